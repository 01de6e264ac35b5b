"""Elementwise Tensor ops against numpy: unary math, binary arithmetic with broadcasting and Python scalars,
comparisons, where, bitwise ops; forward and backward; non-contiguous inputs; 0-d and empty tensors."""
import math

import numpy as np
import pytest
from helpers import assert_close, away_from, check, rand_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinygrad_core import Tensor, dtypes


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_softplus(x):
    return np.log1p(np.exp(x))


def np_gelu(x):   # tinygrad's gelu is the tanh approximation
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def np_elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * (np.exp(x) - 1))


# name, tinygrad fn, numpy fn, (low, high), kinks to keep finite differences away from
UNARY = [
    ("neg", lambda x: x.neg(), np.negative, (-2, 2), ()),
    ("neg_op", lambda x: -x, np.negative, (-2, 2), ()),
    ("abs", lambda x: x.abs(), np.abs, (-2, 2), (0,)),
    ("sign", lambda x: x.sign(), np.sign, (-2, 2), (0,)),
    ("exp", lambda x: x.exp(), np.exp, (-2, 2), ()),
    ("exp2", lambda x: x.exp2(), np.exp2, (-2, 2), ()),
    ("log", lambda x: x.log(), np.log, (0.1, 3), ()),
    ("log2", lambda x: x.log2(), np.log2, (0.1, 3), ()),
    ("sqrt", lambda x: x.sqrt(), np.sqrt, (0.1, 3), ()),
    ("rsqrt", lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), (0.1, 3), ()),
    ("sin", lambda x: x.sin(), np.sin, (-3, 3), ()),
    ("cos", lambda x: x.cos(), np.cos, (-3, 3), ()),
    ("tan", lambda x: x.tan(), np.tan, (-1.2, 1.2), ()),
    ("tanh", lambda x: x.tanh(), np.tanh, (-3, 3), ()),
    ("sigmoid", lambda x: x.sigmoid(), np_sigmoid, (-4, 4), ()),
    ("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), (-2, 2), (0,)),
    ("leakyrelu", lambda x: x.leakyrelu(), lambda x: np.where(x > 0, x, 0.01 * x), (-2, 2), (0,)),
    ("leakyrelu_0.2", lambda x: x.leakyrelu(0.2), lambda x: np.where(x > 0, x, 0.2 * x), (-2, 2), (0,)),
    ("elu", lambda x: x.elu(), np_elu, (-2, 2), (0,)),
    ("elu_alpha", lambda x: x.elu(0.5), lambda x: np_elu(x, 0.5), (-2, 2), (0,)),
    ("gelu", lambda x: x.gelu(), np_gelu, (-3, 3), ()),
    ("silu", lambda x: x.silu(), lambda x: x * np_sigmoid(x), (-3, 3), ()),
    ("swish", lambda x: x.swish(), lambda x: x * np_sigmoid(x), (-3, 3), ()),
    ("softplus", lambda x: x.softplus(), np_softplus, (-3, 3), ()),
    ("softplus_beta", lambda x: x.softplus(2.0), lambda x: np_softplus(2 * x) / 2, (-3, 3), ()),
    ("mish", lambda x: x.mish(), lambda x: x * np.tanh(np_softplus(x)), (-3, 3), ()),
    ("hardtanh", lambda x: x.hardtanh(), lambda x: np.clip(x, -1, 1), (-2, 2), (-1, 1)),
    ("hardtanh_range", lambda x: x.hardtanh(-0.5, 1.5), lambda x: np.clip(x, -0.5, 1.5), (-2, 2), (-0.5, 1.5)),
    ("clip", lambda x: x.clip(-0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), (-2, 2), (-0.5, 0.7)),
    ("clip_min_only", lambda x: x.clip(min_=0.3), lambda x: np.maximum(x, 0.3), (-2, 2), (0.3,)),
    ("clip_max_only", lambda x: x.clip(max_=0.3), lambda x: np.minimum(x, 0.3), (-2, 2), (0.3,)),
    ("reciprocal", lambda x: x.reciprocal(), np.reciprocal, (0.2, 3), ()),
    ("square", lambda x: x.square(), np.square, (-2, 2), ()),
    ("floor", lambda x: x.floor(), np.floor, (-3, 3), range(-3, 4)),
    ("ceil", lambda x: x.ceil(), np.ceil, (-3, 3), range(-3, 4)),
    ("round", lambda x: x.round(), np.round, (-3, 3), [k + 0.5 for k in range(-4, 4)]),
    ("trunc", lambda x: x.trunc(), np.trunc, (-3, 3), range(-3, 4)),
]


