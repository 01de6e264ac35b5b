"""nn layers: output shapes and values against numpy formulas, initialisation ranges, BatchNorm train/eval."""
import math
import numpy as np
import pytest
from tinygrad_core import Tensor, dtypes
from tinygrad_core.nn import (Linear, Conv1d, Conv2d, ConvTranspose2d, BatchNorm, BatchNorm2d, LayerNorm, GroupNorm,
                              Embedding, Dropout)
from helpers import assert_close


def np_conv2d(x, w, b, stride=1, padding=0):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, _, h, wd = x.shape
    cout, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, cout, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out + b.reshape(1, -1, 1, 1)


def test_linear_matches_numpy_and_pytorch_init_bounds():
    layer = Linear(20, 7)
    assert layer.weight.shape == (7, 20) and layer.bias.shape == (7,)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    bound = 1 / math.sqrt(20)
    assert np.abs(w).max() <= bound + 1e-6 and np.abs(b).max() <= bound + 1e-6
    assert w.std() > bound / 3          # actually spread over the range, not all zeros
    x = np.random.randn(3, 20).astype(np.float32)
    assert_close(layer(Tensor(x)).numpy(), x @ w.T + b)
    assert Linear(4, 2, bias=False).bias is None
    assert [p.shape for p in layer.parameters()] == [(7, 20), (7,)]


def test_conv2d_matches_numpy():
    conv = Conv2d(3, 4, kernel_size=3, padding=1, stride=2)
    x = np.random.randn(2, 3, 7, 7).astype(np.float32)
    expected = np_conv2d(x, conv.weight.numpy(), conv.bias.numpy(), stride=2, padding=1)
    assert_close(conv(Tensor(x)).numpy(), expected, atol=1e-4)
    assert conv.weight.shape == (4, 3, 3, 3)
    assert np.abs(conv.weight.numpy()).max() <= 1 / math.sqrt(27) + 1e-6


def test_conv2d_same_padding_keeps_size_and_conv1d():
    assert Conv2d(2, 3, 4, padding="same")(Tensor.randn(1, 2, 6, 5)).shape == (1, 3, 6, 5)
    conv = Conv1d(2, 3, 3)
    x = np.random.randn(2, 2, 8).astype(np.float32)
    w, b = conv.weight.numpy(), conv.bias.numpy()
    expected = np.stack([np.einsum("ncl,ocl->no", x[:, :, i:i + 3], w) for i in range(6)], -1) + b[None, :, None]
    assert_close(conv(Tensor(x)).numpy(), expected, atol=1e-4)


def test_conv_transpose2d_is_the_adjoint_of_conv2d():
    # <conv(x), y> == <x, conv_transpose(y)> for the same weight and no bias
    conv = Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
    deconv = ConvTranspose2d(4, 3, 3, stride=2, padding=1, bias=False)
    deconv.weight = conv.weight
    x, y = np.random.randn(1, 3, 7, 7).astype(np.float32), np.random.randn(1, 4, 4, 4).astype(np.float32)
    lhs = (conv(Tensor(x)).numpy() * y).sum()
    back = deconv(Tensor(y))
    assert back.shape == (1, 3, 7, 7)
    assert abs(lhs - (x * back.numpy()).sum()) < 1e-3 * max(1, abs(lhs))
    assert ConvTranspose2d(4, 2, 2, stride=2)(Tensor.randn(1, 4, 3, 3)).shape == (1, 2, 6, 6)


def test_batchnorm_training_uses_batch_stats_and_updates_running_stats():
    bn = BatchNorm2d(3, momentum=0.1)
    x = (np.random.randn(4, 3, 5, 5) * 2 + 1).astype(np.float32)
    with Tensor.train():
        out = bn(Tensor(x)).numpy()
        Tensor.realize_all(bn.running_mean, bn.running_var, bn.num_batches_tracked)
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    expected = (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5)
    assert_close(out, expected, atol=1e-4)
    n = x.size // 3
    assert_close(bn.running_mean.numpy(), 0.1 * mean, atol=1e-5)
    assert_close(bn.running_var.numpy(), 0.9 + 0.1 * var * n / (n - 1), atol=1e-5)
    assert bn.num_batches_tracked.numpy().tolist() == [1]


