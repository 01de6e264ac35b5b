"""What a renderer's `kernel_opts` hook builds on (part of the backend API, docs/PLUGINS.md): the `KernelOpts` it
returns, and `load_strides`, how each load of a kernel walks memory. The choices are the backend's; this analysis of
the kernel is the same for every one."""
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.codegen.lower import Lowerer
from tinygrad_core.codegen.opts import KernelOpts as KernelOpts     # re-exported: the hook's answer
from tinygrad_core.ops import Ops, UOp


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
