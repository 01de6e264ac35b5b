"""Small functions the CPU renderer adds to a kernel's LLVM module: bfloat16 rounding and the transcendentals.

float32 exp2/log2/sin are written out here as branch-free polynomials, so LLVM inlines and vectorises them (a
libm call per element would keep a loop scalar); float64 calls libm through LLVM's intrinsics."""
from __future__ import annotations
import math
import struct
import numpy as np

BF16_ROUND = "tg_bf16_round"     # float -> the nearest bfloat16 value (ties to even), still as a float
BF16_BITS = "tg_bf16_bits"       # float -> its bfloat16 bits (NaN becomes the quiet NaN 0x7FC0, as in the reference)
F64_TO_F16 = "tg_f64_to_f16"     # double -> the nearest half (ties to even), without a compiler-rt call
EXP2, LOG2, SIN = "tg_exp2_f32", "tg_log2_f32", "tg_sin_f32"

_BF16_BODY = """
  %bits = bitcast float %x to i32
  %odd = and i32 %bits, 65536
  %half_ulp = lshr i32 %odd, 16
  %bias = add i32 %half_ulp, 32767
  %rounded = add i32 %bits, %bias
  %kept = and i32 %rounded, -65536
  %is_nan = fcmp uno float %x, 0.0
  %out = select i1 %is_nan, i32 2143289344, i32 %kept"""

HELPERS = {
    BF16_ROUND: f"""define internal float @{BF16_ROUND}(float %x) alwaysinline nounwind readnone {{{_BF16_BODY}
  %f = bitcast i32 %out to float
  ret float %f
}}""",
    BF16_BITS: f"""define internal i16 @{BF16_BITS}(float %x) alwaysinline nounwind readnone {{{_BF16_BODY}
  %high = lshr i32 %out, 16
  %b = trunc i32 %high to i16
  ret i16 %b
}}""",
}


# LLVM lowers `fptrunc double to half` to a call of compiler-rt's __truncdfhf2, which the JIT can't find in the
# process. Going through float instead rounds twice, which is wrong near halfway points (1 + 2**-11 + 2**-40 would
# give 1.0), unless the first step rounds to odd: truncate, then set the last bit if anything was cut off. float keeps
# 24 bits, more than half's 11 + 2, so the second rounding then sees the halfway point exactly where the double was.
HELPERS[F64_TO_F16] = f"""define internal half @{F64_TO_F16}(double %x) alwaysinline nounwind readnone {{
  %nearest = fptrunc double %x to float
  %back = fpext float %nearest to double
  %inexact = fcmp one double %back, %x
  %abs_back = call double @llvm.fabs.f64(double %back)
  %abs_x = call double @llvm.fabs.f64(double %x)
  %rounded_up = fcmp ogt double %abs_back, %abs_x
  ; one step toward zero in the bit pattern (the sign is apart) gives the truncation; NaN and inf stay as they are
  %bits = bitcast float %nearest to i32
  %step = zext i1 %rounded_up to i32
  %truncated = sub i32 %bits, %step
  %sticky = zext i1 %inexact to i32
  %odd = or i32 %truncated, %sticky
  %f = bitcast i32 %odd to float
  %h = fptrunc float %f to half
  ret half %h
}}"""


def _f32(value: float) -> str:
    """A float constant as LLVM IR writes it: the double pattern of the (exactly representable) float32 value."""
    return "0x" + struct.pack(">d", float(np.float32(value))).hex().upper()


def _f64(value: float) -> str:
    return "0x" + struct.pack(">d", value).hex().upper()


def _horner(name: str, variable: str, coefficients: list[float], ty: str = "float") -> str:
    """IR lines computing %name = c0 + v*(c1 + v*(c2 + ...)) (contract: LLVM may fuse them into FMAs)."""
    literal = _f32 if ty == "float" else _f64
    lines, acc = [], literal(coefficients[-1])
    for i, c in enumerate(reversed(coefficients[:-1])):
        lines.append(f"  %{name}.m{i} = fmul contract {ty} {acc}, {variable}")
        lines.append(f"  %{name}.a{i} = fadd contract {ty} %{name}.m{i}, {literal(c)}")
        acc = f"%{name}.a{i}"
    lines.append(f"  %{name} = fadd {ty} {acc}, 0.0")
    return "\n".join(lines)


