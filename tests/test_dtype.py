"""The dtype matrix: every dtype made, read back, cast, bitcast and computed with, against numpy; and the
promotion rules (numpy's where it has them, PyTorch's choices where it differs: any float beats any int)."""
import itertools
import math

import numpy as np
import pytest
import torch
from helpers import assert_close

from tinygrad_core import Tensor, dtypes
from tinygrad_core.dtype import ALL, FLOATS, INTS, UNSIGNED, least_upper_dtype, to_dtype

NUMPY_DTYPES = [d for d in ALL if d != dtypes.bfloat16]
VALUES = [0, 1, 2.5, 3.75, 100, 7]          # exact in every dtype (truncated for ints)


def np_of(dt):
    return dt.np if dt != dtypes.bfloat16 else np.float32


def as_values(dt, values=VALUES):
    """The values as dt holds them (floats truncate toward zero in int dtypes), as numpy of np_of(dt)."""
    if dt == dtypes.bool:
        return np.array(values) != 0
    if dt in INTS:
        return np.trunc(np.array(values, np.float64)).astype(dt.np)
    return np.array(values, np.float64).astype(np_of(dt))


@pytest.mark.parametrize("dt", ALL, ids=lambda d: d.name)
def test_construct_and_read_back(dt):
    expected = as_values(dt)
    t = Tensor(expected if dt != dtypes.bfloat16 else expected.tolist(), dtype=dt)
    assert t.dtype == dt
    assert t.numpy().dtype == np_of(dt)
    assert_close(t.numpy(), expected)
    assert t.tolist() == expected.tolist()
    assert t.element_size() == dt.itemsize and t.nbytes() == dt.itemsize * len(VALUES)


@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=lambda d: d.name)
def test_dtype_inferred_from_numpy(dt):
    a = as_values(dt)
    assert Tensor(a).dtype == dt


def test_dtype_inferred_from_python():
    assert Tensor([1, 2]).dtype == dtypes.int32
    assert Tensor([1.0, 2]).dtype == dtypes.float32
    assert Tensor([True, False]).dtype == dtypes.bool
    assert Tensor(3).dtype == dtypes.int32
    assert Tensor(3.0).dtype == dtypes.float32
    assert Tensor(True).dtype == dtypes.bool
    assert Tensor([[1, 2], [3, 4.5]]).dtype == dtypes.float32


def test_dtype_by_name():
    assert Tensor([1, 2], dtype="float16").dtype == dtypes.float16
    assert Tensor([1, 2], dtype="half").dtype == dtypes.float16
    assert Tensor([1, 2], dtype=np.int64).dtype == dtypes.int64
    assert to_dtype("bfloat16") == dtypes.bfloat16
    assert dtypes.float is dtypes.float32 and dtypes.long is dtypes.int64


@pytest.mark.parametrize("src,dst", list(itertools.product(ALL, ALL)), ids=lambda d: d.name)
def test_cast_matrix(src, dst):
    t = Tensor(as_values(src).tolist(), dtype=src)
    out = t.cast(dst)
    assert out.dtype == dst
    expected = as_values(dst, as_values(src).astype(np.float64).tolist())
    assert_close(out.numpy(), expected)


@pytest.mark.parametrize("dst", [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64], ids=lambda d: d.name)
def test_float_to_signed_int_truncates_toward_zero(dst):
    x = np.array([-2.7, -0.5, 0.5, 2.7, -100.9], np.float32)
    assert_close(Tensor(x).cast(dst).numpy(), np.trunc(x).astype(dst.np))


def test_int_wraparound_casts():
    x = np.array([255, 256, -1, 300], np.int32)
    assert_close(Tensor(x).cast(dtypes.uint8).numpy(), x.astype(np.uint8))
    assert_close(Tensor(x).cast(dtypes.int8).numpy(), x.astype(np.int8))
    assert_close(Tensor(np.array([-1], np.int64)).cast(dtypes.uint32).numpy(), np.array([-1]).astype(np.uint32))


def test_float_to_bool_and_back():
    x = np.array([0.0, -0.0, 0.1, -3.0, np.nan], np.float32)
    assert_close(Tensor(x).cast(dtypes.bool).numpy(), x.astype(bool))
    assert_close(Tensor([True, False]).float().numpy(), [1.0, 0.0])


