"""Regressions for silently wrong answers on special values (NaN, infinities, -0.0, integer extremes) and at the
edges of gradient rules, each checked against PyTorch on the CPU."""
import math
import numpy as np
import pytest
import torch
from tinygrad_core import Tensor, dtypes
from tests.helpers import DEVICES, against_torch

nan, inf = math.nan, math.inf


def same(ours: Tensor, theirs: torch.Tensor, rtol=1e-6, atol=1e-6):
    expected = theirs.detach().numpy()
    got = ours.numpy()
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


def same_gradient(fn, values, rtol=1e-6):
    """fn's gradient at values (float32), ours against PyTorch's, to this file's tolerance."""
    against_torch(fn, fn, np.array(values, np.float32), weights=1, compare_values=False, atol=1e-6, rtol=rtol)


def test_comparisons_with_nan_are_false():
    x = [nan, 0.0, 1.0, -inf]
    for op in (lambda a: a >= 0, lambda a: a <= 0, lambda a: a > 0, lambda a: a < 0, lambda a: a == a):
        np.testing.assert_array_equal(op(Tensor(x)).numpy(), op(torch.tensor(x)).numpy())
    assert (Tensor([nan]) != Tensor([nan])).item()


def test_relu_keeps_nan_and_negative_zero():
    x = [nan, -0.0, 0.0, -1.0, 2.0, -inf, inf]
    got, expected = Tensor(x).relu().numpy(), torch.tensor(x).relu().numpy()
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    same_gradient(lambda a: a.relu(), [-1.0, 0.0, 2.0, nan, -0.0])


def test_relu_passes_no_gradient_at_zero_even_an_infinite_one():
    # log of relu(0) sends back 1 / 0 = inf; relu's gradient at 0 is 0 whatever arrives (inf * 0 gave NaN)
    same_gradient(lambda a: a.relu().log(), [-0.0, 0.0, -1.0, 2.0])
    same_gradient(lambda a: a.relu() * inf, [-1.0, 0.0, 3.0])


def test_argmax_of_nan_is_the_nan():
    for x in ([1.0, nan, 3.0], [nan, nan, 1.0], [3.0, 1.0, nan]):
        assert Tensor(x).argmax().item() == torch.tensor(x).argmax().item()
        assert Tensor(x).argmin().item() == torch.tensor(x).argmin().item()
    assert np.isnan(Tensor([1.0, nan, 3.0]).max().item())


def test_cumsum_through_infinities():
    for x in ([1.0, inf, 2.0], [-inf, 1.0, inf], [nan, 1.0]):
        same(Tensor(x).cumsum(), torch.tensor(x).cumsum(0))


def test_logsumexp_and_softmax_with_infinities():
    x = [[1.0, inf], [-inf, -inf], [0.0, -inf], [2.0, 3.0]]
    same(Tensor(x).logsumexp(1), torch.tensor(x).logsumexp(1))
    same(Tensor(x).softmax(1), torch.tensor(x).softmax(1))          # (NaN where a row holds +inf, as in PyTorch)
    same(Tensor(x).log_softmax(1), torch.tensor(x).log_softmax(1))


@pytest.mark.parametrize("dtype,low", [(dtypes.int32, -2**31), (dtypes.int64, -2**63), (dtypes.int8, -128)])
def test_integer_minimum_does_not_wrap(dtype, low):
    x = Tensor([low, 0, 5], dtype=dtype)
    assert x.min().item() == low
    assert x.argmin().item() == 0
    assert x.minimum(Tensor([0, low, 3], dtype=dtype)).tolist() == [low, low, 3]
    assert x.min(0, keepdim=True).tolist() == [low]


def test_pow_result_types_follow_pytorch():
    for base, exponent in (([-2, 0, 2], 29), ([1, 2, 3, 4], 2.0), ([1, 2, 3], 0), ([2, 3], 2), ([-3, 5], 3)):
        ours, theirs = Tensor(base) ** exponent, torch.tensor(base, dtype=torch.int32) ** exponent
        assert dtypes.is_float(ours.dtype) == theirs.dtype.is_floating_point, (base, exponent, ours.dtype)
        same(ours, theirs)
    same(Tensor([2, -3, 5]) ** Tensor([3, 2, 0]), torch.tensor([2, -3, 5]) ** torch.tensor([3, 2, 0]))
    with pytest.raises(RuntimeError, match="negative"):
        Tensor([1, 2]) ** -1


def test_pow_special_values():
    bases = [inf, nan, -inf, -inf, 0.0, -0.0, -0.0, -2.0, 1.0, -1.0, 0.5, 0.0, 2.0]
    exps = [0.0, 0.0, 0.3, 1.1, -1.0, -1.0, 0.5, 0.5, nan, inf, -inf, -inf, 3.0]
    got = (Tensor(bases) ** Tensor(exps)).numpy()
    expected = (torch.tensor(bases) ** torch.tensor(exps)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6, equal_nan=True)
    numbers = ~np.isnan(expected)           # (a NaN's sign bit means nothing)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(expected[numbers]))
    for e in (math.inf, -math.inf, math.nan):      # Python exponents that aren't finite
        same(Tensor([0.5, 2.0]) ** e, torch.tensor([0.5, 2.0]) ** e)


