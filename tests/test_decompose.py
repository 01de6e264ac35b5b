"""Every decompose rule computes exactly what ops.REFERENCE computes for the op it replaces, on every dtype it accepts
(negative numbers, zero, int extremes, inf and NaN included), down to ops every renderer has."""
from __future__ import annotations
from types import SimpleNamespace
import numpy as np
import pytest
from tinygrad_core.codegen.decompose import RULES, decompose
from tinygrad_core.dtype import ALL, FLOATS, INTS, dtypes
from tinygrad_core.ops import GroupOp, Ops, UOp, cast_array, exec_alu

# a renderer with only the ops every renderer must have: each rule is rewritten all the way down
MINIMAL = SimpleNamespace(code_for_op={op: op.name for op in GroupOp.REQUIRED})
NUMBERS = tuple(dt for dt in ALL if dt != dtypes.bool)
# (FDIV of bfloat16 rounds to bfloat16, which _evaluate's float32 stand-in doesn't: test_fdiv covers it)
ACCEPTED = {Ops.NEG: ALL, Ops.SUB: NUMBERS, Ops.MAX: ALL, Ops.MULACC: ALL, Ops.SHL: INTS, Ops.SHR: INTS,
            Ops.FDIV: (dtypes.float16, dtypes.float32, dtypes.float64)}


def _host(dt):
    return np.float32 if dt == dtypes.bfloat16 else dt.np


def _values(dt, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt == dtypes.bool:
        return rng.random(64) < 0.5
    if dt in INTS:
        info = np.iinfo(dt.np)
        edges = [info.min, info.min + 1, -1, 0, 1, 2, 3, info.max - 1, info.max]
        edges = [e for e in edges if info.min <= e <= info.max]
        return rng.permutation(np.concatenate([np.array(edges, dt.np), rng.integers(info.min, info.max, 55,
                                                                                    dt.np, endpoint=True)]))
    special = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 65504.0, -3.5]
    return rng.permutation(np.concatenate([special, rng.standard_normal(55) * 100]).astype(_host(dt)))


def _evaluate(u: UOp, inputs: list, memo: dict) -> np.ndarray:
    """The graph's value with the reference semantics (DEFINE_GLOBAL i stands for inputs[i])."""
    if u not in memo:
        if u.op is Ops.DEFINE_GLOBAL:
            memo[u] = inputs[u.arg]
        elif u.op is Ops.CONST:           # as the reference backend builds a constant: the value must fit its dtype
            memo[u] = np.array(u.arg, dtype=_host(u.dtype))
        else:
            memo[u] = exec_alu(u.op, u.dtype, *[_evaluate(s, inputs, memo) for s in u.src])
    return memo[u]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if got.dtype.kind != "f":
        return got.dtype == want.dtype and np.array_equal(got, want)
    both_nan = np.isnan(got) & np.isnan(want)
    return bool(np.all(both_nan | ((got == want) & (np.signbit(got) == np.signbit(want)))))


def _cases(op, dt):
    """(sources, inputs): the op's operands as graph nodes, and their values."""
    arity = 3 if op is Ops.MULACC else 2 if op in GroupOp.BINARY else 1
    operands = [UOp(Ops.DEFINE_GLOBAL, dt, (), i) for i in range(arity)]
    inputs = [_values(dt, seed) for seed in range(arity)]
    if op not in (Ops.SHL, Ops.SHR):
        yield operands, inputs
        return
    for amount in range(8 * dt.itemsize):      # shift amounts are constants in [0, bits)
        yield [operands[0], UOp(Ops.CONST, dt, (), amount)], [inputs[0]]


def test_every_rule_has_its_dtypes_listed_here():
    assert set(ACCEPTED) == set(RULES)


@pytest.mark.parametrize("op", list(ACCEPTED), ids=lambda op: op.name)
def test_each_rule_gives_exactly_the_reference_result(op):
    for dt in ACCEPTED[op]:
        for sources, inputs in _cases(op, dt):
            original = UOp(op, dt, tuple(sources))
            rewritten = decompose(original, MINIMAL)
            assert {u.op for u in rewritten.toposort()} <= GroupOp.REQUIRED | {Ops.CONST, Ops.DEFINE_GLOBAL}
            want = exec_alu(op, dt, *[_evaluate(s, inputs, {}) for s in sources])
            got = _evaluate(rewritten, inputs, {})
            assert _same(got, want), (f"{op.name} on {dt.name} {sources[1].arg if op in (Ops.SHL, Ops.SHR) else ''}:"
                                      f" inputs {inputs}, rule gives {got}, reference {want}")


def test_a_shift_right_of_a_negative_number_rounds_down():
    x = UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), 0)
    shifted = decompose(UOp(Ops.SHR, dtypes.int32, (x, UOp(Ops.CONST, dtypes.int32, (), 1))), MINIMAL)
    assert _evaluate(shifted, [np.array([-3, -4, -1, 3], np.int32)], {}).tolist() == [-2, -2, -1, 1]


@pytest.mark.parametrize("dt", FLOATS, ids=lambda dt: dt.name)
def test_fdiv_rule_rounds_as_the_reference_does(dt):
    """Random bit patterns (every exponent: subnormal quotients, overflow, infinities, NaNs) and quotients next to 1:
    the rule's a * (1 / b) with its corrections gives REFERENCE's correctly rounded quotient bit for bit."""
    rng, bits = np.random.default_rng(5), 8 * dt.itemsize
    host = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    a, b = (rng.integers(0, 2 ** bits, 30000, np.uint64).astype(host) for _ in range(2))
    if dt == dtypes.bfloat16:       # carried as float32: bfloat16 patterns in the top half
        a, b = ((x.astype(np.uint32) << 16) for x in (a, b))
    a, b = a.view(_host(dt)), b.view(_host(dt))
    with np.errstate(all="ignore"):
        a, b = np.concatenate([a, a]), np.concatenate([b, np.where(np.isfinite(a), np.nextafter(a, b), b)])
    sources = [UOp(Ops.DEFINE_GLOBAL, dt, (), i) for i in range(2)]
    rewritten = decompose(UOp(Ops.FDIV, dt, tuple(sources)), MINIMAL)
    assert {u.op for u in rewritten.toposort()} <= GroupOp.REQUIRED | {Ops.CONST, Ops.DEFINE_GLOBAL}
    want = exec_alu(Ops.FDIV, dt, a, b)
    want, got = cast_array(want, dt) if dt == dtypes.bfloat16 else want, _evaluate(rewritten, [a, b], {})
    assert (np.abs(want) < np.finfo(want.dtype).tiny).sum() > 100 and np.isinf(want).sum() > 100   # (tried)
    differ = ~((np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want))))
    assert not differ.any(), f"{dt.name}: {a[differ][:5]} / {b[differ][:5]} = {got[differ][:5]}, not {want[differ][:5]}"