def test_shortcut_casts():
    t = Tensor([1.7, -2.2])
    assert t.float().dtype == dtypes.float32
    assert t.half().dtype == dtypes.float16
    assert t.int().dtype == dtypes.int32 and t.int().tolist() == [1, -2]
    assert t.bool().dtype == dtypes.bool and t.bool().tolist() == [True, True]
    assert t.double().dtype == dtypes.float64
    assert t.long().dtype == dtypes.int64
    assert t.bfloat16().dtype == dtypes.bfloat16


def test_float16_and_bfloat16_rounding():
    x = np.array([1.0009765625, 3.14159, 65504.0, 1e-3], np.float32)
    assert_close(Tensor(x).half().numpy(), x.astype(np.float16))
    # bfloat16 keeps 8 mantissa bits: round to nearest even on the float32 bits
    bits = x.view(np.uint32)
    expected = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    assert_close(Tensor(x).bfloat16().numpy(), expected)
    assert_close(Tensor(x).bfloat16().float().numpy(), expected)


@pytest.mark.parametrize("src,dst", [(dtypes.float32, dtypes.int32), (dtypes.int32, dtypes.float32),
                                     (dtypes.float32, dtypes.uint32), (dtypes.float16, dtypes.int16),
                                     (dtypes.uint16, dtypes.float16), (dtypes.int8, dtypes.uint8),
                                     (dtypes.float64, dtypes.int64)], ids=lambda d: d.name)
def test_bitcast(src, dst):
    x = np.array([1.5, -2.25, 0.0, 100.0], np.float64).astype(src.np) if src in FLOATS else \
        np.array([1, 5, 127, 60], src.np)
    assert_close(Tensor(x).bitcast(dst).numpy(), x.view(dst.np))


# ---- arithmetic in every dtype ----
@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=lambda d: d.name)
def test_arithmetic_per_dtype(dt):
    a = as_values(dt, [0, 1, 2, 3, 5, 7])
    b = as_values(dt, [1, 1, 3, 2, 2, 7])
    ta, tb = Tensor(a), Tensor(b)
    with np.errstate(all="ignore"):
        if dt != dtypes.bool:
            assert_close((ta + tb).numpy(), a + b)
            assert_close((ta * tb).numpy(), a * b)
            assert_close((ta - tb).numpy(), a - b)
        else:
            assert_close((ta + tb).numpy(), a | b)       # bool + is logical or (numpy and PyTorch)
            assert_close((ta * tb).numpy(), a & b)
        assert_close(ta.maximum(tb).numpy(), np.maximum(a, b))
        assert_close(ta.minimum(tb).numpy(), np.minimum(a, b))
        assert_close((ta < tb).numpy(), a < b)
        assert_close((ta == tb).numpy(), a == b)
        assert_close(ta.max().numpy(), a.max())
        assert_close(ta.where(ta, tb).numpy(), np.where(a, a, b))
        if dt != dtypes.bool:
            s = ta.sum()
            assert_close(s.numpy(), a.sum(dtype=s.dtype.np))
            assert (ta + tb).dtype == dt
            assert_close((ta / tb).numpy(), (a / b).astype(np.float32) if dt in INTS else a / b, rtol=1e-3)


def test_float16_math():
    x = np.array([0.5, 1.0, 2.0], np.float16)
    out = Tensor(x).exp()
    assert out.dtype == dtypes.float16
    assert_close(out.numpy(), np.exp(x), rtol=1e-3)
    assert_close((Tensor(x) * Tensor(x)).numpy(), x * x)


def test_float64_precision_kept():
    x = np.array([1.0 + 1e-12, 2.0], np.float64)
    out = Tensor(x) * 3
    assert out.dtype == dtypes.float64
    assert_close(out.numpy(), x * 3, rtol=1e-15, atol=0)


# ---- promotion ----
SAME_KIND_PAIRS = [(a, b) for a, b in itertools.product(ALL, ALL) if a != dtypes.bfloat16 and b != dtypes.bfloat16
                   and (a in FLOATS) == (b in FLOATS) and dtypes.uint64 not in (a, b)]


