"""Elementwise math on Tensor: exp, log, trigonometry, rounding, activations, all built from the unary primitives.

Mixed into Tensor. Where the obvious composition loses digits or overflows (cos, asin near 1, sinh near 0, sigmoid
at large |x|), the comment says which form is used instead and why."""
from __future__ import annotations
import functools
import math
from typing import TYPE_CHECKING
from tinygrad_core.device import Device
from tinygrad_core.dtype import DType, dtypes, least_upper_dtype
from tinygrad_core.gradient import composite
from tinygrad_core.helpers import broadcast_shape
from tinygrad_core.ops import Ops, cos_uop
if TYPE_CHECKING:
    from tinygrad_core.tensor import Tensor

# Taylor coefficients of asin (odd powers) and sinh, as many as float64 needs at |x| = 1/2 (float32 takes fewer)
_ASIN_TAYLOR = [math.comb(2 * n, n) / (4 ** n * (2 * n + 1)) for n in range(26)]
_SINH_TAYLOR = [1 / math.factorial(2 * n + 1) for n in range(26)]
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_ERF_TAYLOR = [_TWO_OVER_SQRT_PI * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(26)]
# erf(x) = 2/sqrt(pi) e^-x^2 (x + 2x^3/3 + 4x^5/15 + ...): 2^n / (2n + 1)!!, 98 terms for float64 at |x| = 6
_ERF_POSITIVE = [_TWO_OVER_SQRT_PI * 2 ** n / math.prod(range(1, 2 * n + 2, 2)) for n in range(98)]
_SIGNED_OF_SIZE = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}


def _odd_series(x: Tensor, coefficients: list[float], dtype: DType) -> Tensor:
    """x * (c0 + c1 x^2 + c2 x^4 + ...) by Horner's rule, to the precision of dtype (|x| <= 1/2)."""
    coefficients = coefficients[:None if dtype == dtypes.float64 else 12]
    x2, acc = x * x, coefficients[-1]
    for c in reversed(coefficients[:-1]):
        acc = x2 * acc + c
    return x * acc


def has_float64(device) -> bool:
    return dtypes.float64 in Device[device].renderer.supported_dtypes     # (a sharded tensor's: its first device's)


