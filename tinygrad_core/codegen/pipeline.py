"""The codegen pipeline: a kernel AST -> the linear program its renderer turns into source, as named passes in order.

PASSES is the whole back half of a kernel at a glance; each pass is a small function of the Kernel being built.
DEBUG=5 prints what each pass leaves."""
from dataclasses import dataclass
from tinygrad_core.codegen import local_tiles, tensor_cores
from tinygrad_core.codegen.decompose import decompose
from tinygrad_core.codegen.linearize import Linearizer
from tinygrad_core.codegen.lower import lower_kernel
from tinygrad_core.codegen.opts import choose_opts
from tinygrad_core.helpers import DEBUG
from tinygrad_core.ops import UOp


@dataclass
class Kernel:
    """One kernel on its way through the passes."""
    ast: UOp
    renderer: object
    opts: object = None                   # KernelOpts; chosen by the "opts" pass when not given
    graph: UOp | None = None              # the kernel graph: a SINK of STOREs, with REDUCE nodes still in it
    program: list[UOp] | None = None      # the linear program
    launch: tuple = ((), ())              # (global size, local size)


def _choose_opts(k: Kernel):
    k.opts = choose_opts(k.ast, k.renderer) if k.opts is None else k.opts


def _lower(k: Kernel):
    """The kernel graph: tensor-core tiles or local-memory tiles when the opts chose them, else the plain lowering."""
    tiled = tensor_cores if k.opts.tensor_core else local_tiles if k.opts.local_tiles else None
    lowered = tiled.lower(k.ast, tiled.match(k.ast, k.renderer), k.renderer) if tiled else \
        lower_kernel(k.ast, k.renderer, k.opts)
    k.graph, k.launch = lowered.sink, (lowered.global_size, lowered.local_size)


def _decompose(k: Kernel):
    k.graph = decompose(k.graph, k.renderer)


def _linearize(k: Kernel):
    # (a reduce's update is made while linearizing: decomposed there too)
    k.program = Linearizer(k.graph, lambda u: decompose(u, k.renderer)).program()


PASSES = [("opts", _choose_opts), ("lower", _lower), ("decompose", _decompose), ("linearize", _linearize)]


def run_passes(ast: UOp, renderer, opts=None) -> Kernel:
    kernel = Kernel(ast, renderer, opts)
    for name, run in PASSES:
        run(kernel)
        if DEBUG >= 5:
            print(f"codegen {name:10s} opts={kernel.opts} graph={kernel.graph and len(kernel.graph.toposort())} nodes "
                  f"program={kernel.program and len(kernel.program)} ops")
    return kernel


def program_for(ast: UOp, renderer, opts=None) -> tuple[list[UOp], tuple, tuple, object]:
    """Kernel AST -> (the linear program a renderer receives, global size, local size, the KernelOpts it was laid out
    by: opts, or the opts pass's choice where opts is None)."""
    kernel = run_passes(ast, renderer, opts)
    return kernel.program, *kernel.launch, kernel.opts