@pytest.mark.parametrize("c", [0.0, 0.3, 1.0, 2.5, -1.0])
def test_pow_gradient_at_zero_and_infinity(c):
    same_gradient(lambda a: a ** c, [0.0, inf, -inf, 2.0, -2.0])


def test_pow_gradient_of_the_exponent():
    b = Tensor([0.0, 2.0, 0.5], requires_grad=True)
    e = Tensor([2.0, 3.0, 0.0], requires_grad=True)
    (b ** e).sum().backward()
    tb, te = torch.tensor([0.0, 2.0, 0.5], requires_grad=True), torch.tensor([2.0, 3.0, 0.0], requires_grad=True)
    (tb ** te).sum().backward()
    same(b.grad, tb.grad)
    same(e.grad, te.grad)


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "silu", "gelu", "quick_gelu", "softplus", "mish", "logsigmoid"])
def test_saturating_activations_have_finite_gradients(name):
    values = [-500.0, -100.0, -45.0, 0.0, 45.0, 100.0, 500.0]
    torch_fn = {"silu": torch.nn.functional.silu, "gelu": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
                "quick_gelu": lambda t: t * torch.sigmoid(1.702 * t), "softplus": torch.nn.functional.softplus,
                "mish": torch.nn.functional.mish, "logsigmoid": torch.nn.functional.logsigmoid}.get(name)
    x = Tensor(values, requires_grad=True)
    getattr(x, name)().sum().backward()
    t = torch.tensor(values, requires_grad=True)
    (torch_fn(t) if torch_fn else getattr(t, name)()).sum().backward()
    same(x.grad, t.grad, atol=1e-5)


def test_abs_and_clip_gradients_at_the_kinks():
    same_gradient(lambda a: a.abs(), [0.0, -0.0, -2.0, 3.0])
    same_gradient(lambda a: a.clip(-2.5, 1.5), [-2.5, 1.5, 0.0, -3.0, 2.0])
    np.testing.assert_array_equal(np.signbit(Tensor([-0.0]).abs().numpy()), [False])
    same(Tensor([nan, -3.0, 3.0]).clip(-1, 1), torch.tensor([nan, -3.0, 3.0]).clip(-1, 1))
    same(Tensor([0.0, 5.0]).clip(3, 1), torch.tensor([0.0, 5.0]).clip(3, 1))   # min > max: max wins


def test_prod_gradient_with_zeros():
    for x in ([2.0, 0.0, 3.0], [0.0, 0.0, 3.0], [2.0, -1.0, 4.0], [[1.0, 0.0], [2.0, 3.0]]):
        same_gradient(lambda a: a.prod(-1), x)


def test_cos_keeps_its_digits_for_large_arguments():
    x = [1e7, 12345.678, 1e4 + 0.5, 3.0, -1e6]
    same(Tensor(x).cos(), torch.tensor(x).cos(), atol=2e-6)
    same(Tensor(x, dtype=dtypes.float16).cos(), torch.tensor(x, dtype=torch.float16).float().cos().half(), atol=1e-3)
    same_gradient(lambda a: a.tan(), [0.5, 1.0, -1.2], rtol=1e-5)


def test_empty_reductions_and_normalisations():
    e = Tensor.ones(3, 0)
    assert e.softmax(-1).shape == (3, 0) and e.log_softmax(-1).shape == (3, 0)
    assert Tensor.ones(0).any().item() is False and Tensor.ones(0).all().item() is True
    assert Tensor.ones(2, 0).any(1).tolist() == [False, False]
    same(Tensor.ones(2, 0).logsumexp(1), torch.ones(2, 0).logsumexp(1))
    assert Tensor(3.0).cumsum(0).item() == 3.0 and Tensor(2.0).cumprod(-1).item() == 2.0


def test_inverse_trig_and_hyperbolic_functions():
    x = np.array([-0.999, -0.7, -0.5, -0.2, -1e-6, 0.0, 1e-6, 0.3, 0.5, 0.6, 0.99, 1.0, 1.5, nan], np.float32)
    for name in ("asin", "acos", "atan", "sinh", "cosh", "asinh", "atanh", "tanh"):
        same(getattr(Tensor(x), name)(), getattr(torch.tensor(x), name)(), rtol=2e-6, atol=1e-7)
    wide = np.array([-1e30, -50.0, -3.0, 1.0, 1.5, 4.0, 1e5, 1e30, inf, -inf], np.float32)
    for name in ("atan", "asinh", "acosh", "sinh", "cosh"):
        same(getattr(Tensor(wide), name)(), getattr(torch.tensor(wide), name)(), rtol=2e-6)
    x64 = np.linspace(-0.99, 0.99, 41)
    for name in ("asin", "acos", "atan", "asinh", "atanh", "sinh"):
        same(getattr(Tensor(x64, dtype=dtypes.float64), name)(), getattr(torch.tensor(x64), name)(), rtol=1e-13,
             atol=1e-15)


