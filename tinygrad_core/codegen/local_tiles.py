"""Local-memory tiling: a matmul- or conv-shaped kernel as the classic shared-memory GEMM, for renderers that declare
has_shared.

A kernel qualifies when its value is (an elementwise epilogue over) one REDUCE_AXIS(ADD) of MUL(x, y), with x and y
any subgraphs, and every output axis moves x only (an "m" axis), y only (an "n" axis) or both (a batch axis); the
reduce axes flatten into one K. A T x T work-group computes a (T*R) x (T*R) block of outputs, R x R per thread: for
each step of T along K the threads compute the block's x tile and y tile (each element by lowering x or y at its
coordinates, prologue and padding included) into local memory, wait at a barrier, and sum the products out of local
memory, so every element read from global memory serves T*R outputs. The epilogue is the kernel's value lowered
with the accumulator in the reduce's place."""
import dataclasses
from dataclasses import dataclass
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.codegen.lower import Lowerer, LoweredKernel, flat_index, program_signature, reads_zero_unless, \
    unflatten
from tinygrad_core.dtype import DType, dtypes
from tinygrad_core.helpers import ceildiv, prod
from tinygrad_core.ops import Ops, UOp

MIN_SIZE = 16        # M, N and K must each be at least this: smaller kernels leave most of a tile's threads idle


@dataclass(frozen=True)
class LocalTilePlan:
    reduce: UOp                       # the REDUCE_AXIS(ADD) of the kernel
    x: UOp                            # the product's operands, in the reduce's input space
    y: UOp
    casts: tuple[DType, ...]          # the casts between the product and the reduce, innermost first
    m_axes: tuple[int, ...]           # output axes along which only x moves
    n_axes: tuple[int, ...]           # ... only y moves
    batch_axes: tuple[int, ...]       # ... both move: a separate product per coordinate
    tile: int                         # T: the work-group is T x T threads; each step takes T k's
    upcast: int                       # R: each thread computes R x R outputs, a group (T*R) x (T*R)

    def sizes(self, shape) -> tuple[int, int, int, int]:
        """(M, N, K, batch): the flattened sizes of the m, n, reduce and batch axes."""
        in_shape = self.reduce.src[0].shape
        return (prod(shape[a] for a in self.m_axes), prod(shape[a] for a in self.n_axes),
                prod(in_shape[a] for a in self.reduce.arg[1]), prod(shape[a] for a in self.batch_axes))


class _AtReduce(Lowerer):
    """Lowers a kernel's value with its reduce replaced: `replace(lowerer, index, valid)` gives what stands in for the
    reduce at that index of its output (the index is in the reduce's input space, its reduce axes still to be set)."""

    def __init__(self, reduce: UOp, replace):
        super().__init__()
        self.reduce, self.replace = reduce, replace
        self.reached: list[tuple] = []

    def _lower(self, node: UOp, idxs, valids) -> tuple[UOp, ...]:
        if node is not self.reduce:
            return super()._lower(node, idxs, valids)
        self.reached += zip(idxs, valids)
        return tuple(self.replace(self, idx, valid) for idx, valid in zip(idxs, valids))


def _operand_at(plan: LocalTilePlan, value: UOp, operand: UOp, out: tuple, k: tuple, valid) -> UOp:
    """operand, lowered at output coordinates `out` and reduce coordinates `k` (one per reduce axis)."""
    def at_reduce(lowerer: Lowerer, idx: tuple, gate):
        moved = list(idx)
        for axis, coordinate in zip(plan.reduce.arg[1], k):
            moved[axis] = coordinate
        found.append(lowerer.lower(operand, (tuple(moved),), (gate,))[0])
        return found[-1]
    found: list[UOp] = []
    _AtReduce(plan.reduce, at_reduce).lower(value, (out,), (valid,))
    return found[0]


