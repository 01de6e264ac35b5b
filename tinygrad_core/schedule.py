"""Lazy graph -> list of kernels. Every fusion decision lives here, and only here.

A kernel computes one node ("a realize point") into a buffer of its own. Elementwise and movement ops fuse into the
loads of whoever uses them; a reduce fuses with the elementwise ops before it and after it. A reduce is cut into
its own kernel when its result is broadcast (EXPAND) or used by several nodes: fusing it there would recompute
the whole reduction for every element that reads it."""
from __future__ import annotations
from dataclasses import dataclass, field
import weakref
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.device import Buffer
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import prod
from tinygrad_core.ops import Ops, UOp, GroupOp


@dataclass
class ScheduleItem:
    ast: UOp                 # SINK(STORE(DEFINE_GLOBAL 0, value)) for a kernel; the COPY node for a transfer
    bufs: list[Buffer]       # output first, then the inputs in DEFINE_GLOBAL order
    node: UOp                # the graph node this item computes
    becomes: UOp | None = None   # the buffer view that holds node's value once the item has run
    var_vals: dict[str, int] = field(default_factory=dict)   # the values of the Variables in ast's sizes


# every node that has been computed, mapped to the buffer view that holds its value (while the node lives)
realized: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def buffer_uop(buf: Buffer, version: int = 0) -> UOp:
    """The graph leaf for a buffer. Writing a buffer (ASSIGN) bumps the version, so graphs built afterwards are new
    nodes and can never be answered from `realized` with the value from before the write."""
    return UOp(Ops.BUFFER, buf.dtype, (), (buf, version))


def buffer_of(u: UOp) -> Buffer | None:
    """The Buffer holding u's value when u is a plain (contiguous, whole) view of one, else None."""
    u = _resolve(u)
    if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER:
        u = u.src[0]
    return u.arg[0] if u.op is Ops.BUFFER else None


# what the schedule being built will compute (published to `realized` by run_schedule, once each kernel has run)
_planned: dict[UOp, UOp] = {}


def _resolve(u: UOp) -> UOp:
    found = _planned.get(u)
    return found if found is not None else realized.get(u, u)


def create_schedule(outs: list[UOp]) -> list[ScheduleItem]:
    outs = [_resolve(u) for u in outs]
    roots: list[UOp] = []
    is_root: set[UOp] = set()

    def make_root(u: UOp):
        if u not in is_root:
            is_root.add(u)
            roots.append(u)

    # a dependency order of the part of the graph that isn't computed yet
    order: list[UOp] = []
    seen: set[UOp] = set()
    stack = [(u, False) for u in outs]
    while stack:
        u, expanded = stack.pop()
        if expanded:
            order.append(u)
            continue
        if u in seen:
            continue
        seen.add(u)
        stack.append((u, True))
        for s in u.src:
            s = _resolve(s)
            if s.op is not Ops.BUFFER and s not in seen:
                stack.append((s, False))

    for u in outs:
        if buffer_of(u) is None and u.op is not Ops.BUFFER:
            make_root(u)
    for u in order:
        if u.op in (Ops.CONTIGUOUS, Ops.COPY, Ops.ASSIGN):
            make_root(u)
        if u.op is Ops.COPY:
            for s in map(_resolve, u.src):
                if buffer_of(s) is None:
                    make_root(s)

    # walk each kernel's graph. A reduce becomes a kernel of its own when fusing it would repeat it: when it is seen
    # through an EXPAND or inside another reduce (it would be recomputed per element), or from a second kernel.
    # Likewise costly elementwise work that a reduce reads through an EXPAND (a batchnorm's backward feeding a
    # convolution's gradients would be recomputed for every input channel and kernel position), and costly work that
    # reduces of two kernels read (a convolution's input gradient feeding a batchnorm's backward)
    reached_by: dict[UOp, UOp] = {}
    done = 0
    while done < len(roots):
        root = roots[done]
        walked: set = set()
        stack = [(s, root.op is Ops.REDUCE_AXIS, root.op is Ops.REDUCE_AXIS) for s in _kernel_inputs(root)]
        walk_again = False
        while stack:
            u, repeated, in_reduce = stack.pop()
            u = _resolve(u)
            if (u, repeated) in walked or u.op in (Ops.BUFFER, Ops.DEVICE) or (u in is_root and u is not root):
                continue
            walked.add((u, repeated))
            if u.op is Ops.REDUCE_AXIS and (repeated or reached_by.setdefault(u, root) is not root):
                make_root(u)
                # this walk went inside it by another path first: what it found there belongs to u's kernel now
                walk_again = walk_again or (u, False) in walked
                continue
            # (views alone are not copied out: a copy of a convolution's windows would be 9x its input, and read
            # in a worse order than the input itself)
            if u.op is Ops.EXPAND and in_reduce and _elementwise_work(expanded := _under_views(u.src[0]),
                                                                      is_root) >= COSTLY_ELEMENTWISE and \
                    _elementwise_work(expanded, is_root, views=False) > 0:
                make_root(expanded)
                continue
            if u.op in GroupOp.ELEMENTWISE and in_reduce and reached_by.setdefault(u, root) is not root and \
                    _elementwise_work(u, is_root) >= COSTLY_ELEMENTWISE:
                make_root(u)          # read inside a reduce by a second kernel: computed once, not twice
                continue
            stack.extend((s, repeated or u.op in (Ops.EXPAND, Ops.REDUCE_AXIS), in_reduce or u.op is Ops.REDUCE_AXIS)
                         for s in u.src)
        if walk_again:
            for u in [u for u, first in reached_by.items() if first is root]:
                del reached_by[u]
            continue
        done += 1
        if root.op is Ops.ASSIGN:
            _guard_assign(root, make_root)

    position = {u: i for i, u in enumerate(order)}
    roots = _order_roots(roots, position, is_root)
    items = []
    try:
        for root in roots:
            # a symbolic size gets a buffer for its largest value, so one buffer serves every value (TinyJit)
            out = None if root.op is Ops.ASSIGN else Buffer(root.device, sym.max_value(prod(root.shape)), root.dtype)
            item = _make_item(root, out, is_root)
            target = item.bufs[0] if item is not None else out
            version = _resolve(root.src[0]).base.arg[1] + 1 if root.op is Ops.ASSIGN else 0
            _planned[root] = view = buffer_uop(target, version).reshape(root.shape)
            if item is None:               # an empty result: nothing to compute
                realized[root] = view
            else:
                item.becomes = view
                items.append(item)
    finally:
        _planned.clear()
    return items


