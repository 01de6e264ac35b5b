"""The codegen pipeline (codegen/pipeline.py): the passes a kernel AST goes through, in order, each named once."""
import numpy as np
import pytest
from tinygrad_core import Context, Device, Tensor, dtypes
from tinygrad_core.codegen import pipeline
from tinygrad_core.codegen.opts import KernelOpts, choose_opts
from tinygrad_core.conformance.harness import product_kernel
from tinygrad_core.ops import Ops
from tinygrad_core.renderer import TensorCore


def _matmul_ast():
    return product_kernel(Tensor(np.ones((8, 6), np.float32)) @ Tensor(np.ones((6, 4), np.float32)))


def test_without_opts_the_pipeline_takes_the_heuristics_choice():
    ast, renderer = _matmul_ast(), Device["PYTHON"].renderer
    kernel = pipeline.run_passes(ast, renderer)
    assert kernel.opts == choose_opts(ast, renderer)
    assert kernel.program == pipeline.program_for(ast, renderer, kernel.opts)[0]


def test_a_plain_kernel_is_lowered_to_a_graph_then_linearized_into_loops():
    kernel = pipeline.run_passes(_matmul_ast(), Device["PYTHON"].renderer)
    assert kernel.graph.op is Ops.SINK and any(u.op is Ops.REDUCE for u in kernel.graph.toposort())
    ops = [u.op for u in kernel.program]
    assert Ops.REDUCE not in ops and ops.count(Ops.RANGE) == ops.count(Ops.ENDRANGE) == 1


def test_the_decompose_pass_leaves_no_op_the_renderer_lacks(monkeypatch):
    renderer = Device["PYTHON"].renderer
    monkeypatch.setattr(renderer, "code_for_op", {op: v for op, v in renderer.code_for_op.items()
                                                   if op not in (Ops.MAX, Ops.NEG)}, raising=False)
    ast = [item.ast for item in Tensor(np.ones((4,), np.float32)).neg().relu().schedule()][-1]
    ops = {u.op for u in pipeline.program_for(ast, renderer)[0]}
    assert not ops & {Ops.MAX, Ops.NEG} and Ops.WHERE in ops


def test_debug_5_prints_each_pass_by_name_in_order(capsys):
    with Context(DEBUG=5):
        pipeline.run_passes(_matmul_ast(), Device["PYTHON"].renderer)
    printed = [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith("codegen ")]
    assert printed == [name for name, _ in pipeline.PASSES]


@pytest.mark.parametrize("tiles", ["tensor_core", "local_tiles"])
def test_tiled_kernels_take_every_pass_with_no_shortcut(monkeypatch, tiles):
    # tensor cores and local tiles are a choice of the lowering: they give a kernel graph, and the program comes from
    # the shared decompose and linearize passes like every other kernel's
    renderer, half = Device["PYTHON"].renderer, {"device": "PYTHON", "dtype": dtypes.float16}
    if tiles == "tensor_core":
        monkeypatch.setattr(renderer, "tensor_cores", (TensorCore((16, 16, 16), dtypes.float16, dtypes.float32),),
                            raising=False)
    else:
        monkeypatch.setattr(renderer, "has_shared", True, raising=False)
        monkeypatch.setattr(renderer, "shared_max", 1 << 14, raising=False)
    seen = []

    def watched(name, run):
        def step(kernel):
            run(kernel)
            seen.append((name, kernel.graph is not None, kernel.program is not None))
        return step
    monkeypatch.setattr(pipeline, "PASSES", [(name, watched(name, run)) for name, run in pipeline.PASSES])
    kernel = pipeline.run_passes(product_kernel(Tensor(np.ones((32, 32)), **half) @ Tensor(np.ones((32, 32)), **half)),
                                 renderer)
    assert getattr(kernel.opts, tiles)
    assert seen == [("opts", False, False), ("lower", True, False), ("decompose", True, False),
                    ("linearize", True, True)]
    tiled_op = Ops.WMMA if tiles == "tensor_core" else Ops.BARRIER
    assert any(u.op is tiled_op for u in kernel.graph.toposort()) and tiled_op in [u.op for u in kernel.program]


# ---- Renderer.kernel_opts: the backend's own choice of opts, asked before the core's neutral heuristic ----
def test_a_renderer_hook_chooses_the_opts_the_kernel_runs_with(monkeypatch):
    renderer, chosen, asked = Device["PYTHON"].renderer, KernelOpts(upcast=((1, 2),), unroll=3, order=(1, 0, 2)), []
    monkeypatch.setattr(renderer, "kernel_opts", lambda value: asked.append(value.shape) or chosen, raising=False)
    kernel = pipeline.run_passes(_matmul_ast(), renderer)
    assert kernel.opts == chosen and asked == [(8, 4, 1)]    # asked with the stored value: (8, 4), the reduced axis kept
    assert sum(u.op is Ops.STORE for u in kernel.program) == 2      # the upcast: two outputs per thread
    with Context(NOOPT=1):
        assert choose_opts(_matmul_ast(), renderer) == KernelOpts() and len(asked) == 1


def test_the_cpu_hook_answers_for_a_reduce_and_the_core_stays_neutral(monkeypatch):
    llvm = pytest.importorskip("tinygrad_cpu.renderer", reason="the CPU backend")
    ast = product_kernel(Tensor(np.ones((64, 256), np.float32)) @ Tensor(np.ones((256, 64), np.float32)))
    cpu = llvm.LLVMRenderer(64)
    assert (answer := cpu.kernel_opts(ast.src[0].src[1])) is not None and choose_opts(ast, cpu) == answer
    # a renderer without the hook gets the core's heuristic, which never reads simd_width (the CPU's tuning)
    renderer = Device["PYTHON"].renderer
    assert renderer.kernel_opts(ast.src[0].src[1]) is None
    monkeypatch.setattr(renderer, "max_upcast", 16, raising=False)       # (room for a register tile)
    neutral = choose_opts(ast, renderer)
    monkeypatch.setattr(renderer, "simd_width", 64, raising=False)
    assert choose_opts(ast, renderer) == neutral
