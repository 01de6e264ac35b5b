"""Shared test helpers: run an op in tinygrad_core and in numpy or PyTorch, compare values and gradients.

Against numpy, gradients are checked against central finite differences of the *numpy* function in float64, so the
expectation never comes from the code under test; against PyTorch, against torch's own autograd."""
from __future__ import annotations

from typing import Any, NamedTuple

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


def as_numpy(value) -> np.ndarray:
    """value as a numpy array: a tinygrad or torch tensor is read back (detached), anything else goes to np.asarray."""
    return value.detach().numpy() if hasattr(value, "detach") else np.asarray(value)


def assert_close(actual, expected, atol=FLOAT_ATOL, rtol=FLOAT_RTOL, what="value"):
    """Same shape, and the same values within atol + rtol * |expected| (NaN where expected has NaN); integers and
    booleans exactly. actual and expected may be arrays, lists, or tinygrad or torch tensors."""
    actual, expected = as_numpy(actual), as_numpy(expected)
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


class TorchRun(NamedTuple):
    """What against_torch ran, for a test that checks more than it does (signs of zeros, one element's gradient)."""
    out: Any                # tiny_fn's result: a Tensor or a tuple of them
    expected: Any           # torch_fn's result, the same way
    inputs: list            # the Tensors tiny_fn was given (with .grad after a gradient check)
    torch_inputs: list      # the torch tensors torch_fn was given


def against_torch(tiny_fn, torch_fn, *arrays: np.ndarray, atol=FLOAT_ATOL, rtol=FLOAT_RTOL, grad: bool = True,
                  grad_atol=None, grad_rtol=None, weights=None, parameters=(), compare_values: bool = True) -> TorchRun:
    """Run tiny_fn on Tensors and torch_fn on torch tensors made from the same arrays and compare the results' shapes
    and values (a tuple result is compared element by element). With grad=True, also the gradients of a weighted sum
    of the (first) result: those of every float input, and of each (our Tensor, torch tensor) pair in parameters,
    whose values are copied into torch first (a layer's weights).

    weights: an array or a number broadcast to the result's shape; by default random in [0.5, 1.5), the same for
    every call. Gradients are held to grad_atol and grad_rtol, which default to atol and rtol. compare_values=False
    leaves the values out, for a test about a gradient only."""
    import torch          # here, not at the top: most tests never compare with PyTorch

    for ours, theirs in parameters:
        with torch.no_grad():
            theirs.copy_(torch.from_numpy(ours.numpy().copy()))
        ours.requires_grad_()
    inputs = [Tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    torch_inputs = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    out, expected = tiny_fn(*inputs), torch_fn(*torch_inputs)
    outs, expecteds = (out, expected) if isinstance(out, tuple) else ((out,), (expected,))
    for o, e in zip(outs, expecteds):
        assert o.shape == tuple(e.shape), f"shape {o.shape}, torch {tuple(e.shape)}"
    if grad and (any(t.requires_grad for t in inputs) or parameters):
        if weights is None:
            weights = rand_array(outs[0].shape, 0.5, 1.5, seed=7)
        weights = np.broadcast_to(np.asarray(weights, np.float32), outs[0].shape).copy()
        (outs[0] * Tensor(weights)).sum().backward()
        (expecteds[0] * torch.tensor(weights)).sum().backward()
    if compare_values:
        for o, e in zip(outs, expecteds):
            assert_close(o, e, atol, rtol)
    grad_atol, grad_rtol = atol if grad_atol is None else grad_atol, rtol if grad_rtol is None else grad_rtol
    for n, (t, r) in enumerate(zip(inputs, torch_inputs)):
        if r.grad is not None:
            assert_close(t.grad, r.grad, grad_atol, grad_rtol, f"gradient of input {n}")
    for n, (ours, theirs) in enumerate(parameters):
        assert_close(ours.grad, theirs.grad, grad_atol, grad_rtol, f"gradient of parameter {n}")
    return TorchRun(out, expected, inputs, torch_inputs)


def pair(x) -> tuple:
    """A size, stride or padding given once for both spatial axes, as the pair (x, x)."""
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


def np_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """The reference 2-d convolution (cross-correlation, as torch's conv2d): x (n, c, h, w), w (out, c / groups, kh,
    kw), padding symmetric per axis, written as one einsum per kernel position."""
    (sh, sw), (dh, dw), (ph, pw) = pair(stride), pair(dilation), pair(padding)
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    n, _, h, wd = x.shape
    cout, cin_group, kh, kw = w.shape
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, cout, oh, ow), dtype=np.result_type(x, w))
    per_group = cout // groups
    for g in range(groups):
        xs, ws = x[:, g * cin_group:(g + 1) * cin_group], w[g * per_group:(g + 1) * per_group]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * per_group:(g + 1) * per_group] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def usable(device: str) -> bool:
    try:
        Device[device]
        return True
    except Exception:            # noqa: BLE001 (any reason the backend can't start is a reason to skip)
        return False


# the CPU, the reference backend and OpenCL, each skipped where it can't start
DEVICES = [pytest.param(d, marks=pytest.mark.skipif(not usable(d), reason=f"{d} is not usable here"))
           for d in ("CPU", "PYTHON", "CL")]