@pytest.mark.parametrize("name,tiny_fn,np_fn,bounds,kinks", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, tiny_fn, np_fn, bounds, kinks):
    x = away_from(rand_array((3, 4), *bounds), kinks)
    check(tiny_fn, np_fn, arrays=[x])


@pytest.mark.parametrize("name,tiny_fn,np_fn,bounds,kinks", UNARY, ids=[u[0] for u in UNARY])
def test_unary_0d(name, tiny_fn, np_fn, bounds, kinks):
    x = away_from(rand_array((), *bounds), kinks)
    check(tiny_fn, np_fn, arrays=[x])


@pytest.mark.parametrize("name,tiny_fn,np_fn,bounds,kinks", UNARY[::4], ids=[u[0] for u in UNARY[::4]])
def test_unary_empty(name, tiny_fn, np_fn, bounds, kinks):
    out = tiny_fn(Tensor(np.zeros((0, 3), np.float32)))
    assert out.shape == (0, 3)
    assert out.numpy().shape == (0, 3)


def test_round_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.4, 0.6], np.float32)
    assert_close(Tensor(x).round().numpy(), np.round(x))


def test_floor_ceil_trunc_on_integers_are_identity():
    x = np.array([-3, -1, 0, 2, 7], np.int32)
    for fn in ("floor", "ceil", "trunc", "round"):
        out = getattr(Tensor(x), fn)()
        assert out.dtype == dtypes.int32
        assert_close(out.numpy(), x)


def test_unary_math_on_int_computes_in_float():
    x = np.array([1, 2, 4], np.int32)
    out = Tensor(x).sqrt()
    assert out.dtype == dtypes.float32
    assert_close(out.numpy(), np.sqrt(x.astype(np.float32)))
    assert_close(Tensor(x).exp().numpy(), np.exp(x), rtol=1e-5)


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1.0], np.float32)
    with np.errstate(all="ignore"):
        assert_close(Tensor(x).exp().numpy(), np.exp(x))
        assert_close(Tensor(x).sigmoid().numpy(), np_sigmoid(x))
        assert_close(Tensor(x).relu().numpy(), np.maximum(x, 0))
        assert_close(Tensor(np.array([-1.0, 0.0, 4.0], np.float32)).sqrt().numpy(), np.sqrt([-1.0, 0.0, 4.0]))
        assert_close(Tensor(np.array([0.0, 1.0], np.float32)).log().numpy(), np.log([0.0, 1.0]))
    assert Tensor(x).isinf().tolist() == np.isinf(x).tolist()
    assert Tensor([1.0, np.nan]).isnan().tolist() == [False, True]
    assert Tensor([1.0, np.nan, np.inf]).isfinite().tolist() == [True, False, False]


def test_softplus_large_inputs_are_stable():
    x = np.array([-100.0, -30.0, 0.0, 30.0, 100.0], np.float32)
    assert_close(Tensor(x).softplus().numpy(), np.logaddexp(0, x.astype(np.float64)), rtol=1e-5)


# ---- binary arithmetic with broadcasting ----
BROADCAST_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 1, 4), (3, 1)), ((), (3,)), ((4,), ()),
                    ((1,), (2, 3))]