# 2**f = exp(f ln 2) on |f| <= 0.5: the Taylor series to degree 7 leaves a relative error of 5e-9 (< 0.1 ulp)
EXP2_COEFFICIENTS = [math.log(2) ** k / math.factorial(k) for k in range(8)]
# log2(m) = 2/ln2 * atanh(s), s = (m-1)/(m+1), |s| <= 0.172 for m in [sqrt(1/2), sqrt(2)]: odd series to s**9
LOG2_COEFFICIENTS = [2 / math.log(2) / (2 * k + 1) for k in range(5)]
# sin and cos on |r| <= pi/4, in double: the Taylor series to r**11 and r**12 leave less than 1e-11, so the float
# result is rounded once from a value within 2**-30 of its own size (within about half an ulp)
SIN_COEFFICIENTS = [(-1) ** (k + 1) / math.factorial(2 * k + 3) for k in range(5)]
COS_COEFFICIENTS = [(-1) ** k / math.factorial(2 * k + 4) for k in range(5)]

HELPERS[EXP2] = f"""define internal float @{EXP2}(float %x) alwaysinline nounwind readnone {{
  ; clamp to where the result is 0 or inf anyway (NaN is put back at the end), split x = n + f, |f| <= 0.5
  %low = fcmp olt float %x, -151.0
  %x1 = select i1 %low, float -151.0, float %x
  %high = fcmp ogt float %x1, 129.0
  %x2 = select i1 %high, float 129.0, float %x1
  %is_nan = fcmp uno float %x, 0.0
  %c = select i1 %is_nan, float 0.0, float %x2
  %n = call float @llvm.rint.f32(float %c)
  %f = fsub float %c, %n
{_horner("p", "%f", EXP2_COEFFICIENTS)}
  ; scale by 2**n in two steps, 2**(n/2) each, so that n = 128 and subnormal results (n < -126) come out right
  %ni = fptosi float %n to i32
  %n1 = ashr i32 %ni, 1
  %n2 = sub i32 %ni, %n1
  %e1 = add i32 %n1, 127
  %b1 = shl i32 %e1, 23
  %s1 = bitcast i32 %b1 to float
  %e2 = add i32 %n2, 127
  %b2 = shl i32 %e2, 23
  %s2 = bitcast i32 %b2 to float
  %r1 = fmul float %p, %s1
  %r2 = fmul float %r1, %s2
  %out = select i1 %is_nan, float %x, float %r2
  ret float %out
}}"""

HELPERS[LOG2] = f"""define internal float @{LOG2}(float %x) alwaysinline nounwind readnone {{
  ; subnormal inputs are scaled by 2**23 first, so every input has a full mantissa
  %small = fcmp olt float %x, {_f32(2.0 ** -126)}
  %scaled = fmul float %x, {_f32(2.0 ** 23)}
  %y = select i1 %small, float %scaled, float %x
  %bias = select i1 %small, i32 150, i32 127
  %bits = bitcast float %y to i32
  %exponent_bits = lshr i32 %bits, 23
  %exponent_field = and i32 %exponent_bits, 255
  %mantissa_bits = and i32 %bits, 8388607
  %m_bits = or i32 %mantissa_bits, 1065353216
  %m0 = bitcast i32 %m_bits to float
  ; m in [sqrt(1/2), sqrt(2)): the series converges fastest around 1
  %big = fcmp ogt float %m0, {_f32(math.sqrt(2))}
  %m_half = fmul float %m0, 0.5
  %m = select i1 %big, float %m_half, float %m0
  %e0 = sub i32 %exponent_field, %bias
  %carry = zext i1 %big to i32
  %e = add i32 %e0, %carry
  ; the series in double: the float result is then rounded once (within about half an ulp)
  %ef = sitofp i32 %e to double
  %md = fpext float %m to double
  %num = fsub double %md, 1.0
  %den = fadd double %md, 1.0
  %s = fdiv double %num, %den
  %s2 = fmul double %s, %s
{_horner("p", "%s2", LOG2_COEFFICIENTS, "double")}
  %log_m = fmul double %s, %p
  %rd = fadd double %ef, %log_m
  %r = fptrunc double %rd to float
  ; log2(0) = -inf, log2(negative or NaN) = NaN, log2(inf) = inf
  %is_zero = fcmp oeq float %x, 0.0
  %r1 = select i1 %is_zero, float 0xFFF0000000000000, float %r
  %is_inf = fcmp oeq float %x, 0x7FF0000000000000
  %r2 = select i1 %is_inf, float %x, float %r1
  %is_nan = fcmp ult float %x, 0.0
  %out = select i1 %is_nan, float 0x7FF8000000000000, float %r2
  ret float %out
}}"""