def in_float32(method, float64=False):
    """A method that loses its digits, or overflows, in 16-bit floats: those compute in float32 and round once. With
    float64, float32 (and integers) compute in float64 where the device has it, as PyTorch's var and std on CPU."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self.dtype in (dtypes.float16, dtypes.bfloat16):     # (rounded to self's dtype promoted with its operands')
            out = least_upper_dtype(self.dtype, *(a.dtype for a in args if isinstance(a, type(self))))
            return method(self.float(), *args, **kwargs).cast(out)
        if float64 and self.dtype != dtypes.float64 and has_float64(self.device):
            return method(self.double(), *args, **kwargs).float()
        return method(self, *args, **kwargs)
    return wrapper


class ElementwiseOps:
    # ---- unary math ----
    def neg(self) -> Tensor:
        return self.logical_not() if self.dtype == dtypes.bool else self._unary(Ops.NEG)

    def exp2(self) -> Tensor: return self._float()._unary(Ops.EXP2)               # noqa: E704
    def log2(self) -> Tensor: return self._float()._unary(Ops.LOG2)               # noqa: E704
    def log(self) -> Tensor: return composite("log", self._float(), value=lambda x: x.log2() * math.log(2))  # noqa
    def log10(self) -> Tensor: return self._float().log2().mul(math.log10(2))     # noqa: E704
    def sin(self) -> Tensor: return self._float()._unary(Ops.SIN)                 # noqa: E704
    def tan(self) -> Tensor: return _smooth(self, "tan", lambda x: x.sin() / x.cos())  # noqa: E704

    # (in float32, as every _smooth: 16-bit floats hold too few bits of ln 2 below)
    def exp(self) -> Tensor: return _smooth(self, "exp", _exp)                   # noqa: E704

    @functools.partial(in_float32, float64=True)     # (1 - 2 sin^2(x/2) cancels near cos's zeros: 1e-7 off)
    def cos(self) -> Tensor: return type(self)(cos_uop(self._float().uop))          # noqa: E704

    def asin(self) -> Tensor: return _smooth(self, "asin", _asin)                  # noqa: E704
    def acos(self) -> Tensor: return _smooth(self, "acos", _acos)                  # noqa: E704
    def atan(self) -> Tensor: return _smooth(self, "atan", _atan)                  # noqa: E704
    def sinh(self) -> Tensor: return _smooth(self, "sinh", _sinh)                  # noqa: E704
    def cosh(self) -> Tensor: return _smooth(self, "cosh", lambda x: _half_exp(x) + _half_exp(-x))  # noqa: E704
    def asinh(self) -> Tensor: return _smooth(self, "asinh", _asinh)               # noqa: E704
    def acosh(self) -> Tensor: return _smooth(self, "acosh", _acosh)               # noqa: E704
    def atanh(self) -> Tensor: return _smooth(self, "atanh", _atanh)               # noqa: E704
    def copysign(self, other) -> Tensor:
        """|self| with the sign of other (the sign bit: -0.0 counts as negative), as torch.copysign."""
        a, b = (t._float() for t in self._to_operand(other))      # (promoted first: int8 with float16 is float16)
        value = lambda a, b: (b.bitcast(_SIGNED_OF_SIZE[b.dtype.itemsize]) < 0).where(-a.abs(), a.abs())  # noqa: E731
        return composite("copysign", a, b, value=value)

    @in_float32                      # (exact in float32, and a remainder of 16-bit floats fits their type)
    def fmod(self, x) -> Tensor:
        """Remainder with the sign of the dividend, exact as C's fmod (% follows the divisor as Python's does)."""
        a, b = self._to_operand(x)
        return composite("fmod", a, b, value=_fmod) if dtypes.is_float(a.dtype) else a.mod_trunc(b)

    def logaddexp(self, other) -> Tensor:
        """log(e^a + e^b) as max + log1p(e^-|a - b|) (its gradient PyTorch's: through the composition, log1p's
        unchosen branch divides by zero where e^-|a - b| is 0 next to 1)."""
        def value(a, b):
            m = a.maximum(b)
            out = m + _log1p((-(a - b).abs()).exp())
            return (m.isinf() & (a == b)).where(m, out)      # inf - inf would be NaN: equal infinities are themselves
        a, b = (t._float() for t in self._to_operand(other))
        return composite("logaddexp", a, b, value=value)
    def sqrt(self) -> Tensor: return self._float()._unary(Ops.SQRT)               # noqa: E704
    def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()                    # noqa: E704
    def reciprocal(self) -> Tensor: return self._float()._unary(Ops.RECIP)        # noqa: E704
    def trunc(self) -> Tensor: return self if not dtypes.is_float(self.dtype) else self._unary(Ops.TRUNC)  # noqa
    def square(self) -> Tensor:
        return _smooth(self, "square", lambda x: x * x) if dtypes.is_float(self.dtype) else self * self

    def floor(self) -> Tensor:
        t = self.trunc()
        return (self < t).where(t - 1, t) if dtypes.is_float(self.dtype) else self

    def ceil(self) -> Tensor:
        t = self.trunc()
        return (self > t).where(t + 1, t) if dtypes.is_float(self.dtype) else self

    def round(self) -> Tensor:
        """Round half to even, as numpy and PyTorch do."""
        if not dtypes.is_float(self.dtype):
            return self
        b = self.trunc()
        frac = self - b
        half_even = ((b * 0.5).trunc() * 2 == b)
        up = (frac.abs() > 0.5) | ((frac.abs() == 0.5) & half_even.logical_not())
        return up.where(b + self.sign(), b)

    def abs(self) -> Tensor:
        if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype):
            return self
        if not dtypes.is_float(self.dtype):
            return (self < 0).where(-self, self)
        return composite("abs", self, value=lambda x: (x <= 0).where(0.0 - x, x))      # (+0.0 for -0.0)

    def sign(self) -> Tensor:
        return (self < 0).where(-1, (self > 0).where(1, 0)).cast(self.dtype) if self.dtype != dtypes.bool else self

    def relu(self) -> Tensor:
        # as PyTorch's: NaN and -0.0 stay as they are (and the gradient at 0 is 0: a rule of its own)
        relu = lambda x: (x < 0).where(0, x).cast(x.dtype)      # noqa: E731
        return composite("relu", self, value=relu) if dtypes.is_float(self.dtype) else relu(self)

    def sigmoid(self) -> Tensor:
        # 1 / (1 + e^-x), with the derivative s (1 - s): through the composition, a saturated e^-x = inf meets a zero
        # gradient and makes NaN
        return composite("sigmoid", self._float(), value=lambda x: (1 + (x * (-1 / math.log(2))).exp2()).reciprocal())

    # (in float32, as every _smooth: 2 sigmoid(2x) - 1 in 16 bits: tanh(1e-3) was 2.4% off)
    def tanh(self) -> Tensor:
        return _smooth(self, "tanh", _tanh)

    def leakyrelu(self, neg_slope: float = 0.01) -> Tensor: return (self > 0).where(self, self * neg_slope)  # noqa

    leaky_relu = leakyrelu

    # the exp branch sees 0 where it isn't taken (e^1e7 = inf would meet its zero gradient as 0 * inf = NaN); NaN
    # takes the linear piece, as in PyTorch (on tensors short enough for its scalar loop)
    @in_float32         # (in 16 bits, (u - 1) x below is subnormal near 0; computed in float32, rounded once)
    def elu(self, alpha: float = 1.0) -> Tensor:
        return (self <= 0).where(alpha * _smooth((self <= 0).where(self, 0), "exp", _expm1), self)

    def celu(self, alpha: float = 1.0) -> Tensor:
        return (self <= 0).where((self / alpha).elu() * alpha, self)

    def selu(self, alpha=1.6732632423543772, gamma=1.0507009873554805) -> Tensor:    # (PyTorch's constants)
        return gamma * self.elu(alpha)

    # (in float32, as every _smooth and as PyTorch's; x^3 overflows 16 bits)
    def gelu(self, approximate: str = "tanh") -> Tensor:
        """GELU; approximate="tanh" (tinygrad's default) or "none" (the erf form, PyTorch's default), x times a
        normal CDF. PyTorch's derivatives: through the composition, an inf gradient met the saturated tanh's or erf's 0
        as NaN"""
        if approximate not in ("tanh", "none"):
            raise ValueError(f"gelu approximate must be 'tanh' or 'none', got {approximate!r}")
        c = math.sqrt(2 / math.pi)
        cdf = (lambda x: 0.5 * (1 + (c * (x + 0.044715 * x * x * x)).tanh())) if approximate == "tanh" else \
            (lambda x: 0.5 * (1 + (x * 0.5 ** 0.5).erf()))
        return _smooth(self, "gelu", lambda x: x * cdf(x), cdf=cdf, approximate=approximate)

    def quick_gelu(self) -> Tensor: return self * (self * 1.702).sigmoid()           # noqa: E704

    # (in float32, as every _smooth: a 16-bit sigmoid underflows where x * sigmoid(x)'s derivative doesn't)
    def silu(self) -> Tensor:
        return _smooth(self, "silu", lambda x: x * x.sigmoid())

    swish = silu

    # the piecewise-linear activations select their pieces (a difference of relus loses the clamp past 1e18), and
    # their gradients are 0 at the corners, as PyTorch's
    def relu6(self) -> Tensor: return self.hardtanh(0, 6)                            # noqa: E704

    @in_float32                      # (as PyTorch's: x * 6 would overflow 16 bits)
    def hardswish(self) -> Tensor:
        # PyTorch's x relu6(x + 3) / 6 (whose x * 6 overflows past 5.7e37) and derivative
        x = self._float()
        return (x <= -3).where(x.detach() * 0, composite("hardswish", x, value=lambda x: x * (x + 3).relu6() / 6))

    def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
        return (alpha * self + beta).hardtanh(0, 1)

    # (in float32, as every _smooth and as PyTorch's: b x overflows 16 bits, and e^-|bx| goes subnormal in them)
    def softplus(self, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
        # log(1 + e^(bx)) / b as bx+ + log1p(e^-|bx|) (no overflow; log(1 + y) alone loses y: softplus(-88) was 0,
        # not 6e-39), and x itself past bx > threshold, as PyTorch's (b x / b overflowed at x = 3e38, b = 2)
        def value(x):
            soft = ((x * beta).maximum(0) + _log1p((-(x * beta).abs()).exp())) * (1 / beta)
            return (x * beta > threshold).where(x, soft)
        return _smooth(self, "softplus", value, beta=beta, threshold=threshold)

    def mish(self) -> Tensor:
        # PyTorch's derivative: through the composition, x = -3.4e38 met softplus's e^x = 0 as inf * 0 = NaN
        return _smooth(self, "mish", lambda x: x * x.softplus().tanh())

    def softsign(self) -> Tensor: return self / (1 + self.abs())                     # noqa: E704

    def hardtanh(self, min_val: float = -1, max_val: float = 1) -> Tensor:
        # clip (-0.0 stays -0.0 at a bound of 0) detached at the bounds: PyTorch's derivative is 1 strictly between
        # them, 0 at NaN (its vector loop's answer, and its clamp's; the scalar loop it runs on the last few elements
        # of a row gives 1 at NaN)
        return ((self == min_val) | (self == max_val)).where(self.detach(), self).clip(min_val, max_val)

    def logsigmoid(self) -> Tensor:
        return 0 - (-self).softplus()        # (+0.0 at +inf and 1e30, as PyTorch's, not -0.0)

    def clip(self, min_=None, max_=None) -> Tensor:
        """Values below min_ become min_, above max_ become max_ (max_ wins if min_ > max_); NaN stays NaN, and the
        gradient is 1 up to and at the bounds (0 at NaN), as in PyTorch."""
        if min_ is None and max_ is None:
            raise RuntimeError("clip needs at least one of min_ and max_")
        out = self if min_ is None else (self < min_).where(min_, self)
        out = out if max_ is None else (out > max_).where(max_, out)
        # a float tensor or NaN bound: NaN where the bound is, as PyTorch's (None != None is False)
        nan_bound = dtypes.is_float(out.dtype) and any(isinstance(b, type(self)) or b != b for b in (min_, max_))
        nan = self.isnan() | (min_ != min_) | (max_ != max_) if nan_bound else self.isnan()
        return nan.where(math.nan if nan_bound else self.detach(), out)

    clamp = clip

    # (in float32, as every _smooth: 1 - poly * e^-x^2 cancels in 16 bits)
    def erf(self) -> Tensor:
        return _smooth(self, "erf", _erf)

    @in_float32                      # (end - self may not fit 16 bits)
    def lerp(self, end: Tensor, weight) -> Tensor:
        # PyTorch's form, start + diff w, or end - diff (1 - w) where |weight| >= 1/2 (so both ends are exact), with the
        # branch taken in the base and in the factor: a branch's own product met where's zero gradient as 0 * inf = NaN
        def value(start, end, w):
            return (small := w.abs() < 0.5).where(start, end) + (end - start) * small.where(w, -(1 - w))
        start, end = self._to_operand(end)
        start, w = start._to_operand(weight)
        shape = broadcast_shape(start.shape, end.shape, w.shape)
        start, end, w = (t._broadcast_to(shape) for t in (start, end, w))
        return composite("lerp", start, end, w, value=value)


def _acos_near_one(y: Tensor) -> Tensor:
    """acos(y) = 2 asin(sqrt((1 - y) / 2)) for y >= 1/2, the series' argument <= 1/2: 1 - y keeps acos(1 - tiny)'s
    digits."""
    return 2 * _odd_series(((1 - y) * 0.5).sqrt(), _ASIN_TAYLOR, y.dtype)


def _asin(x: Tensor) -> Tensor:
    # |x| <= 1/2 by a series; beyond, asin(x) = pi/2 - acos(|x|)
    a = x.abs()
    big = (math.pi / 2 - _acos_near_one(a)).mul(x.sign())
    return (a <= 0.5).where(_odd_series(x, _ASIN_TAYLOR, x.dtype), (a <= 1).where(big, math.nan))


def _acos(x: Tensor) -> Tensor:
    # near +-1 from the half-angle form directly (acos(x) = pi - acos(-x)), so acos(1 - tiny) keeps its digits
    return (x > 0.5).where(_acos_near_one(x), (x < -0.5).where(math.pi - _acos_near_one(-x), math.pi / 2 - x.asin()))


def _atan(x: Tensor) -> Tensor:
    a = x.abs()
    t = (a > 1).where(1 / a, a)                      # atan(a) = pi/2 - atan(1/a) for a > 1
    small = (t * (1 + t * t).rsqrt()).asin()
    return (a > 1).where(math.pi / 2 - small, small).copysign(x)        # (-0.0 keeps its sign: x.sign() is 0 there)


def _exp(x: Tensor) -> Tensor:
    # 2^n e^r with r = x - n ln 2 exact in two parts: 2^(x / ln 2) rounded x / ln 2 (e^8.06 was 5 ulps off). Its own
    # derivative, not ln 2 (exp2's) times 1 / ln 2, which isn't 1 in floats: log_softmax's gradient didn't cancel to 0
    (ebits, mbits), bias = dtypes.finfo(x.dtype), (1 << dtypes.finfo(x.dtype)[0] - 1) - 1
    hi = round(math.log(2) * 2 ** (mbits + 2 - ebits)) / 2 ** (mbits + 2 - ebits)   # (n hi is exact: |n| <= bias)
    n = (x * (1 / math.log(2))).trunc().maximum(1 - bias).minimum(bias)
    r = x - n * hi - n * (math.log(2) - hi + 2.3190468138462996e-17)   # (+ the bits of ln 2 that float64 rounds off)
    return (r * (1 / math.log(2))).exp2() * n.exp2()       # (2^n of a whole n is exact)


def _half_exp(x: Tensor) -> Tensor:
    # e^x / 2 as e^(x/2) (e^(x/2) / 2): finite as long as cosh is (e^(x - ln 2) rounded x - ln 2: 250 ulps at 600)
    return (x * 0.5).exp() * ((x * 0.5).exp() * 0.5)


def _sinh(x: Tensor) -> Tensor:
    return (x.abs() < 0.5).where(_odd_series(x, _SINH_TAYLOR, x.dtype), _half_exp(x) - _half_exp(-x))


def _asinh(x: Tensor) -> Tensor:
    a = x.abs()
    # large |x|: log(2|x|) (x*x would overflow); small: the series (log(1 + tiny) loses the digits)
    wide = (a > 1e4).where(a.log() + math.log(2), (a + (a * a + 1).sqrt()).log())
    series = _odd_series(a, [(-1) ** n * c for n, c in enumerate(_ASIN_TAYLOR)], x.dtype)
    return (a < 0.1).where(series, wide).copysign(x)


def _acosh(x: Tensor) -> Tensor:
    wide = (x > 1e4).where(x.log() + math.log(2), (x + (x * x - 1).sqrt()).log())   # (x*x would overflow)
    return (x < 1).where(math.nan, wide)


def _atanh(x: Tensor) -> Tensor:
    series = _odd_series(x, [1 / (2 * n + 1) for n in range(len(_ASIN_TAYLOR))], x.dtype)
    return (x.abs() < 0.1).where(series, ((1 + x) / (1 - x)).log() * 0.5)


def _tanh(x: Tensor) -> Tensor:
    # near 0, sinh / cosh from sinh's series: 2 sigmoid(2x) - 1 cancels (tanh(2e-4) was 1.7e-4 off, tanh(1e-10) 0)
    s = _odd_series(x, _SINH_TAYLOR, x.dtype)
    return (x.abs() < 0.5).where(s / (1 + s * s).sqrt(), 2.0 * (2.0 * x).sigmoid() - 1.0)


def _erf(x: Tensor) -> Tensor:
    if x.dtype == dtypes.float64:    # a series of positive terms (no cancellation), to |x| = 6, past which erf is +-1
        c = x.maximum(-6).minimum(6)
        return (x.abs() >= 6).where(x.sign(), _odd_series(c, _ERF_POSITIVE, x.dtype) * (-(c * c)).exp())
    # near 0 the Taylor series (the fit below has an absolute error of 1.5e-7, too much for erf(1e-6)); beyond,
    # Abramowitz and Stegun 7.1.26
    t = 1.0 / (1.0 + 0.3275911 * x.abs())
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return (x.abs() < 0.5).where(_odd_series(x, _ERF_TAYLOR, x.dtype), x.sign() * (1.0 - poly * (-(x * x)).exp()))


def _mantissa_exponent(x: Tensor) -> tuple[Tensor, Tensor]:
    """A finite |x| as m * 2^e, the int64s m < 2^(mantissa bits + 1) and e (a subnormal's e is the normal minimum)."""
    ebits, mbits = dtypes.finfo(x.dtype)
    bits = x.abs().bitcast(_SIGNED_OF_SIZE[x.dtype.itemsize]).cast(dtypes.int64)
    field, m = bits >> mbits, bits & ((1 << mbits) - 1)
    return (field > 0).where(m | (1 << mbits), m), field.maximum(1) - ((1 << ebits - 1) - 1 + mbits)


def _mulmod(x: Tensor, y: Tensor, m: Tensor, wide: bool) -> Tensor:
    """x * y mod m for int64s 0 <= x, y < m. Products of 24 bits fit int64; of 53-bit ones (wide), the quotient comes
    from float64 (off by 3 at most) and the remainder from uint64 arithmetic, which wraps to the exact one."""
    if not wide:
        return (x * y).mod_trunc(m)
    x, y, m = x.cast(dtypes.uint64), y.cast(dtypes.uint64), m.cast(dtypes.uint64)
    q = (x.cast(dtypes.float64) * y.cast(dtypes.float64) / m.cast(dtypes.float64)).cast(dtypes.uint64)
    return (x * y + m * 4 - q * m).mod_trunc(m).cast(dtypes.int64)


def _fmod(a: Tensor, b: Tensor) -> Tensor:
    # with |a| = ma 2^ea and |b| = mb 2^eb, |fmod| = (ma 2^(ea - eb) mod mb) 2^eb: 2^(ea - eb) mod mb by squaring
    (ma, ea), (mb, eb) = _mantissa_exponent(a), _mantissa_exponent(b)
    ebits, mbits = dtypes.finfo(a.dtype)
    mb, d, p = mb.maximum(1), ea - eb, ea * 0 + 1
    for bit in reversed(range(ebits)):                  # (ea - eb < 2^ebits)
        p = _mulmod(p, p, mb, mbits > 24) << ((d >> bit) & 1)
        p = (p >= mb).where(p - mb, p)
    r = _mulmod(ma.mod_trunc(mb), p, mb, mbits > 24).cast(a.dtype)
    # r 2^eb in two exact products: r 2^-mbits and 2^(eb + mbits) are normal floats, and r 2^eb is representable;
    # 2^(eb + mbits) exactly, made from its bits (the biased exponent shifted into place)
    scale = ((eb + mbits + (1 << ebits - 1) - 1) << mbits).cast(_SIGNED_OF_SIZE[a.dtype.itemsize]).bitcast(a.dtype)
    r = r * 2.0 ** -mbits * scale
    return (a.abs() < b.abs()).where(a, (a.isfinite() & b.isfinite() & (b != 0)).where((a < 0).where(-r, r), math.nan))


def _log1p(y: Tensor) -> Tensor:
    """log(1 + y) without losing a small y to the rounding of 1 + y (log(1 + 1e-7) in float32 is 1.19e-7, log(1 + 1e-9)
    is 0): Goldberg's log(u) y / (u - 1), with u = 1 + y as rounded."""
    u = 1 + y
    return (u == 1).where(y, u.log() * y / (u - 1))


def _expm1(x: Tensor) -> Tensor:
    """e^x - 1 for x <= 0 without the cancellation near 0 (-1e-10 gave 0, -1e-5 was 0.14% off): Kahan's
    (u - 1) x / log u, with u = e^x as rounded, is within a few ulp. (Below -1 nothing cancels, and a subnormal u's
    log would cost digits.)"""
    u = x.exp()
    return (u == 1).where(x, (x < -1).where(u - 1, (u - 1) * x / u.log()))


@in_float32                      # (16-bit floats overflow inside, or lose digits: asinh's x * x past 256)
def _smooth(x: Tensor, rule: str, value, **args) -> Tensor:
    return composite(rule, x._float(), value=value, **args)