BINARY = [
    ("add", lambda a, b: a + b, np.add, (-2, 2)),
    ("sub", lambda a, b: a - b, np.subtract, (-2, 2)),
    ("mul", lambda a, b: a * b, np.multiply, (-2, 2)),
    ("div", lambda a, b: a / b, np.divide, (0.5, 2)),
    ("pow", lambda a, b: a ** b, np.power, (0.5, 2)),
    ("maximum", lambda a, b: a.maximum(b), np.maximum, (-2, 2)),
    ("minimum", lambda a, b: a.minimum(b), np.minimum, (-2, 2)),
    ("add_method", lambda a, b: a.add(b), np.add, (-2, 2)),
    ("sub_method", lambda a, b: a.sub(b), np.subtract, (-2, 2)),
    ("mul_method", lambda a, b: a.mul(b), np.multiply, (-2, 2)),
    ("div_method", lambda a, b: a.div(b), np.divide, (0.5, 2)),
]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("name,tiny_fn,np_fn,bounds", BINARY, ids=[b[0] for b in BINARY])
def test_binary_broadcast(name, tiny_fn, np_fn, bounds, shapes):
    check(tiny_fn, np_fn, shapes=shapes, low=bounds[0], high=bounds[1])


SCALARS = [2, 0.5, -1.5, 3]


@pytest.mark.parametrize("s", SCALARS)
@pytest.mark.parametrize("name,tiny_fn,np_fn", [
    ("add", lambda x, s: x + s, lambda x, s: x + s), ("radd", lambda x, s: s + x, lambda x, s: s + x),
    ("sub", lambda x, s: x - s, lambda x, s: x - s), ("rsub", lambda x, s: s - x, lambda x, s: s - x),
    ("mul", lambda x, s: x * s, lambda x, s: x * s), ("rmul", lambda x, s: s * x, lambda x, s: s * x),
    ("div", lambda x, s: x / s, lambda x, s: x / s), ("rdiv", lambda x, s: s / x, lambda x, s: s / x),
    ("pow", lambda x, s: x ** s, lambda x, s: x ** s), ("rpow", lambda x, s: abs(s) ** x, lambda x, s: abs(s) ** x),
    ("maximum", lambda x, s: x.maximum(s), np.maximum), ("minimum", lambda x, s: x.minimum(s), np.minimum),
])
def test_python_scalar_both_sides(name, tiny_fn, np_fn, s):
    x = rand_array((2, 3), 0.5, 2.0)
    out = check(lambda t: tiny_fn(t, s), lambda a: np_fn(a, s), arrays=[x])
    assert out.dtype == dtypes.float32


def test_pow_negative_base_integer_exponent():
    x = np.array([-2.0, -1.5, 0.0, 1.5, 2.0], np.float32)
    for e in (3, 2, -1, 3.0, -2.0):
        with np.errstate(divide="ignore"):     # 0 ** -1 is inf in both
            expected = np.power(x.astype(np.float64), e)
        assert_close((Tensor(x) ** e).numpy(), expected, rtol=1e-5)
    assert np.isnan((Tensor(np.array([-2.0], np.float32)) ** 0.5).numpy()).all()
    assert_close((Tensor(np.array([0.0, 2.0], np.float32)) ** Tensor(np.array([0.0, 0.0], np.float32))).numpy(),
                 [1.0, 1.0])


def test_pow_tensor_exponent_negative_base():
    base = np.array([-2.0, -3.0, 2.0, -2.0], np.float32)
    exponent = np.array([2.0, 3.0, 0.5, -1.0], np.float32)
    assert_close((Tensor(base) ** Tensor(exponent)).numpy(), np.power(base.astype(np.float64), exponent), rtol=1e-5)


