"""The CPU backend's choices for reduce kernels, pinned on shapes they are for: the order of a matmul's tiles
(opts.py: _read_biggest_once and the strided-load order), and the machine code of a sum unrolled into vector lanes
(renderer.py: `nuw` index arithmetic). Each result is checked against numpy too. The choices are pinned as an
AVX-512 host's (they follow the vector width): opts_of asks an AVX-512 renderer whatever the host; a test that
compiles for the host says which width it needs."""
import numpy as np
import pytest
from tinygrad_core import Tensor, Device
from tinygrad_core.codegen.opts import choose_opts
from tinygrad_core.engine.realize import CompiledRunner
from tinygrad_cpu.renderer import LLVMRenderer

pytestmark = pytest.mark.skipif(Device.DEFAULT != "CPU", reason="the CPU backend's heuristics")
rng = np.random.default_rng(15)


def opts_of(out: Tensor):
    return choose_opts(out.schedule()[-1].ast, AVX512)


AVX512 = LLVMRenderer(simd_width=64)
HOST_LANES = Device["CPU"].renderer.simd_width // 4      # float32 lanes of the host's vectors


def test_a_fully_connected_layers_big_weight_is_read_once():
    # x (64, 16384) @ w.T, w (512, 16384) is 32 MB: the tiles reading one block of w's rows come one after another
    x = rng.standard_normal((64, 16384), dtype=np.float32)
    w = rng.standard_normal((512, 16384), dtype=np.float32)
    out = Tensor(x) @ Tensor(w).T
    assert opts_of(out).order[0] == 1                  # the output's columns (w's rows) slowest
    np.testing.assert_allclose(out.numpy(), x @ w.T, rtol=1e-4, atol=1e-2)


def test_the_input_gradient_through_a_big_weight_reads_it_once():
    # the gradient of x above, g (64, 512) @ w: w read down its columns (unpacked), one block of them at a time
    x, w = Tensor(np.zeros((64, 16384), np.float32), requires_grad=True), rng.standard_normal((512, 16384),
                                                                                              dtype=np.float32)
    g = rng.standard_normal((64, 512), dtype=np.float32)
    ((x @ Tensor(w).T) * Tensor(g)).sum().backward()
    opts = opts_of(x.grad)
    assert opts.order and opts.order[0] != 0           # not the output's order: an axis w moves along goes first
    np.testing.assert_allclose(x.grad.numpy(), g @ w, rtol=1e-4, atol=1e-3)


def test_square_matmuls_and_small_operands_keep_their_order():
    # an operand no bigger than the output (1024^2 panels: their own order rule) or small (the MLP's 784 x 128)
    a, b = Tensor(rng.standard_normal((1024, 1024), dtype=np.float32)), Tensor(rng.standard_normal((1024, 1024),
                                                                                                   dtype=np.float32))
    assert opts_of(a @ b).order == (1, 0, 2, 3)
    x, w = Tensor(rng.standard_normal((128, 784), dtype=np.float32)), Tensor(rng.standard_normal((128, 784),
                                                                                                 dtype=np.float32))
    assert opts_of(x @ w.T).order == ()


def test_a_product_far_bigger_than_its_inputs_stores_in_its_own_order():
    # a 3x3 convolution's input gradient as im2col rows: (64, 64, 3, 3, 16, 16) floats (38 MB) from g (8 MB)
    g = Tensor(rng.standard_normal((64, 128, 16, 16), dtype=np.float32))
    w = Tensor(rng.standard_normal((128, 64 * 9), dtype=np.float32))
    rows = g.permute(0, 2, 3, 1).reshape(64 * 256, 128) @ w
    out = rows.reshape(64, 16, 16, 64, 3, 3).permute(0, 3, 4, 5, 1, 2)
    assert opts_of(out).order == ()


def sums_over_rows_of_16(n: int):
    """A batchnorm's backward sum: per channel, over batch and 16x16 maps, of g * (x + a - b) * c (a, b, c per channel)"""
    x, g = (rng.standard_normal((n, 64, 16, 16), dtype=np.float32) for _ in range(2))
    a, b, c = (rng.standard_normal((1, 64, 1, 1), dtype=np.float32) for _ in range(3))
    out = (Tensor(g) * ((Tensor(x) + Tensor(a) - Tensor(b)) * Tensor(c))).sum((0, 2, 3), keepdim=True)
    return out, (g * ((x + a - b) * c)).sum((0, 2, 3), keepdims=True, dtype=np.float64)


def test_lanes_of_an_unrolled_sum_are_loaded_as_vectors():
    # without `nuw` on the index arithmetic LLVM gathered the 16 lanes one by one (7x slower on the seed's CNN)
    out, _ = sums_over_rows_of_16(64)
    item = out.schedule()[-1]
    runner = CompiledRunner("CPU", item.ast)
    assert runner.opts.unroll == HOST_LANES
    assembly = Device["CPU"].compiler.disassemble(runner.src)
    assert "gather" not in assembly


def test_an_unrolled_sum_matches_numpy():
    out, want = sums_over_rows_of_16(8)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-3)


