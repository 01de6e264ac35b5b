"""Long reductions, measured: sums, means, variances and standard deviations of 2**20 to 2**27 float32 values, on
every backend, are no further from the float64 answer than PyTorch's (a long sum accumulates in float64 where the
device has it, and is cut in parts the device's threads share); and scans of 10**6 to 10**7 elements finish in
seconds with PyTorch's values."""
import time
import numpy as np
import pytest
import torch

from tinygrad_core import Tensor
from tests.helpers import DEVICES, usable

pytestmark = pytest.mark.slow      # (a quick run deselects it: -m 'not slow')

REDUCTIONS = {
    "sum": (lambda t, axis: t.sum(axis), lambda t, axis: t.sum() if axis is None else t.sum(axis)),
    "mean": (lambda t, axis: t.mean(axis), lambda t, axis: t.mean() if axis is None else t.mean(axis)),
    "var": (lambda t, axis: t.var(axis), lambda t, axis: t.var() if axis is None else t.var(axis)),
    "std": (lambda t, axis: t.std(axis), lambda t, axis: t.std() if axis is None else t.std(axis)),
}
# (shape, axis): whole tensors of 2**20 to 2**27 values, and sums down long columns and along long rows
CASES = [((1 << 20,), None), ((1 << 24,), None), ((1 << 27,), None), ((1 << 16, 1024), 0), ((256, 1 << 16), 1)]
# the reference backend interprets every kernel with numpy: the smaller cases only
PYTHON_CASES = [((1 << 20,), None), ((1 << 10, 1 << 10), 0)]


def float64_answer(name: str, x: np.ndarray, axis):
    x = x.astype(np.float64)
    return {"sum": x.sum(axis), "mean": x.mean(axis), "var": x.var(axis, ddof=1), "std": x.std(axis, ddof=1)}[name]


def relative_error(got, exact) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - exact) / np.maximum(np.abs(exact), 1e-30)))


@pytest.mark.parametrize("device", DEVICES)
def test_long_reductions_are_no_further_from_float64_than_pytorchs(device):
    rng = np.random.default_rng(1)
    for shape, axis in PYTHON_CASES if device == "PYTHON" else CASES:
        # uniform values around a mean (a sum grows, a variance is small next to the mean's square)
        x = (rng.random(shape, dtype=np.float32) * 2 + 3).astype(np.float32)
        ours_in, theirs_in = Tensor(x, device=device), torch.from_numpy(x)
        for name, (ours, theirs) in REDUCTIONS.items():
            exact = float64_answer(name, x, axis)
            got, want = ours(ours_in, axis).numpy(), theirs(theirs_in, axis).numpy()
            assert got.dtype == np.float32 and got.shape == want.shape
            err, torch_err = relative_error(got, exact), relative_error(want, exact)
            assert err <= torch_err, f"{name} over {shape} axis {axis} on {device}: {err:.3g} (PyTorch {torch_err:.3g})"
        del ours_in


@pytest.mark.skipif(not usable("CL"), reason="CL is not usable here")
def test_float32_sums_on_opencl_keep_growing_past_2_to_the_24():
    # one float32 accumulator stops growing at 2**24: 2**24 + 1 rounds back to 2**24
    ones = Tensor.ones(1 << 25, device="CL")
    assert ones.sum().item() == 1 << 25 and ones.mean().item() == 1.0
    columns = Tensor.ones(1 << 25, 2, device="CL").contiguous().sum(0)
    assert columns.tolist() == [1 << 25, 1 << 25]


SCANS = {
    "cumsum": (lambda t: t.cumsum(0), lambda t: t.cumsum(0)),
    "cumprod": (lambda t: t.cumprod(0), lambda t: t.cumprod(0)),
    "logcumsumexp": (lambda t: t.logcumsumexp(0), lambda t: t.logcumsumexp(0)),
    "cummax": (lambda t: t.cummax(0)[0], lambda t: t.cummax(0)[0]),
}


@pytest.mark.parametrize("device", DEVICES)
def test_scans_of_millions_of_elements_finish_in_seconds_with_pytorchs_values(device):
    n = 10**6 + 3 if device != "PYTHON" else 5000 + 3            # (the reference backend interprets: a smaller case)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(n).astype(np.float32)
    x[n // 2] = np.nan
    small = (1 + x * 1e-4).astype(np.float32)                    # (a product of a million values stays in range)
    for name, (ours, theirs) in SCANS.items():
        values = small if name == "cumprod" else x
        start = time.perf_counter()
        got = ours(Tensor(values, device=device)).numpy()
        assert time.perf_counter() - start < 60, f"{name} of {n} elements on {device}"
        np.testing.assert_allclose(got, theirs(torch.from_numpy(values)).numpy(), rtol=2e-6, atol=1e-5,
                                   equal_nan=True, err_msg=f"{name} on {device}")
    got, index = Tensor(x, device=device).cummin(0)
    want, want_index = torch.from_numpy(x).cummin(0)
    np.testing.assert_array_equal(index.numpy(), want_index.numpy())
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    flags = rng.random(n) < 0.3
    assert np.array_equal(Tensor(x, device=device).masked_select(Tensor(flags, device=device)).numpy(), x[flags],
                          equal_nan=True)
    assert np.array_equal(Tensor(flags, device=device).nonzero().numpy(), np.stack(np.nonzero(flags), -1))


def test_ten_million_element_scans_and_their_gradients_against_pytorch():
    n = 10**7
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    start = time.perf_counter()
    got = Tensor(x).cumsum(0).numpy()
    assert time.perf_counter() - start < 60
    np.testing.assert_allclose(got, torch.from_numpy(x).cumsum(0).numpy(), rtol=1e-5, atol=1e-3)
    # gradients of a million, each against PyTorch's (and logcumsumexp's against float64's: PyTorch's float32 one
    # is 3e-4 off it, ours 6e-8)
    x, g = x[:10**6] * np.float32(1e-3) + 1, np.random.default_rng(4).standard_normal(10**6).astype(np.float32)
    for name in ("cumsum", "cumprod", "logcumsumexp", "cummax"):
        ours = Tensor(x, requires_grad=True)
        out = getattr(ours, name)(0)
        ((out[0] if name == "cummax" else out) * Tensor(g)).sum().backward()
        wide = name == "logcumsumexp"
        theirs = torch.from_numpy(x.astype(np.float64) if wide else x).requires_grad_()
        out = getattr(theirs, name)(0)
        ((out[0] if name == "cummax" else out) * torch.from_numpy(g.astype(np.float64) if wide else g)).sum().backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)
