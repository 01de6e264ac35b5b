"""Reductions against numpy: sum mean max min prod std var argmax argmin any all logsumexp softmax log_softmax
cumsum, with axis as int/tuple/None and keepdim; gradients; 0-d, empty and non-contiguous inputs; and, against
PyTorch, the wrong answers fuzzers found."""
import math

import numpy as np
import pytest
import torch
from helpers import against_torch, assert_close, check, rand_array

from tinygrad_core import Tensor, dtypes

nan, inf = math.nan, math.inf

AXES = [None, 0, 1, -1, (0, 2), (0, 1, 2), (-1, 0)]


def np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


REDUCTIONS = [
    ("sum", lambda x, a, k: x.sum(a, keepdim=k), lambda x, a, k: np.sum(x, axis=a, keepdims=k), (-2, 2)),
    ("mean", lambda x, a, k: x.mean(a, keepdim=k), lambda x, a, k: np.mean(x, axis=a, keepdims=k), (-2, 2)),
    ("max", lambda x, a, k: x.max(a, keepdim=k), lambda x, a, k: np.max(x, axis=a, keepdims=k), (-2, 2)),
    ("min", lambda x, a, k: x.min(a, keepdim=k), lambda x, a, k: np.min(x, axis=a, keepdims=k), (-2, 2)),
    ("prod", lambda x, a, k: x.prod(a, keepdim=k), lambda x, a, k: np.prod(x, axis=a, keepdims=k), (0.5, 1.5)),
    ("std", lambda x, a, k: x.std(a, keepdim=k), lambda x, a, k: np.std(x, axis=a, keepdims=k, ddof=1), (-2, 2)),
    ("var", lambda x, a, k: x.var(a, keepdim=k), lambda x, a, k: np.var(x, axis=a, keepdims=k, ddof=1), (-2, 2)),
    ("logsumexp", lambda x, a, k: x.logsumexp(a, keepdim=k), np_logsumexp, (-2, 2)),
]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name,tiny_fn,np_fn,bounds", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reduction(name, tiny_fn, np_fn, bounds, axis, keepdim):
    check(lambda x: tiny_fn(x, axis, keepdim), lambda x: np_fn(x, axis, keepdim), shapes=[(2, 3, 4)],
          low=bounds[0], high=bounds[1])


@pytest.mark.parametrize("name,tiny_fn,np_fn,bounds", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reduction_on_permuted_input(name, tiny_fn, np_fn, bounds):
    check(lambda x: tiny_fn(x.permute(2, 0, 1), 1, False), lambda x: np_fn(x.transpose(2, 0, 1), 1, False),
          shapes=[(2, 3, 4)], low=bounds[0], high=bounds[1])


def test_std_var_correction():
    x = rand_array((3, 5))
    assert_close(Tensor(x).var(1, correction=0).numpy(), np.var(x, axis=1), rtol=1e-5)
    assert_close(Tensor(x).std(0, correction=0).numpy(), np.std(x, axis=0), rtol=1e-5)
    var, mean = Tensor(x).var_mean(1)
    assert_close(var.numpy(), np.var(x, axis=1, ddof=1), rtol=1e-5)
    assert_close(mean.numpy(), np.mean(x, axis=1), rtol=1e-5)


def test_max_gradient_ties_are_shared():
    # PyTorch's amax semantics: equal maxima share the gradient evenly
    x = Tensor([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]], requires_grad=True)
    x.max(axis=1).sum().backward()
    assert_close(x.grad.numpy(), [[0, 0.5, 0.5], [1, 0, 0]])


