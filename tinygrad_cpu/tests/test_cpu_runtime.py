"""Host memory and launches: the allocator's copies and views, and thread splitting that gives the same result as
one thread."""
import numpy as np
import pytest
from tinygrad_core import Tensor
from tinygrad_core.device import Device
from tinygrad_cpu import runtime


def test_allocator_copies_and_offsets():
    allocator = Device["CPU"].allocator
    buf = allocator.alloc(64)
    assert buf.address % runtime.ALIGNMENT == 0
    allocator.copyin(buf, memoryview(np.arange(64, dtype=np.uint8)))
    view = allocator.offset(buf, 16, 8)
    out = bytearray(16)
    allocator.copyout(memoryview(out), view)
    assert list(out) == list(range(8, 24))
    allocator.free(buf, 64)


def test_memory_used_counts_live_buffers():
    before = Device["CPU"].memory_used()
    t = Tensor.ones(1000, device="CPU").contiguous().realize()
    assert Device["CPU"].memory_used() >= before + 4000
    del t


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_split_gives_identical_results(threads, monkeypatch):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 80), dtype=np.float32), rng.standard_normal((80, 72), dtype=np.float32)
    monkeypatch.setattr(runtime, "MIN_WORK_PER_THREAD", 1)          # split even this small kernel
    monkeypatch.setenv("TINYGRAD_CPU_THREADS", str(threads))

    def compute():
        x, y = Tensor(a, device="CPU"), Tensor(b, device="CPU")
        return ((x @ y).relu().sum(axis=1) + x.max(axis=1)).numpy()
    got = compute()
    monkeypatch.setenv("TINYGRAD_CPU_THREADS", "1")
    np.testing.assert_array_equal(got, compute())


def test_slices_cover_the_range_once():
    program = runtime.CPUProgram.__new__(runtime.CPUProgram)
    program.work_per_index = 10 ** 6
    for size in (1, 2, 7, 1000, 1001):
        covered = [i for start, end in program.slices(size) for i in range(start, end)]
        assert covered == list(range(size))


def test_small_kernels_run_on_one_thread(monkeypatch):
    monkeypatch.setenv("TINYGRAD_CPU_THREADS", "8")
    program = runtime.CPUProgram.__new__(runtime.CPUProgram)
    program.work_per_index = 1
    assert len(program.slices(100)) == 1
    program.work_per_index = 10 ** 5
    assert len(program.slices(100)) == 8