def test_log10_copysign_fmod_logaddexp():
    x = [0.1, 1.0, 1000.0, 0.0, -1.0]
    same(Tensor(x).log10(), torch.tensor(x).log10())
    a, b = [1.0, -2.0, 3.0, 0.0, 5.0], [-0.0, 1.0, -inf, -1.0, nan]
    got = Tensor(a).copysign(Tensor(b)).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(torch.tensor(a).copysign(torch.tensor(b)).numpy()))
    same(Tensor([5.5, -5.5, 7.0]).fmod(2), torch.tensor([5.5, -5.5, 7.0]).fmod(2))
    assert Tensor([7, -7]).fmod(3).tolist() == torch.tensor([7, -7]).fmod(3).tolist()
    a, b = [1.0, -inf, inf, 0.0, -inf], [2.0, -inf, inf, -inf, 3.0]
    same(Tensor(a).logaddexp(Tensor(b)), torch.tensor(a).logaddexp(torch.tensor(b)))


def test_isclose_and_allclose():
    a, b = [1.0, inf, nan, 1.0, -inf], [1.0 + 1e-7, inf, nan, 1.1, inf]
    for equal_nan in (False, True):
        assert Tensor(a).isclose(Tensor(b), equal_nan=equal_nan).tolist() == \
            torch.tensor(a).isclose(torch.tensor(b), equal_nan=equal_nan).tolist()
    assert Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.0 + 1e-6])) is True
    assert Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.1])) is False


def test_logsumexp_gradient_reaches_the_maximum():
    for x in ([-1.0], [1.0, 3.0, 2.0], [[0.5, 0.5], [2.0, -1.0]]):
        same_gradient(lambda a: a.logsumexp(-1), x)


def test_stack_as_a_method_and_a_function():
    a, b = Tensor([1.0]), Tensor([2.0])
    assert a.stack(b).tolist() == [[1.0], [2.0]] == Tensor.stack(a, b).tolist() == Tensor.stack([a, b]).tolist()
    assert a.stack(b, dim=1).shape == (1, 2)


@pytest.mark.parametrize("name", ["asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf"])
def test_inverse_and_hyperbolic_gradients_far_out(name):
    # torch's derivative formulas, also where the value is NaN (acosh below 1, atanh past 1)
    values = {"asin": [-0.9, 0.0, 0.3, 0.7], "acos": [-0.9, 0.0, 0.3, 0.7], "atan": [-300.0, 0.0, 2.0, 1e20],
              "sinh": [-60.0, 0.2, 3.0, 60.0], "cosh": [-60.0, 0.2, 3.0, 60.0], "erf": [-30.0, -1e-6, 0.4, 3.0],
              "asinh": [-300.0, 0.05, 2.0, 303.0], "acosh": [-300.0, -2.0, 1.5, 300.0],
              "atanh": [-300.0, -0.5, 0.05, 303.0]}[name]
    same_gradient(lambda a: getattr(a, name)(), values, rtol=2e-5)


def test_erf_keeps_its_digits_near_zero():
    x = [1e-6, -1e-3, 0.0156, 0.3, -0.49]
    same(Tensor(x).erf(), torch.tensor(x).erf(), rtol=2e-6, atol=0)
    same(Tensor(x, dtype=dtypes.float16).erf(), torch.tensor(x, dtype=torch.float16).erf(), rtol=1e-3, atol=6e-8)
    same(Tensor(x, dtype=dtypes.float64).erf(), torch.tensor(x, dtype=torch.float64).erf(), rtol=1e-14, atol=0)


def test_a_fresh_accumulator_each_step_starts_at_zero():
    # tinygrad's gradient-accumulation example: `loss = Tensor.zeros(()).contiguous()` each step, then loss.assign(...)
    # The graph is the same node every step; it was answered from the buffer the previous step had written
    totals = []
    for step in range(4):
        loss = Tensor.zeros(()).contiguous()
        for _ in range(2):
            loss.assign(loss + 1.5)
            loss.realize()
        totals.append(loss.item())
        assert Tensor.zeros(()).contiguous().item() == 0.0
    assert totals == [3.0] * 4


def test_assigning_a_lazy_constant_leaves_other_constants_alone():
    # Adam's running b1 ** t as `Tensor.ones((1,))`, updated in place, next to a 1.0 of the same shape
    b1, p = Tensor.ones((1,), requires_grad=False), Tensor.ones(3).contiguous().realize()
    for step in range(1, 4):
        b1 *= 0.5
        p.assign(p.detach() - 1 / (1.0 - b1))
        Tensor.realize(p, b1)
        assert b1.item() == 0.5 ** step and (Tensor.ones(1) * 1).item() == 1.0


