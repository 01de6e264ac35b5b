"""Differential tests: every op in differential_ops.OPS, forward and gradient, against PyTorch CPU on random shapes
(0- and 1-sized axes included) and values (NaN, infinities, -0.0, subnormals, the dtype's extremes).

The device is the default one (TINYGRAD_DEVICE=PYTHON selects the reference backend); a subset also runs on CL when
it is installed. HYPOTHESIS_PROFILE=differential-long draws many more examples per case."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch")

from differential_ops import (  # noqa: E402  (after the importorskip: it imports torch)
    CL_SUBSET,
    FLOATS,
    GRAD_DTYPES,
    GRAD_TOLERANCE,
    OPS,
    OPS_BY_NAME,
    Domain,
    unary,
    xfail_reason,
)

from tinygrad_core import Device, Tensor, dtypes  # noqa: E402

settings.register_profile("differential-ci", max_examples=8, deadline=None, derandomize=True, database=None,
                          suppress_health_check=list(HealthCheck), print_blob=False,
                          phases=(Phase.explicit, Phase.generate, Phase.shrink))
settings.register_profile("differential-long", max_examples=300, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "differential-ci")
                               if os.environ.get("HYPOTHESIS_PROFILE", "").startswith("differential")
                               else "differential-ci")

TINY_DTYPES = {"bool": dtypes.bool, "int8": dtypes.int8, "uint8": dtypes.uint8, "int16": dtypes.int16,
               "uint16": dtypes.uint16, "int32": dtypes.int32, "uint32": dtypes.uint32, "int64": dtypes.int64,
               "uint64": dtypes.uint64, "float16": dtypes.float16, "bfloat16": dtypes.bfloat16,
               "float32": dtypes.float32, "float64": dtypes.float64}
DTYPE_NAMES = {dt: name for name, dt in TINY_DTYPES.items()}
TORCH_DTYPES = {name: getattr(torch, name) for name in TINY_DTYPES}
TORCH_NAMES = {dt: name for name, dt in TORCH_DTYPES.items()}
NP_DTYPES = {name: np.dtype("float32" if name == "bfloat16" else name) for name in TINY_DTYPES}
# torch CPU implements almost nothing for these: its oracle runs in int64, and the result wraps back
VIA_INT64 = {"uint16", "uint32"}


# ---- values --------------------------------------------------------------------------------------------------------
def _bound(value, info):
    return value(info) if callable(value) else value


def inward(value: float, dtype: str) -> float:
    """value rounded towards zero to one the dtype holds (hypothesis wants exact bounds)."""
    held = float(np.array(value, NP_DTYPES[dtype]))
    if abs(held) > abs(value):
        held = float(np.nextafter(np.array(held, NP_DTYPES[dtype]), np.array(0, NP_DTYPES[dtype])))
    return held


def float_elements(dtype: str, domain: Domain):
    info = torch.finfo(TORCH_DTYPES[dtype])
    width = {"float16": 16, "bfloat16": 32, "float32": 32, "float64": 64}[dtype]
    top = _bound(domain.max_abs, info) or info.max
    lo, hi = domain.float_range or (domain.lo, domain.hi)
    lo, hi = (inward(max(-top, lo if lo is not None else -top), dtype),
              inward(min(top, hi if hi is not None else top), dtype))
    smallest_subnormal = info.tiny * info.eps
    specials = [0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, 45.0, -100.0, 1e7, 1e18, info.tiny, -info.tiny,
                smallest_subnormal, -smallest_subnormal, info.max, -info.max, top, -top]
    if not domain.finite:
        specials += [math.nan, math.inf, -math.inf]
    min_abs = _bound(domain.min_abs, info) or 0.0

    def allowed(v):
        return math.isnan(v) or math.isinf(v) or (lo <= v <= hi and (v == 0 or abs(v) >= min_abs))
    specials = [float(np.array(v, NP_DTYPES[dtype])) if abs(v) <= info.max else v for v in specials]
    specials = sorted({v for v in specials if allowed(v)}, key=repr)
    ranged = st.floats(lo, hi, width=width, allow_nan=False, allow_infinity=False)
    small = st.floats(max(lo, -4.0), min(hi, 4.0), width=width) if lo <= 4 and hi >= -4 else ranged
    return st.one_of(st.sampled_from(specials), small, ranged).filter(allowed)


def int_elements(dtype: str, domain: Domain):
    info = torch.iinfo(TORCH_DTYPES[dtype]) if dtype != "bool" else None
    lo = max(info.min + domain.no_int_min, domain.lo if domain.lo is not None else info.min)
    hi = min(info.max, domain.hi if domain.hi is not None else info.max)
    specials = sorted({v for v in (info.min, info.max, 0, 1, -1, 2, info.min + 1, info.max - 1) if lo <= v <= hi})
    elements = st.one_of(st.sampled_from(specials), st.integers(max(lo, -8), min(hi, 8)), st.integers(lo, hi))
    return elements.filter(lambda v: v != 0) if domain.int_nonzero else elements


def draw_array(draw, shape: tuple, dtype: str, domain: Domain) -> np.ndarray:
    if dtype == "bool":
        return draw(hnp.arrays(np.bool_, shape, elements=st.booleans()))
    elements = float_elements(dtype, domain) if dtype in FLOATS else int_elements(dtype, domain)
    values = draw(hnp.arrays(NP_DTYPES[dtype], shape, elements=elements))
    if dtype == "bfloat16":   # round to what bfloat16 holds, so both sides start from the same values
        values = torch.from_numpy(values).to(torch.bfloat16).float().numpy()
    return values


def to_tiny(values: np.ndarray, dtype: str, device: str) -> Tensor:
    t = Tensor(values, device=device)
    return t.cast(dtypes.bfloat16) if dtype == "bfloat16" else t


def to_torch(values: np.ndarray, dtype: str):
    t = torch.from_numpy(values.copy())
    return t.to(torch.bfloat16) if dtype == "bfloat16" else t.to(torch.int64) if dtype in VIA_INT64 else t


def to_numpy(t) -> np.ndarray:
    if isinstance(t, Tensor):
        return (t.float() if t.dtype == dtypes.bfloat16 else t).numpy()
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


# ---- comparing -----------------------------------------------------------------------------------------------------
def expected_dtype(op, dtype: str, input_dtypes: list[str], torch_out) -> str:
    if op.out_dtype is not None:
        return op.out_dtype(dtype)
    if op.promote:
        floats = [d for d in input_dtypes if d in FLOATS]
        if any(d in VIA_INT64 for d in input_dtypes):   # torch doesn't promote these: numpy's lattice is the same
            return floats[0] if len(floats) == 1 else str(np.promote_types(*[NP_DTYPES[d] for d in input_dtypes]))
        promoted = TORCH_DTYPES[input_dtypes[0]]
        for d in input_dtypes[1:]:
            promoted = torch.promote_types(promoted, TORCH_DTYPES[d])
        return TORCH_NAMES[promoted]
    name = TORCH_NAMES[torch_out.dtype]
    if name == "int64" and dtype in VIA_INT64:
        return dtype    # the oracle ran in int64 for this unsigned dtype
    if name == "int64" and "int64" not in input_dtypes:
        return "int32"  # torch's default int is int64 where tinygrad's is int32
    return name


def mismatches(a: np.ndarray, e: np.ndarray, atol: float, rtol: float, scale, signed_zero: bool) -> np.ndarray:
    bad = np.isnan(a) != np.isnan(e)
    infinite = np.isinf(a) | np.isinf(e)
    bad |= infinite & (a != e)
    finite = np.isfinite(a) & np.isfinite(e)
    margin = atol + rtol * (np.abs(e) + (0 if scale is None else np.abs(scale.astype(np.float64))))
    with np.errstate(invalid="ignore"):
        bad |= finite & ~(np.abs(a - e) <= margin)
    if signed_zero:
        bad |= (a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e))
    return bad


def assert_matches(actual: np.ndarray, expected: np.ndarray, atol: float, rtol: float, scale=None,
                   signed_zero: bool = False, what: str = "value", also: np.ndarray | None = None):
    """also: a second answer torch gives for the same values; an element matching either passes."""
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, torch {expected.shape}"
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    bad = mismatches(a, e, atol, rtol, scale, signed_zero)
    if also is not None:
        bad &= mismatches(a, also.astype(np.float64), atol, rtol, scale, signed_zero)
    if bad.any():
        where = np.argwhere(bad)[:5]
        rows = ", ".join(f"at {tuple(int(i) for i in w)}: {a[tuple(w)]!r} (torch {e[tuple(w)]!r})" for w in where)
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} differ: {rows}")


def cast_expected(t, dtype: str) -> np.ndarray:
    """torch's answer in the dtype tinygrad names (ints wrap, as tinygrad's fixed-width arithmetic does)."""
    values = to_numpy(t)
    if dtype == "bfloat16":
        return values
    return values.astype(NP_DTYPES[dtype]) if values.dtype.kind in "biu" or dtype in FLOATS else values


# ---- the cases -----------------------------------------------------------------------------------------------------
def draw_case(data, op, dtype: str):
    inputs, params = data.draw(st.composite(lambda draw: (op.inputs or unary)(draw, dtype))(), label="inputs")
    arrays, input_dtypes = [], []
    for n, spec in enumerate(inputs):
        dt = spec.dtype or dtype
        values = st.composite(lambda draw, spec=spec, dt=dt: draw_array(draw, spec.shape, dt, spec.domain or op.domain))
        arrays.append(data.draw(values(), label=f"input {n} ({dt})"))
        input_dtypes.append(dt)
    return arrays, input_dtypes, params


def run_forward(op, dtype: str, data, device: str):
    arrays, input_dtypes, params = draw_case(data, op, dtype)
    try:
        reference = op.torch(*[to_torch(a, d) for a, d in zip(arrays, input_dtypes)], **params)
    except (RuntimeError, IndexError, ValueError) as torch_error:
        with pytest.raises(Exception):   # noqa: B017 -- torch refuses: any clear error will do, not a number
            op.tiny(*[to_tiny(a, d, device) for a, d in zip(arrays, input_dtypes)], **params).realize()
        return f"torch raises {torch_error}"
    out = op.tiny(*[to_tiny(a, d, device) for a, d in zip(arrays, input_dtypes)], **params)
    want = expected_dtype(op, dtype, input_dtypes, reference)
    if want in NP_DTYPES and NP_DTYPES[want].kind in "iu" and TORCH_DTYPES[want].itemsize > reference.dtype.itemsize:
        # tinygrad names a wider int than torch: torch must not wrap in the narrower one first
        reference = op.torch(*[to_torch(a, d).to(torch.int64) if d != "bool" and d not in FLOATS else to_torch(a, d)
                               for a, d in zip(arrays, input_dtypes)], **params)
    assert DTYPE_NAMES[out.dtype] == want, f"dtype {DTYPE_NAMES[out.dtype]}, expected {want} (torch {reference.dtype})"
    scale = None
    if op.scale and want in FLOATS:
        magnitudes = [to_torch(np.asarray(np.abs(a)), d).double() for a, d in zip(arrays, input_dtypes)]
        scale = to_numpy(op.torch(*magnitudes, **params))
    atol, rtol = op.tol.get(want, (0, 0))
    assert_matches(to_numpy(out), cast_expected(reference, want), atol, rtol, scale, op.signed_zero, "forward")


def strided(t):
    """The same values in a view with stride 2, which torch's elementwise kernels run through their scalar loop."""
    return torch.stack([t, torch.zeros_like(t)], -1)[..., 0]


