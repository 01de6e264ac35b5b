"""Every primitive op, cast and bitcast, run on a backend and checked against ops.py REFERENCE (exec_alu).

Many checks share one kernel (each result lands in its own segment of one output) because building a kernel is
the slow part on PoCL. Shared by this package's tests; `check_all(device)` returns the failures found."""
from __future__ import annotations
import numpy as np
from tinygrad_core import Tensor
from tinygrad_core.dtype import ALL, DType, dtypes, INTS, f32_to_bf16, bf16_to_f32
from tinygrad_core.ops import Ops, UOp, exec_alu, cast_array

N = 48          # elements per check
TRANSCENDENTAL = {Ops.EXP2, Ops.LOG2, Ops.SIN}
UNARY = [Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.NEG, Ops.TRUNC]
BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR]


def sample(dtype: DType, seed: int) -> np.ndarray:
    """N values of dtype, edge values included, in a seed-dependent order so that the inputs of a binary op pair
    edges with other values (host form: bfloat16 as float32)."""
    rng = np.random.default_rng(seed)
    return rng.permutation(_values(dtype, rng))


def _values(dtype: DType, rng) -> np.ndarray:
    if dtype == dtypes.bool:
        return rng.integers(0, 2, N).astype(bool)
    if dtypes.is_float(dtype):
        edges = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, np.inf, -np.inf, np.nan, 3.0, 1e-3, 7.75]
        values = np.concatenate([edges, rng.normal(0, 4, N - len(edges))]).astype(np.float32)
        if dtype == dtypes.bfloat16:
            return bf16_to_f32(f32_to_bf16(values))
        return values.astype(dtype.np)
    low, high = dtypes.min(dtype), dtypes.max(dtype)
    edges = [0, 1, low, high, low + 1, high - 1] + ([-1, -7, 7] if low < 0 else [7, 3, 2])
    return np.concatenate([np.array(edges, dtype=dtype.np),
                           rng.integers(low, high, N - len(edges), endpoint=True, dtype=dtype.np)])


def reference(op: Ops, dtype: DType, *inputs):
    out = exec_alu(op, dtype, *inputs)
    return cast_array(out, dtype) if dtype == dtypes.bfloat16 else out


def fused(pieces: list[UOp], device: str) -> np.ndarray:
    """One kernel computing every piece (all of one dtype, shape (N,)); returns an array of shape (len(pieces), N)."""
    count = len(pieces)
    segment = Tensor(np.repeat(np.arange(count, dtype=np.int32), N), device=device).uop
    out = None
    for i, piece in enumerate(pieces):
        padded = piece.pad(((i * N, (count - 1 - i) * N),))
        out = padded if out is None else segment.ne(i).where(out, padded)
    return Tensor(out).numpy().reshape(count, N)


def same(got: np.ndarray, want: np.ndarray, approximate: bool) -> np.ndarray:
    """Elementwise: equal bits, or both NaN (or close, for transcendental functions)."""
    got, want = np.asarray(got), np.asarray(want).astype(got.dtype)
    if got.dtype.kind != "f":
        return got == want
    nan = np.isnan(got) & np.isnan(want)
    exact = (got == want) & (np.signbit(got) == np.signbit(want))
    if approximate:
        tol = 2e-2 if got.dtype == np.float16 or got.itemsize == 2 else 1e-5
        with np.errstate(all="ignore"):
            exact |= np.isclose(got, want, rtol=tol, atol=tol)
    return nan | exact


class Checks:
    """Collects (label, pieces, expected, approximate, skip-mask) rows per output dtype, then runs them."""

    def __init__(self, device: str):
        self.device = device
        self.rows: dict[DType, list] = {}

    def tensor(self, values: np.ndarray, dtype: DType) -> UOp:
        return Tensor(values, device=self.device, dtype=dtype).uop

    def add(self, out_dtype: DType, label: str, piece: UOp, expected, approximate=False, care=None):
        self.rows.setdefault(out_dtype, []).append((label, piece, expected, approximate, care))

    def run(self) -> list[str]:
        failures = []
        for dtype, rows in self.rows.items():
            results = fused([row[1] for row in rows], self.device)
            for (label, _, expected, approximate, care), got in zip(rows, results):
                ok = same(got, expected, approximate)
                if care is not None:
                    ok |= ~care
                if not ok.all():
                    bad = np.flatnonzero(~ok)[:4]
                    failures.append(f"{label} -> {dtype.name}: at {bad.tolist()} got {got[bad].tolist()} "
                                    f"want {np.asarray(expected)[bad].tolist()}")
        return failures


