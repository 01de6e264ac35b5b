"""Choosing how a kernel maps onto the hardware: upcasts (register tiles), reduce unrolling, thread-group size.

A simple deterministic heuristic, driven by what the renderer declares (`max_upcast`, `has_local`, ...)."""
from __future__ import annotations
from dataclasses import dataclass
from tinygrad_core.codegen import local_tiles, symbolic as sym, tensor_cores
from tinygrad_core.codegen.lower import Lowerer
from tinygrad_core.helpers import NOOPT, prod
from tinygrad_core.ops import Ops, UOp


@dataclass(frozen=True)
class KernelOpts:
    """How to map a kernel onto the hardware: which output axes to upcast (compute several per thread), how many
    threads per group (GPUs), and by how much to unroll each reduce loop."""
    upcast: tuple[tuple[int, int], ...] = ()     # (axis, amount) pairs; amount divides the axis
    local_size: int = 1                           # threads per group, on renderers with has_local
    unroll: int = 1                               # reduce loop unroll factor (must divide the reduce size)
    tensor_core: bool = False                     # run as tile multiply-accumulates (codegen/tensor_cores.py)
    local_tiles: bool = False                     # run as a local-memory tiled product (codegen/local_tiles.py)
    order: tuple[int, ...] = ()                   # output axes from slowest to fastest along the parallel index


def _expanded_axes(value: UOp) -> set[int]:
    """Output axes along which some input is broadcast: upcasting them lets one load serve several outputs."""
    axes = set()
    for u in value.toposort():
        if u.op is Ops.EXPAND and len(u.shape) == len(value.shape):
            axes |= {i for i, (a, b) in enumerate(zip(u.src[0].shape, u.shape)) if a != b}
    return axes


def has_symbolic_sizes(ast: UOp) -> bool:
    return any(not isinstance(s, int) for u in ast.toposort() for s in u.shape)


def choose_opts(ast: UOp, renderer, shared: bool = True) -> KernelOpts:
    """The opts for this kernel on this renderer (shared=False: without local-memory tiles, whatever it declares)."""
    value = ast.src[0].src[1]
    shape = value.shape
    # symbolic sizes get no tiles: nothing is known to divide them
    if NOOPT or not shape or has_symbolic_sizes(value):
        return KernelOpts(local_size=min(renderer.default_local_size, sym.max_value(prod(shape)) or 1)
                          if renderer.has_local else 1)
    if renderer.tensor_cores and tensor_cores.match(ast, renderer) is not None:
        return KernelOpts(tensor_core=True)
    if shared and renderer.has_shared and local_tiles.match(ast, renderer) is not None:
        return KernelOpts(local_tiles=True)
    reduces = [u for u in value.toposort() if u.op is Ops.REDUCE_AXIS]
    if reduces and renderer.simd_width:
        return _simd_reduce_opts(value, renderer)
    upcast: dict[int, int] = {}
    budget = renderer.max_upcast

    def try_upcast(axis: int, amount: int):
        nonlocal budget
        # axis < len(shape): the reduce's axes only line up with the output's when no reshape follows the reduce
        if amount > 1 and axis < len(shape) and axis not in upcast and shape[axis] % amount == 0 and \
                shape[axis] > amount and budget >= amount:
            upcast[axis] = amount
            budget //= amount

    if reduces and budget > 1:
        # a matmul-shaped kernel: upcast two broadcast axes into a register tile
        for axis in sorted(_expanded_axes(reduces[0].src[0]) - set(reduces[0].arg[1]), reverse=True)[:2]:
            try_upcast(axis, 4)
    elif budget > 1 and shape[-1] > 1 and not renderer.simd_width:
        # (a SIMD CPU's compiler vectorises the parallel loop of an elementwise kernel itself: copies would only
        # make more code to compile)
        try_upcast(len(shape) - 1, min(budget, 4))
    unroll = 1
    if reduces and renderer.max_unroll > 1:
        size = reduces[0].src[0].shape[reduces[0].arg[1][-1]]
        unroll = next((u for u in (renderer.max_unroll, 4, 2) if size % u == 0 and size > u), 1)
    threads = prod(shape) // prod(upcast.values())
    local = min(renderer.default_local_size, threads) if renderer.has_local else 1
    return KernelOpts(tuple(sorted(upcast.items())), local, unroll)


