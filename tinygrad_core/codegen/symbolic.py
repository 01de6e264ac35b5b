"""Index arithmetic with simplification: the integer expressions that address buffers inside a kernel.

Movement ops become index math (reshape -> // and %, pad -> bounds checks); the rules here fold that math back to
its simplest form using each expression's value range, so a contiguous load reads `buf[gidx0]`, not a tangle.
Symbolic sizes are the same expressions over Variables (DEFINE_VAR; BIND when a value comes with it): sizes.py does
their arithmetic with these rules."""
import contextlib
import functools
import math
from tinygrad_core.dtype import dtypes
from tinygrad_core.ops import Ops, UOp

INDEX = dtypes.index          # int64 while a kernel too big for int32 indices is lowered (see wide_index)
_bounds: dict[UOp, tuple[int, int]] = {}


@contextlib.contextmanager
def wide_index():
    """Index arithmetic built inside is int64. Kernels are lowered with int32 indices first (faster on every
    device) and lowered again in here when some index, or a loop's end, doesn't fit (see fits_int32)."""
    global INDEX
    saved, INDEX = INDEX, dtypes.int64
    try:
        yield
    finally:
        INDEX = saved


def fits_int32(sink: UOp) -> bool:
    """Whether all index arithmetic in a kernel graph, its operands, and each loop's end (the counter reaches it)
    stay within int32. Index arithmetic is what is computed from thread indices and loop counters, up to the loads."""
    index: set[UOp] = set()
    for u in sink.toposort():
        if u.op in (Ops.SPECIAL, Ops.RANGE) or (u.dtype == INDEX and u.op not in (Ops.LOAD, Ops.REDUCE) and
                                                any(s in index for s in u.src)):
            index.add(u)
    spans = [bounds(s) for u in index for s in (u, *u.src) if dtypes.is_int(s.dtype)]
    ends = [bounds(u)[1] + 1 for u in index if u.op in (Ops.SPECIAL, Ops.RANGE)]
    return all(-2 ** 31 <= lo and hi < 2 ** 31 for lo, hi in spans) and all(end < 2 ** 31 for end in ends)


def const(value: int | bool | UOp) -> UOp:
    if isinstance(value, UOp):
        return value
    return UOp(Ops.CONST, dtypes.bool if isinstance(value, bool) else INDEX, (), value)


def is_const(u: UOp | None) -> bool:
    return u is not None and u.op is Ops.CONST and not u.src