@pytest.mark.parametrize("a,b", SAME_KIND_PAIRS, ids=lambda d: d.name)
def test_promotion_matches_numpy(a, b):
    expected = np.promote_types(a.np, b.np)
    assert least_upper_dtype(a, b).np == expected
    out = Tensor(np.ones(2, a.np)) + Tensor(np.ones(2, b.np))
    assert out.dtype.np == expected


@pytest.mark.parametrize("i", INTS + (dtypes.bool,), ids=lambda d: d.name)
@pytest.mark.parametrize("f", FLOATS, ids=lambda d: d.name)
def test_any_float_beats_any_int(i, f):
    # PyTorch's rule (numpy would widen int32 + float16 to float64)
    assert least_upper_dtype(i, f) == f
    assert least_upper_dtype(f, i) == f


def test_special_promotions():
    assert least_upper_dtype(dtypes.float16, dtypes.bfloat16) == dtypes.float32
    assert least_upper_dtype(dtypes.bfloat16, dtypes.float32) == dtypes.float32
    assert least_upper_dtype(dtypes.uint64, dtypes.int64) == dtypes.float32
    assert least_upper_dtype(dtypes.uint64, dtypes.uint8) == dtypes.uint64
    assert least_upper_dtype(dtypes.bool, dtypes.bool) == dtypes.bool
    assert least_upper_dtype(dtypes.uint8, dtypes.int8) == dtypes.int16
    assert least_upper_dtype(dtypes.uint32, dtypes.int32) == dtypes.int64


def test_python_scalars_adapt_to_the_tensor():
    # PyTorch: a Python number doesn't widen a tensor of the same kind
    assert (Tensor(np.array([1], np.int8)) + 1).dtype == dtypes.int8
    assert (Tensor(np.array([1], np.uint8)) * 2).dtype == dtypes.uint8
    assert (Tensor(np.array([1.0], np.float16)) + 1.5).dtype == dtypes.float16
    assert (Tensor([1, 2]) + 1.5).dtype == dtypes.float32
    assert_close((Tensor([1, 2]) + 1.5).numpy(), [2.5, 3.5])
    assert (Tensor([True]) + True).dtype == dtypes.bool
    assert (Tensor([True, False]) + 1).dtype == dtypes.int32
    assert_close((Tensor([True, False]) + 1).numpy(), [2, 1])
    assert (1.5 * Tensor(np.array([2], np.int64))).dtype == dtypes.float32
    assert (Tensor(np.array([1.0], np.float64)) + 1).dtype == dtypes.float64


def test_mixed_tensor_arithmetic_values():
    a = Tensor(np.array([100, 200], np.uint8))
    b = Tensor(np.array([-100, 50], np.int8))
    out = a + b
    assert out.dtype == dtypes.int16
    assert_close(out.numpy(), np.array([0, 250], np.int16))
    c = Tensor(np.array([1, 2], np.int32)) * Tensor(np.array([0.5, 0.25], np.float16))
    assert c.dtype == dtypes.float16
    assert_close(c.numpy(), [0.5, 0.5])


def test_comparison_results_are_bool_for_every_dtype():
    for dt in NUMPY_DTYPES:
        t = Tensor(as_values(dt))
        assert (t < t.flip(0)).dtype == dtypes.bool
        assert (t == 1).dtype == dtypes.bool


def test_unsigned_dtype_facts():
    assert all(dtypes.is_int(d) and dtypes.is_unsigned(d) for d in UNSIGNED)
    assert dtypes.min(dtypes.int8) == -128 and dtypes.max(dtypes.uint16) == 65535
    assert dtypes.is_float(dtypes.bfloat16) and not dtypes.is_float(dtypes.int32)