def _order_roots(roots: list[UOp], position: dict, is_root: set[UOp]) -> list[UOp]:
    """Kernels in run order: each after the kernels it reads, and every kernel that reads a buffer's old value before
    the ASSIGN that overwrites it (else a weight's gradient could read the weight already updated by the optimizer)."""
    after: dict[UOp, set[UOp]] = {}
    readers: dict[Buffer, set[UOp]] = {}
    for root in roots:
        deps: set[UOp] = set()
        walked: set[UOp] = set()
        stack = list(root.src if root.op is Ops.COPY else _kernel_inputs(root))
        while stack:
            u = _resolve(stack.pop())
            if u in walked:
                continue
            walked.add(u)
            if u.op is Ops.BUFFER:
                readers.setdefault(u.arg[0], set()).add(root)
            elif u in is_root and u is not root:
                deps.add(u)
            else:
                stack.extend(u.src)
        after[root] = deps
    for root in roots:
        if root.op is Ops.ASSIGN and (target := buffer_of(root.src[0])) is not None:
            after[root] |= readers.get(target, set()) - {root}
    ordered: list[UOp] = []
    placed: dict[UOp, bool] = {}        # False while a root's dependencies are being placed, True once it is placed
    for first in sorted(roots, key=position.__getitem__):
        if first in placed:
            continue
        placed[first] = False
        stack = [(first, iter(sorted(after[first], key=position.__getitem__)))]
        while stack:
            u, pending = stack[-1]
            dep = next(pending, None)
            if dep is None:
                stack.pop()
                placed[u] = True
                ordered.append(u)
            elif dep not in placed:
                placed[dep] = False
                stack.append((dep, iter(sorted(after[dep], key=position.__getitem__))))
            elif placed[dep] is False:
                raise RuntimeError("one computation reads both the old and the assigned value of a buffer; realize a "
                                   "copy of the old value first (x.contiguous().realize()) or realize the assign first")
    return ordered


COSTLY_ELEMENTWISE = 12     # weighted ops (OP_WEIGHT)
# a square root or a division counts as several ops; a reshape of a view costs a division and a remainder per index,
# a pad a bounds check
OP_WEIGHT = {Ops.SQRT: 4, Ops.RECIP: 4, Ops.EXP2: 4, Ops.LOG2: 4, Ops.SIN: 4, Ops.RESHAPE: 2, Ops.PAD: 1}


def _under_views(u: UOp) -> UOp:
    u = _resolve(u)
    while u.op in GroupOp.MOVEMENT:
        u = _resolve(u.src[0])
    return u


def _elementwise_work(u: UOp, is_root: set[UOp], views: bool = True) -> int:
    """How many ALU ops a kernel fusing u computes per element of u (stopping at buffers, reduces, other kernels),
    the index math of views included unless views=False."""
    work, walked, stack = 0, set(), [u]
    while stack:
        node = _resolve(stack.pop())
        if node in walked or node.op in (Ops.BUFFER, Ops.DEVICE, Ops.REDUCE_AXIS) or \
                (node in is_root and node is not u):
            continue
        walked.add(node)
        if views or node.op not in GroupOp.MOVEMENT:
            work += OP_WEIGHT.get(node.op, 1 if node.op in GroupOp.ALU else 0)
        stack.extend(node.src)
    return work


def _kernel_inputs(root: UOp) -> tuple[UOp, ...]:
    if root.op is Ops.ASSIGN:
        return (root.src[1],)
    return root.src if root.op is not Ops.COPY else ()


