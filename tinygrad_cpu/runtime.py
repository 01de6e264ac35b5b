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
import weakref
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
# A kernel is tried split only after this many launches of its size have been timed on one thread, and only if each
# thread's share would take SHARE_OVER_WAKE times what waking the other threads costs; this many split launches are
# then timed, and the split is kept only if it beat one thread (CPUProgram.slices).
PROBES = 3
SHARE_OVER_WAKE = 2
# A share this many times the wake-up is split with no trial: a split can't lose there, and its trial, among the first
# launches, would time cold caches and first touches of new memory (outside a JIT a 1024 matmul kept one thread)
SURE_OVER_WAKE = 32
# Plans are made again after this many launches (of all kernels): the load on the machine when they were made, which
# decides whether a split wins, may have passed.
RECHECK = 8192
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
    _programs: weakref.WeakSet = weakref.WeakSet()
    launches = 0

    @classmethod
    def recheck(cls):
        """Every program times its launches again, against a wake-up measured again."""
        cls._wake_cost = None
        for program in list(cls._programs):
            program.one_thread, program.split_s, program.plans = {}, {}, {}

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
        """Seconds a launch split over every thread takes beyond one on this thread alone: measured once (again at
        each recheck), on a kernel that does nothing (median of a few dozen launches each way)."""
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
        self.one_thread: dict[int, list[float]] = {}   # size -> seconds of its first launches on one thread (CPU time)
        self.split_s: dict[int, list[float]] = {}      # size -> seconds of its next launches, split (wall time)
        self.plans: dict[tuple, list[tuple[int, int]]] = {}   # (size, TINYGRAD_CPU_THREADS, wake cost) -> slices
        _Launcher._programs.add(self)

    def slices(self, size: int) -> list[tuple[int, int]]:
        """How [0, size) is split among threads at this launch. A size's first PROBES launches run on one thread; then,
        if each of n threads' share would take SHARE_OVER_WAKE times the wake-up, its next PROBES are split n ways, and
        the split is kept only if its fastest launch beat the fastest on one thread: a split also pays for what the
        wake-up, measured on an empty kernel at one moment, misses (the data in this CPU's cache, a CPU other work
        holds, a wake-up slower than measured). A share of SURE_OVER_WAKE wake-ups or more is split with no trial."""
        if (plan := self.plans.get((size, THREADS.value, _Launcher._wake_cost))) is not None:   # (decided: a look-up)
            return plan
        threads, alone = thread_count(), self.one_thread.get(size, ())
        if threads > 1 and len(alone) < PROBES:
            return [(0, size)]
        count = 1 if threads == 1 else \
            int(min(threads, size, max(1.0, min(alone) / (SHARE_OVER_WAKE * _Launcher.wake_cost()))))
        step = ceildiv(size, count)
        split = [(start, min(start + step, size)) for start in range(0, size, step)]
        sure = count > 1 and min(alone) >= count * SURE_OVER_WAKE * _Launcher.wake_cost()     # (no trial)
        if count > 1 and not sure and len(tried := self.split_s.get(size, ())) < PROBES:
            return split
        plan = split if count == 1 or sure or min(tried) < min(alone) else [(0, size)]
        self.plans[size, THREADS.value, _Launcher._wake_cost] = plan
        return plan

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
        started = time.perf_counter() if wait else 0.0
        args = [*[b.address for b in bufs], *vals]
        size = global_size[0] * global_size[1] * global_size[2]
        _Launcher.launches += 1
        if _Launcher.launches % RECHECK == 0:
            _Launcher.recheck()
        if (plan := self.plans.get((size, THREADS.value, _Launcher._wake_cost))) is None:
            self._timed_launch(args, size)
        elif len(plan) == 1 or not _Launcher.split(self.function, args, plan):
            self.function(*args, 0, size)
        return time.perf_counter() - started if wait else None

    def _timed_launch(self, args: list, size: int):
        """A launch while its size's plan is being decided (slices): a split timed in wall time (its waits for the
        other CPUs are its cost), one thread in its CPU time (on a busy machine a wait for a CPU is not work)."""
        if len(plan := self.slices(size)) > 1:
            started = time.perf_counter()
            if _Launcher.split(self.function, args, plan):
                self.split_s.setdefault(size, []).append(time.perf_counter() - started)
                return
        cpu = time.thread_time()
        self.function(*args, 0, size)
        self.one_thread.setdefault(size, []).append(time.thread_time() - cpu)
