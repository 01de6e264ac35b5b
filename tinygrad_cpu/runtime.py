"""Host memory and kernel launches for the CPU backend: the last step of the pipeline.

Kernels are loaded from their object files by LLVM's ORC JIT (in-process linking, no system linker) and called
through ctypes, which releases the GIL; slices of the parallel range run at once on worker threads that live in
native code (the pool module below), handed each slice without a lock or the GIL."""
from __future__ import annotations
import ctypes
import itertools
import os
import statistics
import sys
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
# A wake-up measured slower than this is suspect: another CPU was held for a moment (another library's threads
# spinning down after their work: numpy's BLAS holds them that long after a matmul), and every plan made with it would
# keep kernels on one thread until the next recheck. The recheck then comes after SUSPECT_RECHECK launches, twice as
# many each time the wake-up stays that slow (up to RECHECK).
SUSPECT_WAKE_S = 1e-4
SUSPECT_RECHECK = 64
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


# What a worker and the launching thread hand each other, natively, in the first word of the worker's control block
# (the rest: what to call, its arguments, the slice): no Python lock and no GIL on the way, so a worker that is
# spinning sees its slice at once, and one asleep is woken by the kernel's futex, where waking a thread through
# Python costs tens of microseconds more (the GIL changes hands twice).
IDLE, JOB, DONE, ASLEEP = 0, 1, 2, 3
# how long an idle worker spins for its next slice before it sleeps: the gaps between the launches of a training step
# are shorter. (No longer: a spinning worker holds a CPU that other work on the machine may want.)
SPIN_S = 2e-3
# the futex system call's number, by CPU (Linux); elsewhere a sleeping worker looks for its slice every 50 us
FUTEX = {"x86_64": 202, "aarch64": 98}


def _platform_ir() -> tuple[str, str, str, str]:
    """LLVM IR for this machine: (declarations, the spin-wait hint (it frees the core's other hardware thread), the
    sleep of a worker ASLEEP, its wake-up)."""
    machine = host_target_machine().triple.split("-")[0]
    declare, pause = {"x86_64": ("declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()"),
                      "aarch64": ("declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)")
                      }.get(machine, ("", ""))
    if sys.platform.startswith("linux") and machine in FUTEX:     # (FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE)
        call = f"call i64 (i64, ...) @syscall(i64 {FUTEX[machine]}, ptr %block, i64"
        return (declare + "\ndeclare i64 @syscall(i64, ...)", pause,
                f"{call} 128, i64 {ASLEEP}, ptr null)", f"{call} 129, i64 1)")
    return declare + "\ndeclare i32 @usleep(i32)", pause, "call i32 @usleep(i32 50)", ""


def _pool_ir() -> str:
    """await(block, state, spins): whether the block's state became that within spins polls; serve(block, spins): a
    worker's loop, asleep after spins polls with no slice, until a post wakes it; post(block): hands it the slice
    written in its block; finish(block): waits until it is DONE."""
    declare, pause, sleep, wake = _platform_ir()
    return "\n".join([declare, "declare i32 @sched_yield()", f"""
define i1 @tinygrad_cpu_await(ptr %block, i64 %want, i64 %spins) nounwind {{
entry:
  br label %poll
poll:
  %i = phi i64 [0, %entry], [%i.next, %spin]
  %state = load atomic i64, ptr %block acquire, align 64
  %seen = icmp eq i64 %state, %want
  br i1 %seen, label %yes, label %spin
spin:
  {pause}
  %i.next = add i64 %i, 1
  %more = icmp ult i64 %i.next, %spins
  br i1 %more, label %poll, label %no
yes:
  ret i1 true
no:
  ret i1 false
}}

define void @tinygrad_cpu_serve(ptr %block, i64 %spins) nounwind {{
entry:
  br label %poll
poll:
  %job = call i1 @tinygrad_cpu_await(ptr %block, i64 {JOB}, i64 %spins)
  br i1 %job, label %run, label %sleep
sleep:
  %swap = cmpxchg ptr %block, i64 {IDLE}, i64 {ASLEEP} acq_rel acquire
  %slept = extractvalue {{ i64, i1 }} %swap, 1
  br i1 %slept, label %asleep, label %poll
asleep:
  {sleep}
  %state = load atomic i64, ptr %block acquire, align 64
  %still = icmp eq i64 %state, {ASLEEP}
  br i1 %still, label %asleep, label %poll
run:
  %fields = getelementptr i64, ptr %block, i64 1
  %call = load ptr, ptr %fields
  %fn.p = getelementptr i64, ptr %block, i64 2
  %fn = load ptr, ptr %fn.p
  %args.p = getelementptr i64, ptr %block, i64 3
  %args = load ptr, ptr %args.p
  %start.p = getelementptr i64, ptr %block, i64 4
  %start = load i64, ptr %start.p
  %end.p = getelementptr i64, ptr %block, i64 5
  %end = load i64, ptr %end.p
  call void %call(ptr %fn, ptr %args, i64 %start, i64 %end)
  store atomic i64 {DONE}, ptr %block release, align 64
  br label %poll
}}

define void @tinygrad_cpu_post(ptr %block) nounwind {{
entry:
  %swap = cmpxchg ptr %block, i64 {IDLE}, i64 {JOB} acq_rel acquire
  %posted = extractvalue {{ i64, i1 }} %swap, 1
  br i1 %posted, label %out, label %asleep
asleep:
  store atomic i64 {JOB}, ptr %block release, align 64
  {wake}
  br label %out
out:
  ret void
}}

define void @tinygrad_cpu_finish(ptr %block) nounwind {{
entry:
  br label %poll
poll:
  %done = call i1 @tinygrad_cpu_await(ptr %block, i64 {DONE}, i64 1024)
  br i1 %done, label %out, label %yield
yield:
  call i32 @sched_yield()
  br label %poll
out:
  store atomic i64 {IDLE}, ptr %block release, align 64
  ret void
}}
"""])


