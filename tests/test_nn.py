"""nn layers: output shapes and values against numpy formulas, initialisation ranges, BatchNorm train/eval; against
the PyTorch modules of the same name, weights copied across (outputs, input gradients and weight gradients); and
training mode switched each of the three ways (Tensor.train(), Context, Tensor.training)."""
import math

import numpy as np
import pytest
from helpers import against_torch, assert_close, np_conv2d

from tinygrad_core import Context, Tensor, dtypes
from tinygrad_core.helpers import TRAINING
from tinygrad_core.nn import (
    BatchNorm,
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
    Dropout,
    Embedding,
    GroupNorm,
    InstanceNorm,
    LayerNorm,
    LayerNorm2d,
    Linear,
    LSTMCell,
    RMSNorm,
)

torch = pytest.importorskip("torch")
F = torch.nn.functional


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


# ---- against the PyTorch modules of the same name, weights copied across ----
@pytest.mark.parametrize("affine", [True, False])
def test_rmsnorm_matches_torch(affine):
    ours, theirs = RMSNorm(6, elementwise_affine=affine), torch.nn.RMSNorm(6, eps=1e-6, elementwise_affine=affine)
    if affine:
        ours.weight.assign(Tensor(np.random.randn(6).astype(np.float32))).realize()
    against_torch(ours, theirs, np.random.randn(3, 4, 6).astype(np.float32),
                  parameters=[(ours.weight, theirs.weight)] if affine else [])


def test_rmsnorm_half_input_is_normalised_in_float32():
    x = np.array([[300.0, 200.0, 100.0]], dtype=np.float16)     # x**2 overflows float16
    out = RMSNorm(3, elementwise_affine=False)(Tensor(x))
    assert out.dtype == Tensor(x).dtype
    expected = x.astype(np.float32) / np.sqrt((x.astype(np.float32) ** 2).mean() + 1e-6)
    assert_close(out.numpy().astype(np.float32), expected, atol=2e-3)


def test_layernorm2d_matches_torch_layernorm_over_channels():
    ours, theirs = LayerNorm2d(4), torch.nn.LayerNorm(4)
    ours.weight.assign(Tensor(np.random.randn(4).astype(np.float32))).realize()
    ours.bias.assign(Tensor(np.random.randn(4).astype(np.float32))).realize()
    against_torch(ours, lambda x: theirs(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2),
                  np.random.randn(2, 4, 3, 5).astype(np.float32),
                  parameters=[(ours.weight, theirs.weight), (ours.bias, theirs.bias)])


def test_instancenorm_matches_torch_instancenorm2d():
    ours, theirs = InstanceNorm(3), torch.nn.InstanceNorm2d(3, affine=True)
    ours.weight.assign(Tensor(np.random.randn(3).astype(np.float32))).realize()
    against_torch(ours, theirs, (np.random.randn(2, 3, 4, 5) * 3 + 1).astype(np.float32),
                  parameters=[(ours.weight, theirs.weight), (ours.bias, theirs.bias)], atol=1e-4)
    assert InstanceNorm(3, affine=False).parameters() == []


@pytest.mark.parametrize("layer,torch_layer,shape", [(BatchNorm3d, torch.nn.BatchNorm3d, (2, 3, 2, 3, 4)),
                                                     (BatchNorm1d, torch.nn.BatchNorm1d, (8, 3)),
                                                     (BatchNorm1d, torch.nn.BatchNorm1d, (4, 3, 5))])
def test_batchnorm_matches_torch_in_training_then_eval(layer, torch_layer, shape):
    ours, theirs = layer(3, momentum=0.2), torch_layer(3, momentum=0.2)
    ours.weight.assign(Tensor(np.random.randn(3).astype(np.float32))).realize()
    x = (np.random.randn(*shape) * 2 + 1).astype(np.float32)
    with Context(TRAINING=1):
        against_torch(ours, theirs.train(), x, parameters=[(ours.weight, theirs.weight), (ours.bias, theirs.bias)],
                      atol=1e-4)
        Tensor.realize_all(ours.running_mean, ours.running_var)
    assert_close(ours.running_mean.numpy(), theirs.running_mean.numpy(), atol=1e-5)
    assert_close(ours.running_var.numpy(), theirs.running_var.numpy(), atol=1e-5)
    theirs.eval()
    with torch.no_grad():
        assert_close(ours(Tensor(x)).numpy(), theirs(torch.from_numpy(x)).numpy(), atol=1e-5)


