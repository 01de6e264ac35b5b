"""The CPU backend's sin against numpy's float64 sin, at every magnitude a dtype has: the range reduction must hold
from the subnormals to the largest finite value, not only where x * 2/pi still fits a double's 53 bits."""
import numpy as np
import pytest
from tinygrad_core import Tensor
from tinygrad_core.dtype import dtypes
from tinygrad_core.ops import Ops
from tinygrad_cpu import mathlib
from cpu_kernel_runner import run_elementwise


def ulp_error(got: np.ndarray, x: np.ndarray, dtype) -> np.ndarray:
    """|got - sin(x)| in units in the last place of the exact result (numpy's float64 sin stands in for it)."""
    exact = np.sin(x.astype(np.float64))
    return np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(dtype)).astype(np.float64)


def every_binade(dtype, per_binade: int, seed: int = 0) -> np.ndarray:
    """Random bit patterns with every exponent field (subnormals included, inf/NaN not), both signs, plus each
    binade's first and last value."""
    info = np.finfo(dtype)
    bits_type, mantissa_bits = {4: np.uint32, 8: np.uint64, 2: np.uint16}[info.bits // 8], info.nmant
    exponents = np.arange(2 ** (info.bits - 1 - mantissa_bits) - 1, dtype=np.uint64)
    rng = np.random.default_rng(seed)
    mantissas = rng.integers(0, 2 ** mantissa_bits, (len(exponents), per_binade), dtype=np.uint64)
    mantissas[:, :2] = [0, 2 ** mantissa_bits - 1]
    magnitudes = (exponents[:, None] << np.uint64(mantissa_bits)) | mantissas
    signs = rng.integers(0, 2, magnitudes.shape, dtype=np.uint64) << np.uint64(info.bits - 1)
    return (magnitudes | signs).astype(bits_type).view(dtype).reshape(-1)


def test_float32_sin_is_within_half_an_ulp_at_every_magnitude():
    x = np.concatenate([every_binade(np.float32, 512),
                        np.array([1e5, 1e12, 1e18, 1e22, 1e36, 3e38, 3.4028235e38, 16367173 * 2.0 ** 72], np.float32)])
    got = run_elementwise(Ops.SIN, dtypes.float32, [(x, dtypes.float32)])
    error = ulp_error(got, x, np.float32)
    assert error.max() <= 0.51, f"{error.max():.3f} ulp at x = {x[np.argmax(error)]!r}"


def test_sin_at_zero_subnormals_inf_and_nan():
    x = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-40, np.inf, -np.inf, np.nan], np.float32)
    got = run_elementwise(Ops.SIN, dtypes.float32, [(x, dtypes.float32)])
    np.testing.assert_array_equal(got[:5], x[:5])
    assert list(np.signbit(got[:2])) == [False, True]          # sin(-0) is -0
    assert np.isnan(got[5:]).all()


def test_float64_sin_at_every_magnitude():
    x = every_binade(np.float64, 16)
    got = run_elementwise(Ops.SIN, dtypes.float64, [(x, dtypes.float64)])
    assert ulp_error(got, x, np.float64).max() <= 1.0


def test_half_sin_of_every_finite_half_is_the_float_result_rounded():
    x = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16)
    x = np.concatenate([x, -x])
    got = run_elementwise(Ops.SIN, dtypes.float16, [(x, dtypes.float16)])
    # computed in float32 (within half an ulp of it) and rounded once more: at most one half's ulp from exact
    assert ulp_error(got, x, np.float16).max() <= 1.0


def test_large_sin_on_cpu_matches_the_reference_backend():
    values = [1e18, 1e22, 1e36, -3e38]
    cpu = Tensor(values, device="CPU").sin().numpy()
    np.testing.assert_allclose(cpu, Tensor(values, device="PYTHON").sin().numpy(), rtol=1e-6)
    np.testing.assert_allclose(cpu, np.sin(np.array(values, np.float32).astype(np.float64)), rtol=1e-6)


def test_the_bits_of_two_over_pi():
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workprec(300):
        assert mathlib.TWO_OVER_PI_BITS == int(mpmath.floor(2 / mpmath.pi * mpmath.mpf(2) ** 256))


def test_sin_vectorises_without_gathers():
    # the reduction's window of 2/pi is shifted out of constants: a table lookup would be a gather in every lane
    from tinygrad_core.engine.realize import CompiledRunner
    from tinygrad_cpu.compiler import LLVMCompiler
    from cpu_kernel_runner import elementwise_ast
    src = CompiledRunner("CPU", elementwise_ast(Ops.SIN, dtypes.float32, [dtypes.float32], 1 << 20)).src
    assembly = LLVMCompiler().disassemble(src)
    assert "mulpd" in assembly and "gather" not in assembly
