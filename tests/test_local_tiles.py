"""Local-memory tiling (codegen/local_tiles.py) through the reference backend, with has_shared declared for the test:
matmuls (whole and partial tiles, transposed operands, batched), convolutions and their gradients, an epilogue, each
against numpy; kernels that don't fit keep the plain lowering. The same checks run on CL where a device exists.
PYTHON-4x4 lets each thread compute a 4 x 4 register tile (2 x 2 where the output is too small for 4 x 4)."""
from __future__ import annotations
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from tinygrad_core import Device, Tensor
from tinygrad_core.codegen import local_tiles
from tinygrad_core.conformance.harness import product_kernel
from tinygrad_core.engine.realize import get_runner
from helpers import assert_close


def _with_shared(monkeypatch, device: str, upcast: int | None = None):
    compiled = Device[device]
    monkeypatch.setattr(compiled.renderer, "has_shared", True, raising=False)
    monkeypatch.setattr(compiled.renderer, "shared_max", max(compiled.renderer.shared_max, 1 << 14), raising=False)
    if upcast is not None:         # the register tile per thread: R x R outputs, R*R <= max_upcast
        monkeypatch.setattr(compiled.renderer, "max_upcast", upcast, raising=False)
    monkeypatch.setattr(compiled, "kernel_cache", {})
    return device


def _cl_available() -> bool:
    try:
        import tinygrad_opencl
    except ImportError:
        return False
    return tinygrad_opencl.probe() is None


@pytest.fixture(params=[pytest.param(("PYTHON", 1), id="PYTHON"), pytest.param(("PYTHON", 16), id="PYTHON-4x4"),
                        pytest.param(("CL", None), id="CL", marks=pytest.mark.skipif(not _cl_available(),
                                                                                     reason="no OpenCL device"))])
def device(request, monkeypatch):
    name, upcast = request.param
    return _with_shared(monkeypatch, name, upcast)


def _tiled(t: Tensor) -> bool:
    return get_runner(t.device, product_kernel(t)).opts.local_tiles


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("m, k, n", [(32, 48, 64), (40, 33, 20), (70, 20, 65)])
@pytest.mark.parametrize("layout", ["a@b", "a.T@b", "a@b.T"])
def test_matmul_matches_numpy(device, m, k, n, layout):
    a, b = _rand(m, k), _rand(k, n, seed=1)
    ta = Tensor(a.T.copy(), device=device).T if layout == "a.T@b" else Tensor(a, device=device)
    tb = Tensor(b.T.copy(), device=device).T if layout == "a@b.T" else Tensor(b, device=device)
    out = ta @ tb
    assert _tiled(out)
    assert_close(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_batched_matmul_tiles_each_batch(device):
    a, b = _rand(3, 20, 17), _rand(3, 17, 24, seed=1)
    out = Tensor(a, device=device) @ Tensor(b, device=device)
    plan = local_tiles.match(out.schedule()[-1].ast, Device[device].renderer)
    assert plan is not None and plan.batch_axes == (0,)
    assert_close(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_epilogue_and_prologue_run_in_the_tiled_kernel(device):
    a, b, bias = _rand(24, 37), _rand(37, 18, seed=1), _rand(18, seed=2)
    out = (Tensor(a, device=device).exp() @ Tensor(b, device=device) + Tensor(bias, device=device)).relu()
    assert _tiled(out)          # one kernel: exp prologue, K = 37 (a partial step), bias + relu epilogue
    assert_close(out.numpy(), np.maximum(np.exp(a) @ b + bias, 0), rtol=1e-4, atol=1e-3)


def _windows(x: np.ndarray, kh: int, kw: int, stride: int, pad: int) -> np.ndarray:
    """(n, c, oh, ow, kh, kw) input patches of a padded, strided convolution."""
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    return sliding_window_view(padded, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]


def test_conv2d_forward_and_gradients(device):
    x, w = _rand(2, 3, 9, 9), _rand(16, 3, 3, 3, seed=1)
    tx, tw = Tensor(x, device=device, requires_grad=True), Tensor(w, device=device, requires_grad=True)
    out = tx.conv2d(tw, stride=2, padding=1)
    assert _tiled(out)                  # M = 2*5*5 images x positions, N = 16 channels, K = 3*3*3
    windows = _windows(x, 3, 3, 2, 1)
    expected = np.einsum("ncyxhw,ochw->noyx", windows, w)
    assert_close(out.numpy(), expected, rtol=1e-4, atol=1e-4)
    grad = _rand(*expected.shape, seed=3)
    (out * Tensor(grad, device=device)).sum().backward()
    assert _tiled(tw.grad)              # M = 16 channels, N = 3*3*3, K = 2*5*5 (the input's gradient is no product)
    assert_close(tw.grad.numpy(), np.einsum("noyx,ncyxhw->ochw", grad, windows), rtol=1e-4, atol=1e-4)
    # the input's gradient: each output's grad @ w scattered back over the window it read
    dx = np.zeros((2, 3, 11, 11), np.float64)
    patches = np.einsum("noyx,ochw->ncyxhw", grad, w)
    for i in range(3):
        for j in range(3):
            dx[:, :, i:i + 10:2, j:j + 10:2] += patches[..., i, j]
    assert_close(tx.grad.numpy(), dx[:, :, 1:10, 1:10], rtol=1e-4, atol=1e-4)


def test_kernels_that_dont_fit_keep_the_plain_lowering(device, monkeypatch):
    a, b = _rand(8, 40), _rand(40, 40, seed=1)
    assert not _tiled(Tensor(a, device=device) @ Tensor(b, device=device))                 # M = 8
    x = Tensor(_rand(32, 32), device=device)
    assert not _tiled(x.sum(1))                                                            # no product
    assert not _tiled((x @ x).reshape(32, 1, 32).expand(32, 2, 32))                       # a broadcast output
    out = Tensor(b, device=device) @ Tensor(b, device=device)
    monkeypatch.setattr(Device[device].renderer, "shared_max", 64)                          # tiles don't fit
    assert not _tiled(out)
    assert_close(out.numpy(), b @ b, rtol=1e-4, atol=1e-4)
