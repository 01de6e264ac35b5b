"""Kernel graph -> linear program: the ordered list of kernel ops a renderer turns into source.

REDUCE nodes become DEFINE_ACC + RANGE ... UPDATE_ACC ... ENDRANGE; reduces over the same ranges share one loop (that
is what makes upcasting a register tile). Each op is placed in the outermost loop its inputs allow, so work that
does not depend on a loop counter is done once, outside that loop. A loop that waits at a BARRIER for local memory
it wrote ends with another, so that no thread overwrites that memory on the next trip while others still read it."""
from tinygrad_core.dtype import dtypes
from tinygrad_core.ops import Ops, UOp, identity_element


class _Scope:
    def __init__(self, head: UOp | None):
        self.head = head                 # the RANGE that opens this scope (None at top level)
        self.items: list = []            # UOps, and nested _Scopes for loops
        self.open_child: _Scope | None = None

    def add(self, u: UOp):
        # while a child loop is open it is the last item; things for this scope go before it
        self.items.insert(len(self.items) - 1 if self.open_child is not None else len(self.items), u)

    def flatten(self) -> list[UOp]:
        """The scope's ops in order, each loop opened by its RANGE and closed by an ENDRANGE."""
        out: list[UOp] = []
        for item in self.items:
            if isinstance(item, _Scope):
                out += [item.head, *item.flatten(), UOp(Ops.ENDRANGE, dtypes.void, (item.head,))]
            else:
                out.append(item)
        return out


class Linearizer:
    def __init__(self, sink: UOp, rewrite=lambda u: u):
        self.rewrite = rewrite               # applied to the ops made here (a reduce's update): the renderer's rules
        self.done: dict[UOp, UOp] = {}       # graph node -> the node in the program that holds its value
        self.depth_of: dict[UOp, int] = {}
        self.scopes = [_Scope(None)]
        self.acc_count = 0
        # reduces that loop over the same ranges are computed together
        self.groups: dict[tuple, list[UOp]] = {}
        for u in sink.toposort():
            if u.op is Ops.REDUCE:
                self.groups.setdefault(u.src[1:], []).append(u)
        for u in sink.src:          # buffer arguments, then the stores
            self.emit(u)

    def program(self) -> list[UOp]:
        return self.scopes[0].flatten()

    def place(self, u: UOp, depth: int) -> UOp:
        self.scopes[depth].add(u)
        self.depth_of[u] = depth
        return u

    def emit(self, u: UOp) -> UOp:
        if (found := self.done.get(u)) is not None:
            return found
        if u.op in (Ops.REDUCE, Ops.RANGE):     # (a RANGE met here: an output axis looped over, see lower.row_axes)
            self.open_loop(u) if u.op is Ops.RANGE else self.emit_reduce_group(self.groups[u.src[1:]])
            return self.done[u]
        src = tuple(self.emit(s) for s in u.src)
        made = u.replace(src=src) if src != u.src else u
        depth = len(self.scopes) - 1 if u.op is Ops.STORE else max((self.depth_of[s] for s in src), default=0)
        self.done[u] = self.place(made, depth) if made not in self.depth_of else made
        return self.done[u]

    def emit_reduce_group(self, group: list[UOp]):
        ranges = group[0].src[1:]
        outer = len(self.scopes) - 1
        accs = [None if u.arg is Ops.WMMA else self.define_acc(u, outer) for u in group]
        for r in ranges:
            self.open_loop(r)
        # a WMMA adds into an accumulator tile of its own (WMMA_ACC): it is the update
        updates = [self.emit(u.src[0]) if acc is None else self.accumulate(acc, u.arg, self.emit(u.src[0]))
                   for u, acc in zip(group, accs)]
        if any(isinstance(item, UOp) and item.op is Ops.BARRIER for item in self.scopes[-1].items):
            self.place(UOp(Ops.BARRIER, dtypes.void, tuple(updates)), len(self.scopes) - 1)
        for _ in ranges:
            self.close_loop()
        for u, acc, update in zip(group, accs, updates):
            self.done[u] = acc if acc is not None else update
            if acc is None:                   # after the loop, a WMMA stands for its tile, which lives outside it
                self.depth_of[update] = outer

    # ---- the steps of a reduce ----
    def define_acc(self, u: UOp, depth: int) -> UOp:
        init = self.emit(UOp(Ops.CONST, u.dtype, (), identity_element(u.arg, u.dtype)))
        self.acc_count += 1
        return self.place(UOp(Ops.DEFINE_ACC, u.dtype, (init,), self.acc_count - 1), depth)

    def open_loop(self, r: UOp) -> UOp:
        """Open the loop of RANGE r inside the innermost open loop: ops that depend on r go in it."""
        loop = _Scope(r.replace(src=(self.emit(r.src[0]),)))       # (the loop's end is computed before it)
        self.scopes[-1].items.append(loop)
        self.scopes[-1].open_child = loop
        self.scopes.append(loop)
        self.depth_of[loop.head] = len(self.scopes) - 1
        self.done[r] = loop.head
        return loop.head

    def close_loop(self):
        self.scopes.pop()
        self.scopes[-1].open_child = None

    def accumulate(self, acc: UOp, op, value: UOp) -> UOp:
        """acc = op(acc, value) in the innermost open loop; value is an emitted op."""
        outer, inner = self.depth_of[acc], len(self.scopes) - 1
        # the update reads the accumulator, so it (and every op of its decomposition) stays in the innermost loop
        # whatever its inputs are: for the update, the accumulator counts as living there
        self.depth_of[acc] = inner
        update = self.emit(self.rewrite(UOp(op, acc.dtype, (acc, value))))
        self.depth_of[acc] = outer
        return self.place(UOp(Ops.UPDATE_ACC, acc.dtype, (acc, update)), inner)