@pytest.mark.parametrize("kwargs", [{}, {"stride": 2, "padding": 1, "output_padding": 1},
                                    {"stride": 3, "padding": 2, "dilation": 2, "groups": 2, "bias": False}])
def test_conv_transpose1d_matches_torch(kwargs):
    ours, theirs = ConvTranspose1d(4, 6, 3, **kwargs), torch.nn.ConvTranspose1d(4, 6, 3, **kwargs)
    assert ours.weight.shape == tuple(theirs.weight.shape)
    pairs = [(ours.weight, theirs.weight)] + ([(ours.bias, theirs.bias)] if ours.bias is not None else [])
    against_torch(ours, theirs, np.random.randn(2, 4, 7).astype(np.float32), parameters=pairs, atol=1e-4)


@pytest.mark.parametrize("bias,with_state", [(True, True), (True, False), (False, True)])
def test_lstm_cell_matches_torch(bias, with_state):
    ours, theirs = LSTMCell(5, 4, bias=bias), torch.nn.LSTMCell(5, 4, bias=bias)
    names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if bias else [])
    h0, c0 = np.random.randn(3, 4).astype(np.float32), np.random.randn(3, 4).astype(np.float32)

    def run_ours(x):
        return Tensor.cat(*ours(x, (Tensor(h0), Tensor(c0)) if with_state else None), dim=1)

    def run_theirs(x):
        return torch.cat(theirs(x, (torch.from_numpy(h0), torch.from_numpy(c0)) if with_state else None), dim=1)
    against_torch(run_ours, run_theirs, np.random.randn(3, 5).astype(np.float32),
                  parameters=[(getattr(ours, n), getattr(theirs, n)) for n in names], atol=1e-5)


def test_lstm_cell_init_follows_torch_bounds():
    cell = LSTMCell(3, 16)
    assert cell.weight_ih.shape == (64, 3) and cell.weight_hh.shape == (64, 16) and cell.bias_hh.shape == (64,)
    for t in (cell.weight_ih, cell.bias_ih):
        values = t.numpy()
        assert np.abs(values).max() <= 0.25 and values.std() > 0.1


# ---- training mode ----
def test_context_training_is_tensor_training():
    bn, x = BatchNorm1d(2), Tensor([[1.0, 5.0], [3.0, 9.0]])
    assert not Tensor.training and not TRAINING
    with Context(TRAINING=1):
        assert Tensor.training and TRAINING.value == 1
        assert_close(bn(x).numpy(), [[-1.0, -1.0], [1.0, 1.0]], atol=1e-4)        # batch statistics
        assert (Dropout(0.5)(Tensor.ones(200)).numpy() == 0).any()
        with Tensor.train(False):
            assert not Tensor.training and not TRAINING
            assert_close(Dropout(0.5)(Tensor.ones(4)).numpy(), np.ones(4))
        assert TRAINING.value == 1
    with Tensor.train():
        assert TRAINING.value
    assert not Tensor.training
    mean, var = bn.running_mean.numpy(), bn.running_var.numpy()
    assert_close(mean, [0.2, 0.7], atol=1e-6)                                   # updated inside the Context
    assert_close(bn(x).numpy(), (x.numpy() - mean) / np.sqrt(var + 1e-5), atol=1e-5)   # running statistics


def test_assigning_tensor_training_still_switches_layers():
    x = Tensor([[1.0, 5.0], [3.0, 9.0]])
    try:
        Tensor.training = True
        assert_close(BatchNorm1d(2)(x).numpy(), [[-1.0, -1.0], [1.0, 1.0]], atol=1e-4)
        assert (Dropout(0.5)(Tensor.ones(200)).numpy() == 0).any()
        Tensor.training = False
        assert_close(Dropout(0.5)(Tensor.ones(4)).numpy(), np.ones(4))
    finally:
        Tensor.training = TRAINING