# Range reduction for sin (Payne-Hanek, in integers): |x| = m * 2**(e - 150) with a 24-bit integer m, and only the
# bits of 2/pi from 2**-(e - 151) on matter to x * 2/pi mod 4 (the earlier ones give multiples of 4). A window of 96
# of them times m leaves an error below 2**-70 quadrants, while no float32 lies closer than about 2**-29 quadrants
# to a multiple of pi/2: every finite input keeps its full 24 bits. The window is shifted out of constants rather than
# looked up in a table (a gather per lane would cost more than the rest of sin): G holds 2/pi's bits 1 .. 230 in
# five 64-bit words, and the 128 bits from bit e - 151 on are words k+2, k+1, k of G shifted right by t, where
# 254 - e = 64k + t.
TWO_OVER_PI_BITS = 0xA2F9836E4E441529FC2757D1F534DDC0DB6295993C439041FE5163ABDEBBC561    # floor(2/pi * 2**256)
SIN_FIRST_EXPONENT, SIN_LAST_EXPONENT = 115, 254       # 2**-12 <= |x|: below, sin(x) = x; above, inf or NaN
_G = [(TWO_OVER_PI_BITS >> 26 >> (64 * k)) % (1 << 64) for k in range(5)]     # floor(2/pi * 2**230), word k
_I64 = [w - (1 << 64) if w >= 1 << 63 else w for w in _G]                       # as IR's signed literals


def _sin_window_word(name: str, first: int) -> str:
    """IR choosing word first + k of G for %segment = k (0, 1 or 2)."""
    return (f"  %{name}.1 = select i1 %segment_is_0, i64 {_I64[first]}, i64 {_I64[first + 1]}\n"
            f"  %{name} = select i1 %segment_is_2, i64 {_I64[first + 2]}, i64 %{name}.1")