def run_grad(op, dtype: str, data, device: str):
    arrays, input_dtypes, params = draw_case(data, op, dtype)
    differentiable = [d == dtype for d in input_dtypes]
    torch_inputs = [to_torch(a, d).requires_grad_(f) for a, d, f in zip(arrays, input_dtypes, differentiable)]
    try:
        reference = op.torch(*torch_inputs, **params)
    except (RuntimeError, IndexError, ValueError):
        return   # the forward test checks that tinygrad raises too
    # output weights that are powers of two: the incoming gradient adds no rounding of its own
    powers_of_two = st.sampled_from([1.0, -0.5, 2.0, 0.25])
    weights = data.draw(hnp.arrays(np.float32, tuple(reference.shape), elements=powers_of_two), label="output gradient")
    reference.backward(torch.from_numpy(weights).to(reference.dtype))
    # torch's vector loop (contiguous inputs) and its scalar loop (strided ones) can disagree: elu's gradient at NaN
    # is NaN in the first, 1 in the second. Either answer passes
    scalar_inputs = [to_torch(a, d).requires_grad_(f) for a, d, f in zip(arrays, input_dtypes, differentiable)]
    op.torch(*[strided(t) for t in scalar_inputs], **params).backward(torch.from_numpy(weights).to(reference.dtype))
    tiny_inputs = [to_tiny(a, d, device).requires_grad_(f) for a, d, f in zip(arrays, input_dtypes, differentiable)]
    out = op.tiny(*tiny_inputs, **params)
    out.backward(Tensor(weights, device=device).cast(out.dtype))
    scale_grads = [None] * len(arrays)
    if op.scale:
        abs_inputs = [to_torch(np.asarray(np.abs(a)), d).double().requires_grad_(f)
                      for a, d, f in zip(arrays, input_dtypes, differentiable)]
        op.torch(*abs_inputs, **params).backward(torch.from_numpy(np.asarray(np.abs(weights))).double())
        scale_grads = [to_numpy(t.grad) if t.grad is not None else None for t in abs_inputs]
    atol, rtol = GRAD_TOLERANCE[dtype]
    for n, (tiny_in, torch_in) in enumerate(zip(tiny_inputs, torch_inputs)):
        if not differentiable[n]:
            continue
        want, scalar_want, got = (to_numpy(t.grad) if t.grad is not None else np.zeros(arrays[n].shape, np.float32)
                                  for t in (torch_in, scalar_inputs[n], tiny_in))
        assert_matches(got, want, atol, rtol, scale_grads[n], what=f"gradient of input {n}", also=scalar_want)