def test_unsigned_divided_by_a_negative_number_and_half_statistics():
    assert Tensor([1, 4], dtype=dtypes.uint8).div(-2).tolist() == [-0.5, -2.0]     # -2 was taken as uint8 254
    assert (Tensor([3], dtype=dtypes.uint16) / -4).item() == -0.75
    same(Tensor([-1.0, -1000.0], dtype=dtypes.float16).std(), torch.tensor([-1.0, -1000.0], dtype=torch.float16).std(),
         rtol=1e-3)
    assert Tensor([200, 100], dtype=dtypes.uint8).cumsum().dtype == Tensor([1], dtype=dtypes.uint8).sum().dtype
    assert Tensor([200, 100], dtype=dtypes.uint8).cumsum().tolist() == [200, 300]
    with pytest.raises(RuntimeError, match="-2 can't be held by"):
        Tensor([1, 2], dtype=dtypes.uint8).pad(((1, 1),), value=-2)


ACTIVATIONS = {"elu": torch.nn.functional.elu, "selu": torch.nn.functional.selu, "celu": torch.nn.functional.celu,
               "mish": torch.nn.functional.mish, "hardswish": torch.nn.functional.hardswish,
               "hardsigmoid": torch.nn.functional.hardsigmoid}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_gradients_at_the_extremes_and_nan(name):
    # elu's unused exp branch overflowed at 1e7 (0 * inf), celu's min(0, e^x - 1) split a tie at -1.18e-38, mish met
    # e^-3.4e38 = 0 with an infinite gradient, hardswish and hardsigmoid gave NaN and 1/6 at NaN (torch 1 and 0)
    values = [1e7, -1.18e-38, 0.0, -1.0, 2.5, -3.0, 3.0, 3.4e38, -3.4e38, inf, -inf, nan]
    fn = {"selu": lambda a: a.selu(alpha=1.6732632423543772, gamma=1.0507009873554805)}.get(name, getattr(Tensor, name))
    x = Tensor(np.array(values, np.float32), requires_grad=True)
    (fn(x) * 2).sum().backward()
    t = torch.tensor(values, requires_grad=True)
    (ACTIVATIONS[name](t) * 2).sum().backward()
    same(x.grad, t.grad, rtol=1e-5)


def test_clip_gradient_at_nan_is_zero():
    same_gradient(lambda a: a.clip(-0.0, 0.0), [nan, 1.0, 0.0])
    same_gradient(lambda a: a.clip(-1, 1), [nan, 1.0, -1.0, 0.5, 3.0])


def test_binary_crossentropy_clamps_its_logs_as_pytorch():
    p_values, y_values = [0.0, 0.0, 1e-30, 0.5, 1.0, 0.3, 0.0], [0.0, 0.5, 0.3, 0.2, 1.0, 0.7, 1.0]
    p, y = Tensor(p_values, requires_grad=True), Tensor(y_values, requires_grad=True)
    tp, ty = torch.tensor(p_values, requires_grad=True), torch.tensor(y_values, requires_grad=True)
    loss = p.binary_crossentropy(y, "none")
    expected = torch.nn.functional.binary_cross_entropy(tp, ty, reduction="none")
    same(loss, expected)
    loss.sum().backward()
    expected.sum().backward()
    same(p.grad, tp.grad, rtol=1e-5)
    same(y.grad, ty.grad, rtol=1e-5)
    assert Tensor([0.0]).binary_crossentropy(Tensor([0.0])).item() == 0.0


def test_cross_entropy_with_a_minus_infinite_logit():
    logits, labels = [[-1.0, -inf], [2.0, -inf]], [0, 0]
    expected = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(labels))
    same(Tensor(logits).cross_entropy(Tensor(labels)), expected)
    same(Tensor(logits).sparse_categorical_crossentropy(Tensor(labels)), expected)
    same(Tensor(logits).cross_entropy(Tensor([1, 0]), reduction="none"),
         torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor([1, 0]), reduction="none"))


def test_half_nll_loss_layernorm_and_lerp_keep_their_dtype_and_digits():
    logits = np.array([[-1.0, 56352.0, -1.0], [-1.0, -3.0, 100.0], [-1.0, 60000.0, 2.0]], np.float16)
    ours = Tensor(logits).nll_loss(Tensor([1, 1, 1]))
    assert ours.dtype == dtypes.float16       # (torch's half nll_loss is -inf here: it rounds the sum to half first)
    same(ours, torch.nn.functional.nll_loss(torch.tensor(logits).float(), torch.tensor([1, 1, 1])).half(), rtol=1e-3)
    assert Tensor([[-2.0, 1.0]], dtype=dtypes.bfloat16).nll_loss(Tensor([0])).dtype == dtypes.bfloat16
    x = Tensor([-1.0, 361.0], dtype=dtypes.float16).layernorm()
    assert x.dtype == dtypes.float16 and np.allclose(x.numpy(), [-1.0, 1.0], atol=1e-3)     # the squares overflowed
    lerp = Tensor([-100.0], dtype=dtypes.float16).lerp(Tensor([65504.0], dtype=dtypes.float16), 0.0)
    assert lerp.dtype == dtypes.float16 and lerp.item() == -100.0                       # 65604 overflowed half
    for start, end, weight in ((-1.0, inf, 0.0), (-1.0, inf, 1.0), (2.0, 3.0, 1.0), (-4.0, 4.0, 0.25)):
        expected = torch.lerp(torch.tensor([start]), torch.tensor([end]), weight)
        same(Tensor([start]).lerp(Tensor([end]), weight), expected)