def test_index_arithmetic_with_negative_offsets_inside_loops_is_right():
    # a padded convolution reads x at negative offsets (masked): those adds must not be marked as never wrapping
    x = rng.standard_normal((2, 3, 9, 9), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    out = Tensor(x).conv2d(Tensor(w), padding=2).numpy()
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2))), (3, 3), (2, 3))
    np.testing.assert_allclose(out, np.einsum("bchwij,ocij->bohw", windows, w), rtol=1e-5, atol=1e-5)


def test_a_sum_over_an_nchw_and_an_nhwc_operand_takes_vectors_across_the_channels():
    # a batchnorm's backward over 14x14 maps: the gradient g is NCHW (rows of 14, shorter than a vector), x is NHWC
    # (a step of 16 along a row): before, neither layout won and each channel was one serial chain of additions;
    # now two channels at a time (a whole vector of them gathers 16 rows of g: slow when g comes from memory)
    g = rng.standard_normal((16, 16, 14, 14), dtype=np.float32)
    x = rng.standard_normal((16, 14, 14, 16), dtype=np.float32)
    a, c = (rng.standard_normal((1, 16, 1, 1), dtype=np.float32) for _ in range(2))
    out = (Tensor(g) * ((Tensor(x).permute(0, 3, 1, 2) + Tensor(a)) * Tensor(c))).sum((0, 2, 3), keepdim=True)
    assert opts_of(out).upcast == ((1, 2),)
    want = (g * ((x.transpose(0, 3, 1, 2) + a) * c)).sum((0, 2, 3), keepdims=True, dtype=np.float64)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("batch, rows, columns, most_rows", [
    # a convolution's weight gradient as a matmul over 6272 pixels (the MNIST CNN's r_1_1_32_144): few outputs, each
    # a long sum (LONG_REDUCE): 16 rows of one vector (776 -> 457 us)
    (6272, 32, 144, 16),
    # the MNIST MLP's first weight gradient: 128 x 784 outputs, each a sum over the batch of 128 (2^23.6
    # multiply-adds: BIG_REDUCE, not HUGE_REDUCE): 8 rows
    (128, 128, 784, 8)])
def test_a_weight_gradient_gets_the_largest_tile(batch, rows, columns, most_rows):
    # g.T @ x: 8 (or 16) rows x 16 columns of accumulators instead of 4 x 16
    g = rng.standard_normal((batch, rows), dtype=np.float32)
    x = rng.standard_normal((batch, columns), dtype=np.float32)
    out = Tensor(g).T @ Tensor(x)
    assert sorted(amount for _, amount in opts_of(out).upcast) == sorted([most_rows, 16])
    np.testing.assert_allclose(out.numpy(), g.T.astype(np.float64) @ x, rtol=1e-4, atol=1e-2)



@pytest.mark.parametrize("size, tile", [(16, [8, 2]), (32, [4, 4])])
def test_a_3x3_weight_gradient_over_maps_one_vector_wide_tiles_more_output_channels(size, tile):
    # the seed CNN's r_1_1_128_1_1_64_3_3: 8 output x 2 input channels read fewer of the shifted, masked input rows
    # than 4 x 4; maps two vectors wide keep 4 x 4
    x = Tensor(rng.standard_normal((8, 32, size, size), dtype=np.float32))
    w = Tensor(rng.standard_normal((64, 32, 3, 3), dtype=np.float32), requires_grad=True)
    g = rng.standard_normal((8, 64, size, size), dtype=np.float32)
    (x.conv2d(w, padding=1) * Tensor(g)).sum().backward()
    assert [amount for _, amount in opts_of(w.grad).upcast] == tile
    import torch
    tw = torch.tensor(w.numpy(), requires_grad=True)
    (torch.nn.functional.conv2d(torch.tensor(x.numpy()), tw, padding=1) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-3)

def batchnorm_input_gradient_sum(width: int):
    """The 8-buffer sum of a batchnorm's backward over maps width x width: 7 loads, two of them moving."""
    x, y = (rng.standard_normal((32, 32, width, width), dtype=np.float32) for _ in range(2))
    a, b, c, d, e = (rng.standard_normal((1, 32, 1, 1), dtype=np.float32) for _ in range(5))
    out = -(((Tensor(x) + Tensor(a) - Tensor(b)) * Tensor(c)) * 2 + Tensor(y) * Tensor(d) * Tensor(e)).sum(
        (0, 2, 3), keepdim=True)
    want = -((((x + a) - b) * c) * 2 + y * d * e).sum((0, 2, 3), keepdims=True, dtype=np.float64)
    return out, want


@pytest.mark.skipif(HOST_LANES != 16, reason="rows of two AVX-512 vectors")
def test_rows_of_two_vectors_in_a_long_body_are_unrolled_by_half():
    # unrolled by a whole vector, LLVM vectorised the loop over rows instead and gathered every lane (7x slower)
    out, want = batchnorm_input_gradient_sum(32)
    runner = CompiledRunner("CPU", out.schedule()[-1].ast)
    assert runner.opts.unroll == 8
    assert "gather" not in Device["CPU"].compiler.disassemble(runner.src)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-2)
    # a short body over the same rows keeps a whole vector
    x, g = (rng.standard_normal((32, 32, 32, 32), dtype=np.float32) for _ in range(2))
    assert opts_of((Tensor(g) * Tensor(x)).sum((0, 2, 3), keepdim=True)).unroll == 16
