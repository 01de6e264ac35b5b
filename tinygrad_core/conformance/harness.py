"""What every conformance test uses: the backend under test, one-op kernels built straight from UOps, tensor-level
checks that either launch (and compare) or only render and compile (--compile-only), and the tolerances.

The comparisons here are the whole definition of "conforms": exact for exact ops, a few ulps for math functions."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from tinygrad_core.device import Buffer, Compiled, Device
from tinygrad_core.dtype import ALL, FLOATS, DType, bf16_to_f32, dtypes, f32_to_bf16
from tinygrad_core.engine.realize import CompiledRunner
from tinygrad_core.ops import Ops, UOp
from tinygrad_core.plugins import Backend, registry
from tinygrad_core.schedule import create_schedule

REFERENCE_BACKEND = "PYTHON"
# tinygrad-python is not on the package index: it ships in tinygrad-core's repository
REFERENCE_INSTALL = "from a checkout of the tinygrad-core repository, pip install ./plugins/tinygrad_python"


class NotCovered(pytest.skip.Exception):
    """A skip that leaves part of the contract unchecked because something the suite needs is missing (unlike a
    capability the backend declares it lacks): the verdict is then INCOMPLETE, never CONFORMS."""


def not_covered(reason: str):
    raise NotCovered(reason)


@dataclass
class BackendUnderTest:
    """The backend the suite is checking, opened once per session. When load() failed or returned something that
    is not a Compiled, load_error says so and every use of `compiled` fails with it."""
    name: str
    backend: Backend
    loaded: Compiled | None
    compile_only: bool = False
    max_examples: int = 10
    kernels_compiled: int = field(default=0)
    load_error: str | None = None

    @property
    def compiled(self) -> Compiled:
        if self.load_error is not None:
            raise AssertionError(f"{self.name} did not load: {self.load_error}")
        return self.loaded

    @property
    def renderer(self):
        return self.compiled.renderer

    def supports(self, *dts: DType) -> bool:
        return all(dt in self.renderer.supported_dtypes for dt in dts)

    def dtypes(self) -> list[DType]:
        """The declared dtypes, in the core's order."""
        return [dt for dt in ALL if dt in self.renderer.supported_dtypes]

    # ---- kernels built from UOps ----
    def kernel(self, ast: UOp, opts=None) -> CompiledRunner:
        """Render and compile ast (nothing is launched)."""
        runner = CompiledRunner(self.name, ast, opts)
        self.kernels_compiled += 1
        return runner

    def run_kernel(self, runner: CompiledRunner, out_dtype: DType, out_size: int, inputs: list[np.ndarray],
                   in_dtypes: list[DType] | None = None, var_vals: dict | None = None, wait: bool = False):
        """Launch a compiled kernel on fresh buffers holding `inputs` (host values; bfloat16 as float32) and return
        the output as host values (bfloat16 as float32)."""
        in_dtypes = in_dtypes or [dtypes.from_np(x.dtype) for x in inputs]
        bufs = [Buffer(self.name, out_size, out_dtype)]
        bufs += [to_device(self.name, x, dt) for x, dt in zip(inputs, in_dtypes)]
        for buf in bufs:
            buf.ensure_allocated()
        seconds = runner(bufs, var_vals, wait=wait)
        out = from_device(bufs[0])
        return (out, seconds) if wait else out

    # ---- tensor-level checks ----
    def realize_or_compile(self, *tensors):
        """Full mode: realize the tensors and return their numpy values. Compile-only mode: render and compile
        every kernel their schedule needs, and return None."""
        if not self.compile_only:
            from tinygrad_core.tensor import Tensor
            Tensor.realize_all(*tensors)
            return [t.numpy() for t in tensors]
        for item in create_schedule([t.uop for t in tensors]):
            if item.ast.op is Ops.SINK:
                self.kernel(item.ast)
        return None

    def tensor(self, array: np.ndarray, dtype: DType | None = None, requires_grad: bool | None = None):
        """An input tensor on the backend: the array's values, or (compile-only) an unallocated tensor its shape."""
        from tinygrad_core.tensor import Tensor
        dtype = dtype or dtypes.from_np(array.dtype)
        if self.compile_only:
            return Tensor.empty(*array.shape, device=self.name, dtype=dtype, requires_grad=requires_grad)
        return Tensor(array, device=self.name, dtype=dtype, requires_grad=requires_grad)


def open_backend(name: str, compile_only: bool = False, max_examples: int = 10) -> BackendUnderTest:
    """Find the backend by name and load it. Raises LookupError with the reason when it can't be used."""
    registry.discover()
    backend = Device.backend(name)        # raises with the known backends listed when the name is unknown
    if compile_only:
        backend.assume_usable()
    elif backend.reason is not None:
        raise LookupError(f"backend {backend.name} ({backend.distribution} {backend.version}) is {backend.status}: "
                          f"{backend.reason}. Fix that, or run with --compile-only to check rendering and compiling")
    try:
        compiled = Device[backend.name]
        error = None if isinstance(compiled, Compiled) else \
            f"load() of {backend.distribution} returned {compiled!r}, not a Compiled"
    except Exception as e:  # noqa: BLE001  (a load() that raises is that backend's failure, shown in section 1)
        compiled, error = None, f"{type(e).__name__}: {e}"
    return BackendUnderTest(backend.name, backend, compiled, compile_only, max_examples, load_error=error)


