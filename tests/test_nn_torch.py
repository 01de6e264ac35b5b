"""nn layers against the PyTorch modules of the same name, weights copied across: outputs, input gradients and
weight gradients; and training mode switched each of the three ways (Tensor.train(), Context, Tensor.training)."""
import numpy as np
import pytest
from helpers import assert_close

from tinygrad_core import Context, Tensor
from tinygrad_core.helpers import TRAINING
from tinygrad_core.nn import (
    BatchNorm1d,
    BatchNorm3d,
    ConvTranspose1d,
    Dropout,
    InstanceNorm,
    LayerNorm2d,
    LSTMCell,
    RMSNorm,
)

torch = pytest.importorskip("torch")


def compare(ours, theirs, x: np.ndarray, pairs, atol=1e-5):
    """Copy each (our tensor, torch parameter) pair's values into torch, run ours(x) and theirs(x), and compare the
    outputs and, for a random upstream gradient, the gradients of x and of every pair."""
    for mine, param in pairs:
        with torch.no_grad():
            param.copy_(torch.from_numpy(mine.numpy().copy()))
        mine.requires_grad_()
    x_ours, x_theirs = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_ours, out_theirs = ours(x_ours), theirs(x_theirs)
    assert_close(out_ours.numpy(), out_theirs.detach().numpy(), atol=atol, what="output")
    upstream = np.random.randn(*out_theirs.shape).astype(np.float32)
    (out_ours * Tensor(upstream)).sum().backward()
    (out_theirs * torch.from_numpy(upstream)).sum().backward()
    assert_close(x_ours.grad.numpy(), x_theirs.grad.numpy(), atol=atol, what="input gradient")
    for i, (mine, param) in enumerate(pairs):
        assert_close(mine.grad.numpy(), param.grad.numpy(), atol=atol, what=f"gradient of parameter {i}")


@pytest.mark.parametrize("affine", [True, False])
def test_rmsnorm_matches_torch(affine):
    ours, theirs = RMSNorm(6, elementwise_affine=affine), torch.nn.RMSNorm(6, eps=1e-6, elementwise_affine=affine)
    if affine:
        ours.weight.assign(Tensor(np.random.randn(6).astype(np.float32))).realize()
    compare(ours, theirs, np.random.randn(3, 4, 6).astype(np.float32), [(ours.weight, theirs.weight)] if affine else [])


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
    compare(ours, lambda x: theirs(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2),
            np.random.randn(2, 4, 3, 5).astype(np.float32), [(ours.weight, theirs.weight), (ours.bias, theirs.bias)])


def test_instancenorm_matches_torch_instancenorm2d():
    ours, theirs = InstanceNorm(3), torch.nn.InstanceNorm2d(3, affine=True)
    ours.weight.assign(Tensor(np.random.randn(3).astype(np.float32))).realize()
    compare(ours, theirs, (np.random.randn(2, 3, 4, 5) * 3 + 1).astype(np.float32),
            [(ours.weight, theirs.weight), (ours.bias, theirs.bias)], atol=1e-4)
    assert InstanceNorm(3, affine=False).parameters() == []


@pytest.mark.parametrize("layer,torch_layer,shape", [(BatchNorm3d, torch.nn.BatchNorm3d, (2, 3, 2, 3, 4)),
                                                     (BatchNorm1d, torch.nn.BatchNorm1d, (8, 3)),
                                                     (BatchNorm1d, torch.nn.BatchNorm1d, (4, 3, 5))])
def test_batchnorm_matches_torch_in_training_then_eval(layer, torch_layer, shape):
    ours, theirs = layer(3, momentum=0.2), torch_layer(3, momentum=0.2)
    ours.weight.assign(Tensor(np.random.randn(3).astype(np.float32))).realize()
    x = (np.random.randn(*shape) * 2 + 1).astype(np.float32)
    with Context(TRAINING=1):
        compare(ours, theirs.train(), x, [(ours.weight, theirs.weight), (ours.bias, theirs.bias)], atol=1e-4)
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
    compare(ours, theirs, np.random.randn(2, 4, 7).astype(np.float32), pairs, atol=1e-4)


@pytest.mark.parametrize("bias,with_state", [(True, True), (True, False), (False, True)])
def test_lstm_cell_matches_torch(bias, with_state):
    ours, theirs = LSTMCell(5, 4, bias=bias), torch.nn.LSTMCell(5, 4, bias=bias)
    names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if bias else [])
    h0, c0 = np.random.randn(3, 4).astype(np.float32), np.random.randn(3, 4).astype(np.float32)

    def run_ours(x):
        return Tensor.cat(*ours(x, (Tensor(h0), Tensor(c0)) if with_state else None), dim=1)

    def run_theirs(x):
        return torch.cat(theirs(x, (torch.from_numpy(h0), torch.from_numpy(c0)) if with_state else None), dim=1)
    compare(run_ours, run_theirs, np.random.randn(3, 5).astype(np.float32),
            [(getattr(ours, n), getattr(theirs, n)) for n in names], atol=1e-5)


def test_lstm_cell_init_follows_torch_bounds():
    cell = LSTMCell(3, 16)
    assert cell.weight_ih.shape == (64, 3) and cell.weight_hh.shape == (64, 16) and cell.bias_hh.shape == (64,)
    for t in (cell.weight_ih, cell.bias_ih):
        values = t.numpy()
        assert np.abs(values).max() <= 0.25 and values.std() > 0.1


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