# ---------------------------------------------------------------------------------------------------------------
# Reduces on SIMD CPUs (renderer.simd_width > 0): choose by how each load walks memory.
# ---------------------------------------------------------------------------------------------------------------
def _load_strides(value: UOp) -> list[tuple[dict[int, int], int, int]]:
    """For every load of the kernel: (elements it moves per step of each output axis, per step of the innermost
    reduce loop, that loop's length). Found by lowering the kernel once with a placeholder index per output axis."""
    axes = [UOp(Ops.DEFINE_VAR, sym.INDEX, (), (f"axis{i}", 0, s - 1)) if s > 1 else sym.const(0)
            for i, s in enumerate(value.shape)]
    lowered = Lowerer().lower(value, (tuple(axes),), (None,))[0]
    innermost = {u.src[-1] for u in lowered.toposort() if u.op is Ops.REDUCE}
    out = []
    for load in (u for u in lowered.toposort() if u.op is Ops.LOAD):
        terms = sym.affine(load.src[1])[0]
        loop = next((r for r in innermost if r in terms), None)
        out.append(({i: terms.get(a, 0) for i, a in enumerate(axes)}, terms.get(loop, 0) if loop is not None else 0,
                    loop.src[0].arg if loop is not None else 0))
    return out


BIG_REDUCE = 1 << 26        # output elements x reduce length (a 512^3 matmul is 2^27)
MEDIUM_REDUCE = 1 << 20
SHORT_LOOP_VECTORS = 4      # an innermost reduce loop this many vectors long or shorter counts as short
NEAR_ROWS_BYTES = 4096      # strided loads whose rows are closer than a page can keep them in cache (see order)


