"""Section 3, compile and launch: a trivial kernel runs, bad source raises CompileError carrying the source, the
declared launch limits hold, buffers and int arguments arrive in order, and wait=True returns the kernel's time."""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad_core.codegen.opts import KernelOpts
from tinygrad_core.device import CompileError
from tinygrad_core.dtype import DType, dtypes
from tinygrad_core.helpers import prod
from tinygrad_core.ops import Ops, UOp


def load(position: int, dtype: DType, size: int) -> UOp:
    return UOp(Ops.INPUT, dtype, (UOp(Ops.DEFINE_GLOBAL, dtype, (), position),), size)


def const(dtype: DType, value) -> UOp:
    return UOp(Ops.CONST, dtype, (), value)


def kernel(value: UOp) -> UOp:
    out = UOp(Ops.DEFINE_GLOBAL, value.dtype, (), 0)
    return UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (out, value)),))


def launched(dut):
    if dut.compile_only:
        pytest.skip("compile-only: this checks what a launch computes")


def test_trivial_kernel(dut):
    runner = dut.kernel(kernel(load(1, dtypes.float32, 7).alu(Ops.ADD, const(dtypes.float32, 1.5))))
    if dut.compile_only:
        return
    x = np.arange(7, dtype=np.float32)
    np.testing.assert_array_equal(dut.run_kernel(runner, dtypes.float32, 7, [x]), x + 1.5)


def test_one_element_kernel(dut):
    runner = dut.kernel(kernel(load(1, dtypes.int32, 1).alu(Ops.MUL, const(dtypes.int32, -3))))
    if not dut.compile_only:
        assert dut.run_kernel(runner, dtypes.int32, 1, [np.array([14], np.int32)]).tolist() == [-42]


def test_bad_source_raises_compile_error_with_the_source(dut):
    source = "this is not a kernel in any language }{ @@"
    for _ in range(2):                # twice: a failure must not be cached as a success
        with pytest.raises(CompileError) as info:
            dut.compiled.compiler.compile_cached(source)
        assert info.value.source == source, "CompileError.source must hold the source that failed to compile"
        assert source in str(info.value), "the error message must show the source"


def test_launch_geometry_within_declared_limits(dut):
    size = (1 << 20) + 3
    runner = dut.kernel(kernel(load(1, dtypes.int32, size).alu(Ops.ADD, const(dtypes.int32, 1))))
    renderer = dut.renderer
    if renderer.global_max is not None:
        assert all(g <= m for g, m in zip(runner.global_size, renderer.global_max)), \
            f"global size {runner.global_size} exceeds the declared global_max {renderer.global_max}"
    if renderer.local_max is not None:
        assert all(n <= m for n, m in zip(runner.local_size, renderer.local_max)), \
            f"local size {runner.local_size} exceeds the declared local_max {renderer.local_max}"
    assert prod(runner.global_size) * prod(runner.local_size) >= size // max(renderer.max_upcast, 1)
    if not dut.compile_only:
        x = np.arange(size, dtype=np.int32)
        np.testing.assert_array_equal(dut.run_kernel(runner, dtypes.int32, size, [x]), x + 1)


def test_largest_declared_thread_group(dut):
    renderer = dut.renderer
    if not renderer.has_local:
        pytest.skip(f"{dut.name} declares has_local=False (no thread groups)")
    local = renderer.local_max[0]
    size = 3 * local + 5           # three full groups and a partial one (threads past the end must not store)
    runner = dut.kernel(kernel(load(1, dtypes.float32, size).alu(Ops.MUL, const(dtypes.float32, 2.0))),
                        KernelOpts(local_size=local))
    assert runner.local_size[0] == local, f"asked for {local} threads per group, got {runner.local_size}"
    if not dut.compile_only:
        x = np.arange(size, dtype=np.float32)
        np.testing.assert_array_equal(dut.run_kernel(runner, dtypes.float32, size, [x]), x * 2)


# bool, int32 and float32 are what every backend has; the second set also mixes element sizes, where declared
REQUIRED_ONLY, MIXED_WIDTHS = (dtypes.float32, dtypes.int32), (dtypes.float16, dtypes.uint8)


@pytest.mark.parametrize("others", [pytest.param(REQUIRED_ONLY, id="required-dtypes"),
                                    pytest.param(MIXED_WIDTHS, id="half-and-uint8")])
