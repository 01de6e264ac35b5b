"""Section 4, every primitive op x every declared dtype, alone in a kernel built straight from UOps, against the
reference semantics (tinygrad_core.ops.exec_alu): first every pair of edge values (NaN, +-inf, -0.0, denormals,
the integer limits), then random values from hypothesis. Cases the reference calls unspecified are never sent."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinygrad_core.conformance.harness import assert_conforms, host_dtype, kernel_ast, mismatches, ulp
from tinygrad_core.dtype import ALL, FLOATS, INTS, UNSIGNED, DType, bf16_to_f32, dtypes, f32_to_bf16
from tinygrad_core.ops import GroupOp, Ops, bitcast_array, cast_array, exec_alu

SIZE = 128                     # elements per launch
SIN_RANGE = 1e4                # SIN is checked on |x| <= this (beyond it, accuracy is range reduction's business)
NUMERIC = [dt for dt in ALL if dt != dtypes.bool]

# which dtypes each op is defined on (the core never builds the others)
OP_DTYPES = {
    **{op: list(FLOATS) for op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.TRUNC, Ops.FDIV)},
    **{op: list(ALL) for op in (Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.WHERE, Ops.NEG)},
    Ops.SUB: NUMERIC, Ops.MULACC: NUMERIC,
    Ops.IDIV: list(INTS), Ops.MOD: list(INTS), Ops.SHL: list(INTS), Ops.SHR: list(INTS),
    **{op: [dtypes.bool, *INTS] for op in (Ops.AND, Ops.OR, Ops.XOR)},
}
assert set(OP_DTYPES) == GroupOp.ALU, "every ALU op needs a row here"
# units in the last place allowed for the math functions (the usual accuracy of C/OpenCL/CUDA libraries)
ULPS = {Ops.EXP2: 4, Ops.LOG2: 4, Ops.SIN: 4, Ops.SQRT: 3, Ops.RECIP: 3}


@pytest.fixture(autouse=True)
def quiet_numpy():
    # NaN, inf and overflow are this section's subject: numpy shouldn't warn about computing them
    with np.errstate(all="ignore"):
        yield


def _skip_unless_declared(dut, *dts: DType):
    for dt in dts:
        if not dut.supports(dt):
            pytest.skip(f"{dut.name} declares no support for dtypes.{dt.name} (Renderer.supported_dtypes)")


# ---------------------------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------------------------
def edge_values(dt: DType) -> np.ndarray:
    if dt == dtypes.bool:
        return np.array([False, True])
    if dt in INTS:
        lo, hi = dtypes.min(dt), dtypes.max(dt)
        picks = [0, 1, 2, 3, 7, 100, lo, lo + 1, hi, hi - 1, -1, -2, -7, -100]
        return np.array(sorted({v for v in picks if lo <= v <= hi}), dtype=dt.np)
    info = np.finfo(np.float32 if dt == dtypes.bfloat16 else dt.np)
    tiny = info.smallest_subnormal if dt != dtypes.bfloat16 else np.float32(2.0 ** -133)
    big = info.max if dt != dtypes.bfloat16 else bf16_to_f32(np.array(0x7F7F, np.uint16))
    values = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 100.25, -7.75, np.pi, big, -big, info.tiny, -info.tiny,
              tiny, -tiny, 3 * tiny, np.inf, -np.inf, np.nan, 1e-3]
    return bf16_round(np.array(values, dtype=host_dtype(dt)), dt)


def bf16_round(values: np.ndarray, dt: DType) -> np.ndarray:
    return bf16_to_f32(f32_to_bf16(values)) if dt == dtypes.bfloat16 else values


def element_strategy(dt: DType):
    if dt == dtypes.bool:
        return st.booleans()
    if dt in INTS:
        return st.integers(dtypes.min(dt), dtypes.max(dt))
    width = {dtypes.float16: 16, dtypes.float64: 64}.get(dt, 32)
    return st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)


def random_values(rng: np.random.Generator, dt: DType, n: int) -> np.ndarray:
    """n values of dt: half of them any bit pattern (every exponent, NaNs, denormals), half of modest size."""
    if dt == dtypes.bool:
        return rng.integers(0, 2, n).astype(bool)
    if dt in INTS:
        wide = rng.integers(dtypes.min(dt), dtypes.max(dt), n, dtype=dt.np, endpoint=True)
        return np.where(rng.integers(0, 2, n) == 1, wide, rng.integers(-100, 100, n).astype(dt.np))
    bits_dtype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    bits = rng.integers(0, np.iinfo(bits_dtype).max, n, dtype=bits_dtype, endpoint=True)
    any_pattern = bf16_to_f32(bits) if dt == dtypes.bfloat16 else bits.view(dt.np)
    modest = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(host_dtype(dt))
    return bf16_round(np.where(rng.integers(0, 2, n) == 1, any_pattern, modest), dt)


def array_strategy(dt: DType):
    """SIZE values: bulk random values from a seed hypothesis draws, with a few values hypothesis picks itself
    (edges among them) at positions it picks: enough to explore, cheap to generate, and reproducible."""
    picks = st.lists(st.tuples(st.integers(0, SIZE - 1), st.one_of(element_strategy(dt),
                                                                   st.sampled_from(edge_values(dt).tolist()))),
                     max_size=8)

    def build(seed_and_picks):
        seed, chosen = seed_and_picks
        values = random_values(np.random.default_rng(seed), dt, SIZE)
        for position, value in chosen:
            values[position] = value
        return bf16_round(values, dt)
    return st.tuples(st.integers(0, 2 ** 32 - 1), picks).map(build)


def pairs_of_edges(in_dtypes: list[DType]) -> list[list[np.ndarray]]:
    """Every combination of edge values, cut into launches of SIZE elements (the last one padded by repeating)."""
    combos = list(itertools.product(*[edge_values(dt).tolist() for dt in in_dtypes]))
    launches = []
    for start in range(0, len(combos), SIZE):
        chunk = combos[start:start + SIZE]
        chunk += [chunk[i % len(chunk)] for i in range(SIZE - len(chunk))]
        columns = zip(*chunk)
        launches.append([bf16_round(np.array(col, dtype=host_dtype(dt)), dt) for col, dt in zip(columns, in_dtypes)])
    return launches


# ---------------------------------------------------------------------------------------------------------------
# the unspecified cases (ops.py): replaced by harmless values before anything is launched
# ---------------------------------------------------------------------------------------------------------------
def specified_inputs(op: Ops, dt: DType, inputs: list[np.ndarray]) -> list[np.ndarray]:
    inputs = [x.copy() for x in inputs]
    if op in (Ops.IDIV, Ops.MOD):
        a, b = inputs
        b[b == 0] = 1
        if dt not in UNSIGNED:
            a[(a == dtypes.min(dt)) & (b == -1)] = 0
    elif op in (Ops.SHL, Ops.SHR):
        bits = 8 * dt.itemsize
        inputs[1] = (inputs[1].astype(np.uint64) % bits).astype(dt.np)
    elif op is Ops.SIN:
        inputs[0] = bf16_round(np.where(np.abs(inputs[0]) <= SIN_RANGE, inputs[0], np.fmod(inputs[0], SIN_RANGE)), dt)
    return inputs


# ---------------------------------------------------------------------------------------------------------------
# the expected results
# ---------------------------------------------------------------------------------------------------------------
def reference(op: Ops, out_dt: DType, inputs: list[np.ndarray]) -> np.ndarray:
    out = exec_alu(op, out_dt, *inputs)
    return cast_array(out, out_dt) if out_dt == dtypes.bfloat16 else out


def check_alu(dut, runner, op: Ops, dt: DType, in_dtypes, out_dt, inputs):
    inputs = specified_inputs(op, dt, inputs)
    actual = dut.run_kernel(runner, out_dt, SIZE, inputs, in_dtypes)
    expected = reference(op, out_dt, inputs)
    tolerance = {}
    if dt in FLOATS and op in ULPS:
        tolerance = {"ulps": ULPS[op], "atol": 2 * float(ulp(np.array(1.0), dt)) if op is Ops.SIN else 0}
    elif dt in FLOATS and op is Ops.MULACC:
        # fused (one rounding) and unfused (two) are both correct: allow the product's rounding error
        with np.errstate(all="ignore"):
            # the product in extended precision: a float64 product that overflows may still be finite when fused
            exact = inputs[0].astype(np.longdouble) * inputs[1].astype(np.longdouble)
            fused = cast_array(exact + inputs[2].astype(np.longdouble), out_dt)
        product_error = np.nan_to_num(ulp(exact, dt), posinf=0)
        unfused_ok = ~mismatches(actual, expected, out_dt, ulps=1, atol=product_error)
        fused_ok = ~mismatches(actual, fused, out_dt, ulps=1, atol=product_error)
        expected = np.where(unfused_ok | fused_ok, actual, expected)   # keep only the elements that fit neither
        tolerance = {"ulps": 1, "atol": product_error, "signed_zero": False}   # a fused product may keep its -0.0
    elif op is Ops.MAX:
        tolerance = {"signed_zero": False}       # max(-0.0, 0.0) may be either zero
    assert_conforms(actual, expected, out_dt, op.name, inputs, title=f"{op.name} on {dt.name}", **tolerance)


def signature(op: Ops, dt: DType) -> tuple[list[DType], DType]:
    if op is Ops.WHERE:
        return [dtypes.bool, dt, dt], dt
    arity = 1 if op in GroupOp.UNARY else 3 if op is Ops.MULACC else 2
    return [dt] * arity, dtypes.bool if op in GroupOp.COMPARISON else dt


def _settings(dut):
    return settings(max_examples=dut.max_examples, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


ALU_CASES = [pytest.param(op, dt, id=f"{op.name}-{dt.name}") for op in sorted(OP_DTYPES, key=lambda o: o.value)
             for dt in OP_DTYPES[op]]


@pytest.mark.parametrize("op, dt", ALU_CASES)
def test_alu(dut, op, dt):
    in_dtypes, out_dt = signature(op, dt)
    _skip_unless_declared(dut, *in_dtypes, out_dt)
    runner = dut.kernel(kernel_ast(op, out_dt, in_dtypes, SIZE))
    if dut.compile_only:
        return
    for inputs in pairs_of_edges(in_dtypes):
        check_alu(dut, runner, op, dt, in_dtypes, out_dt, inputs)

    @_settings(dut)
    @given(st.tuples(*[array_strategy(d) for d in in_dtypes]))
    def random_values(inputs):
        check_alu(dut, runner, op, dt, in_dtypes, out_dt, list(inputs))
    random_values()


CAST_CASES = [pytest.param(src, dst, id=f"{src.name}-to-{dst.name}") for src in ALL for dst in ALL if src != dst]


def check_conversion(dut, op: Ops, src: DType, dst: DType, prepare, reference):
    """One CAST or BITCAST, src -> dst, on every pair of edge values and then on random arrays."""
    _skip_unless_declared(dut, src, dst)
    runner = dut.kernel(kernel_ast(op, dst, [src], SIZE))
    if dut.compile_only:
        return

    def check(x):
        x = prepare(x)
        assert_conforms(dut.run_kernel(runner, dst, SIZE, [x], [src]), reference(x), dst, f"{op.name} to {dst.name}",
                        [x], title=f"{op.name} {src.name} to {dst.name}")
    for (x,) in pairs_of_edges([src]):
        check(x)

    @_settings(dut)
    @given(array_strategy(src))
    def random_values(x):
        check(x)
    random_values()


@pytest.mark.parametrize("src, dst", CAST_CASES)
def test_cast(dut, src, dst):
    # (out-of-range float-to-int values included: they saturate, and NaN is 0, ops.py)
    check_conversion(dut, Ops.CAST, src, dst, lambda x: x, lambda x: cast_array(x, dst))


BITCAST_CASES = [pytest.param(src, dst, id=f"{src.name}-as-{dst.name}") for src in NUMERIC for dst in NUMERIC
                 if src != dst and src.itemsize == dst.itemsize]


@pytest.mark.parametrize("src, dst", BITCAST_CASES)
def test_bitcast(dut, src, dst):
    def one_nan(x):      # one NaN bit pattern: hardware may quiet a signalling NaN on the way through
        return np.where(np.isnan(x), np.array(np.nan, dtype=x.dtype), x) if src in FLOATS else x
    check_conversion(dut, Ops.BITCAST, src, dst, one_nan, lambda x: bitcast_array(x, src, dst))
