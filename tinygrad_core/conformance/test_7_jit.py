"""Section 7, JIT capture and replay: a TinyJit function gives the right answers on every call, including the
replayed ones (the same compiled kernels launched on new input buffers), and in-place state updates accumulate."""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad_core.conformance.harness import assert_close


@pytest.fixture
def TinyJit(dut):
    if dut.compile_only:
        pytest.skip("compile-only: replaying a JIT capture means launching kernels")
    try:
        from tinygrad_core.engine.jit import TinyJit
    except ImportError as e:
        pytest.skip(f"this tinygrad-core has no TinyJit ({e})")
    return TinyJit


def test_replay_with_new_inputs(dut, TinyJit):
    rng = np.random.default_rng(7)
    w_np = rng.standard_normal((4, 3)).astype(np.float32)
    w = dut.tensor(w_np)
    python_calls = []

    @TinyJit
    def step(x, y):
        python_calls.append(1)
        return ((x * y + 1).relu() @ w).sum(0)

    for call in range(5):
        x_np, y_np = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
        out = step(dut.tensor(x_np), dut.tensor(y_np)).numpy()
        assert_close(out, (np.maximum(x_np * y_np + 1, 0) @ w_np).sum(0), f"call {call + 1}", rtol=1e-5, atol=1e-5)
    assert len(python_calls) == 2, f"the function's Python ran {len(python_calls)} times; after capture it replays"


def test_replay_updates_state_in_place(dut, TinyJit):
    total = dut.tensor(np.zeros(6, np.float32)).contiguous().realize()
    expected = np.zeros(6, np.float32)

    @TinyJit
    def accumulate(x):
        total.assign(total + x * 2).realize()
        return total

    for call in range(4):
        x_np = np.arange(6, dtype=np.float32) + call
        expected += x_np * 2
        np.testing.assert_allclose(accumulate(dut.tensor(x_np)).numpy(), expected, err_msg=f"call {call + 1}")


def test_replay_over_a_symbolic_size(dut, TinyJit):
    """Sizes made of a Variable: one compiled kernel per op, launched with each value (the launch size and the int
    kernel arguments change, the program doesn't)."""
    try:
        from tinygrad_core.ops import Variable
    except ImportError as e:
        pytest.skip(f"this tinygrad-core has no Variable ({e})")
    rng = np.random.default_rng(3)
    length = Variable("length", 1, 40)

    @TinyJit
    def f(x):
        return (x * 2 + 1).sum(1), x.max(1)

    for n in (5, 17, 40, 1, 23):
        x_np = rng.standard_normal((3, n)).astype(np.float32)
        total, peak = f(dut.tensor(x_np).reshape(3, length.bind(n)))
        assert_close(total.numpy(), (x_np * 2 + 1).sum(1), f"length {n}", rtol=1e-5, atol=1e-5)
        assert_close(peak.numpy(), x_np.max(1), f"length {n}")
    assert len(f.captures) == 1, "each length was recorded again instead of replayed with its value"
