"""How the CPU backend maps a kernel onto SIMD registers: its answer to the core's `Renderer.kernel_opts` hook.

The core's neutral heuristic (tinygrad_core/codegen/opts.py) plans kernels as for GPU threads. On a CPU whose compiler
vectorises loops, a reduce is tiled by how each of its loads walks memory (`load_strides`), and an elementwise kernel
is left to the compiler."""
from __future__ import annotations
from tinygrad_core.helpers import prod
from tinygrad_core.ops import Ops, UOp
from tinygrad_core.renderer.kernel_opts import KernelOpts, load_strides

BIG_REDUCE = 1 << 23        # output elements x reduce length (a 512^3 matmul is 2^27)
HUGE_REDUCE = 1 << 26
MEDIUM_REDUCE = 1 << 20
LONG_REDUCE = 4096          # a reduce this long per output runs long enough in each tile to pay for the largest tile
SHORT_LOOP_VECTORS = 4      # an innermost reduce loop this many vectors long or shorter counts as short
LONG_BODY_LOADS = 6         # a sum's body with this many loads is long (see _lane_unroll)
NEAR_ROWS_BYTES = 4096      # strided loads whose rows are closer than a page can keep them in cache (see order)
FAR_BIGGER_BYTES = 1 << 23  # an operand this big is far bigger than a core's cache (see _read_biggest_once)
FAR_BIGGER_THAN_OUTPUT = 4   # ... and this many times bigger than the kernel's output