def match(ast: UOp, renderer) -> LocalTilePlan | None:
    """The tiling plan when this kernel is a product-sum that local-memory tiles fit, else None."""
    value = ast.src[0].src[1]
    shape = value.shape
    if not renderer.has_shared or not shape or not all(isinstance(s, int) for s in shape):
        return None
    reduces = [u for u in value.toposort() if u.op is Ops.REDUCE_AXIS]
    if len(reduces) != 1 or reduces[0].arg[0] is not Ops.ADD:
        return None
    reduce, casts = reduces[0], []
    product = reduce.src[0]
    while product.op is Ops.CAST:
        casts.insert(0, product.dtype)
        product = product.src[0]
    if product.op is not Ops.MUL or product.dtype == dtypes.bool:
        return None
    # which output axes each operand's loads depend on: lower the kernel with a placeholder per axis
    out = tuple(UOp(Ops.DEFINE_VAR, sym.INDEX, (), (f"out{i}", 0, s - 1)) if s > 1 else sym.const(0)
                for i, s in enumerate(shape))
    lowerer = _AtReduce(reduce, lambda _, idx, valid: UOp(Ops.DEFINE_ACC, reduce.dtype, (), 0))
    lowerer.lower(value, (out,), (None,))
    # the epilogue must use the reduce once, where the output is, and not under padding (whose coordinates lie
    # outside the reduce's space)
    if len(lowerer.reached) != 1 or lowerer.reached[0][1] is not None:
        return None
    idx = list(lowerer.reached[0][0])
    for axis in reduce.arg[1]:
        idx[axis] = UOp(Ops.DEFINE_VAR, sym.INDEX, (), (f"k{axis}", 0, reduce.src[0].shape[axis] - 1))
    depends = [{u for u in Lowerer().lower(operand, (tuple(idx),), (None,))[0].toposort() if u.op is Ops.DEFINE_VAR}
               for operand in product.src]
    axes: dict[str, list[int]] = {"m": [], "n": [], "batch": []}
    for axis, var in enumerate(out):
        if shape[axis] == 1:
            continue
        in_x, in_y = var in depends[0], var in depends[1]
        if not in_x and not in_y:          # an output broadcast from the reduce: its tile would be computed twice
            return None
        axes["batch" if in_x and in_y else "m" if in_x else "n"].append(axis)
    tile = renderer.shared_tile
    plan = LocalTilePlan(reduce, *product.src, tuple(casts), *map(tuple, axes.values()), tile, 1)
    M, N, K, batch = plan.sizes(shape)
    # a register tile per thread, as large as the renderer allows and the output fills: each value read from local
    # memory then serves R outputs (with R = 1 there are two local reads per multiply-add)
    upcast = next(r for r in (4, 2, 1) if r == 1 or (r * r <= renderer.max_upcast and min(M, N) >= r * tile))
    plan = dataclasses.replace(plan, upcast=upcast)
    shared_bytes = tile * tile * upcast * (plan.x.dtype.itemsize + plan.y.dtype.itemsize)
    groups = (ceildiv(N, tile * upcast), ceildiv(M, tile * upcast), batch)
    if min(M, N, K) < MIN_SIZE or shared_bytes > renderer.shared_max or \
            any(g > limit for g, limit in zip(groups, renderer.global_max or groups)) or \
            any(tile > limit for limit in (renderer.local_max or (tile, tile))[:2]):
        return None
    return plan