def test_min_gradient():
    x = Tensor([[1.0, 3.0, -2.0], [2.0, 0.0, 5.0]], requires_grad=True)
    x.min().backward()
    assert_close(x.grad.numpy(), [[0, 0, 1], [0, 0, 0]])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(axis, keepdim):
    x = np.array([[1, 5, 5, 0], [7, 2, 7, -1], [3, 3, 3, 3]], np.float32)   # ties: the first index wins
    am, an = Tensor(x).argmax(axis, keepdim=keepdim), Tensor(x).argmin(axis, keepdim=keepdim)
    assert dtypes.is_int(am.dtype)
    expected_max = np.argmax(x, axis=axis, keepdims=keepdim) if axis is not None or not keepdim else \
        np.argmax(x).reshape(1, 1)
    expected_min = np.argmin(x, axis=axis, keepdims=keepdim) if axis is not None or not keepdim else \
        np.argmin(x).reshape(1, 1)
    assert_close(am.numpy(), expected_max)
    assert_close(an.numpy(), expected_min)


def test_argmax_int_and_3d():
    x = rand_array((2, 3, 4), -10, 10, dtype=np.int32, seed=4)
    for axis in (0, 1, 2):
        assert_close(Tensor(x).argmax(axis).numpy(), np.argmax(x, axis=axis))
        assert_close(Tensor(x).argmin(axis).numpy(), np.argmin(x, axis=axis))


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_any_all(axis, keepdim):
    x = np.array([[0, 1, 0], [0, 0, 0], [2, 3, 1]], np.int32)
    for t, a in ((Tensor(x), x), (Tensor(x != 0), x != 0), (Tensor(x.astype(np.float32)), x)):
        out_any, out_all = t.any(axis, keepdim=keepdim), t.all(axis, keepdim=keepdim)
        assert out_any.dtype == dtypes.bool and out_all.dtype == dtypes.bool
        assert_close(out_any.numpy(), np.any(a, axis=axis, keepdims=keepdim))
        assert_close(out_all.numpy(), np.all(a, axis=axis, keepdims=keepdim))


def np_softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(axis):
    check(lambda x: x.softmax(axis), lambda x: np_softmax(x, axis), shapes=[(2, 3, 4)])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_log_softmax(axis):
    check(lambda x: x.log_softmax(axis), lambda x: np.log(np_softmax(x, axis)), shapes=[(2, 3, 4)])


def test_softmax_large_values_are_stable():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]], np.float32)
    assert_close(Tensor(x).softmax().numpy(), np_softmax(x.astype(np.float64), -1), atol=1e-6)
    x64 = x.astype(np.float64)
    expected_log_softmax = x64 - x64.max(-1, keepdims=True) - np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1,
                                                                                                         keepdims=True))
    assert_close(Tensor(x).log_softmax().numpy(), expected_log_softmax, atol=1e-4)
    assert_close(Tensor(x).logsumexp(1).numpy(), np_logsumexp(x.astype(np.float64), 1), rtol=1e-6)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum(axis):
    check(lambda x: x.cumsum(axis), lambda x: np.cumsum(x, axis=axis), shapes=[(3, 4)])


def test_cumsum_int_and_bool():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    assert_close(Tensor(x).cumsum(1).numpy(), np.cumsum(x, axis=1))
    b = np.array([True, False, True, True])
    assert_close(Tensor(b).cumsum(0).numpy(), np.cumsum(b))


# ---- dtypes of reductions (PyTorch/numpy: small ints and bools sum in a wider int) ----
def test_sum_dtypes():
    assert Tensor([True, True, False]).sum().item() == 2
    assert dtypes.is_int(Tensor([True, True]).sum().dtype)
    i8 = Tensor(np.array([100, 100, 100], np.int8)).sum()
    assert i8.item() == 300
    assert Tensor([1, 2, 3]).sum().dtype == dtypes.int32
    assert Tensor([1.0, 2.0]).sum(dtype=dtypes.float64).dtype == dtypes.float64
    assert Tensor([1, 2, 3]).mean().dtype == dtypes.float32
    assert Tensor([1, 2, 3]).mean().item() == 2.0
    assert Tensor([1, 5, 3]).max().item() == 5
    assert Tensor([1, 5, 3]).max().dtype == dtypes.int32


