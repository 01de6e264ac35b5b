"""The CUDA backend's runtime on pycuda: device and context, a caching allocator, host<->device copies, module
load + launch with event timing.

pycuda (which needs the NVIDIA driver) is imported when a device is opened. Without it the device still opens, for
compiling only: rendering and nvcc work anywhere, and allocating or launching says why it can't."""
from __future__ import annotations
import atexit
import functools
import os
import numpy as np
from tinygrad_core.device import Compiled, LRUAllocator, Program
from tinygrad_core.helpers import prod
from tinygrad_cuda.compiler import CUDACompiler, DEFAULT_ARCH
from tinygrad_cuda.renderer import CUDARenderer

cuda = None       # pycuda.driver, once a device with a GPU is opened

DEVICE_ENV = "TINYGRAD_CUDA_DEVICE"     # the GPU index plain "CUDA" opens (default 0)
# copies of at least STAGING_MIN bytes go through a page-locked host buffer (DMA straight from it, no driver-side
# bounce through pageable memory), in pieces of at most STAGING_CHUNK bytes so the buffer stays small
STAGING_MIN = 1 << 20
STAGING_CHUNK = 16 << 20


class DeviceSlice:
    """A view `offset` bytes into a device allocation; holds the allocation so it outlives the view."""

    def __init__(self, base, pointer: int):
        self.base, self.pointer = base, pointer

    def __int__(self) -> int:
        return self.pointer


class CUDAAllocator(LRUAllocator):
    def __init__(self, device: CUDADevice):
        super().__init__()
        self.dev = device
        self.staging = None       # the page-locked host buffer, made on the first large copy

    def _alloc(self, size: int, options):
        self.dev.require_gpu(f"allocate {size} bytes")
        self.dev.make_current()
        try:
            return cuda.mem_alloc(size)
        except cuda.MemoryError as e:
            free, total = cuda.mem_get_info()
            raise MemoryError(f"{self.dev.name} is out of memory allocating {size} bytes ({free} of {total} bytes "
                              f"free): free tensors you no longer need or use smaller batches ({e})") from e

    def _free(self, opaque, size: int, options):
        opaque.free()

    def _copyin(self, dest, src: memoryview):
        self.dev.require_gpu("copy to the GPU")
        self.dev.make_current()
        if len(src) < STAGING_MIN:
            cuda.memcpy_htod(int(dest), src)
            return
        host = np.frombuffer(src, dtype=np.uint8)
        for start, pinned in self._pieces(len(host)):
            pinned[:] = host[start:start + len(pinned)]
            cuda.memcpy_htod(int(dest) + start, pinned)

    def _copyout(self, dest: memoryview, src):
        self.dev.make_current()
        self.dev.synchronize()
        if len(dest) < STAGING_MIN:
            cuda.memcpy_dtoh(dest, int(src))
            return
        host = np.frombuffer(dest, dtype=np.uint8)
        for start, pinned in self._pieces(len(host)):
            cuda.memcpy_dtoh(pinned, int(src) + start)
            host[start:start + len(pinned)] = pinned

    def _pieces(self, size: int):
        """(offset, page-locked view of that piece's length) for each piece of a copy of size bytes."""
        if self.staging is None:
            self.staging = cuda.pagelocked_empty(STAGING_CHUNK, dtype=np.uint8)
        for start in range(0, size, STAGING_CHUNK):
            yield start, self.staging[:min(STAGING_CHUNK, size - start)]

    def offset(self, opaque, size: int, offset: int):
        return DeviceSlice(opaque.base if isinstance(opaque, DeviceSlice) else opaque, int(opaque) + offset)


