"""The index simplifier must never change a value: random index expressions, simplified, are evaluated against
the same expression computed naively over every value their variables can take."""
import itertools
from hypothesis import given, settings, strategies as st
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.dtype import dtypes
from tinygrad_core.ops import Ops, UOp


def evaluate(u: UOp, env: dict) -> int:
    if u.op is Ops.CONST:
        return int(u.arg)
    if u.op in (Ops.SPECIAL, Ops.RANGE):
        return env[u]
    a, b = (evaluate(s, env) for s in u.src)
    if u.op is Ops.ADD:
        return a + b
    if u.op is Ops.MUL:
        return a * b
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)       # C division truncates toward zero
    if u.op is Ops.IDIV:
        return q
    if u.op is Ops.MOD:
        return a - b * q
    if u.op is Ops.CMPLT:
        return int(a < b)
    if u.op is Ops.AND:
        return int(a and b)
    raise AssertionError(u.op)


X = UOp(Ops.SPECIAL, sym.INDEX, (), ("gidx0", 24))
R = UOp(Ops.RANGE, sym.INDEX, (sym.const(5),), 0)
STEPS = st.lists(st.tuples(st.sampled_from(["add", "mul", "idiv", "mod", "addvar"]), st.integers(-7, 9)),
                 min_size=1, max_size=6)


def build(steps, naive: bool):
    expr = X
    for kind, k in steps:
        if kind == "add":
            expr = UOp(Ops.ADD, sym.INDEX, (expr, sym.const(k))) if naive else sym.add(expr, k)
        elif kind == "addvar":
            expr = UOp(Ops.ADD, sym.INDEX, (expr, R)) if naive else sym.add(expr, R)
        elif kind == "mul":
            expr = UOp(Ops.MUL, sym.INDEX, (expr, sym.const(k))) if naive else sym.mul(expr, k)
        elif k > 0:
            if naive:
                expr = UOp(Ops.IDIV if kind == "idiv" else Ops.MOD, sym.INDEX, (expr, sym.const(k)))
            else:
                expr = sym.idiv(expr, k) if kind == "idiv" else sym.mod(expr, k)
    return expr


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_simplified_index_math_keeps_its_value(steps):
    simplified, naive = build(steps, naive=False), build(steps, naive=True)
    for x, r in itertools.product(range(24), range(5)):
        env = {X: x, R: r}
        assert evaluate(simplified, env) == evaluate(naive, env), (steps, x, r)


def test_bounds_contain_every_value():
    expr = sym.add(sym.mul(sym.mod(sym.idiv(X, 3), 4), 5), R)
    lo, hi = sym.bounds(expr)
    values = [evaluate(expr, {X: x, R: r}) for x in range(24) for r in range(5)]
    assert lo <= min(values) and max(values) <= hi


def test_a_split_index_folds_back_to_itself():
    # coordinates of a (4, 3, 2) grid recombined into the flat index: the simplifier must give back gidx0
    coords = [sym.mod(sym.idiv(X, 6), 4), sym.mod(sym.idiv(X, 2), 3), sym.mod(X, 2)]
    flat = sym.add(sym.add(sym.mul(coords[0], 6), sym.mul(coords[1], 2)), coords[2])
    assert flat is X


def test_comparisons_decided_by_bounds_fold_to_constants():
    assert sym.lt(X, 24).arg is True and sym.lt(X, 0).arg is False
    assert sym.ge(X, 0).arg is True


def test_a_bool_constant_is_a_bool_whichever_way_it_was_made():
    zero = UOp(Ops.CONST, dtypes.bool, (), 0)           # made first, as a cast of 0 would
    assert zero.arg is False and sym.lt(X, 0).arg is False and UOp(Ops.CONST, dtypes.bool, (), 1).arg is True


def test_a_division_by_a_multiple_of_a_coefficient_drops_the_terms_below_it():
    # 64*q + (8*y + r + 3), the part in parentheses within [0, 64): // 128 is q // 2, % 128 keeps it beside 64*(q % 2)
    # (a strided window's index over a padded image: it was a division of the whole sum per element)
    q, y = sym.idiv(X, 4), sym.mod(X, 4)
    expr = sym.add(sym.add(sym.add(sym.mul(q, 64), sym.mul(y, 8)), R), 3)
    assert sym.idiv(expr, 128) is sym.idiv(X, 8)
    assert sym.mod(expr, 128) is sym.add(sym.add(sym.add(sym.mul(sym.mod(q, 2), 64), sym.mul(y, 8)), R), 3)
    for x, r in itertools.product(range(24), range(5)):
        value = evaluate(expr, {X: x, R: r})
        assert (evaluate(sym.idiv(expr, 128), {X: x, R: r}), evaluate(sym.mod(expr, 128), {X: x, R: r})) == \
            divmod(value, 128)


TERMS = st.lists(st.tuples(st.sampled_from(["x", "x//3", "x%4", "r"]), st.integers(-3, 12)), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(TERMS, st.integers(-4, 40), st.integers(2, 36))
def test_dividing_a_sum_of_terms_keeps_its_value(terms, constant, c):
    parts = {"x": X, "x//3": sym.idiv(X, 3), "x%4": sym.mod(X, 4), "r": R}
    expr = sym.const(constant)
    for name, k in terms:
        expr = sym.add(expr, sym.mul(parts[name], k))
    naive = {op: UOp(op, sym.INDEX, (expr, sym.const(c))) for op in (Ops.IDIV, Ops.MOD)}
    for x, r in itertools.product(range(24), range(5)):
        env = {X: x, R: r}
        assert evaluate(sym.idiv(expr, c), env) == evaluate(naive[Ops.IDIV], env), (terms, constant, c, x, r)
        assert evaluate(sym.mod(expr, c), env) == evaluate(naive[Ops.MOD], env), (terms, constant, c, x, r)
