"""The CL backend's runtime: picking an OpenCL device, building programs, device memory and kernel launches.

OpenCLDevice (what the plugin's load() returns) bundles the renderer with the compiler, allocator and program
defined here, all bound to one pyopencl context and one in-order, profiling command queue."""
from __future__ import annotations
import functools
import os
import re
import warnings
import numpy as np
import pyopencl as cl
from tinygrad_core.device import Compiled, Compiler, CompileError, LRUAllocator, Program
from tinygrad_core.helpers import prod
from tinygrad_opencl.renderer import OpenCLRenderer

DEVICE_ENV = "TINYGRAD_CL_DEVICE"    # the device index plain "CL" opens (default 0)
VECTORIZE_ENV = "TINYGRAD_CL_VECTORIZE"   # 1: vloadN/vstoreN for neighbouring elements, 0: scalar accesses only
LOCAL_TILES_ENV = "TINYGRAD_CL_LOCAL_TILES"   # 1: matmul/conv kernels tiled through __local memory, 0: never


class NoDevice(RuntimeError):
    pass


def list_devices() -> list[tuple[cl.Platform, cl.Device]]:
    """Every OpenCL device, GPUs first (so CL:0 is a GPU when there is one); raises NoDevice explaining why none."""
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:
        raise NoDevice(f"no OpenCL driver (ICD) was found ({e})") from e
    if not platforms:
        raise NoDevice("no OpenCL driver (ICD) was found")
    found = []
    for platform in platforms:
        try:
            found.extend((platform, device) for device in platform.get_devices())
        except cl.Error:          # a platform without devices raises DEVICE_NOT_FOUND
            continue
    if not found:
        names = ", ".join(p.name for p in platforms)
        raise NoDevice(f"the OpenCL platforms found ({names}) have no devices")
    return sorted(found, key=lambda pair: not pair[1].type & cl.device_type.GPU)


def choose_device(name: str) -> tuple[cl.Platform, cl.Device]:
    """'CL' -> device $TINYGRAD_CL_DEVICE (default 0); 'CL:2' -> device 2."""
    _, _, index_text = name.partition(":")
    index_text = index_text or os.environ.get(DEVICE_ENV, "0")
    devices = list_devices()
    listing = "; ".join(f"CL:{i} = {d.name.strip()} ({p.name.strip()})" for i, (p, d) in enumerate(devices))
    if not index_text.isdigit() or int(index_text) >= len(devices):
        raise NoDevice(f"there is no OpenCL device {index_text!r} (from {name!r} or ${DEVICE_ENV}); "
                       f"this machine has: {listing}")
    return devices[int(index_text)]


def _tag(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text.strip())


class OpenCLCompiler(Compiler):
    """OpenCL C -> the device's program binary (whatever the driver returns for clGetProgramInfo BINARIES)."""

    def __init__(self, context: cl.Context, device: cl.Device):
        self.context, self.cl_device = context, device
        # a binary is only valid for the device and driver that built it
        self.cachekey = f"CL-{_tag(device.platform.name)}-{_tag(device.name)}-{_tag(device.driver_version)}"
        self.options = []
        if device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT:
            self.options.append("-cl-fp32-correctly-rounded-divide-sqrt")   # REFERENCE's 1/x and sqrt are exact

    def compile(self, src: str) -> bytes:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")        # pyopencl warns about any non-empty build log
                program = cl.Program(self.context, src).build(options=self.options, devices=[self.cl_device],
                                                              cache_dir=False)
        except cl.Error as e:
            raise CompileError(f"OpenCL build failed on {self.cl_device.name.strip()}:\n{e}", src) from e
        return program.binaries[0]


