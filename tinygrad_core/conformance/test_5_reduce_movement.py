"""Section 5, reductions and movement ops through real kernels: odd shapes, non-contiguous (permuted, strided),
padded, flipped, shrunk and broadcast inputs, and long reduce axes, against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad_core.conformance.harness import assert_close, product_kernel
from tinygrad_core.dtype import dtypes

rng = np.random.default_rng(5)


def floats(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def ints(*shape):
    return rng.integers(-1000, 1000, shape).astype(np.int32)


# (id, inputs, tensor function, numpy function); exact for ints, a float32 tolerance for floats
CASES = [
    ("sum-all", [floats(3, 5, 7)], lambda x: x.sum(), lambda x: x.sum()),
    ("sum-axis0", [floats(3, 5, 7)], lambda x: x.sum(0), lambda x: x.sum(0)),
    ("sum-axis1-keepdim", [floats(3, 5, 7)], lambda x: x.sum(1, keepdim=True), lambda x: x.sum(1, keepdims=True)),
    ("sum-axis2", [floats(3, 5, 7)], lambda x: x.sum(2), lambda x: x.sum(2)),
    ("sum-axes02", [floats(3, 5, 7)], lambda x: x.sum((0, 2)), lambda x: x.sum((0, 2))),
    ("max-axis1", [floats(4, 9)], lambda x: x.max(1), lambda x: x.max(1)),
    ("max-with-inf", [np.array([[-np.inf, -np.inf, 1], [-np.inf, -3, -np.inf]], np.float32)],
     lambda x: x.max(1), lambda x: x.max(1)),
    ("min-axis0", [floats(6, 5)], lambda x: x.min(0), lambda x: x.min(0)),
    ("prod-axis1", [floats(3, 4) * 0.5 + 1], lambda x: x.prod(1), lambda x: x.prod(1)),
    ("sum-int", [ints(7, 13)], lambda x: x.sum(1), lambda x: x.sum(1, dtype=np.int32)),
    ("max-int", [ints(7, 13)], lambda x: x.max(0), lambda x: x.max(0)),
    ("sum-single-element", [floats(1)], lambda x: x.sum(), lambda x: x.sum()),
    ("sum-of-permuted", [floats(4, 6, 5)], lambda x: x.permute(2, 0, 1).sum(2), lambda x: x.transpose(2, 0, 1).sum(2)),
    ("sum-of-padded", [floats(3, 4)], lambda x: x.pad(((1, 2), (0, 3))).sum(0),
     lambda x: np.pad(x, ((1, 2), (0, 3))).sum(0)),
    ("sum-of-flipped", [floats(5, 3), floats(5, 1)], lambda x, w: (x.flip(0) * w).sum(0),
     lambda x, w: (x[::-1] * w).sum(0)),
    ("sum-of-broadcast", [floats(1, 5)], lambda x: x.expand(6, 5).sum(0), lambda x: np.broadcast_to(x, (6, 5)).sum(0)),
    ("sum-of-strided", [floats(9, 10)], lambda x: x[::2, 1::3].sum(1), lambda x: x[::2, 1::3].sum(1)),
    ("reduce-then-reduce", [floats(5, 6)], lambda x: x.sum(1).max(), lambda x: x.sum(1).max()),
    ("reduce-broadcast-back", [floats(4, 7)], lambda x: x - x.max(1, keepdim=True),
     lambda x: x - x.max(1, keepdims=True)),
    ("long-sum", [floats(100_003)], lambda x: x.sum(), lambda x: x.astype(np.float64).sum()),
    ("long-sum-int", [ints(100_003)], lambda x: x.sum(), lambda x: x.sum(dtype=np.int32)),
    ("long-max", [floats(65_537)], lambda x: x.max(), lambda x: x.max()),
    ("long-rows", [floats(3, 20_001)], lambda x: x.sum(1), lambda x: x.astype(np.float64).sum(1)),
    ("permute-contiguous", [floats(2, 3, 5)], lambda x: x.permute(2, 0, 1).contiguous(),
     lambda x: x.transpose(2, 0, 1)),
    ("reshape-of-permuted", [floats(4, 6)], lambda x: x.permute(1, 0).reshape(3, 8),
     lambda x: x.transpose(1, 0).reshape(3, 8)),
    ("flip-all", [floats(3, 4, 5)], lambda x: x.flip((0, 1, 2)), lambda x: x[::-1, ::-1, ::-1]),
    ("pad-asymmetric", [floats(3, 5)], lambda x: x.pad(((2, 0), (1, 4))), lambda x: np.pad(x, ((2, 0), (1, 4)))),
    ("shrink", [floats(7, 9)], lambda x: x.shrink(((1, 6), (2, 9))), lambda x: x[1:6, 2:9]),
    ("expand", [floats(3, 1)], lambda x: x.expand(3, 4).contiguous(), lambda x: np.broadcast_to(x, (3, 4))),
    ("pad-of-flip-of-shrink", [floats(6, 6)], lambda x: x.shrink(((1, 5), (0, 3))).flip(1).pad(((0, 1), (2, 0))),
     lambda x: np.pad(x[1:5, 0:3][:, ::-1], ((0, 1), (2, 0)))),
    ("negative-step-slice", [floats(11)], lambda x: x[::-3], lambda x: x[::-3]),
    ("cat", [floats(2, 3), floats(4, 3)], lambda a, b: a.cat(b, dim=0), lambda a, b: np.concatenate([a, b], 0)),
    ("transpose-matmul", [floats(5, 3), floats(5, 4)], lambda a, b: a.T @ b, lambda a, b: a.T @ b),
]


@pytest.mark.parametrize("inputs, fn, reference", [pytest.param(c[1], c[2], c[3], id=c[0]) for c in CASES])
def test_through_kernels(dut, inputs, fn, reference):
    if any(x.dtype == np.int32 for x in inputs) and not dut.supports(dtypes.int32):
        pytest.skip(f"{dut.name} declares no support for dtypes.int32")
    out = dut.realize_or_compile(fn(*[dut.tensor(x) for x in inputs]))
    if out is None:
        return
    expected = np.asarray(reference(*inputs))
    if expected.dtype.kind in "iu":
        np.testing.assert_array_equal(out[0], expected)
    else:
        # a long float32 sum may round differently in any order: tolerance grows with the reduced count
        count = max(1, int(np.prod([x.size for x in inputs[:1]])) // max(1, expected.size))
        assert_close(out[0], expected, "result", rtol=1e-5 * max(1.0, np.sqrt(count)), atol=1e-5 * np.sqrt(count))


@pytest.mark.parametrize("layout", ["a@b", "a.T@b", "a@b.T"])
def test_matmul_on_tensor_cores(dut, layout):
    """Each declared tensor core runs a matmul of its input type: whole tiles, each operand read by rows or by
    columns (a transposed operand is stored transposed and viewed back)."""
    if not getattr(dut.renderer, "tensor_cores", ()):
        pytest.skip(f"{dut.name} declares no tensor cores")
    for tc in dut.renderer.tensor_cores:
        (tm, tn, tk), dt = tc.dims, tc.dtype_in
        a_np, b_np = floats(2 * tm, 3 * tk), floats(3 * tk, 2 * tn)
        a = dut.tensor(a_np.T.copy(), dtype=dt).T if layout == "a.T@b" else dut.tensor(a_np, dtype=dt)
        b = dut.tensor(b_np.T.copy(), dtype=dt).T if layout == "a@b.T" else dut.tensor(b_np, dtype=dt)
        out = a @ b
        assert dut.kernel(out.schedule()[-1].ast).opts.tensor_core, f"{layout} in {dt.name} didn't use the tensor core"
        values = dut.realize_or_compile(out)
        if values is not None:
            exact = a.float().numpy().astype(np.float64) @ b.float().numpy()
            assert_close(values[0].astype(np.float32), exact, f"{layout} in {dt.name}", rtol=2e-2, atol=5e-2)


def _conv_reference(x, w, stride, pad):
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxhw,ochw->noyx", windows, w)


LOCAL_TILE_CASES = [
    ("matmul-whole-tiles", [floats(64, 32), floats(32, 64)], lambda a, b: a @ b, lambda a, b: a @ b),
    ("matmul-partial-tiles", [floats(40, 33), floats(33, 20)], lambda a, b: a @ b, lambda a, b: a @ b),
    ("matmul-a-transposed", [floats(33, 40), floats(33, 20)], lambda a, b: a.T @ b, lambda a, b: a.T @ b),
    ("matmul-batched", [floats(3, 20, 17), floats(3, 17, 24)], lambda a, b: a @ b, lambda a, b: a @ b),
    ("linear-bias-relu", [floats(24, 37), floats(37, 18), floats(18)], lambda a, b, c: (a @ b + c).relu(),
     lambda a, b, c: np.maximum(a @ b + c, 0)),
    ("conv2d-strided-padded", [floats(2, 3, 9, 9), floats(16, 3, 3, 3)],
     lambda x, w: x.conv2d(w, stride=2, padding=1), lambda x, w: _conv_reference(x, w, 2, 1)),
]


@pytest.mark.parametrize("inputs, fn, reference", [pytest.param(c[1], c[2], c[3], id=c[0]) for c in LOCAL_TILE_CASES])
def test_products_in_local_memory_tiles(dut, inputs, fn, reference):
    """On a renderer declaring has_shared, matmul- and conv-shaped kernels are tiled through local memory (with
    barriers between the tile loads and their use), for whole and partial tiles, and still match numpy."""
    if not dut.renderer.has_shared:
        pytest.skip(f"{dut.name} declares has_shared=False")
    out = fn(*[dut.tensor(x) for x in inputs])
    assert dut.kernel(product_kernel(out)).opts.local_tiles, "the product wasn't tiled through local memory"
    values = dut.realize_or_compile(out)
    if values is not None:
        assert_close(values[0], np.asarray(reference(*inputs), np.float32), "result", rtol=1e-4, atol=1e-4)