def test_int_min_max_prod():
    x = np.array([[3, -7, 2], [0, 9, -1]], np.int32)
    assert_close(Tensor(x).min(1).numpy(), x.min(1))
    assert_close(Tensor(x).max(0).numpy(), x.max(0))
    assert_close(Tensor(x).prod(1).numpy(), x.prod(1))
    u = np.array([3, 200, 7], np.uint8)
    assert_close(Tensor(u).min().numpy(), u.min())
    assert_close(Tensor(u).max().numpy(), u.max())


# ---- 0-d and empty ----
def test_reduce_0d():
    x = Tensor(3.5)
    assert x.sum().shape == () and x.sum().item() == 3.5
    assert x.max().item() == 3.5
    assert x.mean().item() == 3.5
    assert x.sum(0).item() == 3.5
    assert x.sum(keepdim=True).shape == ()


def test_reduce_empty():
    e = Tensor(np.zeros((0, 3), np.float32))
    assert_close(e.sum(0).numpy(), np.zeros(3, np.float32))
    assert e.sum(1).shape == (0,)
    assert e.sum().item() == 0.0
    assert_close(e.prod(0).numpy(), np.ones(3, np.float32))
    assert np.isnan(e.mean().item())
    assert e.sum(0, keepdim=True).shape == (1, 3)
    with pytest.raises(IndexError, match="empty"):
        e.max(0)


def test_reduce_of_expanded_and_padded():
    base = rand_array((1, 4))
    check(lambda x: x.expand(3, 4).sum(0), lambda x: np.broadcast_to(x, (3, 4)).sum(0), arrays=[base])
    check(lambda x: x.pad(((1, 1), (2, 0))).max(1), lambda x: np.pad(x, ((1, 1), (2, 0))).max(1),
          arrays=[rand_array((2, 3), 0.5, 2)])
    check(lambda x: x.flip(1).cumsum(1), lambda x: np.cumsum(x[:, ::-1], axis=1), shapes=[(2, 4)])


def test_long_sums_cut_in_parts_keep_pytorchs_values_at_nan_inf_and_in_every_dtype():
    # sums of a few outputs over 2^17 elements or more are summed in parts first on a SIMD CPU (schedule.py's
    # _long_sum): what comes out must be what one sum gives, special values and dtypes included
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal((64, 16, 16, 16), dtype=np.float32)
    x[5, 3, 2, 1], x[60, 5, 0, 0], x[1, 7, 3, 3], x[63, 7, 15, 15] = np.nan, np.inf, -np.inf, np.inf
    x[:, 9] = -0.0
    for axes in ((0, 2, 3), (0, 1, 2, 3)):
        got = Tensor(x).sum(axes).numpy()
        want = torch.from_numpy(x).sum(axes).numpy()
        assert_close(got, want, rtol=1e-5, atol=1e-3)       # (NaN where PyTorch has NaN, inf where it has inf)
    assert np.signbit(Tensor(x).sum((0, 2, 3)).numpy()[9]) == np.signbit(torch.from_numpy(x).sum((0, 2, 3))[9].item())
    assert_close(Tensor(x).permute(1, 0, 2, 3).mean((1, 2, 3)).numpy(), torch.from_numpy(x).mean((0, 2, 3)).numpy(),
                 rtol=1e-5, atol=1e-5)
    half = np.random.default_rng(4).uniform(-1, 1, (1 << 18, 2)).astype(np.float16)
    got, want = Tensor(half).sum(0).numpy(), torch.from_numpy(half).sum(0).numpy()   # (float32 inside, both)
    assert got.dtype == want.dtype == np.float16 and np.abs(got - want).max() <= 0.25        # (an ulp at 300)
    ints = np.full(1 << 18, 2**30 + 7, dtype=np.int32)
    assert Tensor(ints).sum().item() == int(ints.sum(dtype=np.int32))                 # wraps as int32 adds do