def _lane_unroll(nested: bool, loads, lanes: int) -> int:
    """A short contiguous innermost reduce loop inside other reduce loops (a convolution's weight gradient sums over
    batch, rows and a 16-wide row): vectorised by the backend's compiler, its vector of partial sums would be added
    up at every exit. Unrolled by a vector's width instead, each lane gets an accumulator of its own, summed once at
    the very end."""
    length = max((length for _, step, length in loads if step), default=0)
    if not nested or not 0 < length <= SHORT_LOOP_VECTORS * lanes:
        return 1
    return next((u for u in (lanes, lanes // 2) if u > 1 and length % u == 0), 1)


def _short_row_unroll(nested: bool, loads, lanes: int) -> int:
    """Rows shorter than two vectors and not made of whole ones, summed inside other reduce loops (a batchnorm's
    statistics over 14x14 maps): the backend's compiler vectorises such a loop poorly. Unrolled whole, each row is a
    few vector loads."""
    moving = [(step, length) for _, step, length in loads if step]
    if not nested or not moving or any(step != 1 for step, _ in moving):
        return 1
    length = max(length for _, length in moving)
    return length if 1 < length < 2 * lanes and length % lanes else 1


def _simd_reduce_opts(value: UOp, renderer) -> KernelOpts:
    """Where every load reads memory contiguously along the reduce loop, the backend vectorises the loop itself
    (partial sums per SIMD lane); a register tile over two output axes along which loads are broadcast (A @ B.T)
    lets each loaded vector serve several outputs. Otherwise (a matmul's B, a sum over rows) SIMD lanes go across
    an output axis that is contiguous in the strided loads, and a second output axis, along which those vector loads
    don't move, makes the register tile."""
    shape = value.shape
    lanes = max(1, renderer.simd_width // value.dtype.itemsize)
    loads = _load_strides(value)
    strided = [axes for axes, step, length in loads if step not in (0, 1) or (step and length < lanes)]
    # every upcast lane is lowered, rendered and compiled separately: small kernels get small tiles (a 128x128x784
    # matmul gains little from the largest tile but would pay for it in compile time)
    reduce = next(u for u in value.toposort() if u.op is Ops.REDUCE_AXIS)
    work = prod(shape) * prod(reduce.src[0].shape[axis] for axis in reduce.arg[1])
    size = 2 if work >= BIG_REDUCE else 1 if work >= MEDIUM_REDUCE else 0
    upcast: dict[int, int] = {}
    budget = renderer.max_upcast

    def fitting(axis: int, amounts) -> int:
        return next((a for a in amounts if a > 1 and shape[axis] % a == 0 and a <= budget), 0)

    def try_upcast(axis: int, amounts) -> bool:
        nonlocal budget
        if amount := fitting(axis, amounts):
            upcast[axis] = amount
            budget //= amount
        return bool(amount)

    # output axes along which one moving load stays put while another moves: a register tile reuses the first
    moving = [axes for axes, step, _ in loads if step]
    broadcast = [i for i in range(len(shape)) if shape[i] > 1 and any(axes[i] == 0 for axes in moving) and
                 any(axes[i] for axes in moving)]
    nested = len(reduce.arg[1]) >= 2          # the innermost reduce loop runs inside other reduce loops
    if not strided:
        unroll = _lane_unroll(nested, loads, lanes) if size else 1
        budget //= unroll
        # the innermost two that a tile fits (a 3x3 kernel's axes would take no tile and block the others)
        for axis in [i for i in broadcast if fitting(i, (4, 2))][-2:] if size else ():
            try_upcast(axis, (4, 2))
        return KernelOpts(tuple(sorted(upcast.items())), unroll=unroll)
    contiguous = [i for i in range(len(shape)) if all(axes[i] in (0, 1) for axes in strided) and
                  any(axes[i] == 1 for axes in strided)]
    if not contiguous and all(step == 1 for _, step, _ in loads if step):
        # contiguous rows shorter than a vector (a 3x3 single-channel convolution's 9 taps as im2col rows) and no
        # output axis to vectorise along: the lanes go across one along which a load is broadcast
        for axis in [i for i in broadcast if fitting(i, (lanes, lanes // 2))][-1:]:
            try_upcast(axis, (lanes, lanes // 2))
    if contiguous:
        widths = tuple(w for w in (4 * lanes, 2 * lanes, lanes, lanes // 2, lanes // 4) if w <= lanes << size)
        # any axis that fills a whole vector will do; the output's innermost one also stores contiguously
        vector_axis = max(contiguous, key=lambda i: (min(fitting(i, widths), lanes), i))
        vector_loads = [axes for axes, _, _ in loads if axes[vector_axis] == 1]
        reused = [i for i in range(len(shape)) if shape[i] > 1 and i != vector_axis and
                  all(axes[i] == 0 for axes in vector_loads) and any(axes[i] for axes, _, _ in loads)]
        if try_upcast(vector_axis, widths[1:] if reused and size else widths) and reused and size:
            # rows x 2 vectors of accumulators in half the vector registers (the rest hold the loads), on the largest
            # kernels; 4 rows on others, or where the renderer doesn't say how many registers it has
            most = max(4, renderer.simd_registers // 4) if size == 2 else 4
            rows = tuple(r for r in (8, 4, 2) if r <= most)
            fits = [i for i in reused if fitting(i, rows)]     # e.g. not a 3x3 kernel's axis
            if fits:
                try_upcast(fits[-1], rows)
    order = ()
    if not upcast and (rows := _short_row_unroll(nested, loads, lanes)) > 1:
        return KernelOpts(unroll=rows)
    if size == 2 and max(abs(step) for _, step, _ in loads) * value.dtype.itemsize < NEAR_ROWS_BYTES:
        # neighbouring parallel indices (a thread's slice) read the same rows of the strided loads while those are
        # in cache: the axes along which they move, other than in the register tile, go slowest. (Rows a page or
        # more apart can't stay in cache, they compete for the same cache sets: there the output's order does better)
        order = tuple(sorted(range(len(shape)), key=lambda i: (i in upcast or all(axes[i] == 0 for axes in strided),
                                                               i)))
    return KernelOpts(tuple(sorted(upcast.items())), order=() if order == tuple(range(len(shape))) else order)