# ---- found by fuzzing: differential fuzzers' reduced cases against PyTorch CPU (docs/FUZZING.md); each comment
# says the wrong answer it gave ----
@pytest.mark.parametrize("layer", ["LayerNorm", "GroupNorm", "RMSNorm"])
def test_float16_norm_layers_scale_in_float32_and_return_float16(layer):
    # weight x the output's gradient (60000 x 2.5) overflowed float16 before the normalization's own gradient made it
    # small again (NaN where torch has 19264); and float16 input with the default float32 weight came out float32
    x = np.array([[-8, -3, 5, 6], [4, -6, -2, 7]], np.float16)
    weight = np.array([1.25, 1.125, -1.0, 60000.0], np.float16)
    g = np.array([[1, -2, 1.5, 2], [-1, 0.5, 1, -2]], np.float32)
    m = {"LayerNorm": LayerNorm(4), "GroupNorm": GroupNorm(1, 4), "RMSNorm": RMSNorm(4)}[layer]
    assert m(Tensor(x)).dtype == dtypes.float16
    tx, tw = Tensor(x, requires_grad=True), Tensor(weight, requires_grad=True)
    rx, rw = torch.tensor(x, requires_grad=True), torch.tensor(weight, requires_grad=True)
    m.weight = tw
    ref = {"LayerNorm": lambda: F.layer_norm(rx, (4,), rw, None), "GroupNorm": lambda: F.group_norm(rx, 1, rw),
           "RMSNorm": lambda: F.rms_norm(rx, (4,), rw, 1e-6)}[layer]()
    if layer != "RMSNorm":
        m.bias = None if layer == "LayerNorm" else Tensor.zeros(4, dtype=dtypes.float16)
    out = m(tx)
    (out.float() * Tensor(g)).sum().backward()
    (ref.float() * torch.tensor(g)).sum().backward()
    assert out.dtype == dtypes.float16
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.detach().numpy().astype(np.float32), rtol=4e-3,
                               atol=0.1)
    assert np.isfinite(tx.grad.numpy()).all()
    np.testing.assert_allclose(tx.grad.numpy().astype(np.float32), rx.grad.numpy().astype(np.float32), rtol=2e-2,
                               atol=1.0)


def test_group_norm_with_one_value_per_group_is_its_bias():
    # torch accepts it (the variance is 0): the output is the bias, the input's gradient 0
    x, w, b = np.array([[1.0, -2.0, 3.0, 0.5], [4.0, 5.0, -6.0, 7.0]], np.float32), [1.0, 2, 3, 4], [0.5, -1, 2, 0]
    m = GroupNorm(4, 4)
    m.weight, m.bias = Tensor(w), Tensor(b)
    # (the values to 1e-3: torch's are off by ~1e-4, its mean and variance round where ours cancel exactly)
    run = against_torch(m, lambda t: F.group_norm(t, 4, torch.tensor(w), torch.tensor(b)), x, weights=1, atol=1e-3,
                        rtol=2e-7, grad_atol=0)
    assert run.out.tolist() == [b, b] and run.inputs[0].grad.tolist() == np.zeros_like(x).tolist()


def test_layernorm_of_a_variance_past_the_float_range_is_nan():
    # the squared deviations overflow to inf: y * rsqrt(inf) = 0 returned the bias; PyTorch gives NaN. (BatchNorm's
    # statistics come out as the bias in PyTorch too, and here)
    for values in ([[1e20, -1e20, 3e20, 0.0]], [[3e38, -3e38, 1.0, 2.0]], [[1e19, 2e19, 3e19, 4e19]]):
        w, b = [1.0, 2.0, 0.5, 1.0], [0.5, -1.0, 2.0, 0.0]
        layer = LayerNorm(4)
        layer.weight, layer.bias = Tensor(w), Tensor(b)
        against_torch(layer, lambda t: F.layer_norm(t, (4,), torch.tensor(w), torch.tensor(b)),
                      np.array(values, np.float32), weights=1, atol=0, rtol=2e-7)
        assert_close(Tensor(values).layernorm().numpy(), F.layer_norm(torch.tensor(values), (4,)), atol=0, rtol=2e-7)
        groups = GroupNorm(1, 4)(Tensor(values).reshape(1, 4, 1))
        assert_close(groups.numpy(), F.group_norm(torch.tensor(values).reshape(1, 4, 1), 1), atol=0, rtol=2e-7)
        batch = BatchNorm(1, track_running_stats=False)(Tensor(values).reshape(4, 1))
        assert_close(batch.numpy(), F.batch_norm(torch.tensor(values).reshape(4, 1), None, None, training=True),
                     atol=0, rtol=2e-7)
