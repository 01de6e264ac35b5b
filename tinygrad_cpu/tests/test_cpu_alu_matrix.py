"""Every ALU op, CAST and BITCAST, for every dtype, on edge values, against the reference semantics (ops.exec_alu)."""
import itertools
import numpy as np
import pytest
from tinygrad_core.dtype import ALL, FLOATS, INTS, UNSIGNED, dtypes, bf16_to_f32, f32_to_bf16
from tinygrad_core.ops import Ops, exec_alu, cast_array
from cpu_kernel_runner import run_elementwise

NUMERIC = [dt for dt in ALL if dt != dtypes.bool]
SIGNED = [dt for dt in INTS if dt not in UNSIGNED]


def edge_values(dt) -> np.ndarray:
    """Host values (bfloat16 as float32) that reach the corners: zero signs, NaN, inf, int limits, negatives."""
    if dt == dtypes.bool:
        return np.array([False, True])
    if dt in INTS:
        lo, hi = dtypes.min(dt), dtypes.max(dt)
        values = [0, 1, 2, 3, 7, 100, hi, hi - 1] + ([-1, -2, -7, -100, lo, lo + 1] if dt in SIGNED else [lo + 5])
        return np.array([v & (2 ** (8 * dt.itemsize) - 1) for v in values], dtype=np.uint64).astype(dt.np)
    host = np.float32 if dt == dtypes.bfloat16 else dt.np
    values = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.75, 1e-3, 100.0, -77.25, np.inf, -np.inf, np.nan, 2.0 ** -10]
    values.append(float(np.finfo(np.float16 if dt == dtypes.float16 else host).max))
    out = np.array(values, dtype=host)
    return bf16_to_f32(f32_to_bf16(out)) if dt == dtypes.bfloat16 else out


def to_buffer(values: np.ndarray, dt) -> np.ndarray:
    return f32_to_bf16(values) if dt == dtypes.bfloat16 else values.astype(dt.np)


def from_buffer(values: np.ndarray, dt) -> np.ndarray:
    return bf16_to_f32(values) if dt == dtypes.bfloat16 else values


def reference(op, out_dtype, *inputs):
    out = exec_alu(op, out_dtype, *inputs)
    return cast_array(out, out_dtype) if out_dtype == dtypes.bfloat16 and op is not Ops.CAST else out


def assert_same(got, want, dt, rtol=0.0):
    """Bit-exact for ints, bools and exact float ops (sign of zero included); NaN must match NaN."""
    got, want = np.asarray(got), np.asarray(want).astype(got.dtype)
    if dt not in FLOATS:
        np.testing.assert_array_equal(got, want)
        return
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"NaN mismatch\n got {got}\nwant {want}"
    finite = ~np.isnan(want)
    if rtol == 0:
        np.testing.assert_array_equal(got[finite], want[finite])
        assert np.array_equal(np.signbit(got[finite]), np.signbit(want[finite])), f"sign of zero: {got} vs {want}"
    else:
        np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=1e-30)


def pairs(dt):
    a, b = zip(*itertools.product(edge_values(dt), repeat=2))
    return np.array(a, dtype=edge_values(dt).dtype), np.array(b, dtype=edge_values(dt).dtype)


def check(op, out_dtype, in_dtype, *inputs, rtol=0.0):
    got = run_elementwise(op, out_dtype, [(to_buffer(x, in_dtype), in_dtype) for x in inputs])
    assert_same(from_buffer(got, out_dtype), reference(op, out_dtype, *inputs), out_dtype, rtol)


BINARY_ALL = [Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE]


@pytest.mark.parametrize("dt", ALL, ids=str)
@pytest.mark.parametrize("op", BINARY_ALL + [Ops.SUB], ids=lambda op: op.name)
def test_binary(op, dt):
    if op is Ops.SUB and dt == dtypes.bool:
        pytest.skip("SUB is not defined for bool (the reference raises too)")
    a, b = pairs(dt)
    check(op, dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dt, dt, a, b)


@pytest.mark.parametrize("dt", INTS, ids=str)
@pytest.mark.parametrize("op", [Ops.IDIV, Ops.MOD], ids=lambda op: op.name)
def test_integer_division_truncates_toward_zero(op, dt):
    a, b = pairs(dt)
    keep = b != 0                  # division by zero is unspecified
    check(op, dt, dt, a[keep], b[keep])


@pytest.mark.parametrize("dt", INTS + (dtypes.bool,), ids=str)
@pytest.mark.parametrize("op", [Ops.AND, Ops.OR, Ops.XOR], ids=lambda op: op.name)
def test_bitwise(op, dt):
    check(op, dt, dt, *pairs(dt))


@pytest.mark.parametrize("dt", INTS, ids=str)
@pytest.mark.parametrize("op", [Ops.SHL, Ops.SHR], ids=lambda op: op.name)
def test_shifts(op, dt):
    a, _ = pairs(dt)
    amounts = (np.arange(len(a)) % (8 * dt.itemsize)).astype(dt.np)     # amounts must be in [0, bits)
    check(op, dt, dt, a, amounts)