# ---- found by fuzzing: differential fuzzers' reduced cases against PyTorch CPU (docs/FUZZING.md); each comment
# says the wrong answer it gave ----
def test_std_gradient_is_zero_where_the_deviation_is_zero():
    # sqrt's inf at 0 met var's 0 as NaN; PyTorch's gradient is 0 (a constant row, a single element)
    against_torch(lambda x: x.std(1), lambda x: x.std(1), np.array([[0.0, 0.0], [1.0, 2.0]], np.float32), weights=1,
                  compare_values=False, atol=0, rtol=2e-7)
    against_torch(lambda x: x.std(None, correction=0), lambda x: x.std(None, correction=0), np.array(30.25, np.float32),
                  weights=1, compare_values=False, atol=0, rtol=2e-7)


def test_var_gradient_does_not_go_through_the_mean():
    # 2 (x - mean) / (n - correction) as PyTorch's: an inf upstream met the deviations' sum as inf - inf = NaN,
    # and n - correction <= 0 gives inf or -0.0 (the value is inf or NaN)
    for correction in (0, 1, 2, 3):
        against_torch(lambda x: x.var(1, correction=correction), lambda x: x.var(1, correction=correction),
                      np.array([[-1.0, 2.0, 0.5], [0.0, 0.0, 0.0]], np.float32), weights=[1.0, -inf],
                      compare_values=False, atol=0, rtol=2e-7)
    against_torch(lambda x: x.var(-1, correction=2), lambda x: x.var(-1, correction=2), np.array([5.93], np.float32),
                  weights=1, compare_values=False, atol=0, rtol=2e-7)


def test_var_and_std_of_float32_past_1e19_dont_overflow():
    # the squares overflowed float32 (var of [1e19] * 50 + [-1e19] * 50 was inf): computed in float64 and rounded
    # once, as PyTorch's
    for values in ([1e19] * 50 + [-1e19] * 50, [3e19, 1e19, -2e19], [1e30, 1e36, 5.0], [1.0, 2.0, 3.5]):
        for op in ("var", "std"):
            against_torch(lambda x: getattr(x, op)(), lambda x: getattr(x, op)(), np.array(values, np.float32),
                          weights=1, atol=0, rtol=2e-7, grad_rtol=5e-7)
    against_torch(lambda x: x.var(1, correction=0), lambda x: x.var(1, correction=0),
                  np.array([[1e20, -1e20], [7.0, 7.0]], np.float32), grad=False, atol=0, rtol=2e-7)


@pytest.mark.parametrize("correction", [2, 3, 2.5])
def test_var_and_std_without_a_degree_of_freedom(correction):
    # over the whole tensor PyTorch's derivative is then inf (NaN where x == mean); it was 2 (x - mean) / (n - c),
    # finite and signed. Along a dim torch keeps that formula, and so do we
    for values in ([1.0, 3.0], [2.0, 2.0], [nan, 1.0], [inf, 1.0]):
        for op in ("var", "std"):
            for axis in (None, 0):
                against_torch(lambda t: getattr(t, op)(axis, correction=correction),
                              lambda t: getattr(t, op)(dim=axis, correction=correction), np.array(values, np.float32),
                              weights=1, atol=0, rtol=2e-7)


def test_prod_gradient_beside_an_infinity_and_a_zero():
    # with one zero, the others' gradient was 0 times the product of all the rest, itself included: NaN at the inf
    # of [-inf, 0] (PyTorch: 0, the product of the others; NaN only beside another inf or NaN)
    for values in ([-inf, 0.0], [-inf, 0.0, 2.0], [nan, 0.0, 3.0]):
        against_torch(lambda x: x.prod(), lambda x: x.prod(), np.array(values, np.float32), weights=1,
                      compare_values=False, atol=0, rtol=2e-7)
    against_torch(lambda x: x.prod(1), lambda x: x.prod(1),
                  np.array([[inf, 0.0, 2.0], [0.0, 0.0, 1.0], [-inf, 0.0, nan], [5.0, 0.0, -1.0]], np.float32),
                  weights=1, compare_values=False, atol=0, rtol=2e-7)