def _lane_unroll(nested: bool, loads, lanes: int) -> int:
    """A short contiguous innermost reduce loop inside other reduce loops (a convolution's weight gradient sums over
    batch, rows and a 16-wide row): vectorised by the backend's compiler, its vector of partial sums would be added
    up at every exit. Unrolled by a vector's width instead, each lane gets an accumulator of its own, summed once at
    the very end.

    A row of exactly two vectors in a body of LONG_BODY_LOADS loads or more (a batchnorm's input gradient over 32x32
    maps, 7 loads) is unrolled by half a vector: LLVM unrolls a loop of two trips of such a body whole and then
    vectorises the loop over rows around it, gathering every lane (the seed CNN's r_1_64_1_1: 8.9 -> 1.3 ms by half
    with its data in cache, 6.7 -> 2.1 ms from memory). Shorter bodies keep the whole vector (1.2-2x faster than
    half)."""
    length = _row_length(loads)
    if not nested or not 0 < length <= SHORT_LOOP_VECTORS * lanes:
        return 1
    halves = length == 2 * lanes and len(loads) >= LONG_BODY_LOADS
    return next((u for u in ((lanes // 2,) if halves else (lanes, lanes // 2)) if u > 1 and length % u == 0), 1)


def _row_length(loads) -> int:
    """The length of the innermost reduce loop (0 outside one)."""
    return max((length for _, step, length in loads if step), default=0)


def _short_row_unroll(nested: bool, loads, lanes: int) -> int:
    """Rows shorter than two vectors and not made of whole ones, summed inside other reduce loops (a batchnorm's
    statistics over 14x14 maps): the backend's compiler vectorises such a loop poorly. Unrolled whole, each row is a
    few vector loads."""
    moving = [(step, length) for _, step, length in loads if step]
    if not nested or not moving or any(step != 1 for step, _ in moving):
        return 1
    length = max(length for _, length in moving)
    return length if 1 < length < 2 * lanes and length % lanes else 1


def _read_biggest_once(value: UOp, nested: bool, loads) -> tuple[int, ...] | None:
    """The order of a product-sum over one axis (a matmul) one of whose operands is FAR_BIGGER_BYTES or more and
    FAR_BIGGER_THAN_OUTPUT times the output (a fully connected layer's 512 x 16384 weight, 32 MB): the output axes
    along which that operand moves go slowest, so the tiles reading one part of it come one after another and it is
    read from memory once; the smaller operand is read again for each part, from cache. In the output's order every
    row of tiles would read all of the big one again (2x slower: the seed's CNN's r_64_512_1 and r_64_1_16384). An
    output not far smaller keeps its order: its stores would scatter (a convolution's input gradient, 7 MB from
    8 MB: 15% slower)."""
    big = max(loads, key=lambda load: _bytes_read(value, load), default=None)
    if nested or big is None or _bytes_read(value, big) < max(FAR_BIGGER_BYTES, FAR_BIGGER_THAN_OUTPUT *
                                                              prod(value.shape) * value.dtype.itemsize):
        return None
    return tuple(sorted(range(len(value.shape)), key=lambda i: (big[0][i] == 0, i)))


def _bytes_read(value: UOp, load) -> int:
    """How much of its buffer a load reads, roughly (the innermost reduce loop the only one counted)."""
    axes, step, length = load
    return prod(value.shape[i] for i, s in axes.items() if s) * (length if step else 1) * value.dtype.itemsize


def simd_opts(value: UOp, renderer) -> KernelOpts:
    """The opts of a kernel (its stored value) on a SIMD CPU: `renderer.simd_width` bytes per vector register,
    `simd_registers` of them, register tiles of up to `max_upcast` outputs.

    An elementwise kernel gets none: the backend's compiler vectorises its parallel loop itself, and upcast copies
    would only make more code to compile. For a reduce: where every load reads memory contiguously along the reduce
    loop, the backend vectorises the loop itself (partial sums per SIMD lane); a register tile over two output axes
    along which loads are broadcast (A @ B.T) lets each loaded vector serve several outputs. Otherwise (a matmul's B,
    a sum over rows) SIMD lanes go across an output axis that is contiguous in the strided loads, and a second output
    axis, along which those vector loads don't move, makes the register tile."""
    reduce = next((u for u in value.toposort() if u.op is Ops.REDUCE_AXIS), None)
    if reduce is None:
        return KernelOpts()
    shape = value.shape
    lanes = max(1, renderer.simd_width // value.dtype.itemsize)
    loads = load_strides(value)
    strided = [axes for axes, step, length in loads if step not in (0, 1) or (step and length < lanes)]
    # every upcast lane is lowered, rendered and compiled separately: small kernels get small tiles. From BIG_REDUCE
    # on, the largest tile pays for its compile time within a few hundred launches (the MNIST MLP's weight gradient,
    # 128x784 outputs summed over a batch of 128, and its kept-out input gradient: 8 rows x 16 columns of
    # accumulators instead of 4, 300 -> 190 us and 260 -> 180 us on one thread; each compiles in 120 ms instead of
    # 65). A reduce of LONG_REDUCE or more per output (a convolution's weight gradient over a batch of 6272 pixels)
    # gets the largest tile anyway: each of its few tiles runs long, and the larger tile's accumulators are
    # independent chains that hide the add latency (the MNIST CNN's r_1_1_32_144: 710 -> 560 us with its data in
    # cache, 1180 -> 1000 us from memory)
    length = prod(reduce.src[0].shape[axis] for axis in reduce.arg[1])
    work = prod(shape) * length
    size = 2 if work >= BIG_REDUCE or (work >= MEDIUM_REDUCE and length >= LONG_REDUCE) else \
        1 if work >= MEDIUM_REDUCE else 0
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
    once = _read_biggest_once(value, nested, loads)
    if not strided:
        unroll = _lane_unroll(nested, loads, lanes) if size else 1
        budget //= unroll
        # the innermost two that a tile fits (a 3x3 kernel's axes would take no tile and block the others), 4 x 4;
        # 8 x 2 where each row is one vector long (a 3x3 convolution's weight gradient over 16x16 maps, its axes the
        # output channels then the input channels): the input's row is read shifted by the tap, masked at the border,
        # and fewer input channels per tile read fewer of them (the seed CNN's r_1_1_128_1_1_64_3_3 and
        # r_1_1_256_1_1_128_3_3 1.23-1.31x faster; over 32x32 maps, rows of two vectors, 4 x 4 is as fast or faster)
        axes = [i for i in broadcast if fitting(i, (4, 2))][-2:] if size else []
        one_vector = len(axes) == 2 and unroll == lanes and _row_length(loads) == lanes
        for axis, amounts in zip(axes, ((8, 4, 2), (2,)) if one_vector else ((4, 2), (4, 2))):
            try_upcast(axis, amounts)
        return KernelOpts(tuple(sorted(upcast.items())), unroll=unroll, order=_plain(once))
    contiguous = _contiguous_axes(shape, strided)
    if not contiguous and (across := _contiguous_axes(shape, [axes for axes, step, _ in loads if step not in (0, 1)])):
        # rows shorter than a vector walked by some loads (a batchnorm's NCHW gradient over 14x14 maps) and another
        # that jumps along the reduce but is contiguous across the channels (the NHWC activation): two channels at a
        # time, two chains of additions instead of one. (A vector of channels gathers as many rows of the first: 2.5x
        # faster with them in cache, 2x slower from memory; in the MNIST CNN's step two are 1.4-1.8x faster, r_16
        # 459 -> 260 us, r_1_16_1_1 534 -> 395 us, r_32 235 -> 128 us, r_1_32_1_1 344 -> 299 us)
        try_upcast(across[-1], (2,))
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
            # rows x the tile's vectors of accumulators in half the vector registers (the rest hold the loads), on
            # the largest kernels; 4 rows on others. Rows of one vector take twice the rows only where the kernel is
            # HUGE_REDUCE or its sums LONG_REDUCE: a tile twice the size compiles twice as long (the seed CNN's
            # r_64_1_256_16_16_1_1_1 1.23x faster, the MNIST CNN's r_1_1_32_144 1.7x; the MNIST MLP's 128x784
            # matmuls gained 9-19%, 45 us a step, for 50 ms more compiling each)
            vectors = 1 if upcast[vector_axis] <= lanes and (work >= HUGE_REDUCE or length >= LONG_REDUCE) else 2
            most = max(4, renderer.simd_registers // 2 // vectors) if size == 2 else 4
            rows = tuple(r for r in (16, 8, 4, 2) if r <= most)
            fits = [i for i in reused if fitting(i, rows)]     # e.g. not a 3x3 kernel's axis
            if fits:
                try_upcast(fits[-1], rows)
    order = once or ()
    if not upcast and (rows := _short_row_unroll(nested, loads, lanes)) > 1:
        return KernelOpts(unroll=rows)
    stores_most = not nested and prod(shape) * value.dtype.itemsize >= \
        FAR_BIGGER_THAN_OUTPUT * max(_bytes_read(value, load) for load in loads)
    if not once and not stores_most and size == 2 and \
            max(abs(step) for _, step, _ in loads) * value.dtype.itemsize < NEAR_ROWS_BYTES:
        # neighbouring parallel indices (a thread's slice) read the same rows of the strided loads while those are
        # in cache: the axes along which they move, other than in the register tile, go slowest. (Rows a page or
        # more apart can't stay in cache, they compete for the same cache sets: there the output's order does better.
        # So does an output FAR_BIGGER_THAN_OUTPUT times what each load reads: its stores would scatter, e.g. the
        # seed's CNN's r_64_64_3_3_16_16, a convolution's 38 MB input gradient from 8 MB, 1.3x faster in its order)
        order = tuple(sorted(range(len(shape)), key=lambda i: (i in upcast or all(axes[i] == 0 for axes in strided),
                                                               i)))
    return KernelOpts(tuple(sorted(upcast.items())), order=_plain(order))


def _contiguous_axes(shape: tuple[int, ...], loads: list[dict[int, int]]) -> list[int]:
    """The output axes along which every one of these loads reads contiguously or stays put, and some move."""
    return [i for i in range(len(shape)) if all(axes[i] in (0, 1) for axes in loads) and
            any(axes[i] == 1 for axes in loads)]


def _plain(order: tuple[int, ...] | None) -> tuple[int, ...]:
    """() for the output's own order (or none chosen): the default, and how the kernel pins spell it."""
    return () if not order or order == tuple(range(len(order))) else order