def torch_implements(op, dtype: str) -> bool:
    """Cases without an oracle don't run: torch raises 'not implemented for <dtype>' on a small example."""
    dt = torch.int64 if dtype in VIA_INT64 else TORCH_DTYPES[dtype]
    try:
        op.torch(*[torch.ones((2, 2), dtype=dt)] * 3 if op.name == "where" else [torch.ones((2, 2), dtype=dt)],
                 **SMOKE_PARAMS.get(op.name, {}))
    except NotImplementedError:
        return False
    except RuntimeError as e:
        return "not implemented for" not in str(e)
    except Exception:   # noqa: BLE001 -- wrong arity or parameters for this smoke call: the op is there
        return True
    return True


SMOKE_PARAMS = {"clip": {"c": 1}, "lshift": {"c": 1}, "rshift": {"c": 1}, "add_scalar": {"c": 1}}


def cases(part: str, names=None, xfail_part=None):
    for op in OPS:
        if names is not None and op.name not in names:
            continue
        dtypes_ = [d for d in op.dtypes if d in GRAD_DTYPES] if part == "grad" else op.dtypes
        if part == "grad" and not op.grad:
            continue
        for dtype in dtypes_:
            if not torch_implements(op, dtype):
                continue
            reason = xfail_reason(op.name, xfail_part or part, dtype)
            marks = [pytest.mark.xfail(reason=reason, strict=False)] if reason else []
            yield pytest.param(op.name, dtype, id=f"{op.name}-{dtype}", marks=marks)