@pytest.mark.parametrize("dt", NUMERIC, ids=str)
@pytest.mark.parametrize("op", [Ops.NEG, Ops.RECIP, Ops.TRUNC], ids=lambda op: op.name)
def test_unary_exact(op, dt):
    if op is Ops.TRUNC and dt not in FLOATS:
        pytest.skip("TRUNC is only emitted for floats")
    values = edge_values(dt)
    if op is Ops.RECIP and dt in FLOATS and dt != dtypes.float64:
        check(op, dt, dt, values, rtol=0)
    else:
        check(op, dt, dt, values)


def test_neg_of_bool_is_not():
    check(Ops.NEG, dtypes.bool, dtypes.bool, edge_values(dtypes.bool))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("op", [Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT], ids=lambda op: op.name)
def test_transcendental(op, dt):
    grid = np.concatenate([edge_values(dt), np.linspace(-130, 130, 521), np.linspace(-7, 7, 333)])
    values = (bf16_to_f32(f32_to_bf16(grid.astype(np.float32))) if dt == dtypes.bfloat16 else
              grid.astype(np.float32 if dt == dtypes.bfloat16 else dt.np))
    # sqrt is correctly rounded; the others within a few units in the last place of the dtype
    rtol = 0.0 if op is Ops.SQRT else {dtypes.float16: 1e-3, dtypes.bfloat16: 8e-3, dtypes.float32: 2e-6,
                                       dtypes.float64: 1e-14}[dt]
    check(op, dt, dt, values, rtol=rtol)


@pytest.mark.parametrize("dt", ALL, ids=str)
def test_where(dt):
    a, b = pairs(dt)
    condition = (np.arange(len(a)) % 3 == 0)
    got = run_elementwise(Ops.WHERE, dt, [(condition, dtypes.bool), (to_buffer(a, dt), dt), (to_buffer(b, dt), dt)])
    assert_same(from_buffer(got, dt), reference(Ops.WHERE, dt, condition, a, b), dt)


@pytest.mark.parametrize("dt", NUMERIC, ids=str)
def test_mulacc(dt):
    a, b = pairs(dt)
    c = np.roll(a, 5)
    # two roundings, bit for bit the reference's a * b + c (no FMA: see renderer.py's fast-math flags)
    check(Ops.MULACC, dt, dt, a, b, c)


@pytest.mark.parametrize("src", ALL, ids=str)
@pytest.mark.parametrize("dst", ALL, ids=str)
def test_cast(src, dst):
    values = edge_values(src)
    if src in FLOATS and dst in INTS:
        # out-of-range and non-finite values give unspecified results; check the values that fit
        lo, hi = dtypes.min(dst), dtypes.max(dst)
        wide = values.astype(np.float64)
        values = values[np.isfinite(wide) & (wide > lo - 1) & (wide < hi + 1)]
    check(Ops.CAST, dst, src, values)


SAME_SIZE = [(a, b) for a in ALL for b in ALL if a.itemsize == b.itemsize and dtypes.bool not in (a, b)]


@pytest.mark.parametrize("src,dst", SAME_SIZE, ids=str)
def test_bitcast(src, dst):
    values = edge_values(src)
    values = values[~np.isnan(values)] if src in FLOATS else values      # NaN payloads are not pinned
    got = run_elementwise(Ops.BITCAST, dst, [(to_buffer(values, src), src)])
    want = to_buffer(values, src).view(dst.np)
    if dst == dtypes.bfloat16:     # a bfloat16 is computed as float32 and stored rounded: NaNs come out as 0x7FC0
        want = to_buffer(from_buffer(want, dst), dst)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_double_to_half_rounds_once_to_nearest_even():
    # every half's neighbourhood: exactly halfway to the next one, a hair either side (where going through float
    # with plain rounding goes wrong), plus the subnormal, overflow and special cases
    halves = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    gap = np.diff(np.append(halves, 65536.0))       # (65536 is where the next half would be)
    middle = halves + gap / 2
    values = np.concatenate([middle, middle * (1 + 2.0 ** -40), middle * (1 - 2.0 ** -40), halves,
                             [65519.99, 65520.0, 65520.01, 1e300, 2.0 ** -25, 2.0 ** -25 * (1 + 2.0 ** -50),
                              2.0 ** -26, 1e-300, 5e-324, 0.0, np.inf, np.nan]])
    values = np.concatenate([values, -values])
    got = run_elementwise(Ops.CAST, dtypes.float16, [(values, dtypes.float64)])
    with np.errstate(over="ignore"):
        want = values.astype(np.float16)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)])


def test_no_cast_calls_a_runtime_library_function():
    # compiler-rt's conversion helpers (__truncdfhf2, __floatdihf, ...) that LLVM may call are missing from a process
    # that has not loaded libgcc by chance, so the JIT can't link them; libc's (memcpy for a copy) are always there
    from tinygrad_core.engine.realize import CompiledRunner
    from tinygrad_cpu.compiler import LLVMCompiler
    from cpu_kernel_runner import elementwise_ast
    compiler = LLVMCompiler()
    for src, dst in itertools.product(ALL, ALL):
        assembly = compiler.disassemble(CompiledRunner("CPU", elementwise_ast(Ops.CAST, dst, [src], 64)).src)
        calls = [line.split()[-1] for line in assembly.splitlines()
                 if line.split()[:1] in (["call"], ["callq"], ["jmp"]) and line.split()[-1].startswith("__")]
        assert not calls, f"casting {src} to {dst} calls {calls}"
