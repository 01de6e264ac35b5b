"""Tensor cores: a matmul-shaped kernel as warp-wide tile multiply-accumulates, for renderers that declare them.

A kernel qualifies when it computes out[m, n] = sum_k A * B with both operands read straight from buffers of the
tensor core's input type, each along rows or columns, so that every 16x16 tile is a pointer plus a leading
dimension, and the sizes are whole tiles. Each warp then owns one output tile and walks K a tile at a time."""
from dataclasses import dataclass
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.codegen.lower import Lowerer, LoweredKernel, program_signature
from tinygrad_core.dtype import DType, dtypes
from tinygrad_core.ops import Ops, UOp


@dataclass(frozen=True)
class TensorCore:
    """A matrix unit: one warp computes acc[M, N] += A[M, K] @ B[K, N] for tiles of dims = (M, N, K)."""
    dims: tuple[int, int, int]
    dtype_in: DType
    dtype_acc: DType
    threads: int = 32          # the threads of one warp, which issue each tile op together


@dataclass(frozen=True)
class Operand:
    buf: UOp                  # its DEFINE_GLOBAL
    offset: int               # index of element [0, 0]
    ld: int                   # leading dimension: the index step between rows (row-major) or columns
    row_major: bool
    outer: int                # index step per m (A) or per n (B): where a warp's tile starts
    step_k: int               # index step per k


@dataclass(frozen=True)
class TilePlan:
    tc: TensorCore
    M: int
    N: int
    K: int
    a: Operand
    b: Operand


def _strip(u: UOp, ops: tuple[Ops, ...]) -> UOp:
    while u.op in ops:
        u = u.src[0]
    return u


def _operand(load: UOp, var_outer: UOp, var_inner: UOp, var_k: UOp, tc: TensorCore, is_a: bool) -> Operand | None:
    """A lowered load as a tile operand (A: rows m, columns k; B: rows k, columns n): its index must be
    offset + outer*s_o + k*s_k with one of the strides 1, and not move with the other output axis. A load widened to
    the accumulator's type is one too (the tile products are exact)."""
    if load.op is Ops.CAST and load.dtype == tc.dtype_acc:
        load = load.src[0]
    if load.op is not Ops.LOAD or len(load.src) != 2 or load.dtype != tc.dtype_in:
        return None
    terms, offset = sym.affine(load.src[1])
    if set(terms) - {var_outer, var_k} or var_inner in terms:
        return None
    outer, step_k = terms.get(var_outer, 0), terms.get(var_k, 0)
    # a row-major A reads k contiguously; a row-major B reads n contiguously
    row_major = step_k == 1 if is_a else outer == 1
    ld = (outer if step_k == 1 else step_k) if is_a else (step_k if outer == 1 else outer)
    unit = 1 in (outer, step_k)
    # the API wants ld a multiple of 16 bytes and each tile 32-byte aligned (buffers themselves are 256-aligned)
    if not unit or ld % (16 // tc.dtype_in.itemsize) or offset % (32 // tc.dtype_in.itemsize) or ld <= 0:
        return None
    return Operand(load.src[0], offset, ld, row_major, outer, step_k)


def match(ast: UOp, renderer) -> TilePlan | None:
    """The tile plan when some tensor core of the renderer can run this kernel, else None."""
    store = ast.src[0]
    value = store.src[1]
    if not all(isinstance(s, int) for s in value.shape):
        return None
    # the store may cast the accumulator once, to the output's type
    reduce = _strip(value, (Ops.RESHAPE,))
    if reduce.op is Ops.CAST and reduce.dtype == store.src[0].dtype:
        reduce = _strip(reduce.src[0], (Ops.RESHAPE,))
    if reduce.op is not Ops.REDUCE_AXIS or reduce.arg[0] is not Ops.ADD or len(reduce.src[0].shape) != 3 or \
            reduce.arg[1] != (2,) or [s for s in value.shape if s != 1] != [s for s in reduce.shape if s != 1]:
        return None
    product = _strip(reduce.src[0], (Ops.CAST,))
    if product.op is not Ops.MUL:
        return None
    M, N, K = reduce.src[0].shape
    for tc in renderer.tensor_cores:
        tm, tn, tk = tc.dims
        if reduce.dtype != tc.dtype_acc or M % tm or N % tn or K % tk:
            continue
        m, n, k = (UOp(Ops.DEFINE_VAR, sym.INDEX, (), (name, 0, size - 1)) for name, size in zip("mnk", (M, N, K)))
        loads = [Lowerer().lower(x, ((m, n, k),), (None,))[0] for x in product.src]
        for first, second in (loads, loads[::-1]):
            a, b = _operand(first, m, n, k, tc, True), _operand(second, n, m, k, tc, False)
            if a is not None and b is not None:
                return TilePlan(tc, M, N, K, a, b)
    return None


def lower(ast: UOp, plan: TilePlan, renderer) -> LoweredKernel:
    """The kernel graph (and launch size): a warp per output tile, a loop over K in tile steps."""
    tc, (tm, tn, tk) = plan.tc, plan.tc.dims
    tiles_n, warps = plan.N // tn, (plan.M // tm) * (plan.N // tn)
    warp = UOp(Ops.SPECIAL, sym.INDEX, (), ("gidx0", warps))
    # the warp's threads: each tile op is issued by all of them together
    threads = (UOp(Ops.SPECIAL, sym.INDEX, (), ("lidx0", tc.threads)),) if renderer.has_local else ()
    m0, n0 = sym.mul(sym.idiv(warp, tiles_n), tm), sym.mul(sym.mod(warp, tiles_n), tn)
    steps = UOp(Ops.RANGE, sym.INDEX, (sym.const(plan.K // tk),), 0)
    k0 = sym.mul(steps, tk)
    a_index = sym.add(sym.add(sym.mul(m0, plan.a.outer), sym.mul(k0, plan.a.step_k)), plan.a.offset)
    b_index = sym.add(sym.add(sym.mul(n0, plan.b.outer), sym.mul(k0, plan.b.step_k)), plan.b.offset)
    mma = UOp(Ops.WMMA, tc.dtype_acc, (UOp(Ops.WMMA_ACC, tc.dtype_acc, (), (tc,)), plan.a.buf, a_index, plan.b.buf,
                                       b_index), (tc, plan.a.ld, plan.a.row_major, plan.b.ld, plan.b.row_major))
    tile = UOp(Ops.REDUCE, tc.dtype_acc, (mma, steps), Ops.WMMA)
    store = UOp(Ops.WMMA_STORE, dtypes.void, (ast.src[0].src[0], sym.add(sym.mul(m0, plan.N), n0), tile), (tc, plan.N))
    sink = UOp(Ops.SINK, dtypes.void, (*program_signature(ast.toposort())[0], warp, *threads, store))
    return LoweredKernel(sink, (warps, 1, 1), (tc.threads, 1, 1) if renderer.has_local else (1, 1, 1))
