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
# sin and cos on |r| <= pi/4 (Cephes' single-precision minimax coefficients)
SIN_COEFFICIENTS = [-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4]
COS_COEFFICIENTS = [4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5]

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

HELPERS[SIN] = f"""define internal float @{SIN}(float %x) alwaysinline nounwind readnone {{
  %ax = call float @llvm.fabs.f32(float %x)
  %finite = fcmp olt float %ax, 0x7FF0000000000000
  %tiny = fcmp olt float %ax, {_f32(2.0 ** -12)}
  %xs = select i1 %finite, float %x, float 0.0
  ; reduce in double: r = x - k*pi/2 (pi/2 in two parts, so k*pi/2 is exact for any k a float32 input gives)
  %xd = fpext float %xs to double
  %k0 = fmul double %xd, {_f64(2 / math.pi)}
  %k = call double @llvm.rint.f64(double %k0)
  %t1 = fmul double %k, {_f64(1.57079632673412561417e+00)}
  %r1 = fsub double %xd, %t1
  %t2 = fmul double %k, {_f64(6.07710050650619224932e-11)}
  %rd = fsub double %r1, %t2
  %r = fptrunc double %rd to float
  %k64 = call i64 @llvm.fptosi.sat.i64.f64(double %k)
  %quadrant = trunc i64 %k64 to i32
  %z = fmul float %r, %r
{_horner("sp", "%z", SIN_COEFFICIENTS)}
  %rz = fmul float %r, %z
  %sin_tail = fmul contract float %rz, %sp
  %sin_r = fadd contract float %r, %sin_tail
{_horner("cp", "%z", COS_COEFFICIENTS)}
  %zz = fmul float %z, %z
  %half_z = fmul float %z, 0.5
  %cos_head = fsub float 1.0, %half_z
  %cos_tail = fmul contract float %zz, %cp
  %cos_r = fadd contract float %cos_head, %cos_tail
  ; quadrant 0: sin r, 1: cos r, 2: -sin r, 3: -cos r
  %odd_bit = and i32 %quadrant, 1
  %odd = icmp ne i32 %odd_bit, 0
  %v = select i1 %odd, float %cos_r, float %sin_r
  %neg_bit = and i32 %quadrant, 2
  %negative = icmp ne i32 %neg_bit, 0
  %minus_v = fneg float %v
  %signed = select i1 %negative, float %minus_v, float %v
  ; sin(x) = x below 2**-12 (this also keeps the sign of -0.0); sin(inf) and sin(NaN) are NaN
  %near_zero = select i1 %tiny, float %x, float %signed
  %out = select i1 %finite, float %near_zero, float 0x7FF8000000000000
  ret float %out
}}"""

# the LLVM intrinsics each helper calls
HELPER_DECLARATIONS = {
    EXP2: ["declare float @llvm.rint.f32(float)"],
    LOG2: [],
    SIN: ["declare float @llvm.fabs.f32(float)", "declare double @llvm.rint.f64(double)",
          "declare i64 @llvm.fptosi.sat.i64.f64(double)"],
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