def test_batchnorm_eval_uses_running_stats():
    bn = BatchNorm(2)
    bn.running_mean.assign(Tensor([1.0, -2.0]))
    bn.running_var.assign(Tensor([4.0, 0.25]))
    bn.weight.assign(Tensor([2.0, 1.0]))
    bn.bias.assign(Tensor([0.5, 0.0]))
    x = np.random.randn(3, 2, 2, 2).astype(np.float32)
    expected = (x - np.array([1, -2]).reshape(1, 2, 1, 1)) / np.sqrt(np.array([4, 0.25]).reshape(1, 2, 1, 1) + 1e-5)
    expected = expected * np.array([2, 1]).reshape(1, 2, 1, 1) + np.array([0.5, 0]).reshape(1, 2, 1, 1)
    assert not Tensor.training
    assert_close(bn(Tensor(x)).numpy(), expected, atol=1e-5)
    assert_close(bn.running_mean.numpy(), [1.0, -2.0])      # eval never changes the running statistics


def test_two_layers_never_share_a_buffer():
    a, b = BatchNorm2d(4), BatchNorm2d(4)
    a.weight.assign(a.weight * 3).realize()
    b.weight.realize()
    assert_close(b.weight.numpy(), np.ones(4))
    assert_close(a.weight.numpy(), np.full(4, 3.0))


def test_layernorm_and_groupnorm_match_numpy():
    x = np.random.randn(2, 4, 6).astype(np.float32)
    ln = LayerNorm(6)
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    assert_close(ln(Tensor(x)).numpy(), expected, atol=1e-5)
    ln2 = LayerNorm((4, 6))
    flat = x.reshape(2, -1)
    expected2 = ((flat - flat.mean(-1, keepdims=True)) / np.sqrt(flat.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    assert_close(ln2(Tensor(x)).numpy(), expected2, atol=1e-5)
    gn = GroupNorm(2, 4)
    groups = x.reshape(2, 2, -1)
    expected3 = ((groups - groups.mean(-1, keepdims=True)) / np.sqrt(groups.var(-1, keepdims=True) + 1e-5))
    assert_close(gn(Tensor(x)).numpy(), expected3.reshape(x.shape), atol=1e-5)
    with pytest.raises(ValueError, match="last 1 dims must be"):
        ln(Tensor.randn(2, 5))


def test_embedding_looks_up_rows_and_gets_a_scatter_gradient():
    emb = Embedding(5, 3)
    idx = np.array([[0, 4], [4, 2]], dtype=np.int32)
    out = emb(Tensor(idx))
    assert_close(out.numpy(), emb.weight.numpy()[idx])
    emb.weight.requires_grad_()
    emb(Tensor(idx)).sum().backward()
    assert_close(emb.weight.grad.numpy()[:, 0], [1, 0, 1, 0, 2])
    with pytest.raises(TypeError, match="integer indices"):
        emb(Tensor([0.5]))


def test_dropout_only_in_training():
    x = Tensor.ones(1000)
    assert_close(Dropout(0.5)(x).numpy(), np.ones(1000))
    with Tensor.train():
        dropped = Dropout(0.25)(x).numpy()
    kept = dropped != 0
    assert 0.65 < kept.mean() < 0.85
    assert_close(dropped[kept], np.full(kept.sum(), 1 / 0.75))
    with pytest.raises(ValueError):
        Dropout(1.0)


def test_parameters_of_a_layer_with_sub_layers_and_dtype():
    bn = BatchNorm2d(3)
    params = bn.parameters()
    assert [p.shape for p in params] == [(3,), (3,), (3,), (3,), (1,)]
    assert bn.num_batches_tracked.dtype == dtypes.int32
    assert bn.running_mean.requires_grad is False
