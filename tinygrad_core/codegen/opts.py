"""Choosing how a kernel maps onto the hardware: upcasts (register tiles), reduce unrolling, thread-group size.

A simple deterministic heuristic, driven by what the renderer declares (`max_upcast`, `has_local`, ...) and neutral
about the hardware behind it. A backend tuned otherwise (the CPU's SIMD tiling) answers `Renderer.kernel_opts`, on
`load_strides`, how each load of a kernel walks memory."""
from dataclasses import dataclass
from tinygrad_core.codegen import local_tiles, symbolic as sym, tensor_cores
from tinygrad_core.codegen.lower import Lowerer
from tinygrad_core.helpers import NOOPT, prod
from tinygrad_core.ops import Ops, UOp
from tinygrad_core.sizes import max_value


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


def load_strides(value: UOp) -> list[tuple[dict[int, int], int, int]]:
    """For every load of the kernel whose stored value is `value`: (elements it moves per step of each output axis,
    per step of the innermost reduce loop, that loop's length; 0 and 0 outside reduces). Found by lowering the kernel
    once with a placeholder index per output axis."""
    axes = [UOp(Ops.DEFINE_VAR, sym.INDEX, (), (f"axis{i}", 0, s - 1)) if s > 1 else sym.const(0)
            for i, s in enumerate(value.shape)]
    lowered = Lowerer().lower(value, (tuple(axes),), (None,))[0]
    innermost = {u.src[-1] for u in lowered.toposort() if u.op is Ops.REDUCE}
    out = []
    for load in (u for u in lowered.toposort() if u.op is Ops.LOAD):
        terms = sym.affine(load.src[1])[0]
        loop = next((r for r in innermost if r in terms), None)
        out.append(({i: terms.get(a, 0) for i, a in enumerate(axes)}, terms.get(loop, 0),
                    loop.src[0].arg if loop is not None else 0))
    return out


def _expanded_axes(value: UOp) -> set[int]:
    """Output axes along which some input is broadcast: upcasting them lets one load serve several outputs."""
    return {i for u in value.toposort() if u.op is Ops.EXPAND and len(u.shape) == len(value.shape)
            for i, (a, b) in enumerate(zip(u.src[0].shape, u.shape)) if a != b}


def has_symbolic_sizes(ast: UOp) -> bool:
    return any(not isinstance(s, int) for u in ast.toposort() for s in u.shape)


def choose_opts(ast: UOp, renderer, shared: bool = True) -> KernelOpts:
    """The opts for this kernel on this renderer (shared=False: without local-memory tiles, whatever it declares)."""
    value = ast.src[0].src[1]
    shape = value.shape
    # symbolic sizes get no tiles: nothing is known to divide them
    if NOOPT or not shape or has_symbolic_sizes(value):
        return KernelOpts(local_size=min(renderer.default_local_size, max_value(prod(shape)) or 1)
                          if renderer.has_local else 1)
    whole = ast.src[0].src[0].op is Ops.DEFINE_GLOBAL       # (the tiles store by the output's own index, not a view's)
    if whole and renderer.tensor_cores and tensor_cores.match(ast, renderer) is not None:
        return KernelOpts(tensor_core=True)
    if whole and shared and renderer.has_shared and local_tiles.match(ast, renderer) is not None:
        return KernelOpts(local_tiles=True)
    # the backend's own choice, where it makes one (the heuristic below knows nothing of its hardware)
    if (chosen := renderer.kernel_opts(value)) is not None:
        return chosen
    reduces = [u for u in value.toposort() if u.op is Ops.REDUCE_AXIS]
    upcast: dict[int, int] = {}

    def try_upcast(axis: int, amount: int):
        # axis < len(shape): the reduce's axes only line up with the output's when no reshape follows the reduce
        if amount > 1 and axis < len(shape) and axis not in upcast and shape[axis] % amount == 0 and \
                shape[axis] > amount and renderer.max_upcast // prod(upcast.values()) >= amount:
            upcast[axis] = amount

    if reduces and renderer.max_upcast > 1:
        # a matmul-shaped kernel: upcast two broadcast axes into a register tile
        for axis in sorted(_expanded_axes(reduces[0].src[0]) - set(reduces[0].arg[1]), reverse=True)[:2]:
            try_upcast(axis, 4)
    elif renderer.max_upcast > 1 and shape[-1] > 1:
        try_upcast(len(shape) - 1, min(renderer.max_upcast, 4))
    unroll = 1
    if reduces and renderer.max_unroll > 1:
        size = reduces[0].src[0].shape[reduces[0].arg[1][-1]]
        unroll = next((u for u in (renderer.max_unroll, 4, 2) if size % u == 0 and size > u), 1)
    threads = prod(shape) // prod(upcast.values())
    local = min(renderer.default_local_size, threads) if renderer.has_local else 1
    return KernelOpts(tuple(sorted(upcast.items())), local, unroll)