def test_a_product_of_small_ints_is_widened_as_a_sum_is():
    # int8 [-10, -4, -8]: -320, not -64 wrapped in int8 (PyTorch computes it in int64; tinygrad keeps int8)
    x = np.array([-10, -4, -8], dtype=np.int8)
    assert Tensor(x).prod().item() == torch.tensor(x).prod().item() == -320
    assert Tensor(np.array([200, 2], dtype=np.uint8)).prod().item() == 400


def test_a_sum_over_one_element_of_negative_zero_is_positive_zero():
    # a sum adds to +0 (PyTorch, numpy, and our sums of more elements): a sum or matmul over a size-1 axis returned
    # the element itself, so (-0.0 @ 1.5) ** -1 was -inf where PyTorch gives inf; fuzzer CPU 12558
    assert math.copysign(1, Tensor([[-0.0]]).sum(1).numpy()[0]) == 1
    assert ((Tensor([[-0.0]]) @ Tensor([[1.5]])) ** -1).numpy()[0, 0] == math.inf


def test_mean_passes_an_infinite_gradient_as_pytorch():
    # the correction that rounds sum / count once has a derivative of 0, which met an inf from above as NaN
    a = Tensor([2.0, 3.0], requires_grad=True)
    (a.mean() * Tensor(-math.inf)).backward()
    np.testing.assert_array_equal(a.grad.numpy(), [-math.inf, -math.inf])


def test_the_one_axis_of_a_0d_tensor_transposes_and_reduces_to_a_0d_tensor():
    assert Tensor(0.0).transpose(0, -1).shape == torch.tensor(0.0).transpose(0, -1).shape == ()
    for keepdim in (False, True):
        got = Tensor(1.0).argmin(-1, keepdim=keepdim)
        want = torch.argmin(torch.tensor(1.0), -1, keepdim=keepdim)
        assert got.shape == tuple(want.shape) and got.item() == want.item() == 0


def test_gradients_that_cancel_in_pytorch_cancel_here():
    # exp's derivative was exp2's ln 2 times 1 / ln 2 and log's 1 / ln 2 times ln 2, neither exactly 1 in floats:
    # log_softmax over an axis of one element had a gradient of ~1e-8, not 0 (a following pow made it 0.005; fuzzer
    # CPU 11155, 20249). log's is g / x, as PyTorch's (1 / x would overflow at a subnormal x)
    rng = np.random.default_rng(0)
    values, weights = rng.standard_normal((2, 1, 3)) * 50, rng.standard_normal((2, 1, 3))
    for dtype in (np.float32, np.float64):       # (the gradients bit for bit)
        against_torch(lambda x: x.log_softmax(1), lambda x: torch.log_softmax(x, 1), values.astype(dtype),
                      weights=weights, compare_values=False, atol=0, rtol=0)
    against_torch(lambda x: (x ** 2.5).log_softmax(-2), lambda x: torch.log_softmax(x ** 2.5, -2),
                  np.array([[[nan, 14.022, 122.971]], [[nan, 52.235, 40.585]]], np.float32), weights=weights,
                  compare_values=False, atol=0, rtol=0)
    x = Tensor([-3.0, 0.0, 1.5, 20.0, -90.0], requires_grad=True)
    x.exp().sum().backward()
    assert_close(x.grad.numpy(), torch.tensor([-3.0, 0.0, 1.5, 20.0, -90.0]).exp(), atol=0, rtol=2e-7)   # d e^x = e^x
    against_torch(lambda x: x.log(), lambda x: x.log(), np.array([1e-40, 3e-39, 1.0, 1e30], np.float32),
                  weights=[1e-3, -1e-2, 0.5, 2.0], compare_values=False, atol=0, rtol=2e-7)


