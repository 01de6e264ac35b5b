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
