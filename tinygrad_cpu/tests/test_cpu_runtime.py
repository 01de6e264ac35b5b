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


def test_numpy_is_the_tensors_memory_until_the_tensor_is_written():
    t = (Tensor(np.arange(6, dtype=np.float32), device="CPU") * 2).realize()
    first, second = t.numpy(), t.numpy()
    assert np.shares_memory(first, second) and first.tolist() == [0, 2, 4, 6, 8, 10]
    t.assign(t + 1).realize()                    # copy on write: the kernel writes memory of the tensor's own
    assert first.tolist() == [0, 2, 4, 6, 8, 10] and t.numpy().tolist() == [1, 3, 5, 7, 9, 11]
    assert not np.shares_memory(first, t.numpy())


def test_a_read_only_array_becomes_a_tensor_without_a_copy():
    a = np.arange(1000, dtype=np.float32)
    a.flags.writeable = False
    t = Tensor(a, device="CPU")
    assert np.shares_memory(t.numpy(), a)
    np.testing.assert_allclose((t * 2).numpy(), a * 2)
    writeable = np.arange(1000, dtype=np.float32)
    assert not np.shares_memory(Tensor(writeable, device="CPU").numpy(), writeable)     # it could change: a copy
    assert not np.shares_memory(Tensor(a[::2], device="CPU").numpy(), a)                # strided: a copy


def test_a_jitted_functions_output_read_out_keeps_its_values():
    from tinygrad_core import TinyJit
    step = TinyJit(lambda x: (x * 3).realize())
    outs = [step(Tensor(np.full(4, i, np.float32), device="CPU")).numpy() for i in range(5)]
    assert [o[0] for o in outs] == [0, 3, 6, 9, 12]


def test_shared_memory_is_counted_and_never_reused_while_an_array_holds_it():
    from tinygrad_core.device import Buffer
    from tinygrad_core.dtype import dtypes
    allocator = Device["CPU"].allocator
    before = allocator.in_use
    buf = Buffer("CPU", 1 << 16, dtypes.float32, initial=np.full(1 << 16, 2, np.float32))
    view = buf.host_view()
    assert allocator.in_use == before + buf.nbytes
    del buf                                       # the array keeps the memory; the allocator doesn't pool it
    assert allocator.in_use == before
    fresh = Buffer("CPU", 1 << 16, dtypes.float32, initial=np.full(1 << 16, 5, np.float32))
    assert view[0] == 2.0 and fresh.numpy()[0] == 5.0