def test_float_remainder_by_infinite_and_tiny_divisors():
    a, b = [-1.0, 1.0, 1.0, -1.0, 5.0, 7.5, -7.5, inf, 3.0], [inf, inf, -inf, -1e-45, -1e-45, -2.0, 2.0, 2.0, 0.0]
    same(Tensor(a) % Tensor(b), torch.remainder(torch.tensor(a), torch.tensor(b)))
    half = Tensor([10496.0], dtype=dtypes.float16) % Tensor([-100.0], dtype=dtypes.float16)
    assert half.dtype == dtypes.float16 and half.item() == -4.0        # the quotient rounded in 16 bits


def test_whole_powers_are_exact_at_the_top_of_the_range():
    for dtype in (dtypes.float32, dtypes.float64):
        top = float(np.finfo(np.float32 if dtype == dtypes.float32 else np.float64).max)
        assert (Tensor([-top, top], dtype=dtype) ** 1).tolist() == [-top, top]      # 2^(1 * log2 max) overflowed
    assert (Tensor([2.375], dtype=dtypes.bfloat16) ** 29).item() == torch.tensor(2.375, dtype=torch.bfloat16).pow(29)
    same(Tensor([-inf, -0.0, 4.0, nan]) ** 0.5, torch.tensor([-inf, -0.0, 4.0, nan]) ** 0.5)
    same_gradient(lambda a: a ** 0.5, [-0.0, 0.0, 4.0])
    same_gradient(lambda a: a ** 3, [-inf, 0.0, 2.0, -1e20])


@pytest.mark.parametrize("dtype", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16])
def test_small_int_matmul_wraps_once_to_its_own_dtype(dtype):
    # the dtype tinygrad and PyTorch give (int8 @ int8 is int8), with the exact product wrapped as that dtype wraps
    low, high = (0, dtypes.max(dtype)) if dtypes.is_unsigned(dtype) else (dtypes.min(dtype), dtypes.max(dtype))
    a = np.array([[low, high], [high, 1]], dtype=np.int64)
    out = Tensor(a, dtype=dtype) @ Tensor(a, dtype=dtype)
    assert out.dtype == dtype and out.tolist() == (a @ a).astype(out.numpy().dtype).tolist()


def test_prod_of_an_empty_bool_tensor_is_one_in_the_dtype_its_sum_has():
    # (bools and small ints multiply in 32 bits, as they add: PyTorch takes int64)
    assert Tensor([], dtype=dtypes.bool).prod().dtype == Tensor([], dtype=dtypes.bool).sum().dtype == dtypes.int32
    assert Tensor([], dtype=dtypes.bool).prod().item() == 1
    assert Tensor([], dtype=dtypes.int8).prod().dtype == dtypes.int32


def test_logsumexp_gradient_beside_an_infinite_maximum():
    for x in ([inf, 3.4e38], [1.0, inf, 3.4e38], [[inf, 1.0], [2.0, 3.0]], [-inf, -inf], [2.0, 1e30]):
        same_gradient(lambda a: a.logsumexp(-1), x)


def test_half_mean_of_large_values_is_not_inf():
    # the float32 sum was rounded to half (inf) before the division
    x = Tensor([65504., 65504.], dtype=dtypes.float16)
    assert x.mean().dtype == dtypes.float16 and x.mean().item() == 65504.


def test_tanh_of_tiny_values_is_the_value():
    # 2 * sigmoid(2x) - 1 rounded every |x| below ~3e-8 to 0 (so sqrt(tanh(-1e-40)) was 0, torch NaN)
    for x in (1e-10, -1e-40, 5e-5):
        assert Tensor([x]).tanh().item() == pytest.approx(float(torch.tanh(torch.tensor([x]))), rel=1e-6)
    assert math.isnan(Tensor([-1e-40]).tanh().sqrt().item())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_float_remainder_is_exact_past_the_quotients_precision(dtype):
    # a - trunc(a / b) * b rounded the quotient: 1e18 % 3 was -6.9e10 (torch 1), 3.4e38 % 1e-45 NaN
    tdt, info = getattr(torch, dtype), torch.finfo(getattr(torch, dtype))
    values = [1e18, 3.0, 0.1, 7.5, 1e-3, 1e4, info.max, info.tiny, info.tiny * info.eps, 0.0, inf, nan]
    values = torch.tensor(values + [-v for v in values], dtype=torch.float64).to(tdt).tolist()
    a, b = np.meshgrid(values, values, indexing="ij")
    fmod = np.array([math.fmod(x, y) if math.isfinite(x) and y != 0 else nan for x, y in zip(a.flat, b.flat)])
    remainder = np.where((fmod != 0) & ((fmod < 0) != (b.flat < 0)), fmod + b.flat, fmod)   # torch's sign rule
    x, y = Tensor(a, dtype=dtypes.float64).cast(getattr(dtypes, dtype)), Tensor(b, dtype=dtypes.float64).cast(
        getattr(dtypes, dtype))
    for ours, exact in ((x.fmod(y), fmod), (x % y, remainder)):
        got = ours.cast(dtypes.float64).numpy().reshape(-1)
        expected = torch.tensor(exact).to(tdt).double().numpy()      # (r + b rounds to the dtype, as torch's does)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(np.signbit(got) | np.isnan(got), np.signbit(expected) | np.isnan(expected))
    assert (Tensor([1e18]) % 3).item() == 1.0