def lower(ast: UOp, plan: LocalTilePlan, renderer) -> LoweredKernel:
    """The kernel graph and its launch size. Group (gidx0, gidx1, gidx2) = (n tile, m tile, batch); thread (lidx0,
    lidx1) = (col, row) computes the outputs m = m0 + i*T + row, n = n0 + j*T + col for i, j < R, so neighbouring
    threads read and write neighbouring n."""
    out_buf, value = ast.src[0].src
    shape, T, R, zero = value.shape, plan.tile, plan.upcast, sym.const(0)
    M, N, K, batch = plan.sizes(shape)
    in_shape, reduce_axes = plan.reduce.src[0].shape, plan.reduce.arg[1]
    groups = (ceildiv(N, T * R), ceildiv(M, T * R), batch)
    gn, gm = (UOp(Ops.SPECIAL, sym.INDEX, (), (f"gidx{i}", g)) for i, g in enumerate(groups[:2]))
    gb = (UOp(Ops.SPECIAL, sym.INDEX, (), ("gidx2", batch)),) if plan.batch_axes else ()
    col, row = (UOp(Ops.SPECIAL, sym.INDEX, (), (f"lidx{i}", T)) for i in range(2))
    ms = [sym.add(sym.mul(gm, T * R), sym.add(row, i * T)) for i in range(R)]
    ns = [sym.add(sym.mul(gn, T * R), sym.add(col, j * T)) for j in range(R)]
    m_ok = [sym.lt(m, M) if M % (T * R) else None for m in ms]
    n_ok = [sym.lt(n, N) if N % (T * R) else None for n in ns]
    step = UOp(Ops.RANGE, sym.INDEX, (sym.const(ceildiv(K, T)),), 0)
    k0 = sym.mul(step, T)

    def coords(m: UOp, n: UOp) -> tuple[UOp, ...]:
        """The output coordinates of flat m and n (and the batch), each axis from the flat index it belongs to."""
        out = [zero] * len(shape)
        for axes, flat in ((plan.m_axes, m), (plan.n_axes, n), (plan.batch_axes, gb[0] if gb else zero)):
            for axis, coordinate in zip(axes, unflatten(flat, [shape[a] for a in axes])):
                out[axis] = coordinate
        return tuple(out)

    def tile_element(operand: UOp, tile: UOp, index: UOp, m: UOp, n: UOp, k: UOp, valid) -> UOp:
        """One element of an operand's tile: the operand lowered at (m, n, k), stored at tile[index]."""
        k_ok = sym.lt(k, K) if K % T else None
        element = _operand_at(plan, value, operand, coords(m, n), unflatten(k, [in_shape[a] for a in reduce_axes]),
                              sym.and_(valid, k_ok))
        if k_ok is not None and not reads_zero_unless(element, k_ok):
            # past K both tiles must hold 0, whatever a prologue makes of a masked load (exp(0) = 1)
            element = UOp(Ops.WHERE, element.dtype, (k_ok, element, UOp(Ops.CONST, element.dtype, (), 0)))
        return UOp(Ops.STORE, dtypes.void, (tile, index, element))

    # the x tile is (T*R) x T, row-major: x[m][k0 + col]; the y tile T x (T*R): y[k0 + row][n]
    x_tile = UOp(Ops.DEFINE_LOCAL, plan.x.dtype, (), ("tile_x", T * T * R))
    y_tile = UOp(Ops.DEFINE_LOCAL, plan.y.dtype, (), ("tile_y", T * T * R))
    stores = [tile_element(plan.x, x_tile, sym.add(sym.add(sym.mul(row, T), col), i * T * T), ms[i], zero,
                           sym.add(k0, col), m_ok[i]) for i in range(R)]
    stores += [tile_element(plan.y, y_tile, sym.add(sym.add(sym.mul(row, T * R), col), j * T), zero, ns[j],
                            sym.add(k0, row), n_ok[j]) for j in range(R)]
    ready = UOp(Ops.BARRIER, dtypes.void, tuple(stores))
    # each step's sum over its T k's, unrolled: straight-line code lets a CPU driver vectorise across the group's
    # threads, and GPU compilers unroll a loop this short anyway
    sums: list[UOp | None] = [None] * (R * R)
    for kk in range(T):
        xs = [UOp(Ops.LOAD, plan.x.dtype, (x_tile, sym.add(sym.mul(row, T), i * T * T + kk), ready)) for i in range(R)]
        ys = [UOp(Ops.LOAD, plan.y.dtype, (y_tile, sym.add(col, kk * T * R + j * T), ready)) for j in range(R)]
        for a, (x, y) in enumerate((x, y) for x in xs for y in ys):
            product = UOp(Ops.MUL, plan.x.dtype, (x, y))
            for dtype in plan.casts:
                product = product.cast(dtype)
            sums[a] = product if sums[a] is None else UOp(Ops.ADD, plan.reduce.dtype, (sums[a], product))
    # the epilogue: the kernel's value with the reduce over the steps in the reduce's place, stored where that output is
    out_stores = []
    for a, (i, j) in enumerate((i, j) for i in range(R) for j in range(R)):
        valid, out = sym.and_(m_ok[i], n_ok[j]), coords(ms[i], ns[j])
        total = UOp(Ops.REDUCE, plan.reduce.dtype, (sums[a], step), Ops.ADD)
        result = _AtReduce(plan.reduce, lambda *_, total=total: total).lower(value, (out,), (valid,))[0]
        out_stores.append(UOp(Ops.STORE, dtypes.void, (out_buf, flat_index(out, shape), result) +
                              (() if valid is None else (valid,))))
    sink = (*program_signature(ast.toposort())[0], gn, gm, *gb, col, row, *out_stores)
    return LoweredKernel(UOp(Ops.SINK, dtypes.void, sink), groups, (T, T, 1))
