"""A sample of Tensor programs run on CPU and on the reference backend (PYTHON): same results, forward and backward.

Sizes are small and deliberately not multiples of the upcast/unroll amounts, so remainders and padding masks run."""
import numpy as np
import pytest
from tinygrad_core import Tensor, dtypes
from tinygrad_core.codegen.opts import KernelOpts
from tinygrad_core.codegen.opts import choose_opts
from tinygrad_core.device import Device
from tinygrad_core.engine.realize import CompiledRunner
from tinygrad_cpu.renderer import LLVMRenderer

# the choices pinned are an AVX-512 host's (they follow the vector width); the kernels run with the host's own
AVX512 = LLVMRenderer(simd_width=64)

rng = np.random.default_rng(42)
A = rng.standard_normal((5, 7), dtype=np.float32)
B = rng.standard_normal((7, 6), dtype=np.float32)
V = rng.standard_normal((7,), dtype=np.float32)
IMG = rng.standard_normal((2, 3, 9, 8), dtype=np.float32)
KERNEL = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
INTS = rng.integers(-50, 50, (6, 5)).astype(np.int32)

PROGRAMS = {
    "fused_chain": lambda a, b, v, img, w, i: ((a * 2 + v).relu() * 0.5).exp(),
    "matmul": lambda a, b, v, img, w, i: a @ b,
    "matmul_bias_relu": lambda a, b, v, img, w, i: (a @ b + b[0]).relu(),
    "sum_axes": lambda a, b, v, img, w, i: img.sum(axis=(0, 2)) + img.sum(),
    "max_min": lambda a, b, v, img, w, i: a.max(axis=1) - a.min(axis=0).sum(),
    "mean_var": lambda a, b, v, img, w, i: a.var(axis=0) + a.mean(),
    "softmax": lambda a, b, v, img, w, i: a.softmax(axis=1),
    "log_softmax": lambda a, b, v, img, w, i: a.log_softmax(axis=0),
    "conv2d_padded": lambda a, b, v, img, w, i: img.conv2d(w, padding=1),
    "conv2d_strided": lambda a, b, v, img, w, i: img.conv2d(w, stride=2),
    "max_pool": lambda a, b, v, img, w, i: img.max_pool2d(),
    "movement": lambda a, b, v, img, w, i: a.pad(((1, 2), (0, 3))).flip(0).permute(1, 0)[1:5, ::2] * 3,
    "cat_where": lambda a, b, v, img, w, i: (a > 0).where(a, a.cat(a, dim=0)[3:8] * -1),
    "transcendental": lambda a, b, v, img, w, i: a.sin() + a.abs().sqrt() + (a.abs() + 1).log() + a.sigmoid(),
    "int_math": lambda a, b, v, img, w, i: (i // 3) + (i % 7) * 2 - (i ^ 5) + i.max(axis=0),
    "int_sum_and_cast": lambda a, b, v, img, w, i: i.sum(axis=1).cast(dtypes.float32) / 3 + i.float().mean(),
    "half": lambda a, b, v, img, w, i: (a.half() * 3 + 1).sum(axis=1).float(),
    "bfloat16": lambda a, b, v, img, w, i: (a.bfloat16() * 3 + 1).exp2().float(),
    "argmax_cumsum": lambda a, b, v, img, w, i: a.argmax(axis=1).float() + a.cumsum(axis=1).sum(axis=1),
    "arange": lambda a, b, v, img, w, i: (Tensor.arange(37, device=a.device).reshape(37, 1) *
                                          Tensor.arange(3, device=a.device)),
}


def run(program, device):
    inputs = [Tensor(x, device=device) for x in (A, B, V, IMG, KERNEL, INTS)]
    return program(*inputs).numpy()


@pytest.mark.parametrize("name", PROGRAMS)
def test_forward_matches_reference(name):
    got, want = run(PROGRAMS[name], "CPU"), run(PROGRAMS[name], "PYTHON")
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def mlp_gradients(device):
    x = Tensor(A, device=device)
    w1 = Tensor(B, device=device, requires_grad=True)
    w2 = Tensor(B[:6, :3].copy(), device=device, requires_grad=True)
    loss = (x @ w1).relu().matmul(w2).log_softmax(axis=1).mean()
    loss.backward()
    return loss.numpy(), w1.grad.numpy(), w2.grad.numpy()


def test_backward_matches_reference():
    for got, want in zip(mlp_gradients("CPU"), mlp_gradients("PYTHON")):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_conv_backward_matches_reference():
    def grads(device):
        img = Tensor(IMG, device=device, requires_grad=True)
        w = Tensor(KERNEL, device=device, requires_grad=True)
        img.conv2d(w, padding=1).relu().sum().backward()
        return img.grad.numpy(), w.grad.numpy()
    for got, want in zip(grads("CPU"), grads("PYTHON")):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ---- the kernels big enough for register tiles, vectorised reduce loops and prefetches (checked against numpy:
# the reference interpreter would take too long at these sizes) ----
BIG_CASES = {
    # name: (numpy inputs, the program, the numpy result, the upcast the CPU's opts must choose)
    "matmul": (lambda r: (r.standard_normal((256, 320), dtype=np.float32),
                          r.standard_normal((320, 384), dtype=np.float32)),
               lambda a, b: a @ b, lambda a, b: a @ b, ((0, 8), (1, 32))),
    "matmul_big_tile": (lambda r: (r.standard_normal((512, 256), dtype=np.float32),
                                   r.standard_normal((256, 512), dtype=np.float32)),
                        lambda a, b: a @ b, lambda a, b: a @ b, ((0, 8), (1, 32))),
    "matmul_transposed": (lambda r: (r.standard_normal((96, 1000), dtype=np.float32),
                                     r.standard_normal((80, 1000), dtype=np.float32)),
                          lambda a, b: a @ b.T, lambda a, b: a @ b.T, ((0, 4), (1, 4))),
    "weight_gradient": (lambda r: (r.standard_normal((64, 128), dtype=np.float32),
                                   r.standard_normal((64, 784), dtype=np.float32)),
                        lambda g, x: g.T @ x, lambda g, x: g.T @ x, ((0, 4), (1, 16))),
    # the kernel computes in the reduce's own shape (1, 1024); sum(axis=0) only views it without the first axis
    "sum_rows": (lambda r: (r.standard_normal((1024, 1024), dtype=np.float32),),
                 lambda m: m.sum(axis=0), lambda m: m.sum(axis=0), ((1, 32),)),
    # b's rows are 4 KiB apart: it is packed into panels of 64 columns, the product is computed as (96, 16, 1, 64)
    "matmul_packed": (lambda r: (r.standard_normal((96, 384), dtype=np.float32),
                                 r.standard_normal((384, 1024), dtype=np.float32)),
                      lambda a, b: a @ b, lambda a, b: a @ b, ((0, 8), (3, 32))),
    "sum_columns": (lambda r: (r.standard_normal((1030, 1024), dtype=np.float32),),
                    lambda m: m.sum(axis=1), lambda m: m.sum(axis=1), ()),
}


@pytest.mark.parametrize("name", BIG_CASES)
def test_tiled_kernels_match_numpy(name):
    make, program, reference, upcast = BIG_CASES[name]
    arrays = make(np.random.default_rng(3))
    # the tiling chosen, from a graph of its own (schedule() marks its graph's result as computed)
    kernel = program(*[Tensor(x, device="CPU") for x in arrays]).schedule()[-1]
    assert choose_opts(kernel.ast, AVX512).upcast == upcast
    out = program(*[Tensor(x, device="CPU") for x in arrays])
    np.testing.assert_allclose(out.numpy(), reference(*arrays), rtol=1e-4, atol=1e-3)


def test_a_product_sum_over_short_rows_sums_them_in_vector_lanes():
    # channels correlated over batch and 16-wide rows: each lane of a vector gets a partial sum of its own
    x = rng.standard_normal((8, 16, 16, 16), dtype=np.float32)
    g = rng.standard_normal((8, 32, 16, 16), dtype=np.float32)
    out = (Tensor(x, device="CPU").reshape(8, 1, 16, 16, 16) * Tensor(g, device="CPU").reshape(8, 32, 1, 16, 16))
    out = out.sum((0, 3, 4))
    assert choose_opts(out.schedule()[-1].ast, AVX512).unroll == 16
    np.testing.assert_allclose(out.numpy(), np.einsum("bihw,bjhw->ji", x, g), rtol=1e-4, atol=1e-3)


def test_strided_conv_weight_gradient_is_a_register_tiled_matmul_of_im2col_rows():
    x = rng.standard_normal((8, 16, 16, 16), dtype=np.float32)
    g = rng.standard_normal((8, 32, 8, 8), dtype=np.float32)
    tx, tw = Tensor(x, device="CPU"), Tensor(np.zeros((32, 16, 3, 3), np.float32), device="CPU", requires_grad=True)
    (tx.conv2d(tw, padding=1, stride=2) * Tensor(g, device="CPU")).sum().backward()
    opts = choose_opts(tw.grad.schedule()[-1].ast, AVX512)
    assert len(opts.upcast) == 2 and all(amount > 1 for _, amount in opts.upcast)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3))
    windows = windows[:, :, ::2, ::2]
    np.testing.assert_allclose(tw.grad.numpy(), np.einsum("bohw,bihwyx->oiyx", g, windows), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("opts", [KernelOpts(), KernelOpts(order=(1, 0, 2)),
                                  KernelOpts(((0, 2), (1, 8)), order=(1, 2, 0)), KernelOpts(unroll=4),
                                  KernelOpts(((1, 8),), unroll=20)], ids=str)
def test_walk_order_and_lane_unroll_keep_results(opts):
    # the parallel index may walk the output (here 6 x 24 x 1) in another order, a reduce may keep a partial sum per
    # unrolled copy: neither changes what is computed
    a, b = rng.standard_normal((6, 20), dtype=np.float32), rng.standard_normal((20, 24), dtype=np.float32)
    item = (Tensor(a, device="CPU") @ Tensor(b, device="CPU")).schedule()[-1]
    for buf in item.bufs:
        buf.ensure_allocated()
    CompiledRunner("CPU", item.ast, opts)(item.bufs)
    np.testing.assert_allclose(item.bufs[0].numpy().reshape(6, 24), a @ b, rtol=1e-5, atol=1e-5)


def test_short_rows_summed_inside_other_loops_are_unrolled_whole():
    # a batchnorm's statistics over 14x14 maps: 14-float rows, each a few vector loads when unrolled whole
    x = rng.standard_normal((8, 16, 14, 14), dtype=np.float32)
    out = Tensor(x, device="CPU").sum((0, 2, 3))
    lanes = AVX512.simd_width // 4          # (rows of two vectors or more are left to LLVM)
    assert choose_opts(out.schedule()[-1].ast, AVX512).unroll == (14 if 14 < 2 * lanes else 1)
    np.testing.assert_allclose(out.numpy(), x.sum((0, 2, 3)), rtol=1e-4, atol=1e-3)


def test_rows_shorter_than_a_vector_put_the_lanes_across_a_broadcast_output_axis():
    # a single-channel 3x3 convolution as im2col rows times the weight: 9-float dot products, 16 output channels
    cols, w = rng.standard_normal((512, 1, 1, 9), dtype=np.float32), rng.standard_normal((1, 16, 9), dtype=np.float32)
    out = (Tensor(cols, device="CPU") * Tensor(w, device="CPU")).sum(-1)
    lanes = AVX512.simd_width // 4
    assert dict(choose_opts(out.schedule()[-1].ast, AVX512).upcast).get(2) == min(lanes, 16)
    np.testing.assert_allclose(out.numpy(), (cols * w).sum(-1), rtol=1e-5, atol=1e-5)


def test_a_double_rounded_to_float_then_half_inside_a_reduce_compiles_and_rounds_twice():
    # float16's std runs in float64: LLVM's code generator folded its double -> float -> half casts into one
    # rounding, a call of __truncdfhf2, which the JIT couldn't find ("Failed to materialize symbols")
    x0 = np.array([[[1e-40, 1.4977993]], [[3.8492, 5.8531537]]], dtype=np.float32)
    x1 = np.array([[-0.5, 0.5], [0.5, 0.5], [88.7, 0.0], [-88.7, 1.0]], dtype=np.float32)
    w = np.array([-0.7834333, 0.48106557], dtype=np.float32)
    results = []
    for device in ("CPU", "PYTHON"):
        a, b = Tensor(x0, device=device, requires_grad=True), Tensor(x1, device=device, requires_grad=True)
        out = (a - b).half().std(axis=(1, -1), correction=2)
        (out * Tensor(w, device=device)).sum().backward()
        results.append([out.numpy(), a.grad.numpy(), b.grad.numpy()])
    for cpu, python in zip(*results):
        np.testing.assert_array_equal(cpu, python)
