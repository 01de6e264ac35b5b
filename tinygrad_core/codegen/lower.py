"""Kernel AST -> kernel graph: give every output element an index, and push indices down through the ops.

Movement ops turn into index arithmetic (codegen/symbolic.py), loads become LOAD(buffer, index, valid), reduces
become REDUCE nodes over fresh RANGEs. Upcasting computes several neighbouring outputs per thread, sharing the
loads they have in common; linearize.py then orders the graph into loops."""
from dataclasses import dataclass
import functools
import itertools
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import ceildiv, prod
from tinygrad_core.ops import Ops, UOp, GroupOp
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.sizes import max_value

Indices = tuple[UOp, ...]


def program_signature(uops: list[UOp]) -> tuple[list[UOp], list[UOp]]:
    """The kernel's buffer arguments (DEFINE_GLOBALs, in position order: the order of the Program call's buffers)
    and its int arguments (DEFINE_VARs, in the order of `vals`). Works on a kernel AST's toposort too."""
    return sorted((u for u in uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg), \
        [u for u in uops if u.op is Ops.DEFINE_VAR]


@dataclass
class LoweredKernel:
    sink: UOp                      # SINK of STOREs (with REDUCE nodes still in it)
    global_size: tuple              # ints, or symbolic sizes that each launch evaluates
    local_size: tuple[int, int, int]


def contiguous_strides(shape) -> tuple[int, ...]:
    # (each the product of the sizes after it, multiplied from the innermost: one expression for symbolic sizes)
    return tuple(prod(reversed(shape[i + 1:])) for i in range(len(shape)))


class Lowerer:
    def __init__(self, unroll: int = 1, ranges: int = 0):
        self.memo: dict = {}
        self.range_count = ranges         # RANGE ids taken already (by the row loops, see _lower_kernel)
        self.unroll = unroll

    def lower(self, node: UOp, idxs: tuple[Indices, ...], valids: tuple) -> tuple[UOp, ...]:
        key = (node, idxs, valids)
        if key not in self.memo:
            self.memo[key] = self._lower(node, idxs, valids)
        return self.memo[key]

    def _lower(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        if (rule := self.RULES.get(node.op)) is None:
            raise NotImplementedError(f"can't lower {node.op} inside a kernel (the scheduler should have cut it out)")
        return rule(self, node, idxs, valids)

    def _lower_input(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        # a gate keeps a load inside its buffer (what it zeroes, a WHERE or a gated store above discards as well): a
        # load whose index stays inside anyway goes ungated, so it can leave the loops it doesn't depend on
        inside = lambda i: (isinstance(node.arg, int) and  # noqa: E731
                            0 <= sym.bounds(i)[0] and sym.bounds(i)[1] < node.arg)
        return tuple(UOp(Ops.CONST, node.dtype, (), 0) if sym.is_const(v) and v.arg is False else
                     UOp(Ops.LOAD, node.dtype, (node.src[0], idx[0]) + (() if v is None or inside(idx[0]) else (v,)))
                     for idx, v in zip(idxs, valids))

    def _lower_const(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        # a number, or a symbolic size used as a number (its Variables are kernel arguments)
        value = node.arg.cast(node.dtype) if isinstance(node.arg, UOp) else UOp(Ops.CONST, node.dtype, (), node.arg)
        return (value,) * len(idxs)

    def _lower_elementwise(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        lowered = [self.lower(s, idxs, valids) for s in node.src]
        return tuple(UOp(node.op, node.dtype, tuple(parts), node.arg) for parts in zip(*lowered))

    def _lower_pad(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        src, zero = node.src[0], UOp(Ops.CONST, node.dtype, (), 0)
        if 0 in src.shape:      # padding an empty tensor: all padding, nothing to read
            return (zero,) * len(idxs)
        conds, src_idxs = [], []
        for idx in idxs:
            cond, moved = None, []
            for i, (before, after), size in zip(idx, node.arg, src.shape):
                if before or after:
                    cond = sym.and_(cond, sym.and_(sym.ge(i, before), sym.lt(i, before + size)))
                moved.append(sym.sub(i, before))
            conds.append(cond)
            src_idxs.append(tuple(moved))
        inner = self.lower(src, tuple(src_idxs), tuple(sym.and_(v, c) for v, c in zip(valids, conds)))
        return tuple(x if c is None or (sym.is_const(c) and c.arg is True) or reads_zero_unless(x, c) else
                     zero if sym.is_const(c) else UOp(Ops.WHERE, node.dtype, (c, x, zero)) for x, c in zip(inner, conds))

    def _lower_movement(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        return self.lower(node.src[0], tuple(move_index(node, idx) for idx in idxs), valids)

    def _lower_gather(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        """x[..., index[j], ...]: the index is loaded, and becomes part of x's address. An index outside [-n, n)
        gives 0 (as the one-hot selection does); the address is taken modulo n, so no load leaves the buffer."""
        x, index = node.src
        axis, k, n = node.arg, len(index.shape), x.shape[node.arg]
        picks = self.lower(index, tuple(idx[axis:axis + k] for idx in idxs), valids)
        src_idxs, src_valids = [], []
        for idx, valid, pick in zip(idxs, valids, picks):
            at = UOp(Ops.CAST, sym.INDEX, (pick,))
            inside = sym.and_(sym.ge(at, -n), sym.lt(at, n))
            wrapped = UOp(Ops.MOD, sym.INDEX, (UOp(Ops.ADD, sym.INDEX, (at, sym.const(n))), sym.const(n)))
            src_idxs.append(idx[:axis] + (wrapped,) + idx[axis + k:])
            src_valids.append(sym.and_(valid, inside))
        zero = UOp(Ops.CONST, node.dtype, (), 0)
        return tuple(v if reads_zero_unless(v, c) else UOp(Ops.WHERE, node.dtype, (c, v, zero))
                     for v, c in zip(self.lower(x, tuple(src_idxs), tuple(src_valids)), src_valids))

    def _lower_reduce(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        reduce_op, axes = node.arg
        in_shape = node.src[0].shape
        ranges, unrolled = {}, {}
        for axis in axes:
            size = in_shape[axis]
            amount = self.unroll if axis == axes[-1] and isinstance(size, int) and size % self.unroll == 0 and \
                size >= self.unroll else 1
            ranges[axis] = UOp(Ops.RANGE, sym.INDEX, (sym.const(size // amount if amount > 1 else size),),
                               self.range_count)
            unrolled[axis] = amount
            self.range_count += 1
        # each unrolled copy of the loop body is a separate input index with an accumulator of its own (partial sums
        # that don't wait on each other, and that a CPU keeps in the lanes of a vector); they are combined at the end
        copies = [dict(zip(axes, copy)) for copy in itertools.product(*[range(unrolled[a]) for a in axes])]
        src_idxs = tuple(tuple(sym.add(sym.mul(ranges[a], unrolled[a]), copy[a]) if a in ranges else i
                               for a, i in enumerate(idx)) for idx in idxs for copy in copies)
        inner = self.lower(node.src[0], src_idxs, tuple(v for v in valids for _ in copies))
        partials = [UOp(Ops.REDUCE, node.dtype, (body,) + tuple(ranges[a] for a in axes), reduce_op) for body in inner]
        return tuple(functools.reduce(lambda a, b: UOp(reduce_op, node.dtype, (a, b)), partials[i:i + len(copies)])
                     for i in range(0, len(partials), len(copies)))

    def _lower_through(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        return self.lower(node.src[0], idxs, valids)

    # how each op of a kernel AST lowers (the scheduler cuts every other op out of kernels)
    RULES = {Ops.INPUT: _lower_input, Ops.CONST: _lower_const, Ops.REDUCE_AXIS: _lower_reduce, Ops.GATHER: _lower_gather,
             Ops.PAD: _lower_pad, Ops.DEFINE_VAR: lambda _, node, idxs, __: (node,) * len(idxs),
             **dict.fromkeys(GroupOp.ELEMENTWISE, _lower_elementwise),
             **dict.fromkeys((Ops.CONTIGUOUS, Ops.DETACH, Ops.CUSTOM), _lower_through),
             **dict.fromkeys(GroupOp.MOVEMENT - {Ops.PAD}, _lower_movement)}


def store_place(at: UOp, gate: UOp | None) -> tuple:
    """(buffer, index, gate) of a store through a view, from the load its lowering gives (a view of the output
    buffer, lowered as if read: its padding, or an empty element, is a condition around the load or its gate)."""
    while at.op is Ops.WHERE:
        gate, at = sym.and_(gate, at.src[0]), at.src[1]
    if at.op is Ops.CONST:          # (no element of the buffer: stored nowhere)
        return None, None, sym.const(False)
    return at.src[0], at.src[1], sym.and_(gate, at.src[2]) if len(at.src) > 2 else gate


def reads_zero_unless(x: UOp, cond: UOp) -> bool:
    """x is a load (maybe cast) that already reads 0 wherever cond is False (so a WHERE around it changes nothing)."""
    while x.op is Ops.CAST:
        x = x.src[0]
    if x.op is not Ops.LOAD or len(x.src) < 3:
        return False
    gate = x.src[2]
    return gate is cond or (gate.op is Ops.AND and cond in gate.src)


def move_index(node: UOp, idx: Indices) -> Indices:
    """Where output index idx of a movement op reads its source (PAD is handled by the caller)."""
    op, arg, src_shape = node.op, node.arg, node.src[0].shape
    if op is Ops.PERMUTE:           # output axis i is source axis arg[i]
        return tuple(idx[arg.index(axis)] for axis in range(len(idx)))
    if op is Ops.EXPAND:
        return tuple(sym.const(0) if s == 1 and n != 1 else i for i, s, n in zip(idx, src_shape, arg))
    if op is Ops.SHRINK:
        return tuple(sym.add(i, start) for i, (start, _) in zip(idx, arg))
    if op is Ops.FLIP:
        return tuple(sym.sub(sym.const(s - 1), i) if axis in arg else i
                     for axis, (i, s) in enumerate(zip(idx, src_shape)))
    if op is Ops.RESHAPE:
        return reshape_index(idx, node.shape, src_shape)
    raise AssertionError(op)


def reshape_index(idx: Indices, shape, src_shape) -> Indices:
    # dropping or adding size-1 axes needs no arithmetic
    if [s for s in shape if s != 1] == [s for s in src_shape if s != 1]:
        kept = (i for i, s in zip(idx, shape) if s != 1)        # the coordinates along the sizes both have
        return tuple(sym.const(0) if s == 1 else next(kept) for s in src_shape)
    return unflatten(flat_index(idx, shape), src_shape)


def flat_index(idx: Indices, shape) -> UOp:
    """The row-major position of index idx in shape."""
    flat = sym.const(0)
    for i, stride in zip(idx, contiguous_strides(shape)):
        flat = sym.add(flat, sym.mul(i, stride))
    return flat


def unflatten(flat: UOp, shape) -> Indices:
    """The row-major index of position flat in shape. No "% size" on the outermost axis: at every position that is
    read, flat is in range (positions past the end are gated off: padding, a partial tile), and that modulo would
    cost a division per element. (A shape with a 0 in it has no positions, so flat is never read: it stands for every
    axis, with no division by the sizes.)"""
    first = next((i for i, s in enumerate(shape) if s != 1), None)
    return tuple(sym.const(0) if s == 1 else flat if 0 in shape else sym.idiv(flat, stride) if i == first else
                 sym.mod(sym.idiv(flat, stride), s) for i, (stride, s) in enumerate(zip(contiguous_strides(shape), shape)))


def row_axes(grid: list, order, row: int = 64) -> list[int]:
    """The output axes each parallel index loops over, outermost first, where the renderer runs parallel indices as
    a loop (no thread groups): the order's last ones, until a row holds `row` elements (Renderer.row_elements) or
    fewer than `row` rows would be left to share among threads. The div and mod that split the parallel index into coordinates are then computed
    once per row, not per element, and the row's addresses are affine in the loop counters (vector loads). (A row
    of 16 elements doesn't pay back the work per row: the seed CNN's 16 x 16 average-pool gradient.)"""
    rows, axes = [], [axis for axis in order if grid[axis] != 1]
    while axes and isinstance(grid[axes[-1]], int) and prod(grid[a] for a in rows) < row and \
            isinstance(left := prod(grid[a] for a in axes[:-1]), int) and left >= row:
        rows.insert(0, axes.pop())
    return rows


def lower_kernel(ast: UOp, renderer, opts) -> LoweredKernel:
    """ast = SINK(STORE(DEFINE_GLOBAL 0, value)) -> a kernel graph for `renderer` laid out by `opts` (a KernelOpts:
    it lives in codegen/opts.py, which builds on this module), with its launch size. Index arithmetic is int32, or
    int64 in a kernel where int32 could overflow (a buffer of 2**31 elements or more)."""
    kernel, step = _lower_kernel(ast, renderer, opts, 0), 0       # row loops pay only where indices are divided
    if any(u.op in (Ops.IDIV, Ops.MOD) for u in kernel.sink.toposort()) and \
            (step := row_step((kernel := _lower_kernel(ast, renderer, opts)).sink)) > 1:
        kernel = _lower_kernel(ast, renderer, opts, step)
    if sym.INDEX == dtypes.int64 or sym.fits_int32(kernel.sink):
        return kernel
    with sym.wide_index():
        return _lower_kernel(ast, renderer, opts, step)


def row_step(sink: UOp) -> int:
    """How many neighbouring outputs one trip of a row's loop computes: d where a gate tests the row's counter divided
    by a small d (a strided window read backwards: a strided convolution's input gradient). With the counter a
    multiple of d, those divisions and remainders fold away, and so do the loads their gates rule out."""
    row = [u for u in sink.src if u.op is Ops.RANGE][-1:]           # the innermost row loop (see _lower_kernel)
    steps = [s.src[1].arg for u in sink.toposort() if u.op is Ops.CMPLT for s in u.src if s.op in (Ops.IDIV, Ops.MOD)
             and sym.is_const(s.src[1]) and any(sym.affine(s.src[0])[0].get(r) == 1 and r.src[0].arg % s.src[1].arg == 0
                                                for r in row)]
    return min(steps) if steps and 1 < min(steps) <= 4 else 1


def _lower_kernel(ast: UOp, renderer, opts, step: int = 1) -> LoweredKernel:
    """The kernel graph; with row loops (see row_axes) unless step is 0, the innermost stepping by step."""
    out_buf, value = ast.src[0].src
    shape = value.shape
    upcast = dict(opts.upcast)
    grid = [s // upcast[axis] if axis in upcast else s for axis, s in enumerate(shape)]
    order = opts.order or tuple(range(len(shape)))
    rows = [] if renderer.has_local or not step else row_axes(grid, order, renderer.row_elements)
    if step > 1:
        upcast[rows[-1]], grid[rows[-1]] = upcast.get(rows[-1], 1) * step, grid[rows[-1]] // step
    parallel = [1 if axis in rows else g for axis, g in enumerate(grid)]
    total = prod(parallel)       # with symbolic sizes, an expression: the launch size is computed per launch
    if renderer.has_local:
        local = max(1, min(opts.local_size, max_value(total)))
        groups = ceildiv(total, local) if isinstance(total, int) else sym.idiv(sym.add(total, local - 1), local)
        gid = sym.add(sym.mul(UOp(Ops.SPECIAL, sym.INDEX, (), ("gidx0", max_value(groups))), local),
                      UOp(Ops.SPECIAL, sym.INDEX, (), ("lidx0", local)))
        thread_valid = None if isinstance(total, int) and groups * local == total else sym.lt(gid, total)
        global_size, local_size = (groups, 1, 1), (local, 1, 1)
    else:
        gid = UOp(Ops.SPECIAL, sym.INDEX, (), ("gidx0", max_value(total)))
        thread_valid, global_size, local_size = None, (total, 1, 1), (1, 1, 1)
    # neighbouring parallel indices (and so each thread's slice) step along the last axis of the order fastest
    strides = dict(zip(order, contiguous_strides([parallel[axis] for axis in order])))
    loops = {axis: UOp(Ops.RANGE, sym.INDEX, (sym.const(grid[axis]),), i) for i, axis in enumerate(rows)}
    coords = [loops[axis] if axis in loops else sym.mod(sym.idiv(gid, strides[axis]), g)
              for axis, g in enumerate(parallel)]
    idxs = tuple(tuple(sym.add(sym.mul(c, upcast.get(axis, 1)), k) for axis, (c, k) in enumerate(zip(coords, combo)))
                 for combo in itertools.product(*[range(upcast.get(axis, 1)) for axis in range(len(shape))]))
    lowerer = Lowerer(opts.unroll, len(loops))
    values = lowerer.lower(value, idxs, (thread_valid,) * len(idxs))
    places = [(out_buf, flat_index(idx, shape), thread_valid) for idx in idxs] if out_buf.op is Ops.DEFINE_GLOBAL \
        else [store_place(at, thread_valid) for at in lowerer.lower(out_buf, idxs, (thread_valid,) * len(idxs))]
    stores = [UOp(Ops.STORE, dtypes.void, (buf, index, v) + (() if gate is None or sym.is_const(gate) else (gate,)))
              for (buf, index, gate), v in zip(places, values) if not sym.is_const(gate) or gate.arg is True]
    # every buffer argument stays in the program, even one whose loads were all folded away (loops: opened in order)
    sink = UOp(Ops.SINK, dtypes.void, (*program_signature(ast.toposort())[0], *loops.values(), *stores))
    return LoweredKernel(sink, global_size, local_size)
