"""Host memory and kernel launches for the CPU backend: the last step of the pipeline.

Kernels are loaded from their object files by LLVM's ORC JIT (in-process linking, no system linker) and called
through ctypes, which releases the GIL, so slices of the parallel range run on several threads at once."""
from __future__ import annotations
import ctypes
import itertools
import os
import statistics
import threading
import time
import numpy as np
import llvmlite.binding as llvm
from tinygrad_core.device import LRUAllocator, Program
from tinygrad_core.helpers import ContextVar, ceildiv
from tinygrad_cpu.compiler import LLVMCompiler, host_target_machine, split_binary

ALIGNMENT = 64          # a cache line, and the width of an AVX-512 register
# Loads under a padding mask read element 0 of their buffer when the mask is off (see renderer.py), so every
# allocation keeps this much slack past its end: even an empty view at the very end stays readable.
SLACK = 64
THREADS = ContextVar("TINYGRAD_CPU_THREADS", 0)    # threads a kernel may use; 0: every CPU this process may run on
# A kernel is split only after this many launches of its size have been timed on one thread; then each thread's share
# must take SHARE_OVER_WAKE times what waking the other threads costs (the split then wins by at least that cost even
# when a wake-up takes twice as long as measured, as it does when other work keeps the CPUs busy).
PROBES = 3
SHARE_OVER_WAKE = 2
# what the wake-up cost is measured on: a kernel that does nothing
_EMPTY_KERNEL = ('; tinygrad_cpu work_per_index=1 buffers=0 vars=0\n'
                 'define void @"tinygrad_cpu_empty"(i64 %start, i64 %end) nounwind {\nentry:\n  ret void\n}\n')


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


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))     # the CPUs this process may run on (a container may allow fewer)
    except AttributeError:
        return os.cpu_count() or 1


_CPUS = _usable_cpus()


def thread_count() -> int:
    """TINYGRAD_CPU_THREADS (read once, at import; `with Context(TINYGRAD_CPU_THREADS=n):` changes it), else every
    usable CPU. Every launch asks, so it reads no environment."""
    return THREADS.value if THREADS.value > 0 else _CPUS


class _Worker:
    """A thread that runs one slice each time its `go` lock is released, and releases `done` after it. A lock is the
    cheapest wake-up Python has: no queue, no future, no condition variable."""

    def __init__(self):
        self.go, self.done = threading.Lock(), threading.Lock()
        self.go.acquire()
        self.done.acquire()
        self.job, self.error = None, None
        threading.Thread(target=self._serve, daemon=True, name="tinygrad_cpu").start()

    def _serve(self):
        while True:
            self.go.acquire()
            try:
                function, args = self.job
                function(*args)
            except BaseException as e:     # the launching thread raises it (and must not wait for ever)
                self.error = e
            finally:
                self.done.release()


class _Launcher:
    """The JIT that loads kernels and the worker threads that run them (one of each per process)."""
    _lock = threading.Lock()
    _busy = threading.Lock()      # held by the launch the workers are running
    _jit = None
    _workers: list[_Worker] = []
    _wake_cost: float | None = None
    _library_ids = itertools.count()

    @classmethod
    def jit(cls):
        with cls._lock:
            if cls._jit is None:
                cls._jit = llvm.create_lljit_compiler(host_target_machine())
            return cls._jit

    @classmethod
    def split(cls, function, args: list, slices: list[tuple[int, int]]) -> bool:
        """Runs the first slice on this thread and the others on workers; False (and nothing run) when another
        thread's launch has the workers."""
        if not cls._busy.acquire(blocking=False):
            return False
        try:
            with cls._lock:
                while len(cls._workers) < len(slices) - 1:
                    cls._workers.append(_Worker())
            woken = cls._workers[:len(slices) - 1]
            for worker, (start, end) in zip(woken, slices[1:]):
                worker.job = function, (*args, start, end)
                worker.go.release()
            try:
                function(*args, *slices[0])
            finally:
                for worker in woken:
                    worker.done.acquire()
            if error := next((w.error for w in woken if w.error is not None), None):
                for worker in woken:
                    worker.error = None
                raise error
            return True
        finally:
            cls._busy.release()

    @classmethod
    def wake_cost(cls) -> float:
        """Seconds a launch split over every thread takes beyond one on this thread alone: measured once, on a
        kernel that does nothing (median of a few dozen launches each way)."""
        if cls._wake_cost is None:
            empty = CPUProgram("empty", LLVMCompiler().compile(_EMPTY_KERNEL))
            split = [(i, i + 1) for i in range(thread_count())]

            def median_s(run) -> float:
                times = []
                for _ in range(31):
                    started = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - started)
                return statistics.median(times)
            cost = median_s(lambda: cls.split(empty.function, [], split)) - median_s(lambda: empty.function(0, 1))
            cls._wake_cost = max(cost, 1e-7)
        return cls._wake_cost


class CPUProgram(Program):
    def __init__(self, name: str, lib: bytes):
        super().__init__(name, lib)
        meta, obj = split_binary(lib)
        # every kernel is a JIT library of its own: kernels with the same name never clash, and dropping the
        # tracker unloads the code
        builder = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process().export_symbol(meta["symbol"])
        self.tracker = builder.link(_Launcher.jit(), f"kernel{next(_Launcher._library_ids)}")
        argtypes = [ctypes.c_void_p] * meta["buffers"] + [ctypes.c_int32] * meta["vars"] + [ctypes.c_int64] * 2
        self.function = ctypes.CFUNCTYPE(None, *argtypes)(self.tracker[meta["symbol"]])
        self.one_thread: dict[int, list[float]] = {}   # size -> seconds of its first launches, on one thread
        self.plans: dict[tuple, list[tuple[int, int]]] = {}   # (size, threads, wake cost) -> slices

    def slices(self, size: int) -> list[tuple[int, int]]:
        """How [0, size) is split among threads: one slice until PROBES launches of this size were timed, then as
        many equal slices as keep each one SHARE_OVER_WAKE times as long as the wake-up."""
        threads = thread_count()
        if (plan := self.plans.get((size, threads, _Launcher._wake_cost))) is not None:   # (once timed: one look-up)
            return plan
        timed = self.one_thread.get(size, ())
        if threads == 1 or len(timed) < PROBES:
            return [(0, size)]
        wake = _Launcher.wake_cost()
        count = int(min(threads, size, max(1.0, min(timed) / (SHARE_OVER_WAKE * wake))))
        step = ceildiv(size, count)
        plan = self.plans[size, threads, wake] = [(start, min(start + step, size)) for start in range(0, size, step)]
        return plan

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
        started = time.perf_counter()
        args = [*[b.address for b in bufs], *vals]
        size = global_size[0] * global_size[1] * global_size[2]
        if len(slices := self.slices(size)) == 1 or not _Launcher.split(self.function, args, slices):
            if len(timed := self.one_thread.get(size, ())) >= PROBES:
                self.function(*args, 0, size)
            else:       # (this thread's CPU time: on a busy machine, the time it waited for a CPU isn't work)
                cpu = time.thread_time()
                self.function(*args, 0, size)
                self.one_thread[size] = [*timed, time.thread_time() - cpu]
        return time.perf_counter() - started if wait else None