def _caller_ir(name: str, buffers: int, variables: int) -> str:
    """call(kernel, args, start, end): the kernel called with its arguments read from an array of 64-bit words (a
    worker calls every kernel so, whatever its signature)."""
    lines = [f'define void @"{name}"(ptr %fn, ptr %args, i64 %start, i64 %end) nounwind {{', "entry:"]
    for i in range(buffers + variables):
        lines += [f"  %p{i} = getelementptr i64, ptr %args, i64 {i}",
                  f"  %a{i} = load ptr, ptr %p{i}" if i < buffers else f"  %w{i} = load i64, ptr %p{i}"]
        if i >= buffers:
            lines.append(f"  %a{i} = trunc i64 %w{i} to i32")
    params = [f"ptr %a{i}" for i in range(buffers)] + [f"i32 %a{i}" for i in range(buffers, buffers + variables)]
    return "\n".join(lines + [f"  call void %fn({', '.join(params + ['i64 %start', 'i64 %end'])})", "  ret void",
                              "}"]) + "\n"


class _Native:
    """The pool's native half, built once per process with the kernels' JIT: serve, post and finish, and one caller
    per kernel signature (buffers, variables)."""

    def __init__(self, jit):
        self.jit, self.callers, self.libraries = jit, {}, []
        library = llvm.JITLibraryBuilder().add_ir(_pool_ir()).add_current_process()
        for name in ("await", "serve", "post", "finish"):
            library.export_symbol(f"tinygrad_cpu_{name}")
        self.library = library.link(jit, "tinygrad_cpu_pool")
        word, address = ctypes.c_int64, ctypes.c_void_p
        self.serve = ctypes.CFUNCTYPE(None, address, word)(self.library["tinygrad_cpu_serve"])
        self.post = ctypes.CFUNCTYPE(None, address)(self.library["tinygrad_cpu_post"])
        self.finish = ctypes.CFUNCTYPE(None, address)(self.library["tinygrad_cpu_finish"])
        # polls per second, timed on a block no one posts to
        wait, block = ctypes.CFUNCTYPE(ctypes.c_bool, address, word, word)(self.library["tinygrad_cpu_await"]), _Block()
        started = time.perf_counter()
        wait(block.address, JOB, 20000)
        self.spins = max(1000, int(20000 * SPIN_S / max(time.perf_counter() - started, 1e-9)))

    def caller(self, buffers: int, variables: int) -> int:
        if (address := self.callers.get((buffers, variables))) is None:
            name = f"tinygrad_cpu_call_{buffers}_{variables}"
            library = llvm.JITLibraryBuilder().add_ir(_caller_ir(name, buffers, variables)).export_symbol(name)
            self.libraries.append(library.link(self.jit, name))       # (kept: dropping the tracker unloads it)
            address = self.callers[buffers, variables] = self.libraries[-1][name]
        return address