class OpenCLAllocator(LRUAllocator):
    def __init__(self, device: OpenCLDevice):
        super().__init__()
        self.dev = device

    def _alloc(self, size: int, options):
        limit = self.dev.cl_device.max_mem_alloc_size
        if size > limit:
            raise MemoryError(f"{self.dev.name} can't allocate {size} bytes in one buffer: the device's limit is "
                              f"{limit} bytes (CL_DEVICE_MAX_MEM_ALLOC_SIZE); use smaller tensors")
        try:
            return cl.Buffer(self.dev.context, cl.mem_flags.READ_WRITE, size)
        except cl.Error as e:
            raise MemoryError(f"{self.dev.name} is out of memory allocating {size} bytes ({self.in_use} bytes in "
                              f"use of {self.dev.cl_device.global_mem_size}): free tensors you no longer need or use "
                              f"smaller batches ({e})") from e

    def _free(self, opaque, size: int, options):
        opaque.release()

    # blocking copies: the host memory may be reused as soon as these return
    def _copyin(self, dest, src: memoryview):
        cl.enqueue_copy(self.dev.queue, dest, src, is_blocking=True)

    def _copyout(self, dest: memoryview, src):
        cl.enqueue_copy(self.dev.queue, dest, src, is_blocking=True)

    def offset(self, opaque, size: int, offset: int):
        alignment = self.dev.cl_device.mem_base_addr_align // 8
        if offset % alignment:
            raise ValueError(f"an OpenCL sub-buffer must start on a {alignment}-byte boundary on "
                             f"{self.dev.cl_device.name.strip()}; offset {offset} isn't (copy the slice instead)")
        return opaque.get_sub_region(offset, size)


class OpenCLProgram(Program):
    def __init__(self, dev: OpenCLDevice, name: str, lib: bytes):
        super().__init__(name, lib)
        self.dev = dev
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # pyopencl warns about any non-empty build log
            self.program = cl.Program(dev.context, [dev.cl_device], [lib]).build()
        self.kernel = cl.Kernel(self.program, name)
        self.max_group = self.kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, dev.cl_device)

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
        # the kernel's index math assumes exactly this group size, so a device that can't run it is an error
        item_limits = self.dev.cl_device.max_work_item_sizes
        if prod(local_size) > self.max_group or any(n > m for n, m in zip(local_size, item_limits)):
            raise RuntimeError(f"kernel {self.name} needs work groups of {tuple(local_size)} but "
                               f"{self.dev.cl_device.name.strip()} allows {self.max_group} items per group (at most "
                               f"{tuple(item_limits)} per dimension) for it; lower the renderer's default_local_size")
        global_work = tuple(g * n for g, n in zip(global_size, local_size))
        if 0 in global_work:
            return 0.0 if wait else None
        for i, buf in enumerate(bufs):
            self.kernel.set_arg(i, buf)
        for i, value in enumerate(vals, start=len(bufs)):
            self.kernel.set_arg(i, np.int32(value))
        event = cl.enqueue_nd_range_kernel(self.dev.queue, self.kernel, global_work, tuple(local_size))
        if not wait:
            return None
        event.wait()
        return (event.profile.end - event.profile.start) * 1e-9


class OpenCLDevice(Compiled):
    def __init__(self, name: str):
        self.platform, self.cl_device = choose_device(name)
        self.context = cl.Context([self.cl_device])
        self.queue = cl.CommandQueue(self.context, self.cl_device,
                                     properties=cl.command_queue_properties.PROFILING_ENABLE)
        extensions = self.cl_device.extensions.split()
        # explicit vectors give a GPU wider memory transactions; a CPU driver (PoCL) vectorises across the work-items
        # of a group itself, and explicit vectors get in its way (a 512 matmul runs at half the speed with them)
        is_gpu = bool(self.cl_device.type & cl.device_type.GPU)
        vector_loads = os.environ.get(VECTORIZE_ENV, "1" if is_gpu else "0") not in ("", "0")
        # local-memory tiles feed a GPU's many threads from on-chip memory; on a CPU driver local memory is ordinary
        # cache and every barrier spills the work-items' registers (on PoCL tiled matmuls are the slower ones: README)
        local_tiles = os.environ.get(LOCAL_TILES_ENV, "1" if is_gpu else "0") not in ("", "0")
        renderer = OpenCLRenderer(has_fp16="cl_khr_fp16" in extensions, has_fp64="cl_khr_fp64" in extensions,
                                  max_work_group_size=self.cl_device.max_work_group_size,
                                  max_work_item_sizes=tuple(self.cl_device.max_work_item_sizes),
                                  vector_loads=vector_loads, local_mem_size=self.cl_device.local_mem_size,
                                  local_tiles=local_tiles)
        super().__init__(name, OpenCLAllocator(self), renderer, OpenCLCompiler(self.context, self.cl_device),
                         functools.partial(OpenCLProgram, self))
        self.name = name

    def __repr__(self) -> str:
        return f"<OpenCLDevice {self.name}: {self.cl_device.name.strip()} ({self.platform.name.strip()})>"

    def synchronize(self):
        self.queue.finish()
