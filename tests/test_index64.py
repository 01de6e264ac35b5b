"""64-bit index arithmetic: a kernel whose indices or loop ends can pass int32 is lowered with int64 indices, on every
renderer; every other kernel keeps int32 (cheaper everywhere)."""
import pytest
from tinygrad_core.codegen.lower import lower_kernel
from tinygrad_core.codegen.opts import KernelOpts
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.dtype import dtypes
from tinygrad_core.codegen.pipeline import program_for
from tinygrad_core.ops import Ops, UOp

BIG = 2 ** 31 + 64


def add_ast(size: int, dtype=dtypes.uint8) -> UOp:
    loads = tuple(UOp(Ops.INPUT, dtype, (UOp(Ops.DEFINE_GLOBAL, dtype, (), i + 1),), size) for i in range(2))
    store = UOp(Ops.STORE, dtypes.void, (UOp(Ops.DEFINE_GLOBAL, dtype, (), 0), UOp(Ops.ADD, dtype, loads)))
    return UOp(Ops.SINK, dtypes.void, (store,))


def index_dtypes(sink: UOp) -> set:
    return {u.dtype for u in sink.toposort() if u.op in (Ops.SPECIAL, Ops.RANGE)}


def renderers():
    from tinygrad_cpu.renderer import LLVMRenderer
    from tinygrad_python.backend import PythonRenderer
    out = [LLVMRenderer(), PythonRenderer()]
    for module, name in (("tinygrad_opencl.renderer", "OpenCLRenderer"), ("tinygrad_cuda.renderer", "CUDARenderer")):
        out.append(getattr(pytest.importorskip(module), name)())
    return out


@pytest.mark.parametrize("size, wide", [(1000, False), (2 ** 31 - 1, False), (2 ** 31, True), (BIG, True)])
def test_index_width_follows_the_kernel_size(size, wide):
    from tinygrad_cpu.renderer import LLVMRenderer
    kernel = lower_kernel(add_ast(size), LLVMRenderer(), KernelOpts())
    assert index_dtypes(kernel.sink) == {dtypes.int64 if wide else dtypes.int32}
    assert sym.INDEX == dtypes.int32          # the wide lowering leaves the default as it was


def test_a_reduce_whose_flat_index_passes_int32_is_wide():
    # 2**16 rows of 2**16: every loop fits int32, but row * 2**16 + column does not (scheduling allocates nothing)
    from tinygrad_core import Tensor
    from tinygrad_core.schedule import create_schedule
    from tinygrad_cpu.renderer import LLVMRenderer
    ast = create_schedule([Tensor.empty(2 ** 16, 2 ** 16, dtype=dtypes.uint8).max(1).uop])[-1].ast
    assert index_dtypes(lower_kernel(ast, LLVMRenderer(), KernelOpts()).sink) == {dtypes.int64}


@pytest.mark.parametrize("renderer", renderers(), ids=lambda r: r.device)
def test_every_renderer_writes_64_bit_index_math_for_a_big_kernel(renderer):
    opts = KernelOpts(local_size=128) if renderer.has_local else KernelOpts()
    small, big = (renderer.render("k", program_for(add_ast(n), renderer, opts)[0]) for n in (1000, BIG))
    wide_names = {"CPU": "i64 %gidx", "PYTHON": '"SPECIAL", "long"', "CL": "long gidx0", "CUDA": "long long gidx0"}
    narrow_names = {"CPU": "i32 %gidx", "PYTHON": '"SPECIAL", "int"', "CL": "int gidx0", "CUDA": "int gidx0"}
    assert wide_names[renderer.device] in big and narrow_names[renderer.device] not in big
    assert narrow_names[renderer.device] in small and wide_names[renderer.device] not in small