def test_remainder_gradient_is_torchs():
    a, b = [5.5, -7.5, 1e18, 3.0], [2.0, 2.0, 3.0, -2.0]
    for op in (lambda x, y: x % y, lambda x, y: x.fmod(y)):
        x, y = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
        op(x, y).sum().backward()
        tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        op(tx, ty).sum().backward()
        same(x.grad, tx.grad)
        same(y.grad, ty.grad)


def test_tanh_near_zero_keeps_its_relative_accuracy():
    # 2 sigmoid(2x) - 1 cancelled: tanh(2e-4) was 1.7e-4 off relative, half tanh(1e-3) 2.4%
    xs = np.geomspace(1e-6, 3, 300)
    for dtype, rtol in ((dtypes.float32, 3e-7), (dtypes.float64, 1e-15), (dtypes.float16, 0)):
        x = Tensor(np.concatenate([xs, -xs]), dtype=dtypes.float64).cast(dtype)
        expected = np.tanh(x.cast(dtypes.float64).numpy())
        if dtype == dtypes.float16:
            expected = np.tanh(x.cast(dtypes.float64).numpy().astype(np.float16).astype(np.float32)).astype(np.float16)
        got = x.tanh().cast(dtypes.float64).numpy()
        np.testing.assert_allclose(got, expected.astype(np.float64), rtol=rtol or 1e-3, atol=0)


def test_float64_erf_is_float64_accurate():
    # erf in float64 was the float32 fit (erf(-1) was -0.84270069, torch -0.84270079)
    x = np.concatenate([np.linspace(-7, 7, 1401), np.geomspace(1e-300, 1, 50)])
    np.testing.assert_allclose(Tensor(x, dtype=dtypes.float64).erf().numpy(), torch.erf(torch.tensor(x)).numpy(),
                               rtol=1e-14, atol=5e-15)


def test_exp_is_within_two_ulps():
    # 2^(x / ln 2) rounded x / ln 2 first: e^8.06 was 5 ulps off (sin(e^x)'s gradient 1% off), e^88 ~40
    for dtype, npd, lim in ((dtypes.float32, np.float32, 88), (dtypes.float64, np.float64, 709)):
        x = np.linspace(-lim, lim, 4001).astype(npd)
        exact = np.exp(x.astype(np.float64)) if npd == np.float32 else np.exp(x)
        ulps = np.abs(Tensor(x, dtype=dtype).exp().numpy().astype(np.float64) - exact) / np.spacing(exact.astype(npd))
        assert ulps.max() <= 2, (dtype, x[ulps.argmax()], ulps.max())


def test_a_constant_rows_mean_is_its_value():
    # sum * (1 / n) rounded differently from PyTorch's sum / n, and the FMA fused into x - sum * (1 / n) left 3e-8:
    # layernorm of [-1, -1, -1] was 9.4e-6 (torch 0)
    for value in (-1.0, 0.1, 3.7, -1e-3):
        x = Tensor(np.full((4, 3), value, np.float32))
        assert not (x - x.mean(-1, keepdim=True)).numpy().any()
        assert not x.layernorm().numpy().any()
    assert Tensor([inf, 1.0]).mean().item() == inf and math.isnan(Tensor([inf, -inf]).mean().item())


def test_max_of_one_element_passes_nan_to_its_gradient():
    # a reduce over size-1 axes folds away; PyTorch's amax gradient there is still 0/0 = NaN at a NaN
    for x, axis in (([nan], None), ([[nan], [inf], [-2.0]], 1), ([[nan, 1.0]], 0), ([[nan, 1.0]], None)):
        ours = Tensor(np.array(x, np.float32), requires_grad=True)
        ours.max(axis).sum().backward()
        theirs = torch.tensor(x, requires_grad=True)
        theirs.amax(axis if axis is not None else tuple(range(theirs.ndim))).sum().backward()
        same(ours.grad, theirs.grad)
        same(Tensor(np.array(x, np.float32)).max(axis), theirs.amax(axis if axis is not None else
                                                                   tuple(range(theirs.ndim))))