def add_alu_checks(checks: Checks, dtypes_to_check):
    for dtype in dtypes_to_check:
        a, b, c = sample(dtype, 1), sample(dtype, 2), sample(dtype, 3)
        if dtype in INTS:      # shift amounts must be in [0, bits)
            shift = (np.abs(b.astype(np.int64)) % (8 * dtype.itemsize)).astype(dtype.np)
        ua, ub, uc = checks.tensor(a, dtype), checks.tensor(b, dtype), checks.tensor(c, dtype)
        for op in UNARY + BINARY + [Ops.MULACC, Ops.CMPLT, Ops.CMPNE]:
            if op in UNARY and not dtypes.is_float(dtype) and op not in (Ops.NEG, Ops.RECIP, Ops.TRUNC):
                continue           # Tensor casts ints to float before exp2/log2/sin/sqrt
            if op is Ops.FDIV and not dtypes.is_float(dtype):
                continue           # Tensor.div casts ints to float too
            inputs, nodes = [a, b, c][:_arity(op)], [ua, ub, uc][:_arity(op)]
            if op in (Ops.SHL, Ops.SHR):
                if dtype not in INTS:
                    continue
                inputs[1], nodes[1] = shift, checks.tensor(shift, dtype)
            try:
                expected = reference(op, dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dtype, *inputs)
            except TypeError:
                continue           # not defined for this dtype (e.g. SUB of bools, IDIV of floats)
            node = nodes[0].alu(op, *nodes[1:])
            checks.add(node.dtype, f"{op.name}({dtype.name})", node, expected, op in TRANSCENDENTAL)
        condition = sample(dtypes.bool, 4)
        checks.add(dtype, f"WHERE({dtype.name})", checks.tensor(condition, dtypes.bool).alu(Ops.WHERE, ua, ub),
                   np.where(condition, a, b))


def _arity(op: Ops) -> int:
    return 1 if op in UNARY else 3 if op is Ops.MULACC else 2


def add_cast_checks(checks: Checks, dtypes_to_check):
    for source in dtypes_to_check:
        values = sample(source, 5)
        node = checks.tensor(values, source)
        for target in dtypes_to_check:
            if target == source:
                continue
            care = None
            if dtypes.is_float(source) and target in INTS:
                # out of range (or NaN) is unspecified: only values the target can hold are checked
                wide = values.astype(np.float64)
                whole = np.trunc(wide)
                care = np.isfinite(wide) & (whole >= dtypes.min(target)) & (whole <= dtypes.max(target))
            checks.add(target, f"CAST({source.name})", node.cast(target), cast_array(values, target), care=care)


def add_bitcast_checks(checks: Checks, dtypes_to_check):
    for source in dtypes_to_check:
        for target in dtypes_to_check:
            if target == source or target.itemsize != source.itemsize or dtypes.bool in (source, target):
                continue
            values = sample(source, 6)
            bits = f32_to_bf16(values) if source == dtypes.bfloat16 else values
            expected = bits.view(target.np)
            if target == dtypes.bfloat16:
                expected = bf16_to_f32(expected)
            checks.add(target, f"BITCAST({source.name})", checks.tensor(values, source).bitcast(target), expected)


def check_all(device: str, dtypes_to_check=ALL) -> list[str]:
    checks = Checks(device)
    add_alu_checks(checks, dtypes_to_check)
    add_cast_checks(checks, dtypes_to_check)
    add_bitcast_checks(checks, dtypes_to_check)
    return checks.run()