class CUDAProgram(Program):
    def __init__(self, dev: CUDADevice, name: str, lib: bytes):
        super().__init__(name, lib)
        self.dev = dev
        dev.require_gpu(f"load kernel {name}")
        dev.make_current()
        self.module = cuda.module_from_buffer(lib)
        self.function = self.module.get_function(name)
        self.max_threads = self.function.get_attribute(cuda.function_attribute.MAX_THREADS_PER_BLOCK)

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
        # the kernel's index math assumes exactly this block size, so a GPU that can't run it is an error
        if prod(local_size) > self.max_threads:
            raise RuntimeError(f"kernel {self.name} needs blocks of {tuple(local_size)} threads but this GPU runs at "
                               f"most {self.max_threads} per block for it; lower the renderer's default_local_size")
        if 0 in global_size:
            return 0.0 if wait else None
        self.dev.make_current()
        args = [np.uintp(int(b)) for b in bufs] + [np.int32(v) for v in vals]
        if wait:
            start, end = cuda.Event(), cuda.Event()
            start.record()
        self.function(*args, block=tuple(int(x) for x in local_size), grid=tuple(int(x) for x in global_size))
        if not wait:
            return None
        end.record()
        end.synchronize()
        return start.time_till(end) * 1e-3


class CUDADevice(Compiled):
    def __init__(self, name: str):
        self.name, self.cu_device, self.unavailable = name, None, None
        try:
            self._open_gpu(name)
        except ImportError as e:
            self.unavailable = f"pycuda can't be imported ({e})"
        # without a GPU, kernels are compiled for $CUDA_ARCH (default sm_90) and can't be launched
        arch = os.environ.get("CUDA_ARCH") or (self._gpu_arch() if self.cu_device is not None else DEFAULT_ARCH)
        renderer = CUDARenderer(arch)
        if self.cu_device is not None:
            attribute = cuda.device_attribute
            renderer.local_max = tuple(self.cu_device.get_attribute(a) for a in (
                attribute.MAX_BLOCK_DIM_X, attribute.MAX_BLOCK_DIM_Y, attribute.MAX_BLOCK_DIM_Z))
            renderer.global_max = tuple(self.cu_device.get_attribute(a) for a in (
                attribute.MAX_GRID_DIM_X, attribute.MAX_GRID_DIM_Y, attribute.MAX_GRID_DIM_Z))
            renderer.shared_max = self.cu_device.get_attribute(attribute.MAX_SHARED_MEMORY_PER_BLOCK)
        super().__init__(name, CUDAAllocator(self), renderer, CUDACompiler(arch), functools.partial(CUDAProgram, self))

    def _open_gpu(self, name: str):
        global cuda
        import pycuda.driver
        cuda = pycuda.driver
        try:
            cuda.init()
            count = cuda.Device.count()
        except cuda.Error as e:
            self.unavailable = f"the CUDA driver failed to initialise ({e})"
            return
        _, _, index_text = name.partition(":")
        index_text = index_text or os.environ.get(DEVICE_ENV, "0")
        if not index_text.isdigit() or int(index_text) >= count:
            raise RuntimeError(f"there is no CUDA device {index_text!r} (from {name!r} or ${DEVICE_ENV}); "
                               f"this machine has {count}" + (f": CUDA:0 .. CUDA:{count - 1}" if count else ""))
        self.cu_device = cuda.Device(int(index_text))
        self.context = self.cu_device.retain_primary_context()
        self.context.push()
        atexit.register(self._release)

    def _gpu_arch(self) -> str:
        major, minor = self.cu_device.compute_capability()
        return f"sm_{major}{minor}"

    def require_gpu(self, action: str):
        if self.cu_device is None:
            raise RuntimeError(f"{self.name} can't {action}: it is open for compiling only, because "
                               f"{self.unavailable}. Run on a machine with an NVIDIA GPU, its driver and pycuda "
                               f"(pip install 'tinygrad-cuda[runtime]')")

    def __repr__(self) -> str:
        what = self.cu_device.name() if self.cu_device is not None else "compile only"
        return f"<CUDADevice {self.name}: {what} ({self.compiler.arch})>"

    def make_current(self):
        # pycuda keeps a per-thread context stack: make sure ours is on top before talking to the driver
        if cuda.Context.get_current() != self.context:
            self.context.push()

    def synchronize(self):
        if self.cu_device is None:
            return
        self.make_current()
        cuda.Context.synchronize()

    def _release(self):
        try:
            self.allocator.free_cache()
            if cuda.Context.get_current() == self.context:
                cuda.Context.pop()
        except cuda.Error:
            pass      # the driver may already be shutting down
