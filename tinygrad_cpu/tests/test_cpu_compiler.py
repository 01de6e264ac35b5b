"""The LLVM compiler: bad IR is a CompileError carrying the IR and LLVM's message; the disk-cache key names the CPU
and the LLVM versions; cached binaries load and run."""
import llvmlite
import llvmlite.binding as llvm
import numpy as np
import pytest
from tinygrad_core.device import Device, CompileError
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import Context
from tinygrad_core.ops import Ops
from tinygrad_cpu.compiler import LLVMCompiler, split_binary
from tinygrad_cpu.runtime import CPUProgram
from tinygrad_core.engine.realize import CompiledRunner
from cpu_kernel_runner import elementwise_ast, run_elementwise

HEADER = "; tinygrad_cpu work_per_index=1 buffers=1 vars=0\n"
GOOD = HEADER + """define void @"add_one"(ptr noalias %data0, i64 %start, i64 %end) nounwind {
entry:
  %run = icmp slt i64 %start, %end
  br i1 %run, label %body, label %exit
body:
  %i = phi i64 [%start, %entry], [%next, %body]
  %p = getelementptr inbounds float, ptr %data0, i64 %i
  %x = load float, ptr %p
  %y = fadd float %x, 1.0
  store float %y, ptr %p
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %end
  br i1 %more, label %body, label %exit
exit:
  ret void
}
"""


def test_invalid_ir_raises_compile_error_with_source_and_llvm_message():
    bad = GOOD.replace("fadd float %x, 1.0", "fadd float %x, %undefined_value")
    with pytest.raises(CompileError) as info:
        LLVMCompiler().compile(bad)
    assert info.value.source == bad
    assert "undefined_value" in info.value.message        # LLVM's own words about what is wrong


def test_type_error_in_ir_is_a_compile_error():
    with pytest.raises(CompileError):
        LLVMCompiler().compile(GOOD.replace("fadd float %x, 1.0", "fadd i32 %x, 1"))


def test_source_without_the_renderer_header_is_refused():
    with pytest.raises(CompileError, match="header"):
        LLVMCompiler().compile(GOOD[len(HEADER):])


def test_cache_key_names_cpu_and_versions():
    key = LLVMCompiler().cachekey
    assert llvm.get_host_cpu_name() in key
    assert llvmlite.__version__ in key and ".".join(map(str, llvm.llvm_version_info)) in key


def test_compiled_binary_runs_and_splits_across_threads():
    lib = LLVMCompiler().compile(GOOD)
    meta, obj = split_binary(lib)
    assert meta["symbol"] == "add_one" and obj[:4] == b"\x7fELF"
    program = CPUProgram("add_one", lib)
    allocator = Device["CPU"].allocator
    buf = allocator.alloc(4 * 1000)
    allocator.copyin(buf, memoryview(np.arange(1000, dtype=np.float32).view(np.uint8)))
    seconds = program(buf, global_size=(1000, 1, 1), wait=True)
    out = np.empty(1000, np.float32)
    allocator.copyout(memoryview(out.view(np.uint8)), buf)
    np.testing.assert_array_equal(out, np.arange(1000, dtype=np.float32) + 1)
    assert isinstance(seconds, float) and seconds >= 0


def test_disk_cache_reuses_binaries(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    x = np.arange(64, dtype=np.int32)
    first = run_elementwise(Ops.MUL, dtypes.int32, [(x, dtypes.int32), (x, dtypes.int32)])
    entries = list(tmp_path.rglob("*"))
    assert any(p.is_file() for p in entries)
    second = run_elementwise(Ops.MUL, dtypes.int32, [(x, dtypes.int32), (x, dtypes.int32)])
    np.testing.assert_array_equal(first, x * x)
    np.testing.assert_array_equal(second, x * x)
    assert list(tmp_path.rglob("*")) == entries            # the second run compiled nothing new


@Context(TINYGRAD_CPU_THREADS=2)
def test_a_batch_compiles_on_several_processes_to_the_same_binaries():
    compiler = LLVMCompiler()
    sources = [GOOD.replace("1.0", f"{i}.0") for i in range(3)]
    assert compiler.compile_many(sources) == [compiler.compile(src) for src in sources]


@Context(TINYGRAD_CPU_THREADS=2)
def test_a_bad_kernel_in_a_batch_raises_compile_error_with_its_source():
    bad = GOOD.replace("fadd float %x, 1.0", "fadd float %x, %undefined_value")
    with pytest.raises(CompileError) as info:
        LLVMCompiler().compile_many([GOOD, bad])
    assert info.value.source == bad and "undefined_value" in info.value.message


@pytest.mark.parametrize("size, kept_as_written", [(64, True), (1 << 20, False)])
def test_only_small_kernels_ask_llvm_to_leave_their_loops_alone(size, kept_as_written):
    # vectorising a loop of a few dozen trips gains nothing and doubles the compile time
    src = CompiledRunner("CPU", elementwise_ast(Ops.ADD, dtypes.float32, [dtypes.float32] * 2, size)).src
    assert ('"llvm.loop.vectorize.enable", i1 false' in src) == kept_as_written


def test_a_changed_math_helper_renders_kernels_anew(monkeypatch):
    # programs remembered on disk must not outlive the helper text they were rendered with
    from tinygrad_core.engine.realize import _program_path
    from tinygrad_cpu import mathlib
    from tinygrad_cpu.renderer import LLVMRenderer
    ast = elementwise_ast(Ops.SIN, dtypes.float32, [dtypes.float32], 64)
    before = _program_path("CPU", LLVMRenderer(), ast)
    monkeypatch.setitem(mathlib.HELPERS, mathlib.SIN, mathlib.HELPERS[mathlib.SIN] + "\n; changed")
    assert _program_path("CPU", LLVMRenderer(), ast) != before