def _guard_assign(root: UOp, make_root):
    """x.assign(f(x)) is safe when f reads x only at the element being written; otherwise compute f(x) first."""
    target = _resolve(root.src[0])
    view_chain = set()            # the target's own view of its buffer: reading through it is reading in place
    node = target
    while True:
        view_chain.add(node)
        if node.op not in GroupOp.MOVEMENT:
            break
        node = node.src[0]
    for u in root.src[1].toposort():
        u = _resolve(u)
        if u.base is node and u not in view_chain and (u.op in GroupOp.MOVEMENT or u.op is Ops.BUFFER):
            make_root(_resolve(root.src[1]))
            return


def _make_item(root: UOp, out: Buffer | None, is_root: set[UOp]) -> ScheduleItem | None:
    if root.op is Ops.ASSIGN:
        target = buffer_of(root.src[0])
        if target is None:
            raise RuntimeError(f"assign target must be a realized tensor, got a {root.src[0].op.name} graph; "
                               f"call .realize() on it first")
        out = target
    if out.size == 0:
        return None
    if root.op is Ops.COPY:
        inputs = [buffer_of(_resolve(s)) for s in root.src]
        return ScheduleItem(root, [out] + inputs, root)
    bufs: list[Buffer] = [out]
    globals_by_buffer: dict = {}
    memo: dict[UOp, UOp] = {}
    var_vals: dict[str, int] = {}

    def load(buf: Buffer, size=None) -> UOp:
        if buf not in globals_by_buffer:
            globals_by_buffer[buf] = UOp(Ops.DEFINE_GLOBAL, buf.dtype, (), len(bufs))
            bufs.append(buf)
        return UOp(Ops.LOAD, buf.dtype, (globals_by_buffer[buf],), buf.size if size is None else size)

    def to_ast(u: UOp) -> UOp:
        if u in memo:
            return memo[u]
        r = _resolve(u)
        if r.op is Ops.BUFFER:
            made = load(r.arg[0])
        elif r is not u:
            made = to_ast(r)
        elif u in is_root and u is not root:
            raise AssertionError("a realize point must be realized before its users")
        elif u.op is Ops.CONST:
            made = UOp(Ops.CONST, u.dtype, (), sym.unbind(u.arg, var_vals))
        elif u.op is Ops.CUSTOM:       # a custom op's value is its forward graph; the rest is for gradients
            made = to_ast(u.src[0])
        elif u.op is Ops.RESHAPE:      # reshapes compose (row-major order): one reshape of the innermost source
            shape, inner = sym.unbind(u.arg, var_vals), to_ast(u.src[0])
            inner = inner.src[0] if inner.op is Ops.RESHAPE else inner
            if inner.op is Ops.LOAD and not all(isinstance(s, int) for s in shape):
                # a buffer seen with a symbolic shape (a TinyJit input): its size is that shape's, so the kernel
                # doesn't depend on the size of the buffer it is given
                inner = load(bufs[inner.src[0].arg], prod(shape))
            made = inner.reshape(shape)
        else:   # sizes in movement ops lose their values: the kernel is the same for every value of a Variable
            made = u.replace(src=tuple(to_ast(s) for s in u.src), arg=sym.unbind(u.arg, var_vals))
        memo[u] = made
        return made

    value = root.src[1] if root.op is Ops.ASSIGN else root
    if root.op is Ops.ASSIGN and root.src[1] in is_root and _resolve(root.src[1]) is root.src[1]:
        raise AssertionError("assign value must be realized first")
    body = to_ast(value.src[0]) if value.op is Ops.CONTIGUOUS else to_ast(value)
    # a reshape (or a detach) on top changes no byte of the result: the kernel computes in the shape before it, where
    # a reduce's output axes are its own (codegen/opts.py tiles a kernel along them)
    while body.op in (Ops.RESHAPE, Ops.DETACH) and body.src[0].op is not Ops.LOAD:
        body = body.src[0]
    if body.op is Ops.LOAD:          # a plain copy still needs a shape to index it
        body = body.reshape(sym.unbind(value.shape, var_vals))
    out_global = UOp(Ops.DEFINE_GLOBAL, out.dtype, (), 0)
    ast = UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (out_global, body)),))
    return ScheduleItem(ast, bufs, root, var_vals=var_vals)


def graph_roots_in_order(items: list[ScheduleItem]) -> str:
    """A text view of a schedule (DEBUG >= 3)."""
    lines = []
    for i, item in enumerate(items):
        kind = item.ast.op.name if item.ast.op is not Ops.SINK else "KERNEL"
        ops = sorted({u.op.name for u in item.ast.toposort() if u.op in GroupOp.ALU or u.op is Ops.REDUCE_AXIS})
        lines.append(f"  [{i}] {kind} -> {item.node.shape} {item.node.dtype.name}  reads {len(item.bufs) - 1} "
                     f"buffers  ops: {' '.join(ops)}")
    return "\n".join(lines)