HELPERS[SIN] = f"""define internal float @{SIN}(float %x) alwaysinline nounwind readnone {{
  %bits = bitcast float %x to i32
  %abs_bits = and i32 %bits, 2147483647
  %exponent = lshr i32 %abs_bits, 23
  ; tiny, inf and NaN lanes reduce some other exponent and are replaced at the end (branch-free: it vectorises)
  %below = icmp ult i32 %exponent, {SIN_FIRST_EXPONENT}
  %e1 = select i1 %below, i32 {SIN_FIRST_EXPONENT}, i32 %exponent
  %above = icmp ugt i32 %e1, {SIN_LAST_EXPONENT}
  %e2 = select i1 %above, i32 {SIN_LAST_EXPONENT}, i32 %e1
  %distance = sub i32 {SIN_LAST_EXPONENT}, %e2
  %segment = lshr i32 %distance, 6
  %segment_is_0 = icmp eq i32 %segment, 0
  %segment_is_2 = icmp eq i32 %segment, 2
  %shift32 = and i32 %distance, 63
  %shift = zext i32 %shift32 to i64
{_sin_window_word("g0", 0)}
{_sin_window_word("g1", 1)}
{_sin_window_word("g2", 2)}
  %window_high = call i64 @llvm.fshr.i64(i64 %g2, i64 %g1, i64 %shift)
  %window_rest = call i64 @llvm.fshr.i64(i64 %g1, i64 %g0, i64 %shift)
  %window_low = lshr i64 %window_rest, 32
  ; m * window mod 2**96 from three 24 x 32-bit products; h is its top 64 bits: |x| * 2/pi mod 4 = h / 2**62
  %fraction_bits = and i32 %abs_bits, 8388607
  %m32 = or i32 %fraction_bits, 8388608
  %m = zext i32 %m32 to i64
  %w0 = lshr i64 %window_high, 32
  %w1 = and i64 %window_high, 4294967295
  %p0 = mul nuw i64 %m, %w0
  %p1 = mul nuw i64 %m, %w1
  %p2 = mul nuw i64 %m, %window_low
  %p0_up = shl i64 %p0, 32
  %p2_down = lshr i64 %p2, 32
  %h0 = add i64 %p0_up, %p1
  %h = add i64 %h0, %p2_down
  ; the nearest quadrant, and what is left as a signed 64-bit fraction of a quadrant (the two bits shifted out at
  ; the top are the quadrant; the two shifted in at the bottom come from the product's low word)
  %h_rounded = add i64 %h, 2305843009213693952
  %quadrant64 = lshr i64 %h_rounded, 62
  %quadrant = trunc i64 %quadrant64 to i32
  %f0 = shl i64 %h, 2
  %p2_bits = lshr i64 %p2, 30
  %f1 = and i64 %p2_bits, 3
  %f = or i64 %f0, %f1
  %fd = sitofp i64 %f to double
  %r = fmul double %fd, {_f64(math.pi / 2 * 2.0 ** -64)}
  %z = fmul double %r, %r
{_horner("sp", "%z", SIN_COEFFICIENTS, "double")}
  %rz = fmul double %r, %z
  %sin_tail = fmul contract double %rz, %sp
  %sin_r = fadd contract double %r, %sin_tail
{_horner("cp", "%z", COS_COEFFICIENTS, "double")}
  %zz = fmul double %z, %z
  %half_z = fmul double %z, 0.5
  %cos_head = fsub double 1.0, %half_z
  %cos_tail = fmul contract double %zz, %cp
  %cos_r = fadd contract double %cos_head, %cos_tail
  ; quadrant 0: sin r, 1: cos r, 2: -sin r, 3: -cos r; then sin(-x) = -sin(x)
  %odd_bit = and i32 %quadrant, 1
  %odd = icmp ne i32 %odd_bit, 0
  %v_wide = select i1 %odd, double %cos_r, double %sin_r
  %v = fptrunc double %v_wide to float
  %v_bits = bitcast float %v to i32
  %quadrant_sign = shl i32 %quadrant, 30
  %sign0 = xor i32 %quadrant_sign, %bits
  %sign = and i32 %sign0, -2147483648
  %signed_bits = xor i32 %v_bits, %sign
  %signed = bitcast i32 %signed_bits to float
  ; sin(x) = x below 2**-12 (this also keeps the sign of -0.0); sin(inf) and sin(NaN) are NaN
  %near_zero = select i1 %below, float %x, float %signed
  %finite = icmp ult i32 %exponent, 255
  %out = select i1 %finite, float %near_zero, float 0x7FF8000000000000
  ret float %out
}}"""

# the LLVM intrinsics each helper calls
HELPER_DECLARATIONS = {
    EXP2: ["declare float @llvm.rint.f32(float)"],
    LOG2: [],
    SIN: ["declare i64 @llvm.fshr.i64(i64, i64, i64)"],
    BF16_ROUND: [], BF16_BITS: [], F64_TO_F16: ["declare double @llvm.fabs.f64(double)"],
}
FLOAT32_HELPERS = {"exp2": EXP2, "log2": LOG2, "sin": SIN}


def render(writer, name: str, ty: str, x: str) -> str:
    """Emit `name(x)` (exp2, log2, sin or sqrt) for a value of IR type ty; returns the result's IR name.
    float32 (and bfloat16, computed as float32) uses the helpers above; float16 goes through them in float32 and
    rounds once at the end; float64 and sqrt use LLVM's intrinsics (sqrt is an instruction)."""
    if name == "sqrt" or ty == "double":
        return writer.intrinsic(name, ty, x)
    if ty == "half":
        wide = writer.emit(f"fpext half {x} to float")
        return writer.emit(f"fptrunc float {render(writer, name, 'float', wide)} to half")
    return writer.call("float", FLOAT32_HELPERS[name], [("float", x)])