# ---------------------------------------------------------------------------------------------------------------
# Host <-> device values (bfloat16 is carried on the host as float32 values, on the device as its 16 bits).
# ---------------------------------------------------------------------------------------------------------------
def to_device(device: str, values: np.ndarray, dtype: DType | None = None) -> Buffer:
    dtype = dtype or dtypes.from_np(values.dtype)
    raw = f32_to_bf16(values.astype(np.float32)) if dtype == dtypes.bfloat16 else values.astype(dtype.np)
    return Buffer(device, values.size, dtype, initial=raw.reshape(-1))


def from_device(buf: Buffer) -> np.ndarray:
    out = buf.numpy()
    return bf16_to_f32(out) if buf.dtype == dtypes.bfloat16 else out


def host_dtype(dt: DType):
    return np.dtype(np.float32) if dt == dtypes.bfloat16 else dt.np


def kernel_ast(op: Ops, out_dtype: DType, in_dtypes: list[DType], size: int, arg=None) -> UOp:
    """SINK(STORE(out, op(INPUT in1, INPUT in2, ...))): one op alone in a kernel, over `size` elements."""
    loads = [UOp(Ops.INPUT, dt, (UOp(Ops.DEFINE_GLOBAL, dt, (), i + 1),), size) for i, dt in enumerate(in_dtypes)]
    value = UOp(op, out_dtype, tuple(loads), arg)
    out = UOp(Ops.DEFINE_GLOBAL, out_dtype, (), 0)
    return UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (out, value)),))


# ---------------------------------------------------------------------------------------------------------------
# Comparisons.
# ---------------------------------------------------------------------------------------------------------------
def product_kernel(tensor) -> UOp:
    """The AST of the last kernel that computes `tensor` and reduces (a matmul's or a convolution's product; kernels
    after it only move or map its result)."""
    return [item.ast for item in tensor.schedule() if any(u.op is Ops.REDUCE_AXIS for u in item.ast.toposort())][-1]


def ulp(values: np.ndarray, dtype: DType) -> np.ndarray:
    """The spacing of dtype's floats at each value (the smallest subnormal near zero)."""
    if dtype == dtypes.bfloat16:   # float32's spacing with 16 fewer mantissa bits
        return np.spacing(np.abs(values).astype(np.float32)).astype(np.float64) * 2.0 ** 16
    return np.abs(np.spacing(np.abs(values).astype(dtype.np))).astype(np.float64)


def mismatches(actual: np.ndarray, expected: np.ndarray, dtype: DType, ulps: float = 0, atol: float = 0,
               signed_zero: bool = True) -> np.ndarray:
    """A boolean mask of the elements where actual doesn't conform to expected.

    Floats: NaN must meet NaN; infinities must match exactly; finite values within `ulps` units in the last place
    of the expected value (plus atol); with signed_zero, a zero result must have the expected sign."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if dtype not in FLOATS:
        return actual.astype(expected.dtype) != expected
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    a_nan, e_nan = np.isnan(a), np.isnan(e)
    with np.errstate(all="ignore"):
        finite = np.isfinite(e) & np.isfinite(a)
        bad = (a_nan != e_nan) | (~finite & ~a_nan & ~e_nan & (a != e))
        tolerance = ulps * ulp(e, dtype) + atol
        bad |= finite & (np.abs(a - e) > tolerance)
        if signed_zero:
            bad |= finite & (e == 0) & (a == 0) & (np.signbit(a) != np.signbit(e))
    return bad


def assert_conforms(actual, expected, dtype: DType, what: str, inputs: list[np.ndarray] | None = None,
                    title: str | None = None, **tolerance):
    bad = mismatches(actual, expected, dtype, **tolerance)
    if bad.any():
        where = np.flatnonzero(bad)[:8]
        rows = []
        for i in where:
            args = ", ".join(repr(x.reshape(-1)[i].item()) for x in inputs or [])
            rows.append(f"  [{i}] {what}({args}) = {np.asarray(actual).reshape(-1)[i]!r}, "
                        f"expected {np.asarray(expected).reshape(-1)[i]!r}")
        shown = {k: ("per element" if np.ndim(v) else v) for k, v in tolerance.items()} or "exact"
        title = title or f"{what} on {dtype.name}"
        raise AssertionError(f"{title}: {int(bad.sum())} of {bad.size} elements differ from the reference semantics "
                             f"(tolerance {shown}):\n" + "\n".join(rows))


def assert_close(actual: np.ndarray, expected: np.ndarray, what: str, rtol: float = 1e-4, atol: float = 1e-5):
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {actual.shape}, expected {expected.shape}")
    with np.errstate(all="ignore"):
        bad = ~np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        i = np.flatnonzero(bad)[0]
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} values differ (rtol={rtol}, atol={atol}); "
                             f"first at flat index {i}: got {actual.reshape(-1)[i]!r}, expected "
                             f"{expected.reshape(-1)[i]!r}")


def numeric_gradient(fn, inputs: list[np.ndarray], weights: np.ndarray, eps: float = 1e-6) -> list[np.ndarray]:
    """d sum(fn(*inputs) * weights) / d inputs, by central differences in float64 (the expected gradients never come
    from the code under test)."""
    inputs = [x.astype(np.float64) for x in inputs]
    grads = []
    for k, x in enumerate(inputs):
        grad = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            plus, minus = [v.copy() for v in inputs], [v.copy() for v in inputs]
            plus[k][i] += eps
            minus[k][i] -= eps
            grad[i] = ((fn(*plus) * weights).sum() - (fn(*minus) * weights).sum()) / (2 * eps)
        grads.append(grad)
    return grads