class _Block:
    """A worker's control block: eight 64-bit words on a cache line of their own (state, caller, kernel, arguments,
    start, end)."""

    def __init__(self):
        self.raw = np.zeros(16, dtype=np.int64)
        self.words = self.raw[(-self.raw.ctypes.data % 64) // 8:][:8]
        self.address = self.words.ctypes.data


class _Worker:
    """A thread that runs one slice each time its block is posted: natively, for good (serve), polling between
    slices for SPIN_S, then asleep until a post wakes it."""

    def __init__(self, native: _Native):
        self.native, self.block = native, _Block()
        threading.Thread(target=native.serve, args=(self.block.address, native.spins), daemon=True,
                         name="tinygrad_cpu").start()

    def post(self, caller: int, kernel: int, args: int, start: int, end: int):
        words = self.block.words
        words[1], words[2], words[3], words[4], words[5] = caller, kernel, args, start, end
        self.native.post(self.block.address)


class _Launcher:
    """The JIT that loads kernels and the worker threads that run them (one of each per process)."""
    _lock = threading.Lock()
    _busy = threading.Lock()      # held by the launch the workers are running
    _jit = None
    _native: _Native | None = None
    _workers: list[_Worker] = []
    _wake_cost: float | None = None
    next_recheck, slow_in_a_row = RECHECK, 0
    _library_ids = itertools.count()
    _programs: weakref.WeakSet = weakref.WeakSet()
    launches = 0

    @classmethod
    def recheck(cls):
        """Every program times its launches again, against a wake-up measured again."""
        cls._wake_cost, cls.next_recheck = None, cls.launches + RECHECK
        for program in list(cls._programs):
            program.one_thread, program.split_s, program.plans = {}, {}, {}

    @classmethod
    def jit(cls):
        with cls._lock:
            if cls._jit is None:
                cls._jit = llvm.create_lljit_compiler(host_target_machine())
            return cls._jit

    @classmethod
    def split(cls, program: CPUProgram, args: list, slices: list[tuple[int, int]]) -> bool:
        """Runs the first slice on this thread and the others on workers; False (and nothing run) when another
        thread's launch has the workers."""
        if not cls._busy.acquire(blocking=False):
            return False
        try:
            if cls._native is None or len(cls._workers) < len(slices) - 1:     # (the first launch this wide)
                jit = cls.jit()
                with cls._lock:
                    cls._native = cls._native or _Native(jit)
                    while len(cls._workers) < len(slices) - 1:
                        cls._workers.append(_Worker(cls._native))
            woken = cls._workers[:len(slices) - 1]
            packed = (ctypes.c_int64 * max(len(args), 1))(*args)
            caller = cls._native.caller(program.buffers, program.vars)
            for worker, (start, end) in zip(woken, slices[1:]):
                worker.post(caller, program.address, ctypes.addressof(packed), start, end)
            try:
                program.function(*args, *slices[0])
            finally:
                for worker in woken:
                    cls._native.finish(worker.block.address)
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
            cost = median_s(lambda: cls.split(empty, [], split)) - median_s(lambda: empty.function(0, 1))
            cls._wake_cost = max(cost, 1e-7)
            if cost > SUSPECT_WAKE_S:
                gap = min(SUSPECT_RECHECK << cls.slow_in_a_row, RECHECK)
                cls.next_recheck, cls.slow_in_a_row = min(cls.next_recheck, cls.launches + gap), cls.slow_in_a_row + 1
            else:
                cls.slow_in_a_row = 0
        return cls._wake_cost


def _forget_workers():
    """In a forked child only the forking thread exists: its launches start workers of their own."""
    _Launcher._workers, _Launcher._busy = [], threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


class CPUProgram(Program):
    def __init__(self, name: str, lib: bytes):
        super().__init__(name, lib)
        meta, obj = split_binary(lib)
        # every kernel is a JIT library of its own: kernels with the same name never clash, and dropping the
        # tracker unloads the code
        builder = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process().export_symbol(meta["symbol"])
        self.tracker = builder.link(_Launcher.jit(), f"kernel{next(_Launcher._library_ids)}")
        argtypes = [ctypes.c_void_p] * meta["buffers"] + [ctypes.c_int32] * meta["vars"] + [ctypes.c_int64] * 2
        self.address, self.buffers, self.vars = self.tracker[meta["symbol"]], meta["buffers"], meta["vars"]
        self.function = ctypes.CFUNCTYPE(None, *argtypes)(self.address)
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
        if _Launcher.launches >= _Launcher.next_recheck:
            _Launcher.recheck()
        if (plan := self.plans.get((size, THREADS.value, _Launcher._wake_cost))) is None:
            self._timed_launch(args, size)
        elif len(plan) == 1 or not _Launcher.split(self, args, plan):
            self.function(*args, 0, size)
        return time.perf_counter() - started if wait else None

    def _timed_launch(self, args: list, size: int):
        """A launch while its size's plan is being decided (slices): a split timed in wall time (its waits for the
        other CPUs are its cost), one thread in its CPU time (on a busy machine a wait for a CPU is not work)."""
        if len(plan := self.slices(size)) > 1:
            started = time.perf_counter()
            if _Launcher.split(self, args, plan):
                self.split_s.setdefault(size, []).append(time.perf_counter() - started)
                return
        cpu = time.thread_time()
        self.function(*args, 0, size)
        self.one_thread.setdefault(size, []).append(time.thread_time() - cpu)