def bounds(u: UOp) -> tuple[int, int]:
    """The smallest and largest value u can take."""
    if (found := _bounds.get(u)) is not None:
        return found
    op, src = u.op, u.src
    if op is Ops.CONST:
        out = (int(u.arg), int(u.arg))
    elif op is Ops.SPECIAL:
        out = (0, bounds(const(u.arg[1]))[1] - 1)      # (the size: an int, or a symbolic size at its largest)
    elif op is Ops.RANGE:
        out = (0, bounds(src[0])[1] - 1)
    elif op is Ops.DEFINE_VAR:
        out = (u.arg[1], u.arg[2])
    elif op is Ops.BIND:          # the range it may take, not its value: kernels and buffers serve all of them
        out = bounds(src[0])
    elif op in (Ops.ADD, Ops.MUL):
        (a0, a1), (b0, b1) = bounds(src[0]), bounds(src[1])
        corners = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        out = (a0 + b0, a1 + b1) if op is Ops.ADD else (min(corners), max(corners))
    elif op is Ops.IDIV and is_const(src[1]) and src[1].arg > 0:      # truncating, so monotonic in src[0]
        out = tuple(b // src[1].arg if b >= 0 else -(-b // src[1].arg) for b in bounds(src[0]))
    elif op is Ops.MOD and is_const(src[1]) and src[1].arg > 0:
        (lo, hi), c = bounds(src[0]), src[1].arg
        out = (lo, hi) if 0 <= lo and hi < c else (0, c - 1) if lo >= 0 else (-(c - 1), c - 1)
    elif op in (Ops.IDIV, Ops.MOD) and bounds(src[0])[0] >= 0 and bounds(src[1])[0] > 0:    # by a symbolic size
        (a0, a1), (b0, b1) = bounds(src[0]), bounds(src[1])
        out = (a0 // b1, a1 // b0) if op is Ops.IDIV else (0, min(a1, b1 - 1))
    elif u.dtype == dtypes.bool:
        out = (0, 1)
    elif op in (Ops.WHERE, Ops.MAX):     # one of two values (WHERE's last two sources), or the larger
        (a0, a1), (b0, b1) = bounds(src[-2]), bounds(src[-1])
        out = (min(a0, b0) if op is Ops.WHERE else max(a0, b0), max(a1, b1))
    else:
        out = (dtypes.min(u.dtype), dtypes.max(u.dtype)) if dtypes.is_int(u.dtype) else (-2 ** 63, 2 ** 63)
    _bounds[u] = out
    return out


# ---- affine forms: an expression as {term: coefficient} + constant ----
@functools.lru_cache(1 << 16)     # (asked for every term of every sum built; the graph under a node never changes)
def _sort_key(u: UOp):
    return (u.op.value, str(u.arg), tuple(_sort_key(s) for s in u.src))


def _sum_terms(t1: dict[UOp, int], t2: dict[UOp, int]) -> dict[UOp, int]:
    return {t: c for t in {**t1, **t2} if (c := t1.get(t, 0) + t2.get(t, 0))}


def affine(u: UOp) -> tuple[dict[UOp, int], int]:
    """u as ({term: coefficient}, constant). (The dict is shared: read it, don't change it.)"""
    return _affine(u, INDEX)


@functools.lru_cache(1 << 16)     # (by the index dtype too: under wide_index an int32 index is not an INDEX)
def _affine(u: UOp, index) -> tuple[dict[UOp, int], int]:
    if is_const(u):
        return {}, int(u.arg)
    if u.dtype == index and (lo := bounds(u))[0] == lo[1]:     # e.g. the index of a loop of one: always 0
        return {}, lo[0]
    if u.op is Ops.ADD:
        (t1, c1), (t2, c2) = affine(u.src[0]), affine(u.src[1])
        return _sum_terms(t1, t2), c1 + c2
    if u.op is Ops.MUL and is_const(u.src[1]):
        (terms, c), k = affine(u.src[0]), int(u.src[1].arg)
        return {t: v * k for t, v in terms.items() if v * k}, c * k
    return {u: 1}, 0


def from_affine(terms: dict[UOp, int], constant: int) -> UOp:
    out = None
    for term in sorted(terms, key=_sort_key):
        piece = term if terms[term] == 1 else UOp(Ops.MUL, INDEX, (term, const(terms[term])))
        out = piece if out is None else UOp(Ops.ADD, INDEX, (out, piece))
    return const(constant) if out is None else out if constant == 0 else UOp(Ops.ADD, INDEX, (out, const(constant)))


# ---- the builders: each returns a simplified node ----
def add(a: UOp, b: UOp | int) -> UOp:
    (t1, c1), (t2, c2) = affine(a), affine(const(b))
    return from_affine(_fold_divmod(_sum_terms(t1, t2)), c1 + c2)


def _fold_divmod(terms: dict[UOp, int]) -> dict[UOp, int]:
    """k*(y % m) + k*m*(y // m) == k*y: put back together an index that was split into coordinates."""
    while True:
        for t, k in terms.items():
            if t.op is Ops.MOD and is_const(t.src[1]):
                y, m = t.src[0], t.src[1].arg
                if terms.get(quotient := idiv(y, m)) == k * m:
                    del terms[t], terms[quotient]
                    terms = _sum_terms(terms, {y: k})
                    break       # (terms changed: look again from the start)
        else:
            return terms


def mul(a: UOp, k: int | UOp) -> UOp:
    if isinstance(k, UOp) and not is_const(k):
        if not is_const(a):            # a product of two symbolic values: a term of its own
            return UOp(Ops.MUL, INDEX, tuple(sorted((a, k), key=_sort_key)))
        a, k = k, a
    (terms, c), k = affine(a), int(k.arg) if isinstance(k, UOp) else k
    return from_affine({t: v * k for t, v in terms.items() if v * k}, c * k)


def sub(a: UOp, b: UOp | int) -> UOp:
    return add(a, mul(const(b) if isinstance(b, int) else b, -1))


def _divmod_by_bounds(op: Ops, x: UOp, c: int | UOp) -> UOp | int:
    """x // c or x % c (op IDIV or MOD, c > 0) where x's terms needn't be looked at: c is 1, x lies in [0, c), or
    nothing folds (x may be negative, c is a symbolic size). Else c as an int: x's terms may fold."""
    c = int(c.arg) if isinstance(c, UOp) and is_const(c) else c
    if c == 1:
        return x if op is Ops.IDIV else const(0)
    lo, hi = bounds(x)
    if lo >= 0 and hi < bounds(const(c))[0]:
        return const(0) if op is Ops.IDIV else x
    return UOp(op, INDEX, (x, const(c))) if lo < 0 or isinstance(c, UOp) else c


def idiv(x: UOp, c: int | UOp) -> UOp:
    """x // c for c > 0 (truncating, as the kernels compute it)."""
    if isinstance(c := _divmod_by_bounds(Ops.IDIV, x, c), UOp):     # the quotient, decided by x's bounds
        return c
    terms, k = affine(x)
    whole = {t: v // c for t, v in terms.items() if v % c == 0}
    rest = {t: v for t, v in terms.items() if v % c != 0}
    whole_const, rest_const = divmod(k, c)
    rest_expr = from_affine(rest, rest_const)
    if bounds(rest_expr)[0] < 0:
        return UOp(Ops.IDIV, INDEX, (x, const(c)))
    if split := _split_by_factor(rest, rest_const, c):      # (a*y + r) // (a*c') == y // c' where 0 <= r < a
        return add(from_affine(whole, whole_const), idiv(split[1], c // split[0]))
    if (inner := rest_expr).op is Ops.IDIV and is_const(inner.src[1]) and bounds(inner.src[0])[0] >= 0:
        rest_part = idiv(inner.src[0], inner.src[1].arg * c)     # (x // a) // b == x // (a*b)
    else:
        rest_part = const(0) if bounds(rest_expr)[1] < c else UOp(Ops.IDIV, INDEX, (rest_expr, const(c)))
    return add(from_affine(whole, whole_const), rest_part)


def _split_by_factor(terms: dict[UOp, int], constant: int, c: int) -> tuple[int, UOp, UOp] | None:
    """(a, y, r) with terms + constant == a*y + r, a a factor of c and 0 <= r < a: the terms whose coefficients a
    doesn't divide, with the constant, stay within one multiple of a (it goes into y). None where no factor does."""
    factors = {math.gcd(v, c) for v in terms.values()} | {math.gcd(c, *terms.values())}
    for a in sorted(factors - {1, c}, reverse=True):
        low = from_affine({t: v for t, v in terms.items() if v % a}, constant)
        if (lo := bounds(low)[0]) >= 0 and (k := lo // a) == bounds(low)[1] // a:
            return a, from_affine({t: v // a for t, v in terms.items() if v % a == 0}, k), add(low, -k * a)
    return None


def mod(x: UOp, c: int | UOp) -> UOp:
    """x % c for c > 0 (sign of x, as the kernels compute it)."""
    if isinstance(c := _divmod_by_bounds(Ops.MOD, x, c), UOp):      # the remainder, decided by x's bounds
        return c
    terms, k = affine(x)
    rest = from_affine({t: v % c for t, v in terms.items() if v % c}, k % c)
    lo, hi = bounds(rest)
    if lo >= 0 and hi < c:
        return rest
    if lo < 0:
        return UOp(Ops.MOD, INDEX, (x, const(c)))
    if split := _split_by_factor(*affine(rest), c):         # (a*y + r) % (a*c') == a*(y % c') + r where 0 <= r < a
        return add(mul(mod(split[1], c // split[0]), split[0]), split[2])
    if rest.op is Ops.MOD and is_const(rest.src[1]) and rest.src[1].arg % c == 0:
        return mod(rest.src[0], c)                                # (x % (a*c)) % c == x % c
    return UOp(Ops.MOD, INDEX, (rest, const(c)))


def lt(x: UOp, c: int | UOp) -> UOp:
    """x < c, folded to a constant when the bounds decide it."""
    (lo, hi), (c_lo, c_hi) = bounds(x), bounds(const(c))
    return const(hi < c_lo) if hi < c_lo or lo >= c_hi else UOp(Ops.CMPLT, dtypes.bool, (x, const(c)))


def ge(x: UOp, c: int | UOp) -> UOp:
    return lt(sub(const(c), 1), x)      # x >= c  <=>  not (x < c)  <=>  (c-1) < x


def and_(a: UOp | None, b: UOp | None) -> UOp | None:
    """Logical and of two validity conditions; None means "always valid"."""
    for x, y in ((a, b), (b, a)):
        if x is None or (is_const(x) and x.arg is True):
            return y
        if is_const(x) and x.arg is False:
            return x
    return a if a is b else UOp(Ops.AND, dtypes.bool, (a, b))
