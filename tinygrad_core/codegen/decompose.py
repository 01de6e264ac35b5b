"""Rewrite ops a renderer doesn't list in `code_for_op` into ops it does (so a minimal backend renders less).

Only ops outside GroupOp.REQUIRED can be missing. Each rule keeps the reference semantics exactly; for FDIV that is
shown by tests, not proven. Its rule is a * (1 / b) with the operands scaled by powers of two into a safe range, one
correction step with the exact residual a - b q (Dekker's product), and a look at the residual where a subnormal
quotient would round twice; it matches REFERENCE bit for bit on every pair tests/test_decompose.py tries (random bit
patterns of each float type), at about 100 ops a division. A renderer whose target divides correctly rounded should
render FDIV."""
from tinygrad_core.dtype import dtypes, truncate_value
from tinygrad_core.ops import Ops, UOp, GroupOp


def _const(dtype, value) -> UOp:
    return UOp(Ops.CONST, dtype, (), truncate_value(value, dtype))      # (-1 as an unsigned is its largest value)


def _neg(x: UOp) -> UOp:
    return x.alu(Ops.XOR, _const(dtypes.bool, True)) if x.dtype == dtypes.bool else x.alu(Ops.MUL, _const(x.dtype, -1))


def _max(a: UOp, b: UOp) -> UOp:
    bigger = a.lt(b).where(b, a)
    return b.ne(b).where(b, bigger) if dtypes.is_float(a.dtype) else bigger      # NaN in b wins


def _shift(x: UOp, amount: UOp, left: bool) -> UOp:
    if amount.op is not Ops.CONST:
        raise NotImplementedError("this renderer lacks SHL/SHR and the shift amount isn't a constant")
    places, signed = int(amount.arg), not dtypes.is_unsigned(x.dtype)
    if not left and signed and places == 8 * x.dtype.itemsize - 1:    # 2**places overflows: shift twice
        return _shift(_shift(x, _const(x.dtype, places - 1), left), _const(x.dtype, 1), left)
    factor = _const(x.dtype, 2 ** places)
    if left or not signed:
        return x.alu(Ops.MUL if left else Ops.IDIV, factor)
    # a signed shift rounds down, IDIV toward zero: one less where a negative x leaves a remainder
    step = x.alu(Ops.MOD, factor).lt(_const(x.dtype, 0)).where(_const(x.dtype, -1), _const(x.dtype, 0))
    return x.alu(Ops.IDIV, factor).alu(Ops.ADD, step)


def _residual(a: UOp, b: UOp, q: UOp, bits: int) -> UOp:
    """a - b q, exactly where q is near a / b (Dekker's product, with b and q split by Veltkamp into halves)."""
    ((bh, bl), (qh, ql)) = ((hi := (c := x * _const(x.dtype, 2 ** bits + 1)) - (c - x), x - hi) for x in (b, q))
    return (a - (p := b * q)) - ((((bh * qh - p) + bh * ql) + bl * qh) + bl * ql)      # (a - p is exact)


def _fdiv(a: UOp, b: UOp) -> UOp:
    # (written with SUB, NEG and MAX: decompose() rewrites those where they are missing too)
    if a.dtype in (dtypes.float16, dtypes.bfloat16):   # a correctly rounded float32 quotient rounds right to 16 bits
        return _fdiv(a.cast(dtypes.float32), b.cast(dtypes.float32)).cast(a.dtype)
    (exponent_bits, mantissa_bits), k = dtypes.finfo(a.dtype), lambda value: _const(a.dtype, value)     # noqa: E731
    half, big, size = (mantissa_bits + 2) // 2, 2 ** (exponent_bits - 2), lambda x: x.alu(Ops.MAX, -x)  # noqa: E731
    edge = k(2.0 ** big)                                 # above it a value is huge, below its inverse tiny
    tiny = lambda x: (size(x) * edge).lt(k(1.0))                                                 # noqa: E731
    scale = lambda small, x: small.where(edge, edge.lt(size(x)).where(k(2.0 ** -(half + 2)), k(1.0)))  # noqa: E731
    # both operands times a power of two (the quotient stays): 1 / b of a tiny b would overflow, a huge b's split;
    # then a and the quotient: its split overflows where it is huge, products of their halves underflow where tiny
    a, b = a * (up := scale(tiny(b), b)), b * up
    q = a * (r := b.alu(Ops.RECIP))
    a, q = a * (down := scale(tiny(a).alu(Ops.OR, tiny(q)), q)), q * down
    # one step, except where the residual is 0 (it would lose -0.0) or the step is NaN (q or b infinite)
    q = (res := _residual(a, b, q, half)).ne(k(0)).where((stepped := q + res * r).ne(stepped).where(q, stepped), q)
    # a subnormal quotient, scaled back, rounds a second time: where q lies halfway between two subnormals, the
    # residual's sign says which one the quotient is nearer (step: half the subnormals' spacing, scaled)
    out, step = q * (inverse := down.alu(Ops.RECIP)), k(2.0 ** (1 - 2 ** (exponent_bits - 1) - mantissa_bits + big))
    below = (res := _residual(a, b, q, half)).lt(k(0)).ne(b.lt(k(0)))          # the quotient is below q
    nudged = res.ne(k(0)).where((q + below.where(-step, step)) * inverse, out)
    return (q - out * down).alu(Ops.MAX, out * down - q).ne(step).where(out, nudged)     # (not halfway: out)


RULES = {
    Ops.NEG: lambda u: _neg(u.src[0]),
    Ops.SUB: lambda u: UOp(Ops.ADD, u.dtype, (u.src[0], _neg(u.src[1]))),
    Ops.MAX: lambda u: _max(*u.src),
    Ops.MULACC: lambda u: UOp(Ops.ADD, u.dtype, (UOp(Ops.MUL, u.dtype, u.src[:2]), u.src[2])),
    Ops.FDIV: lambda u: _fdiv(*u.src),
    Ops.SHL: lambda u: _shift(*u.src, left=True),
    Ops.SHR: lambda u: _shift(*u.src, left=False),
}


def decompose(sink: UOp, renderer) -> UOp:
    """Rebuild the kernel graph with every op the renderer can't render replaced by its rule."""
    supported = renderer.code_for_op
    if all(op in supported for op in RULES):
        return sink
    memo: dict[UOp, UOp] = {}
    for u in sink.toposort():
        made = u.replace(src=tuple(memo[s] for s in u.src)) if u.src else u
        while made.op in GroupOp.ALU and made.op not in supported and made.op in RULES:
            made = RULES[made.op](made)
            # a rule's output may itself use missing ops (SUB -> NEG): rewrite those too
            made = decompose(made, renderer) if made.op is not Ops.SINK else made
        memo[u] = made
    return memo[sink]