def test_cumulative_sums_and_products_accumulate_a_size_up():
    # PyTorch's CPU loop runs float32 in float64 (16-bit floats in float32) and rounds each prefix once: the product
    # of [3e38, 5, -4, 0] ends in -0.0 there (it was inf * 0 = NaN), and 3e38 + 3e38 - 3e38 is 3e38 (it was inf)
    for device in ("CPU", "PYTHON"):
        for values, dtype, torch_dtype in (([3e38, 5, -4, 0], dtypes.float32, torch.float32),
                                           ([1e-30, 1e-30, 1e30, 1e30], dtypes.float32, torch.float32),
                                           ([60000, 2, 0.5], dtypes.float16, torch.float16),
                                           ([3e38, 3e38, -3e38], dtypes.float32, torch.float32)):
            for op in ("cumprod", "cumsum"):
                y = getattr(Tensor(values, dtype=dtype, device=device), op)(0)
                u = getattr(torch.tensor(values, dtype=torch_dtype), op)(0)
                assert y.dtype == dtype
                assert_close(y.float().numpy(), u.float(), atol=0, rtol=2e-7)
                assert np.signbit(y.float().numpy()).tolist() == torch.signbit(u).tolist()


@pytest.mark.parametrize("dtype", [dtypes.int8, dtypes.bool, dtypes.int16])
def test_a_0d_cumsum_takes_the_dtype_of_a_longer_one(dtype):
    # a 0-d tensor was its own running sum: int8 stayed int8 where a 1-element axis gives int32
    x = Tensor(True if dtype == dtypes.bool else 3, dtype=dtype)
    assert x.cumsum(0).dtype == x.reshape(1).cumsum(0).dtype == dtypes.int32
    assert x.cumprod(0).dtype == dtypes.int32 and x.cumsum(0).item() == int(x.item())


def test_cumprod_gradient_stops_at_the_first_zero():
    # the running products' gradients went through a product over each prefix: a zero followed by inf or NaN made
    # NaN before it and after it (PyTorch: the sum of g y / x before the first zero, the products skipping it there,
    # 0 after it); a single element is its own gradient even at -inf
    rng = np.random.default_rng(5)
    rows = [[2.0, 0.0, inf, 3.0], [2.0, 0.0, nan, 3.0], [-inf, 0.0, 3.5, 2.0], [1.5, 0.0, -2.0, 0.0],
            [0.5, 4.0, -2.0, 3.0]]
    against_torch(lambda x: x.cumprod(1), lambda x: x.cumprod(1), np.array(rows, np.float32),
                  weights=rng.standard_normal((5, 4)), atol=0, rtol=2e-7, grad_rtol=1e-6)
    against_torch(lambda x: x.cumprod(0), lambda x: x.cumprod(0), np.array([-inf], np.float32), weights=[1.5],
                  compare_values=False, atol=0, rtol=2e-7)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x[1, 2, 3], x[0, 1, :] = 0, 0
    for axis in (0, 1, -1):
        against_torch(lambda t: t.cumprod(axis), lambda t: t.cumprod(axis), x, weights=rng.standard_normal((3, 4, 5)),
                      atol=0, rtol=1e-6, grad_atol=1e-6, grad_rtol=1e-5)


def test_cumprod_gradient_at_the_first_zero_stops_at_the_next_zero():
    # an outside fuzzer's: the first zero's gradient summed g times the products skipping it over the whole row, and
    # past a second zero that product is 0: an inf or NaN of g there made NaN (PyTorch leaves those terms out)
    for x, g in [([0.0, 0.0], [inf, inf]), ([2.0, 0.0, 0.0], [0.0, 0.0, inf]), ([0.0, 0.0], [1.0, inf]),
                 ([2.0, 0.0, 5.0], [0.0, 0.0, inf]), ([1.0, 0.0, 2.0, 0.0, 3.0], [nan, 1.0, inf, 2.0, nan])]:
        against_torch(lambda t: t.cumprod(0), lambda t: t.cumprod(0), np.array(x, np.float32), weights=g, atol=0,
                      rtol=2e-7)