def test_integer_pow():
    x = np.array([-3, -1, 0, 2, 5], np.int32)
    out = Tensor(x) ** 3
    assert out.dtype == dtypes.int32
    assert_close(out.numpy(), x ** 3)


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_floordiv_and_mod_follow_python(dtype):
    a = np.array([7, -7, 7, -7, 6, 0, -1], dtype)
    b = np.array([2, 2, -2, -2, 3, 5, 4], dtype)
    assert_close((Tensor(a) // Tensor(b)).numpy(), a // b)
    assert_close((Tensor(a) % Tensor(b)).numpy(), a % b)
    assert_close((Tensor(a) // 3).numpy(), a // dtype(3))
    assert_close((Tensor(a) % 3).numpy(), a % dtype(3))
    assert_close((10 // Tensor(b)).numpy(), dtype(10) // b)
    assert_close((10 % Tensor(b)).numpy(), dtype(10) % b)


def test_div_of_ints_is_true_division():
    a, b = np.array([7, -7, 1], np.int32), np.array([2, 2, 3], np.int32)
    out = Tensor(a) / Tensor(b)
    assert dtypes.is_float(out.dtype)
    assert_close(out.numpy(), a / b)


def test_div_rounding_modes():
    a, b = np.array([7, -7, 5], np.int32), np.array([2, 2, -3], np.int32)
    assert_close(Tensor(a).div(Tensor(b), rounding_mode="trunc").numpy(), np.trunc(a / b).astype(np.int32))
    assert_close(Tensor(a).div(Tensor(b), rounding_mode="floor").numpy(), a // b)


def test_maximum_minimum_ties_split_gradient():
    # PyTorch semantics: at a tie maximum/minimum send half the gradient to each side
    a = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = Tensor([1.0, 1.0, 4.0], requires_grad=True)
    a.maximum(b).sum().backward()
    assert_close(a.grad.numpy(), [0.5, 1.0, 0.0])
    assert_close(b.grad.numpy(), [0.5, 0.0, 1.0])
    a2 = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    b2 = Tensor([1.0, 1.0, 4.0], requires_grad=True)
    a2.minimum(b2).sum().backward()
    assert_close(a2.grad.numpy(), [0.5, 0.0, 1.0])
    assert_close(b2.grad.numpy(), [0.5, 1.0, 0.0])


# ---- comparisons ----
COMPARISONS = [
    ("lt", lambda a, b: a < b, np.less), ("gt", lambda a, b: a > b, np.greater),
    ("le", lambda a, b: a <= b, np.less_equal), ("ge", lambda a, b: a >= b, np.greater_equal),
    ("eq", lambda a, b: a == b, np.equal), ("ne", lambda a, b: a != b, np.not_equal),
]


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (4,))], ids=str)
@pytest.mark.parametrize("name,tiny_fn,np_fn", COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_comparison(name, tiny_fn, np_fn, shapes):
    # small integers stored as floats give plenty of equal pairs
    a, b = (np.round(rand_array(s, -2, 2, seed=i)).astype(np.float32) for i, s in enumerate(shapes))
    out = tiny_fn(Tensor(a), Tensor(b))
    assert out.dtype == dtypes.bool
    assert_close(out.numpy(), np_fn(a, b))


@pytest.mark.parametrize("name,tiny_fn,np_fn", COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_comparison_with_scalar_both_sides(name, tiny_fn, np_fn):
    a = np.array([[-1, 0, 1], [2, 1, 3]], np.int32)
    assert_close(tiny_fn(Tensor(a), 1).numpy(), np_fn(a, 1))
    assert_close(tiny_fn(1, Tensor(a)).numpy(), np_fn(1, a))
    assert_close(tiny_fn(Tensor(a), 0.5).numpy(), np_fn(a, 0.5))


# ---- where ----
def test_where_forward_backward():
    cond = rand_array((3, 4), dtype=np.bool_, seed=5)
    check(lambda x, y: Tensor(cond).where(x, y), lambda x, y: np.where(cond, x, y), shapes=[(3, 4), (3, 4)])


def test_where_broadcasts_and_scalars():
    cond = rand_array((3, 1), dtype=np.bool_, seed=3)
    check(lambda x: Tensor(cond).where(x, 0.5), lambda x: np.where(cond, x, 0.5), shapes=[(1, 4)])
    check(lambda y: Tensor(cond).where(-1.0, y), lambda y: np.where(cond, -1.0, y), shapes=[(4,)])
    out = Tensor(cond).where(1, 2)
    assert_close(out.numpy(), np.where(cond, 1, 2))


def test_where_nonbool_condition():
    c = np.array([0.0, 1.5, -2.0, 0.0], np.float32)
    assert_close(Tensor(c).where(Tensor([1, 2, 3, 4]), 0).numpy(), np.where(c, [1, 2, 3, 4], 0))


# ---- bitwise and logic ----
def test_bitwise_ops():
    a = np.array([0, 1, 5, -3, 12], np.int32)
    b = np.array([3, 1, 6, 7, -8], np.int32)
    assert_close((Tensor(a) & Tensor(b)).numpy(), a & b)
    assert_close((Tensor(a) | Tensor(b)).numpy(), a | b)
    assert_close((Tensor(a) ^ Tensor(b)).numpy(), a ^ b)
    assert_close((~Tensor(a)).numpy(), ~a)
    assert_close((Tensor(a) & 6).numpy(), a & 6)
    assert_close((6 | Tensor(a)).numpy(), 6 | a)
    u = np.array([0, 1, 200], np.uint8)
    assert_close((~Tensor(u)).numpy(), ~u)


def test_shifts():
    a = np.array([1, 3, 8, 255], np.int32)
    assert_close((Tensor(a) << 2).numpy(), a << 2)
    assert_close((Tensor(a) >> 1).numpy(), a >> 1)
    u = np.array([1, 0x80000000, 0xFFFFFFFF], np.uint32)
    assert_close((Tensor(u) >> 4).numpy(), u >> 4)


def test_bool_logic():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    assert_close((Tensor(a) & Tensor(b)).numpy(), a & b)
    assert_close((Tensor(a) | Tensor(b)).numpy(), a | b)
    assert_close((Tensor(a) ^ Tensor(b)).numpy(), a ^ b)
    assert_close((~Tensor(a)).numpy(), ~a)
    assert_close(Tensor(a).logical_not().numpy(), ~a)


# ---- integer arithmetic ----
def test_integer_arithmetic_wraps():
    a = np.array([2 ** 31 - 1, -2 ** 31, 100], np.int32)
    with np.errstate(over="ignore"):
        assert_close((Tensor(a) + 1).numpy(), a + np.int32(1))
        assert_close((Tensor(a) * 3).numpy(), a * np.int32(3))
    u = np.array([0, 1, 255], np.uint8)
    with np.errstate(over="ignore"):
        assert_close((Tensor(u) + Tensor(np.array([1, 255, 1], np.uint8))).numpy(), u + np.array([1, 255, 1], np.uint8))
        assert_close((Tensor(u) - Tensor(np.array([1, 0, 0], np.uint8))).numpy(), u - np.array([1, 0, 0], np.uint8))


def test_integer_maximum_minimum_abs_neg():
    a = np.array([-5, 3, 0, 7], np.int32)
    b = np.array([2, 3, -1, 8], np.int32)
    assert_close(Tensor(a).maximum(Tensor(b)).numpy(), np.maximum(a, b))
    assert_close(Tensor(a).minimum(Tensor(b)).numpy(), np.minimum(a, b))
    assert_close(Tensor(a).abs().numpy(), np.abs(a))
    assert_close((-Tensor(a)).numpy(), -a)
    assert_close(Tensor(a).sign().numpy(), np.sign(a))
    assert_close(Tensor(a).relu().numpy(), np.maximum(a, 0))
    u = np.array([0, 5, 250], np.uint8)
    assert_close(Tensor(u).minimum(Tensor(np.array([3, 3, 255], np.uint8))).numpy(),
                 np.minimum(u, np.array([3, 3, 255], np.uint8)))


# ---- non-contiguous inputs ----
VIEWS = {
    "permuted": (lambda t: t.permute(1, 0), lambda a: a.transpose(1, 0), (4, 3)),
    "flipped": (lambda t: t.flip(0, 1), lambda a: a[::-1, ::-1], (3, 4)),
    "padded": (lambda t: t.pad(((1, 0), (0, 2))), lambda a: np.pad(a, ((1, 0), (0, 2))), (2, 2)),
    "shrunk": (lambda t: t.shrink(((1, 4), (0, 4))), lambda a: a[1:4, 0:4], (5, 5)),
    "expanded": (lambda t: t.expand(3, 4), lambda a: np.broadcast_to(a, (3, 4)), (1, 4)),
    "strided": (lambda t: t[::2, 1::2], lambda a: a[::2, 1::2], (5, 8)),
}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("op", ["add", "mul_exp", "sigmoid"])
def test_non_contiguous_inputs(view, op):
    tiny_view, np_view, base_shape = VIEWS[view]
    base_a, base_b = rand_array(base_shape, seed=1), rand_array(base_shape, seed=2)
    fns = {"add": (lambda x, y: x + y, np.add),
           "mul_exp": (lambda x, y: (x * y).exp(), lambda x, y: np.exp(x * y)),
           "sigmoid": (lambda x, y: (x - y).sigmoid(), lambda x, y: np_sigmoid(x - y))}
    tiny_fn, np_fn = fns[op]
    check(lambda a, b: tiny_fn(tiny_view(a), tiny_view(b)), lambda a, b: np_fn(np_view(a), np_view(b)),
          arrays=[base_a, base_b])


def test_non_contiguous_realized_view():
    base = rand_array((3, 4))
    t = Tensor(base).realize().permute(1, 0)
    assert_close((t * 2).numpy(), base.T * 2)
    assert_close(t.numpy(), base.T)
    f = Tensor(base).realize().flip(1)
    assert_close((f + f).numpy(), base[:, ::-1] * 2)


# ---- 0-d and empty ----
def test_zero_d_arithmetic():
    a, b = Tensor(3.0), Tensor(4.0)
    assert (a * b + 1).shape == ()
    assert (a * b + 1).item() == 13.0
    assert_close((a + Tensor([1.0, 2.0])).numpy(), [4.0, 5.0])


def test_empty_arithmetic():
    a = Tensor(np.zeros((0, 4), np.float32))
    assert (a + 1).shape == (0, 4)
    assert (a * Tensor(np.ones((1, 4), np.float32))).numpy().shape == (0, 4)
    assert (a + Tensor(np.ones((4,), np.float32))).shape == (0, 4)


# ---- properties ----
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 3), min_size=0, max_size=3), st.data())
def test_broadcasting_binary_ops_property(shape, data):
    # drop leading dims and set some dims to 1 on each side: any such pair broadcasts
    other = [1 if data.draw(st.booleans()) else s for s in shape][data.draw(st.integers(0, len(shape))):]
    op = data.draw(st.sampled_from(["add", "sub", "mul", "max"]))
    a = rand_array(tuple(shape), seed=1)
    b = rand_array(tuple(other), seed=2)
    tiny = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
            "max": lambda x, y: x.maximum(y)}[op]
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum}[op]
    if data.draw(st.booleans()):
        a, b = b, a
    assert_close(tiny(Tensor(a), Tensor(b)).numpy(), ref(a, b))


@settings(max_examples=20, deadline=None)
@given(st.floats(-5, 5, allow_nan=False, width=32), st.floats(-5, 5, allow_nan=False, width=32))
def test_scalar_ops_match_python(a, b):
    x = Tensor([a])
    assert math.isclose((x + b).item(), np.float32(a) + np.float32(b), rel_tol=1e-6, abs_tol=1e-6)
    assert math.isclose((x * b).item(), np.float32(a) * np.float32(b), rel_tol=1e-6, abs_tol=1e-6)
    assert (x < b).item() == (np.float32(a) < np.float32(b))