@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16])
def test_gelu_gradient_under_an_infinite_gradient_at_large_inputs(approximate, dtype):
    # through the composition, exp's inf from above met the saturated tanh's (erf's) 0 derivative: NaN, PyTorch inf
    x = [1e18, 100.0, 300.0, 7.0, 0.5, -0.3, -5.0, -100.0, -1e18] if dtype == dtypes.float32 else \
        [60000.0, 300.0, 7.0, 0.5, -0.3, -5.0, -300.0]
    np_dtype, torch_dtype = (np.float32, torch.float32) if dtype == dtypes.float32 else (np.float16, torch.float16)
    for upstream in (1.0, inf):
        ours = Tensor(np.array(x, np_dtype), requires_grad=True)
        (ours.gelu(approximate) * upstream).sum().backward()
        theirs = torch.tensor(x, dtype=torch_dtype, requires_grad=True)
        (torch.nn.functional.gelu(theirs, approximate=approximate) * upstream).sum().backward()
        tol = 2e-3 if dtype == dtypes.float32 else 1e-2
        same(ours.grad, theirs.grad, rtol=tol, atol=1e-5)
    ours = Tensor([1e18], requires_grad=True)
    ours.gelu().relu().exp().sum().backward()
    assert ours.grad.numpy()[0] == inf


def test_division_gradient_does_not_overflow_before_dividing():
    # a / c = a * (1 / c): recip's rule took g * a (inf) times (1 / c)^2 (0), NaN or inf where PyTorch is finite
    a, c = Tensor([1e30, 0.0, -1.8234476e38], requires_grad=True), Tensor([1e30, 2.0, -1.8234476e38], requires_grad=True)
    ta, tc = torch.tensor([1e30, 0.0, -1.8234476e38], requires_grad=True), \
        torch.tensor([1e30, 2.0, -1.8234476e38], requires_grad=True)
    ((a / c) * Tensor([1e10, 3.0, 2.0])).sum().backward()
    ((ta / tc) * torch.tensor([1e10, 3.0, 2.0])).sum().backward()
    same(a.grad, ta.grad, atol=1e-30)
    same(c.grad, tc.grad, atol=1e-30)
    v = Tensor([-1.8234476e38, 3.0], requires_grad=True)
    ((v / v) * Tensor([2.0, 1.0])).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), [0.0, 0.0], atol=1e-30)
    # a reciprocal asked for by name still gets its own gradient
    x = Tensor([2.0], requires_grad=True)
    r = x.reciprocal()
    gr, gx = (Tensor([3.0]) * r).sum().gradient(r, x)
    assert gr.numpy().tolist() == [3.0] and gx.numpy().tolist() == [-0.75]


def same_bits(ours: Tensor, theirs: torch.Tensor):
    """Bit for bit (so -0.0 is not 0.0); NaNs only need to be NaN."""
    got, want = ours.numpy(), theirs.detach().numpy()
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    differ = ~(np.isnan(got) & np.isnan(want)) & (got.view(f"u{got.itemsize}") != want.view(f"u{want.itemsize}"))
    assert not differ.any(), f"at {np.flatnonzero(differ)[:8]}: {got[differ][:8]} where PyTorch has {want[differ][:8]}"


@pytest.mark.parametrize("device", DEVICES)
def test_dividing_by_a_subnormal(device):
    # a / b was a * (1 / b), and 1 / b overflows to inf for a float32 b below 2^-128 (inf, and NaN for 0 / b)
    a, b = [-1e-40, 0.0, 3e-40, 1e-45, -0.0, 1.0], [-1e-40, -1e-40, 1e-40, 1e-45, 1e-45, 1e-45]
    same_bits(Tensor(a, device=device) / Tensor(b, device=device), torch.tensor(a) / torch.tensor(b))
    same_bits(Tensor([0.0], device=device) / Tensor([-1e-40], device=device), torch.tensor([-0.0]))


def _double_rounded(dtype, n: int):
    """Pairs where a * (1 / b) is not the correctly rounded a / b in dtype (the old division's wrong answers)."""
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal(64 * n) * 10).astype(dtype), (rng.standard_normal(64 * n) * 10).astype(dtype)
    with np.errstate(all="ignore"):
        wrong = a * (dtype(1) / b) != a / b
    assert wrong.sum() >= n, "too few pairs to test"
    return a[wrong][:n], b[wrong][:n]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=lambda d: d.__name__)
def test_division_rounds_once(device, dtype):
    a, b = _double_rounded(dtype, 64)
    same_bits(Tensor(a, device=device) / Tensor(b, device=device), torch.tensor(a) / torch.tensor(b))
    # tiny and huge divisors and quotients
    a, b = np.array([1e-3, 3.0, -7.0, 5.0, 0.0], dtype), np.array([7e-8, 1e-7, -3e-8, 6e4, -2e-8], dtype)
    if dtype != np.float16:
        a, b = np.concatenate([a, np.array([1e-30, 3e30, 1e-38, 1e38], dtype)]), \
            np.concatenate([b, np.array([3e-38, 7e-9, 3.0, 3e-3], dtype)])
    same_bits(Tensor(a, device=device) / Tensor(b, device=device), torch.tensor(a) / torch.tensor(b))