def cl_available() -> bool:
    try:
        Device["CL"]
        return True
    except Exception:   # noqa: BLE001 -- not installed, or no OpenCL platform: either way no CL cases
        return False


def make_test(part: str, run, name: str, params: list, device=None):
    """One test function per op and part, parametrized by dtype: hypothesis's pytest plugin wraps a parametrized
    test's settings once per case, and a thousand cases on one function nest past the recursion limit."""
    @pytest.mark.parametrize("dtype", params)
    @settings(PROFILE)
    @given(data=st.data())
    def test(dtype, data):
        run(OPS_BY_NAME[name], dtype, data, device or Device.DEFAULT)
    test.__name__ = test.__qualname__ = f"test_{part}_{name}"
    return test


def per_op(params):
    by_op = {}
    for p in params:
        by_op.setdefault(p.values[0], []).append(pytest.param(p.values[1], id=p.id.rpartition("-")[2], marks=p.marks))
    return by_op


for _name, _params in per_op(cases("forward")).items():
    globals()[f"test_forward_{_name}"] = make_test("forward", run_forward, _name, _params)
for _name, _params in per_op(cases("grad")).items():
    globals()[f"test_grad_{_name}"] = make_test("grad", run_grad, _name, _params)
if cl_available():
    _cl_cases = (p for p in cases("forward", CL_SUBSET, "cl") if p.values[1] in ("float32", "int32"))
    for _name, _params in per_op(_cl_cases).items():
        globals()[f"test_cl_{_name}"] = make_test("cl", run_forward, _name, _params, "CL")
