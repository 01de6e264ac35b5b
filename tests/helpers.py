"""Shared test helpers: run an op in tinygrad_core and in numpy, compare values and gradients.

Gradients are checked against central finite differences of the *numpy* function in float64, so the expectation
never comes from the code under test."""
from __future__ import annotations

import numpy as np

import pytest

from tinygrad_core import Device, Tensor
from tinygrad_core.conformance.harness import numeric_gradient

FLOAT_ATOL, FLOAT_RTOL = 1e-5, 1e-4
GRAD_ATOL, GRAD_RTOL = 1e-4, 1e-3


def rand_array(shape, low: float = -2.0, high: float = 2.0, dtype=np.float32, seed: int = 0) -> np.ndarray:
    """Reproducible random values in [low, high)."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(int(low), int(high), size=shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    return rng.uniform(low, high, size=shape).astype(dtype)


def away_from(values: np.ndarray, points, margin: float = 0.05) -> np.ndarray:
    """Nudge values away from kinks (0 for relu/abs, integers for floor, ...) so finite differences are valid."""
    values = values.copy()
    for p in points:
        close = np.abs(values - p) < margin
        values[close] = p + np.where(values[close] >= p, margin, -margin) * 2
    return values


def assert_close(actual, expected, atol=FLOAT_ATOL, rtol=FLOAT_RTOL, what="value"):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    else:
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), atol=atol, rtol=rtol,
                                   err_msg=what, equal_nan=True)


def check(tiny_fn, np_fn, shapes=None, arrays=None, grad: bool = True, low: float = -2.0, high: float = 2.0,
          atol=FLOAT_ATOL, rtol=FLOAT_RTOL, grad_atol=GRAD_ATOL, grad_rtol=GRAD_RTOL, make_inputs=None):
    """Compare tiny_fn(*tensors) with np_fn(*arrays) (forward), and, with grad=True, the gradient of a randomly
    weighted sum of the output against finite differences of np_fn. Float inputs reach np_fn as float64.

    make_inputs(array) -> Tensor lets a test feed non-contiguous views (it must hold the same values)."""
    if arrays is None:
        arrays = [rand_array(s, low, high, seed=i) for i, s in enumerate(shapes)]
    arrays = [np.asarray(a) for a in arrays]
    is_float = [a.dtype.kind == "f" for a in arrays]
    make = make_inputs or (lambda a: Tensor(a))
    tensors = [make(a) for a in arrays]
    if grad:
        for t, f in zip(tensors, is_float):
            if f:
                t.requires_grad_()
    ref_inputs = [a.astype(np.float64) if f else a for a, f in zip(arrays, is_float)]
    expected = np.asarray(np_fn(*ref_inputs))
    out = tiny_fn(*tensors)
    weights = rand_array(expected.shape, 0.5, 1.5, dtype=np.float64, seed=99)
    if grad:   # build the backward graph before realizing the forward (realizing must not matter, see test_autograd)
        (out * Tensor(weights.astype(np.float32))).sum().backward()
    assert_close(out.numpy(), expected, atol, rtol, "forward")
    if not grad:
        return out
    float_arrays = [a for a, f in zip(ref_inputs, is_float) if f]
    float_tensors = [t for t, f in zip(tensors, is_float) if f]

    def float_fn(*floats):
        it = iter(floats)
        return np_fn(*[next(it) if f else a for a, f in zip(ref_inputs, is_float)])

    expected_grads = numeric_gradient(float_fn, float_arrays, weights)
    for n, (t, g) in enumerate(zip(float_tensors, expected_grads)):
        actual = t.grad.numpy() if t.grad is not None else np.zeros(t.shape, np.float32)
        assert_close(actual, g, grad_atol, grad_rtol, f"gradient of input {n}")
    return out


def usable(device: str) -> bool:
    try:
        Device[device]
        return True
    except Exception:            # noqa: BLE001 (any reason the backend can't start is a reason to skip)
        return False


# the CPU, the reference backend and OpenCL, each skipped where it can't start
DEVICES = [pytest.param(d, marks=pytest.mark.skipif(not usable(d), reason=f"{d} is not usable here"))
           for d in ("CPU", "PYTHON", "CL")]