def test_log_gradient_at_the_smallest_subnormal():
    # g / x was g * (1 / x): at x = 1.4e-45, 1 / x is inf, and an upstream 0 made it NaN (PyTorch: 0)
    for upstream in (0.0, 1.0, 1e-30):
        values = [1.4e-45, 1e-40, 2.0]
        x, t = Tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
        (x.log() * upstream).sum().backward()
        (t.log() * upstream).sum().backward()
        same(x.grad, t.grad, rtol=1e-5, atol=0)


def test_division_gradient_at_subnormal_divisors():
    a_values, b_values = [1.0, -3e-40, 0.0, 1e-30, 2.0], [1e-40, -2e-40, 1e-45, 3e-39, -1e-45]
    a, b = Tensor(a_values, requires_grad=True), Tensor(b_values, requires_grad=True)
    ta, tb = torch.tensor(a_values, requires_grad=True), torch.tensor(b_values, requires_grad=True)
    weights = [1.0, 2.0, 0.0, 1e-20, 1e-30]
    ((a / b) * Tensor(weights)).sum().backward()
    ((ta / tb) * torch.tensor(weights)).sum().backward()
    same(a.grad, ta.grad, rtol=1e-6, atol=0)
    same(b.grad, tb.grad, rtol=1e-6, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_half_quotients_are_halves_also_when_cast_to_float(device):
    # a * (1 / b) rounded twice in half: (a / b).float() was off on a fifth of random half pairs
    rng = np.random.default_rng(3)
    a, b = (np.concatenate([rng.integers(0, 2 ** 16, 2048, np.uint16).view(np.float16), np.float16([6e-8, 1.0])])
            for _ in range(2))
    b[-2:] = [-2.5, 3.0]
    ours = (Tensor(a, device=device) / Tensor(b, device=device)).float()
    same_bits(ours, (torch.tensor(a) / torch.tensor(b)).float())


def test_an_index_tensor_on_another_device_is_refused_when_built():
    t = Tensor([1.0, 2.0, 3.0], device="PYTHON")
    with pytest.raises(RuntimeError, match="indices are on CPU, the indexed tensor on PYTHON"):
        t[Tensor([0, 2], device="CPU")]
    with pytest.raises(RuntimeError, match="indices are on CPU, the indexed tensor on PYTHON"):
        t[Tensor([0, 2], device="CPU")] = 5.0


@pytest.mark.parametrize("device", DEVICES)
def test_bitcast_between_bool_and_bytes(device):
    # LLVM rejected `bitcast i1 to i8`, OpenCL C has no as_bool
    flags, raw = [True, False, True], np.array([1, 0, 2], np.uint8)
    np.testing.assert_array_equal(Tensor(flags, device=device).bitcast(dtypes.uint8).numpy(),
                                  torch.tensor(flags).view(torch.uint8).numpy())
    np.testing.assert_array_equal(Tensor(flags, device=device).bitcast(dtypes.int8).numpy(),
                                  torch.tensor(flags).view(torch.int8).numpy())
    np.testing.assert_array_equal(Tensor(raw, device=device).bitcast(dtypes.bool).numpy(),
                                  torch.tensor(raw).view(torch.bool).numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_out_of_range_float_to_int_casts_saturate_on_every_backend(device):
    # the contract (ops.py): truncate toward zero, past the range the target's min or max, NaN 0 (C leaves it
    # undefined: the CPU saturated, OpenCL gave INT_MIN, the reference 0 or INT_MIN)
    values = [300.0, -300.0, 3e9, -3e9, nan, inf, -inf, 2.7, -2.7, 1e20, -1e20]
    for source in (dtypes.float32, dtypes.float64, dtypes.float16):
        x = Tensor(values, device=device, dtype=dtypes.float32).cast(source)
        for target in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.uint32, dtypes.int64):
            lo, hi = dtypes.min(target), dtypes.max(target)
            finite = np.nan_to_num(x.float().numpy().astype(np.float64), nan=0.0)
            expected = [lo if v <= lo else hi if v >= hi else int(np.trunc(v)) for v in finite]
            assert x.cast(target).tolist() == expected, (device, source, target)


@pytest.mark.parametrize("device", DEVICES)
def test_a_product_sum_whose_products_overflow_is_inf_or_nan_never_a_number(device):
    # the contract (ops.py): a reduce's accumulator update may round once (fused, the CPU's) or twice (the
    # reference's): past float32's range with mixed signs that is inf or NaN. PyTorch's BLAS gives NaN here
    a, b = np.full((4, 16), 1e30, np.float32), np.full((16, 4), 1e30, np.float32)
    b[1::2] *= -1
    got = (Tensor(a, device=device) @ Tensor(b, device=device)).numpy()
    assert np.isinf(got).all() or np.isnan(got).all()
    if device == "PYTHON":
        assert np.isnan(got).all() and np.isnan((torch.from_numpy(a) @ torch.from_numpy(b)).numpy()).all()
