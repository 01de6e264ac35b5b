"""Rewrite ops a renderer doesn't list in `code_for_op` into ops it does (so a minimal backend renders less).

Only ops outside GroupOp.REQUIRED can be missing; each rule below keeps the reference semantics exactly."""
from __future__ import annotations
from tinygrad_core.dtype import dtypes, truncate_value
from tinygrad_core.ops import Ops, UOp, GroupOp


def _const(dtype, value) -> UOp:
    return UOp(Ops.CONST, dtype, (), truncate_value(value, dtype))      # (-1 as an unsigned is its largest value)


def _neg(x: UOp) -> UOp:
    if x.dtype == dtypes.bool:
        return UOp(Ops.XOR, dtypes.bool, (x, _const(dtypes.bool, True)))
    return UOp(Ops.MUL, x.dtype, (x, _const(x.dtype, -1)))


def _max(a: UOp, b: UOp) -> UOp:
    bigger = UOp(Ops.WHERE, a.dtype, (UOp(Ops.CMPLT, dtypes.bool, (a, b)), b, a))
    if not dtypes.is_float(a.dtype):
        return bigger
    return UOp(Ops.WHERE, a.dtype, (UOp(Ops.CMPNE, dtypes.bool, (b, b)), b, bigger))   # NaN in b wins


def _shift(x: UOp, amount: UOp, left: bool) -> UOp:
    if amount.op is not Ops.CONST:
        raise NotImplementedError("this renderer lacks SHL/SHR and the shift amount isn't a constant")
    places, signed = int(amount.arg), not dtypes.is_unsigned(x.dtype)
    if not left and signed and places == 8 * x.dtype.itemsize - 1:    # 2**places overflows: shift twice
        return _shift(_shift(x, _const(x.dtype, places - 1), left), _const(x.dtype, 1), left)
    factor = _const(x.dtype, 2 ** places)
    if left or not signed:
        return UOp(Ops.MUL if left else Ops.IDIV, x.dtype, (x, factor))
    # a signed shift rounds down, IDIV toward zero: one less where a negative x leaves a remainder
    quotient, remainder = UOp(Ops.IDIV, x.dtype, (x, factor)), UOp(Ops.MOD, x.dtype, (x, factor))
    below = UOp(Ops.CMPLT, dtypes.bool, (remainder, _const(x.dtype, 0)))
    step = UOp(Ops.WHERE, x.dtype, (below, _const(x.dtype, -1), _const(x.dtype, 0)))
    return UOp(Ops.ADD, x.dtype, (quotient, step))


RULES = {
    Ops.NEG: lambda u: _neg(u.src[0]),
    Ops.SUB: lambda u: UOp(Ops.ADD, u.dtype, (u.src[0], _neg(u.src[1]))),
    Ops.MAX: lambda u: _max(*u.src),
    Ops.MULACC: lambda u: UOp(Ops.ADD, u.dtype, (UOp(Ops.MUL, u.dtype, u.src[:2]), u.src[2])),
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