def test_buffer_arguments_arrive_in_order(dut, others):
    """Five inputs, used in an order unlike their positions and each scaled differently: a swapped binding shows."""
    if not dut.supports(*others):
        pytest.skip(f"{dut.name} declares no support for {' and '.join(f'dtypes.{dt.name}' for dt in others)} "
                    f"(Renderer.supported_dtypes)")
    n, (d_dtype, e_dtype) = 33, others
    a, b, c = load(3, dtypes.float32, n), load(1, dtypes.int32, n), load(5, dtypes.bool, n)
    d, e = load(2, d_dtype, n), load(4, e_dtype, n)
    value = a.alu(Ops.ADD, b.cast(dtypes.float32).alu(Ops.MUL, const(dtypes.float32, 1000.0)))
    other = d.cast(dtypes.float32).alu(Ops.MUL, const(dtypes.float32, 0.5)).alu(
        Ops.ADD, e.cast(dtypes.float32).alu(Ops.MUL, const(dtypes.float32, 7.0)))
    runner = dut.kernel(kernel(c.alu(Ops.WHERE, value, other)))
    if dut.compile_only:
        return
    rng = np.random.default_rng(3)
    ints, floats, mask = rng.integers(-50, 50, n).astype(np.int32), rng.standard_normal(n).astype(np.float32), \
        rng.integers(0, 2, n).astype(bool)
    d_values = rng.standard_normal(n).astype(d_dtype.np)
    e_values = rng.integers(0, 100 if e_dtype == dtypes.int32 else 255, n).astype(e_dtype.np)
    out = dut.run_kernel(runner, dtypes.float32, n, [ints, d_values, floats, e_values, mask])
    expected = np.where(mask, floats + ints.astype(np.float32) * 1000,
                        d_values.astype(np.float32) * 0.5 + e_values.astype(np.float32) * 7)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_many_buffer_arguments(dut):
    n, count = 5, 12
    value = load(1, dtypes.float32, n)
    for position in range(2, count + 1):
        value = value.alu(Ops.ADD, load(position, dtypes.float32, n).alu(Ops.MUL, const(dtypes.float32, position)))
    runner = dut.kernel(kernel(value))
    if dut.compile_only:
        return
    inputs = [np.full(n, 1.0, np.float32) for _ in range(count)]
    expected = 1 + sum(range(2, count + 1))
    np.testing.assert_array_equal(dut.run_kernel(runner, dtypes.float32, n, inputs), np.full(n, expected, np.float32))


def test_symbolic_int_arguments(dut):
    n = 9
    scale, shift = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("scale", 1, 100)), \
        UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("shift", -100, 100))
    value = load(1, dtypes.int32, n).alu(Ops.MUL, scale).alu(Ops.ADD, shift)
    runner = dut.kernel(kernel(value))
    assert sorted(v.arg[0] for v in runner.vars) == ["scale", "shift"], "both int arguments reach the program"
    if dut.compile_only:
        return
    x = np.arange(n, dtype=np.int32)
    for s, t in ((3, -5), (7, 11)):        # the same binary, launched with different values
        out = dut.run_kernel(runner, dtypes.int32, n, [x], var_vals={"scale": s, "shift": t})
        np.testing.assert_array_equal(out, x * s + t, err_msg=f"with scale={s}, shift={t}")


def test_wait_returns_seconds(dut):
    launched(dut)
    n = 4096
    runner = dut.kernel(kernel(load(1, dtypes.float32, n).alu(Ops.SQRT)))
    out, seconds = dut.run_kernel(runner, dtypes.float32, n, [np.arange(n, dtype=np.float32)], wait=True)
    assert isinstance(seconds, float) and seconds > 0, \
        f"Program(wait=True) must return the seconds taken, got {seconds!r}"
    np.testing.assert_allclose(out, np.sqrt(np.arange(n, dtype=np.float32)), rtol=1e-6)
    runner2 = dut.kernel(kernel(load(1, dtypes.float32, n).alu(Ops.RECIP)))
    bufs_out = dut.run_kernel(runner2, dtypes.float32, n, [np.ones(n, np.float32)], wait=False)
    np.testing.assert_array_equal(bufs_out, np.ones(n, np.float32))
