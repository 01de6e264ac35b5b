"""Host memory and kernel launches for the CPU backend: the last step of the pipeline.

Kernels are loaded from their object files by LLVM's ORC JIT (in-process linking, no system linker) and called
through ctypes, which releases the GIL, so slices of the parallel range run on a pool of threads at once."""
from __future__ import annotations
import ctypes
import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import llvmlite.binding as llvm
from tinygrad_core.device import LRUAllocator, Program
from tinygrad_core.helpers import getenv
from tinygrad_cpu.compiler import host_target_machine, split_binary

ALIGNMENT = 64          # a cache line, and the width of an AVX-512 register
# Loads under a padding mask read element 0 of their buffer when the mask is off (see renderer.py), so every
# allocation keeps this much slack past its end: even an empty view at the very end stays readable.
SLACK = 64
MIN_WORK_PER_THREAD = 100_000   # below this much work (renderer's estimate) another thread costs more than it saves


class HostMemory:
    """A piece of host memory: the numpy array that owns it and its address (what the kernels receive)."""
    __slots__ = ("array", "address")

    def __init__(self, array: np.ndarray):
        self.array, self.address = array, array.ctypes.data

    def __repr__(self):
        return f"<HostMemory {self.array.nbytes} bytes at {self.address:#x}>"


class CPUAllocator(LRUAllocator):
    shares_host_memory = True

    def _alloc(self, size: int, options) -> HostMemory:
        raw = np.empty(size + SLACK + ALIGNMENT, dtype=np.uint8)
        start = -raw.ctypes.data % ALIGNMENT
        raw[start + size:start + size + SLACK] = 0
        return HostMemory(raw[start:start + size])

    def _copyin(self, dest: HostMemory, src: memoryview):
        ctypes.memmove(dest.address, np.frombuffer(src, dtype=np.uint8).ctypes.data, len(src))

    def _copyout(self, dest: memoryview, src: HostMemory):
        ctypes.memmove(np.frombuffer(dest, dtype=np.uint8).ctypes.data, src.address, len(dest))

    def offset(self, opaque: HostMemory, size: int, offset: int) -> HostMemory:
        return HostMemory(opaque.array[offset:offset + size])

    def as_buffer(self, opaque: HostMemory) -> memoryview:
        """The memory itself, without a copy."""
        return memoryview(opaque.array)

    def _borrow(self, array: np.ndarray) -> HostMemory:
        # (a masked-off load reads element 0, so a non-empty array needs no slack past its end)
        return HostMemory(array.reshape(-1).view(np.uint8))


def thread_count() -> int:
    if (chosen := getenv("TINYGRAD_CPU_THREADS", 0)) > 0:
        return chosen
    try:
        return len(os.sched_getaffinity(0))     # the CPUs this process may run on (a container may allow fewer)
    except AttributeError:
        return os.cpu_count() or 1


class _Launcher:
    """The JIT that loads kernels and the worker threads that run them (one of each per process)."""
    _lock = threading.Lock()
    _jit = None
    _pool: ThreadPoolExecutor | None = None
    _pool_size = 0
    _library_ids = itertools.count()

    @classmethod
    def jit(cls):
        with cls._lock:
            if cls._jit is None:
                cls._jit = llvm.create_lljit_compiler(host_target_machine())
            return cls._jit

    @classmethod
    def pool(cls, threads: int) -> ThreadPoolExecutor:
        with cls._lock:
            if cls._pool is None or cls._pool_size < threads:
                cls._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tinygrad_cpu")
                cls._pool_size = threads
            return cls._pool


class CPUProgram(Program):
    def __init__(self, name: str, lib: bytes):
        super().__init__(name, lib)
        meta, obj = split_binary(lib)
        self.work_per_index = meta["work_per_index"]
        # every kernel is a JIT library of its own: kernels with the same name never clash, and dropping the
        # tracker unloads the code
        builder = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process().export_symbol(meta["symbol"])
        self.tracker = builder.link(_Launcher.jit(), f"kernel{next(_Launcher._library_ids)}")
        argtypes = [ctypes.c_void_p] * meta["buffers"] + [ctypes.c_int32] * meta["vars"] + [ctypes.c_int64] * 2
        self.function = ctypes.CFUNCTYPE(None, *argtypes)(self.tracker[meta["symbol"]])

    def slices(self, size: int) -> list[tuple[int, int]]:
        """How [0, size) is split among threads: one slice for small kernels, equal slices otherwise."""
        threads = min(thread_count(), size, max(1, size * self.work_per_index // MIN_WORK_PER_THREAD))
        if threads <= 1:
            return [(0, size)]
        step = -(-size // threads)
        return [(start, min(start + step, size)) for start in range(0, size, step)]

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
        started = time.perf_counter()
        args = [b.address for b in bufs] + list(vals)
        slices = self.slices(global_size[0] * global_size[1] * global_size[2])
        if len(slices) == 1:
            self.function(*args, *slices[0])
        else:
            pool = _Launcher.pool(len(slices) - 1)
            others = [pool.submit(self.function, *args, start, end) for start, end in slices[1:]]
            self.function(*args, *slices[0])      # this thread takes a slice too
            for job in others:
                job.result()
        return time.perf_counter() - started if wait else None