def test_min_max_are_dtype_attributes_as_in_tinygrad_and_match_torch():
    torch = pytest.importorskip("torch")
    for dt in INTS:
        info = torch.iinfo(getattr(torch, {"char": "int8", "uchar": "uint8", "short": "int16", "ushort": "uint16",
                                           "int": "int32", "uint": "uint32", "long": "int64",
                                           "ulong": "uint64"}[dt.name]))
        assert (dt.min, dt.max) == (info.min, info.max) == (dtypes.min(dt), dtypes.max(dt)), dt
    assert dtypes.int.max == 2 ** 31 - 1 and dtypes.int32.min == -2 ** 31
    assert dtypes.float.min == -float("inf") and dtypes.half.max == float("inf")
    assert dtypes.bool.min is False and dtypes.bool.max is True
    assert [dt.bitsize for dt in (dtypes.bool, dtypes.int8, dtypes.half, dtypes.double)] == [1, 8, 16, 64]


def test_dtype_groups_and_predicates_as_tinygrad():
    assert dtypes.uints == (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
    assert dtypes.sints == (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
    assert set(dtypes.ints) == set(INTS) and set(dtypes.floats) == set(FLOATS) and set(dtypes.all) == set(ALL)
    assert dtypes.int32s == (dtypes.uint32, dtypes.int32)
    assert dtypes.is_bool(dtypes.bool) and not dtypes.is_bool(dtypes.uint8)


def test_finfo_gives_exponent_and_mantissa_bits():
    assert [dtypes.finfo(d) for d in (dtypes.half, dtypes.bfloat16, dtypes.float, dtypes.double)] == \
        [(5, 10), (8, 7), (8, 23), (11, 52)]
    np_bits = {dtypes.half: np.float16, dtypes.float: np.float32, dtypes.double: np.float64}
    for dt, np_type in np_bits.items():
        assert dtypes.finfo(dt) == (np.finfo(np_type).nexp, np.finfo(np_type).nmant)
    with pytest.raises(ValueError, match="floating point.*dtypes.int"):
        dtypes.finfo(dtypes.int32)


# ---- found by fuzzing: differential fuzzers' reduced cases against PyTorch CPU (docs/FUZZING.md); each comment
# says the wrong answer it gave ----
@pytest.mark.parametrize("a, b", [("float16", "float32"), ("bfloat16", "float32"), ("float16", "float64"),
                                  ("int8", "float16"), ("int32", "float16")])
def test_a_binary_op_computed_in_float32_takes_the_promoted_dtype(a, b):
    # a 16-bit float computing in float32 was rounded back to its own dtype: fmod(float16, float32) was float16;
    # an int made float32 before the promotion: copysign(int8, float16) was float32
    x, y = np.array([5.5, -7.25, 3.0, 1.0]), np.array([2.0, 1.5, -0.75, 3.0])
    for op in ("fmod", "copysign", "logaddexp"):
        got = getattr(Tensor(x).cast(getattr(dtypes, a)), op)(Tensor(y).cast(getattr(dtypes, b)))
        want = getattr(torch, op)(torch.tensor(x).to(getattr(torch, a)), torch.tensor(y).to(getattr(torch, b)))
        assert got.dtype == getattr(dtypes, str(want.dtype).split(".")[1]), (op, got.dtype, want.dtype)
        assert_close(got.float().numpy(), want.float(), atol=0, rtol=1e-3)


def test_a_float16_product_with_a_number_past_its_range_computes_in_float32():
    # 1e10 and 1e-8 were rounded to float16 first (inf and 0): 0 * 1e10 was NaN, 1e-6 * 1e10 inf, 1e10 / x NaN.
    # PyTorch rounds the number first in a sum or a comparison (inf - 1e5 is NaN there): so do we
    x = np.array([0.0, 1e-6, -3.0, math.inf, -math.inf, math.nan, 1e-7, 2.0, 65504.0], np.float16)
    for fn in (lambda t: t * 1e10, lambda t: 1e10 / t, lambda t: t / 1e10, lambda t: t * 1e-8, lambda t: 3e-9 * t,
               lambda t: t - 1e5, lambda t: 1e5 + t, lambda t: (t == 70000.0).float(), lambda t: (t < 1e5).float()):
        y, u = fn(Tensor(x)), fn(torch.tensor(x))
        assert y.dtype == (dtypes.float16 if u.dtype == torch.float16 else dtypes.float32)
        assert_close(y.numpy(), u, atol=0, rtol=2e-7)
