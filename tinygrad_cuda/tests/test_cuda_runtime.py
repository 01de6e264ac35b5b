"""The CUDA runtime on a real GPU (skipped, with probe()'s reason, anywhere else): registration, copies, launches,
timing, and tensor programs against numpy. Without a GPU, the device opens for compiling only."""
import numpy as np
import pytest
import tinygrad_cuda
from tinygrad_core import Device, Tensor
from tinygrad_core.device import Buffer
from tinygrad_core.dtype import dtypes
from tinygrad_core.plugins import registry

REASON = tinygrad_cuda.probe()
needs_gpu = pytest.mark.skipif(REASON is not None, reason=f"needs a CUDA GPU: {REASON}")


def test_registered_as_the_preferred_gpu_backend():
    registry.discover()
    backend = registry.backends["CUDA"]
    assert backend.distribution == "tinygrad-cuda" and backend.spec.is_gpu and backend.spec.priority == 20


@pytest.mark.skipif(REASON is None, reason="this machine has a usable CUDA GPU")
def test_probe_says_why_and_the_device_still_compiles():
    assert "pycuda" in REASON or "driver" in REASON or "GPU" in REASON
    from tinygrad_cuda.runtime import CUDADevice
    dev = CUDADevice("CUDA")
    assert dev.compiler.arch and "compile" in repr(dev)
    with pytest.raises(RuntimeError, match="compiling only"):
        dev.allocator.alloc(16)


@needs_gpu
def test_copy_roundtrip_and_offset():
    allocator = Device["CUDA"].allocator
    data = np.arange(256, dtype=np.uint8)
    base = allocator.alloc(256)
    allocator.copyin(base, memoryview(data))
    out = np.empty(64, dtype=np.uint8)
    allocator.copyout(memoryview(out), allocator.offset(base, 64, 32))
    np.testing.assert_array_equal(out, data[32:96])


@needs_gpu
def test_launch_with_timing():
    dev = Device["CUDA"]
    src = 'extern "C" __global__ void twice(float* out, const float* x) { int i = blockIdx.x * 4 + threadIdx.x; ' \
          'out[i] = x[i] * 2.0f; }'
    program = dev.runtime("twice", dev.compiler.compile(src))
    x = np.arange(8, dtype=np.float32)
    out, inp = Buffer("CUDA", 8, dtypes.float32), Buffer("CUDA", 8, dtypes.float32, initial=x)
    seconds = program(out.opaque, inp.opaque, global_size=(2, 1, 1), local_size=(4, 1, 1), wait=True)
    assert 0 <= seconds < 10
    np.testing.assert_array_equal(out.numpy(), x * 2)


@needs_gpu
def test_tensor_programs_match_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(37, 29)).astype(np.float32), rng.normal(size=(29, 41)).astype(np.float32)
    np.testing.assert_allclose((Tensor(a, device="CUDA") @ Tensor(b, device="CUDA")).numpy(), a @ b, rtol=1e-4,
                               atol=1e-4)
    x = Tensor(a, device="CUDA")
    np.testing.assert_allclose((x.relu() * 2 + 1).sum(axis=0).numpy(), (np.maximum(a, 0) * 2 + 1).sum(axis=0),
                               rtol=1e-5)
    for dtype in (dtypes.half, dtypes.bfloat16, dtypes.int8, dtypes.int64, dtypes.float64):
        on = {dev: (Tensor(a, device=dev).cast(dtype) * 3 + Tensor(a, device=dev).cast(dtype)).numpy()
              for dev in ("CUDA", "PYTHON")}
        np.testing.assert_array_equal(on["CUDA"], on["PYTHON"])


def test_large_copies_go_through_page_locked_pieces(monkeypatch):
    """The staging logic against a stand-in driver (device memory is a numpy array): big copies are cut into
    STAGING_CHUNK pieces through one page-locked buffer, small ones go straight; both arrive intact."""
    from tinygrad_cuda import runtime
    device_memory = np.zeros(3 * runtime.STAGING_CHUNK, dtype=np.uint8)
    calls = []

    class Driver:
        @staticmethod
        def pagelocked_empty(size, dtype):
            calls.append(("pinned", size))
            return np.empty(size, dtype)

        @staticmethod
        def memcpy_htod(address, host):
            host = np.frombuffer(host, np.uint8)
            calls.append(("htod", len(host)))
            device_memory[address:address + len(host)] = host

        @staticmethod
        def memcpy_dtoh(host, address):
            host = np.frombuffer(host, np.uint8)
            calls.append(("dtoh", len(host)))
            host[:] = device_memory[address:address + len(host)]

    monkeypatch.setattr(runtime, "cuda", Driver)
    device = type("FakeDevice", (), {"require_gpu": lambda *a: None, "make_current": lambda *a: None,
                                     "synchronize": lambda *a: None})()
    allocator = runtime.CUDAAllocator(device)
    size = 2 * runtime.STAGING_CHUNK + 12345
    data = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    allocator._copyin(7, memoryview(data))
    back = np.empty(size, np.uint8)
    allocator._copyout(memoryview(back), 7)
    np.testing.assert_array_equal(back, data)
    assert calls.count(("pinned", runtime.STAGING_CHUNK)) == 1 and calls.count(("htod", 12345)) == 1
    assert sum(1 for kind, _ in calls if kind == "htod") == 3
    small = np.arange(100, dtype=np.uint8)
    allocator._copyin(0, memoryview(small))
    assert calls[-1] == ("htod", 100)
