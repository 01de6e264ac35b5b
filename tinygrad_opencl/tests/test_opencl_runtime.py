"""The CL backend's parts one by one: registration and probe, device choice, compiler (errors, disk cache),
allocator (copies, sub-buffers, out of memory) and program launch (timing, work-group limits)."""
import numpy as np
import pytest
import pyopencl as cl
import tinygrad_opencl
from tinygrad_core import Device
from tinygrad_core.device import Buffer, CompileError
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import Context
from tinygrad_core.plugins import registry
from tinygrad_opencl.runtime import NoDevice, OpenCLDevice, choose_device, list_devices, _tag

KERNEL = """__kernel __attribute__((reqd_work_group_size(4, 1, 1)))
void twice(__global float* out, __global const float* x) {
  int i = get_group_id(0) * 4 + get_local_id(0);
  out[i] = x[i] * 2.0f;
}"""


def test_registered_as_a_gpu_backend_below_cpu():
    registry.discover()
    backend = registry.backends["CL"]
    assert backend.distribution == "tinygrad-opencl" and backend.spec.is_gpu
    assert 0 < backend.spec.priority < 10
    assert backend.reason is None


def test_describe_names_platform_and_device():
    _, device = list_devices()[0]
    assert device.name.strip() in tinygrad_opencl.describe() and "CL:0" in tinygrad_opencl.describe()


def test_device_index_out_of_range_lists_the_devices():
    with pytest.raises(NoDevice, match="CL:0 = "):
        choose_device("CL:99")


def test_device_env_var_chooses_the_default(monkeypatch):
    monkeypatch.setenv("TINYGRAD_CL_DEVICE", "0")
    assert choose_device("CL")[1] == list_devices()[0][1]
    monkeypatch.setenv("TINYGRAD_CL_DEVICE", "nope")
    with pytest.raises(NoDevice, match="TINYGRAD_CL_DEVICE"):
        choose_device("CL")


def test_build_failure_raises_compile_error_with_log_and_source():
    with pytest.raises(CompileError) as info:
        Device["CL"].compiler.compile("__kernel void broken(__global float* x) { x[0] = undefined_name; }")
    assert "undefined_name" in info.value.message      # the build log names the problem
    assert "broken" in info.value.source


def test_binaries_are_cached_on_disk_per_device_and_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    compiler = Device["CL"].compiler
    device = Device["CL"].cl_device
    assert _tag(device.name) in compiler.cachekey and _tag(device.driver_version) in compiler.cachekey
    first = compiler.compile_cached(KERNEL)
    entries = list(tmp_path.rglob("*"))
    assert any(p.is_file() for p in entries)
    assert compiler.compile_cached(KERNEL) == first


def test_compiled_binary_runs_with_timing():
    dev = Device["CL"]
    program = dev.runtime("twice", dev.compiler.compile(KERNEL))
    x = np.arange(8, dtype=np.float32)
    out, inp = Buffer("CL", 8, dtypes.float32), Buffer("CL", 8, dtypes.float32, initial=x)
    seconds = program(out.opaque, inp.opaque, global_size=(2, 1, 1), local_size=(4, 1, 1), wait=True)
    assert isinstance(seconds, float) and 0 <= seconds < 10
    np.testing.assert_array_equal(out.numpy(), x * 2)


def test_group_larger_than_the_device_allows_is_refused():
    dev = Device["CL"]
    program = dev.runtime("twice", dev.compiler.compile(KERNEL))
    too_big = program.max_group + 1
    buf = Buffer("CL", 8, dtypes.float32)
    with pytest.raises(RuntimeError, match="default_local_size"):
        program(buf.opaque, buf.opaque, global_size=(1, 1, 1), local_size=(too_big, 1, 1))


def test_copy_roundtrip_and_sub_buffer():
    allocator = Device["CL"].allocator
    data = np.arange(1024, dtype=np.uint8)
    base = allocator.alloc(1024)
    allocator.copyin(base, memoryview(data))
    alignment = Device["CL"].cl_device.mem_base_addr_align // 8
    view = allocator.offset(base, 128, alignment)
    out = np.empty(128, dtype=np.uint8)
    allocator.copyout(memoryview(out), view)
    np.testing.assert_array_equal(out, data[alignment:alignment + 128])
    if alignment > 1:
        with pytest.raises(ValueError, match="boundary"):
            allocator.offset(base, 16, 1)


def test_allocation_beyond_the_device_limit_is_a_clear_memory_error():
    dev = Device["CL"]
    with pytest.raises(MemoryError, match="MAX_MEM_ALLOC_SIZE"):
        dev.allocator.alloc(dev.cl_device.max_mem_alloc_size + 1)


def test_freed_buffers_are_reused():
    allocator = Device["CL"].allocator
    first = allocator.alloc(4096)
    allocator.free(first, 4096)
    assert allocator.alloc(4096) is first


def test_unsupported_dtype_is_refused_before_running():
    renderer = tinygrad_opencl.renderer.OpenCLRenderer(has_fp16=False, has_fp64=False)
    assert dtypes.float64 not in renderer.supported_dtypes and dtypes.float16 in renderer.supported_dtypes
    from tinygrad_core.ops import Ops, UOp
    uops = [UOp(Ops.DEFINE_GLOBAL, dtypes.float64, (), 0)]
    with pytest.raises(NotImplementedError, match="cl_khr_fp64"):
        renderer.render("k", uops)


def test_second_device_object_shares_nothing_but_works():
    # CL:0 opened by name is a separate context: buffers and kernels made there work on their own
    dev = OpenCLDevice("CL:0")
    assert isinstance(dev.context, cl.Context)
    with Context(DISK_CACHE=0):
        assert dev.compiler.compile(KERNEL)
