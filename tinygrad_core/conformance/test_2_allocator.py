"""Section 2, the allocator: bytes go in and come back out unchanged (1 byte, odd sizes, large buffers, views at
offsets), freed memory is accounted for and reused, and running out of memory raises MemoryError."""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad_core.device import Allocator, Buffer
from tinygrad_core.dtype import dtypes

LARGE = 64 * 1024 * 1024        # bytes


@pytest.fixture
def allocator(dut):
    if dut.compile_only:
        pytest.skip("compile-only: no device memory is touched")
    return dut.compiled.allocator


def round_trip(compiled, data: np.ndarray) -> np.ndarray:
    allocator = compiled.allocator
    opaque = allocator.alloc(data.nbytes)
    try:
        allocator.copyin(opaque, memoryview(data))
        compiled.synchronize()
        out = np.zeros_like(data)
        allocator.copyout(memoryview(out), opaque)
        return out
    finally:
        allocator.free(opaque, data.nbytes)


@pytest.mark.parametrize("nbytes", [1, 3, 7, 17, 255, 1001, 4099, 65537])
def test_round_trip(dut, allocator, nbytes):
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    np.testing.assert_array_equal(round_trip(dut.compiled, data), data,
                                  err_msg=f"{nbytes} bytes changed in a round trip")


def test_round_trip_large(dut, allocator):
    data = np.random.default_rng(0).integers(0, 256, LARGE, dtype=np.uint8)
    out = round_trip(dut.compiled, data)
    bad = np.flatnonzero(out != data)
    assert bad.size == 0, f"{bad.size} of {LARGE} bytes changed, first at byte {bad[0] if bad.size else None}"


def test_buffers_do_not_alias(allocator):
    a, b = allocator.alloc(4096), allocator.alloc(4096)
    try:
        allocator.copyin(a, memoryview(np.full(4096, 1, np.uint8)))
        allocator.copyin(b, memoryview(np.full(4096, 2, np.uint8)))
        out = np.zeros(4096, np.uint8)
        allocator.copyout(memoryview(out), a)
        assert (out == 1).all(), "writing one buffer changed another"
    finally:
        allocator.free(a, 4096)
        allocator.free(b, 4096)


def test_views_at_offsets(dut, allocator):
    if type(allocator).offset is Allocator.offset:
        pytest.skip(f"{dut.name}'s allocator declares no sub-buffer views (Allocator.offset not overridden)")
    # 4096: devices may require sub-buffers to start aligned (OpenCL's CL_DEVICE_MEM_BASE_ADDR_ALIGN)
    size, start, length = 3 * 4096, 4096, 1000
    base = allocator.alloc(size)
    try:
        allocator.copyin(base, memoryview(np.zeros(size, np.uint8)))
        view = allocator.offset(base, length, start)
        payload = (np.arange(length) % 251 + 1).astype(np.uint8)
        allocator.copyin(view, memoryview(payload))
        whole = np.zeros(size, np.uint8)
        allocator.copyout(memoryview(whole), base)
        expected = np.zeros(size, np.uint8)
        expected[start:start + length] = payload
        np.testing.assert_array_equal(whole, expected, err_msg=f"a write through a view at offset {start} landed "
                                                               f"elsewhere")
        part = np.zeros(length, np.uint8)
        allocator.copyout(memoryview(part), view)
        np.testing.assert_array_equal(part, payload)
    finally:
        allocator.free(base, size)


def test_free_and_reuse(allocator):
    before = allocator.in_use
    for i in range(50):
        opaque = allocator.alloc(1 << 20)
        allocator.copyin(opaque, memoryview(np.full(1 << 20, i, np.uint8)))
        out = np.zeros(1 << 20, np.uint8)
        allocator.copyout(memoryview(out), opaque)
        assert (out == i).all()
        allocator.free(opaque, 1 << 20)
    assert allocator.in_use == before, f"in_use went from {before} to {allocator.in_use} bytes after alloc+free pairs"


def test_buffers_are_freed_when_dropped(dut, allocator):
    before = dut.compiled.memory_used()
    bufs = [Buffer(dut.name, 1000, dtypes.float32).ensure_allocated() for _ in range(10)]
    assert dut.compiled.memory_used() == before + 10 * 4000
    del bufs
    assert dut.compiled.memory_used() == before


def test_out_of_memory_raises_memory_error(allocator):
    with pytest.raises(MemoryError):
        allocator.alloc(1 << 60)        # an exabyte: no device has it
    opaque = allocator.alloc(16)        # and the allocator still works afterwards
    allocator.free(opaque, 16)
