"""Choosing how a kernel maps onto the hardware: upcasts (register tiles), reduce unrolling, thread-group size.

A simple deterministic heuristic, driven by what the renderer declares (`max_upcast`, `has_local`, ...)."""
from __future__ import annotations
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.codegen.lower import KernelOpts, Lowerer
from tinygrad_core.helpers import NOOPT, prod
from tinygrad_core.ops import Ops, UOp


def _expanded_axes(value: UOp) -> set[int]:
    """Output axes along which some input is broadcast: upcasting them lets one load serve several outputs."""
    axes = set()
    for u in value.toposort():
        if u.op is Ops.EXPAND and len(u.shape) == len(value.shape):
            axes |= {i for i, (a, b) in enumerate(zip(u.src[0].shape, u.shape)) if a != b}
    return axes


def choose_opts(ast: UOp, renderer) -> KernelOpts:
    value = ast.src[0].src[1]
    shape = value.shape
    if NOOPT or not shape:
        return KernelOpts(local_size=min(renderer.default_local_size, prod(shape) or 1) if renderer.has_local else 1)
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
    elif budget > 1 and shape[-1] > 1:
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
        terms = sym.linear(load.src[1])[0]
        loop = next((r for r in innermost if r in terms), None)
        out.append(({i: terms.get(a, 0) for i, a in enumerate(axes)}, terms.get(loop, 0) if loop is not None else 0,
                    loop.src[0].arg if loop is not None else 0))
    return out


def _simd_reduce_opts(value: UOp, renderer) -> KernelOpts:
    """A reduce that reads memory contiguously along its loop is left alone: the backend vectorises the loop itself
    (partial sums per SIMD lane). Otherwise (a matmul's B, a sum over rows) SIMD lanes go across the output axis that
    is contiguous in those loads, and a second output axis, along which those loads don't move, makes the register
    tile: each vector loaded is used for several outputs."""
    shape = value.shape
    lanes = max(1, renderer.simd_width // value.dtype.itemsize)
    loads = _load_strides(value)
    strided = [(axes, step) for axes, step, length in loads if step not in (0, 1) or (step and length < lanes)]
    if not strided:
        return KernelOpts()
    upcast: dict[int, int] = {}
    budget = renderer.max_upcast

    def try_upcast(axis: int, amounts) -> bool:
        nonlocal budget
        amount = next((a for a in amounts if a > 1 and shape[axis] % a == 0 and a <= budget), 0)
        if amount:
            upcast[axis] = amount
            budget //= amount
        return bool(amount)

    contiguous = [i for i in range(len(shape)) if all(axes[i] in (0, 1) for axes, _ in strided) and
                  any(axes[i] == 1 for axes, _ in strided)]
    reused = [i for i in range(len(shape)) if shape[i] > 1 and i not in contiguous and
              all(axes[i] == 0 for axes, _ in strided) and any(axes[i] for axes, _, _ in loads)]
    if contiguous:
        vector_axis = contiguous[-1]
        widths = (2 * lanes, lanes, lanes // 2, lanes // 4) if reused else (4 * lanes, 2 * lanes, lanes, lanes // 2)
        if try_upcast(vector_axis, widths) and reused:
            try_upcast(reused[-1], (4, 2))
    return KernelOpts(tuple(sorted(upcast.items())))
