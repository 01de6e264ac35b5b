"""Tensor cores through the reference backend: a renderer that declares them gets WMMA tile ops for matmul-shaped
kernels, which the reference backend executes tile by tile. The results must match numpy; kernels that don't
fit (float32, partial tiles, an epilogue) keep the plain lowering."""
from __future__ import annotations
import numpy as np
import pytest
from tinygrad_core import Device, Tensor, dtypes
from tinygrad_core.dtype import bf16_to_f32, f32_to_bf16
from tinygrad_core.engine.realize import get_runner
from tinygrad_core.renderer import TensorCore
from helpers import assert_close


@pytest.fixture
def python_with_tensor_cores(monkeypatch):
    compiled = Device["PYTHON"]
    monkeypatch.setattr(compiled.renderer, "tensor_cores", (TensorCore((16, 16, 16), dtypes.float16, dtypes.float32),
                                                           TensorCore((16, 16, 16), dtypes.bfloat16, dtypes.float32)),
                        raising=False)
    monkeypatch.setattr(compiled, "kernel_cache", {})
    return compiled


def _uses_tensor_core(t: Tensor) -> bool:
    return get_runner("PYTHON", t.schedule()[-1].ast).opts.tensor_core


@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16])
@pytest.mark.parametrize("m, k, n", [(16, 16, 16), (32, 48, 64)])
def test_matmuls_run_as_tiles_and_match_numpy(python_with_tensor_cores, dtype, m, k, n):
    rng = np.random.default_rng(m + k + n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    ta, tb = Tensor(a, device="PYTHON", dtype=dtype), Tensor(b, device="PYTHON", dtype=dtype)
    # the inputs as the 16-bit type holds them, rounded by numpy (a realized ta.float() could be reused below)
    rounded = (lambda x: x.astype(np.float16)) if dtype == dtypes.float16 else (lambda x: bf16_to_f32(f32_to_bf16(x)))
    exact = rounded(a).astype(np.float64) @ rounded(b).astype(np.float64)
    for x, y, widen in ((ta, tb, False), (Tensor(a.T.copy(), device="PYTHON", dtype=dtype).T, tb, False),
                        (ta, Tensor(b.T.copy(), device="PYTHON", dtype=dtype).T, False), (ta, tb, True)):
        out = x.float() @ y.float() if widen else x @ y
        assert _uses_tensor_core(out)
        assert_close(out.float().numpy(), exact, rtol=2e-2, atol=5e-2)


def test_kernels_that_dont_fit_keep_the_plain_lowering(python_with_tensor_cores):
    half = dict(device="PYTHON", dtype=dtypes.float16)
    a, b = np.ones((32, 24), np.float32), np.ones((24, 16), np.float32)
    assert not _uses_tensor_core(Tensor(a, device="PYTHON") @ Tensor(b, device="PYTHON"))     # float32
    assert not _uses_tensor_core(Tensor(a, **half) @ Tensor(b, **half))                      # K = 24
    c = np.ones((32, 32), np.float32)
    out = Tensor(c, **half) @ Tensor(c, **half) + 1                                          # an epilogue
    assert not _uses_tensor_core(out)
    assert_close(out.numpy(), c @ c + 1)
    assert not _uses_tensor_core((Tensor(c, **half) @ Tensor(c, **half)).float())      # rounds to half, then widens
