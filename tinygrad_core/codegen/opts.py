"""Choosing how a kernel maps onto the hardware: upcasts (register tiles), reduce unrolling, thread-group size.

A simple deterministic heuristic, driven by what the renderer declares (`max_upcast`, `has_local`, ...)."""
from __future__ import annotations
from tinygrad_core.codegen.lower import KernelOpts
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
    upcast: dict[int, int] = {}
    budget = renderer.max_upcast

    def try_upcast(axis: int, amount: int):
        nonlocal budget
        if amount > 1 and axis not in upcast and shape[axis] % amount == 0 and shape[axis] > amount and budget >= amount:
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
