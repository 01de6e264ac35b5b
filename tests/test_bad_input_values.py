"""Index values known when the op is built (a realized index: made from a list or an array, a dataset's labels) are
range-checked, with PyTorch's exception class and a message naming the value; a lazy index is not computed for the
check. And the nn ops' argument errors (conv and pooling lengths and padding, batchnorm sizes, loss targets) are
raised as PyTorch raises them, while the valid programs next to them keep their values (PyTorch is the oracle)."""
import timeit
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tinygrad_core import Tensor, TinyJit, nn


def _assign_out_of_range():
    t = Tensor.zeros(3).contiguous()
    t[Tensor([0, 5])] = 1.0


def _batchnorm_layer_in_training():
    with Tensor.train():
        nn.BatchNorm2d(4)(Tensor.ones(2, 3, 4, 4)).realize()


CASES = [
    # out-of-range index values
    (IndexError, r"index 5 is out of bounds for dimension 0 with size 3", lambda: Tensor.arange(3)[Tensor([0, 5])]),
    (IndexError, r"index -4 is out of bounds for dimension 0 with size 3", lambda: Tensor.arange(3)[Tensor([-4])]),
    # an index made from a Python number is a constant, its value known too (these read back 0)
    (IndexError, r"index 3 is out of bounds for dimension 0 with size 3", lambda: Tensor.arange(3)[Tensor(3)]),
    (IndexError, r"index 5 is out of bounds for dimension 1 with size 3", lambda: Tensor.zeros(2, 3)[:, Tensor(5)]),
    (IndexError, r"12 of 10 rows", lambda: nn.Embedding(10, 4)(Tensor(12))),
    (IndexError, r"Target 5 is out of bounds", lambda: Tensor.ones(3).cross_entropy(Tensor(5))),
    (RuntimeError, r"smaller than num_classes=3, got 5", lambda: Tensor(5).one_hot(3)),
    (IndexError, r"index 4 is out of bounds", lambda: Tensor.arange(3)[Tensor.full((2,), 4).cast("int64")]),
    (IndexError, r"index 3 is out of bounds for dimension 1 with size 3",
     lambda: Tensor.zeros(2, 3)[:, Tensor([0, 3])]),
    (IndexError, r"index 3 is out of bounds for dimension 1 with size 3",
     lambda: Tensor.zeros(2, 3)[Tensor([0]), Tensor([3])]),
    (IndexError, r"index 5 is out of bounds for dimension 0 with size 3", _assign_out_of_range),
    (RuntimeError, r"index 5 is out of bounds for dimension 1 with size 3",
     lambda: Tensor.arange(6).reshape(2, 3).gather(1, Tensor([[0, 5], [1, 1]]))),
    (RuntimeError, r"index -1 is out of bounds for dimension 1 with size 3",
     lambda: Tensor.arange(6).reshape(2, 3).gather(1, Tensor([[0, -1], [1, 1]]))),
    (RuntimeError, r"index 7 is out of bounds for dimension 1 with size 3",
     lambda: Tensor.zeros(2, 3).scatter(1, Tensor([[0, 7]]), 1.0)),
    (RuntimeError, r"index 7 is out of bounds for dimension 1 with size 3",
     lambda: Tensor.zeros(2, 3).scatter_reduce(1, Tensor([[0, 7]]), Tensor.ones(1, 2), "sum")),
    (IndexError, r"index out of range in self: 10 of 10", lambda: nn.Embedding(10, 4)(Tensor([10]))),
    (IndexError, r"index out of range in self: -1 of 10", lambda: nn.Embedding(10, 4)(Tensor([-1]))),
    (IndexError, r"Target 5 is out of bounds", lambda: Tensor.ones(2, 3).cross_entropy(Tensor([0, 5]))),
    (IndexError, r"Target -1 is out of bounds", lambda: Tensor.ones(2, 3).cross_entropy(Tensor([0, -1]))),
    (IndexError, r"Target 3 is out of bounds", lambda: Tensor.ones(2, 3).log_softmax().nll_loss(Tensor([0, 3]))),
    (IndexError, r"Target 3 is out of bounds",
     lambda: Tensor.ones(2, 3).sparse_categorical_crossentropy(Tensor([0, 3]))),
    (RuntimeError, r"Class values must be smaller than num_classes=2, got 2", lambda: Tensor([0, 1, 2]).one_hot(2)),
    (RuntimeError, r"Class values must be non-negative, got -1", lambda: Tensor([0, -1]).one_hot(3)),
    (RuntimeError, r"Class values must be smaller than num_classes=0", lambda: Tensor([0, 1]).one_hot(0)),
    (RuntimeError, r"Class values must be non-negative, got -1", lambda: Tensor([0, -1]).one_hot()),
    # nn ops' arguments
    (RuntimeError, r"stride \(1, 1, 1\).*list of 2 values to match the convolution dimensions",
     lambda: Tensor.ones(1, 1, 6, 6).conv2d(Tensor.ones(1, 1, 3, 3), stride=(1, 1, 1))),
    (RuntimeError, r"dilation \(1, 1, 1\).*list of 2 values to match the convolution dimensions",
     lambda: Tensor.ones(1, 1, 6, 6).conv2d(Tensor.ones(1, 1, 3, 3), dilation=(1, 1, 1))),
    (RuntimeError, r"stride \(1, 1, 1\).*2 ints", lambda: Tensor.ones(1, 1, 4, 4).max_pool2d(2, stride=(1, 1, 1))),
    (RuntimeError, r"pad should be at most half of kernel size, but got pad=2, kernel_size=2",
     lambda: Tensor.ones(1, 1, 4, 4).max_pool2d(kernel_size=2, padding=2)),
    (RuntimeError, r"pad should be at most half of kernel size, but got pad=2, kernel_size=3",
     lambda: Tensor.ones(1, 1, 6, 6).avg_pool2d(kernel_size=3, padding=2)),
    (RuntimeError, r"pad should be at most half of kernel size, but got pad=3, kernel_size=5",
     lambda: Tensor.ones(1, 1, 6, 6).avg_pool2d(kernel_size=(3, 5), padding=(1, 3))),
    (RuntimeError, r"Invalid padding string: 'typo'",
     lambda: Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(1, 1, 3, 3), padding="typo")),
    (ValueError, r"Invalid padding string: 'same'", lambda: Tensor.ones(1, 1, 4, 4).max_pool2d(2, padding="same")),
    (RuntimeError, r"padding='same' is not supported for strided convolutions",
     lambda: Tensor.ones(1, 1, 6, 6).conv2d(Tensor.ones(1, 1, 3, 3), padding="same", stride=2)),
    (RuntimeError, r"integer target.*dtypes.float",
     lambda: Tensor([[0.1, 0.9], [0.8, 0.2]]).log().nll_loss(Tensor([0.5, 1.0]))),
    (RuntimeError, r"running_mean should contain 3 elements not 4",
     lambda: Tensor.ones(2, 3, 4, 4).batchnorm(Tensor.ones(4), Tensor.ones(4), Tensor.zeros(4), Tensor.ones(4))),
    (RuntimeError, r"weight should contain 3 elements not 4",
     lambda: Tensor.ones(2, 3, 4, 4).batchnorm(Tensor.ones(4), Tensor.ones(3), Tensor.zeros(3), Tensor.ones(3))),
    (RuntimeError, r"running_mean should contain 3 elements not 4", lambda: nn.BatchNorm2d(4)(Tensor.ones(2, 3, 4, 4))),
    (RuntimeError, r"running_mean should contain 3 elements not 4", _batchnorm_layer_in_training),
    (RuntimeError, r"query \(2, 4, 8\) and key \(2, 4, 6\)",
     lambda: Tensor.ones(2, 4, 8).scaled_dot_product_attention(Tensor.ones(2, 4, 6), Tensor.ones(2, 4, 8))),
    (TypeError, r"size \(2.5, 2\)", lambda: Tensor.ones(1, 1, 4, 4).interpolate(size=(2.5, 2))),
    (TypeError, r"k=2.5", lambda: Tensor.ones(2, 3).topk(2.5)),
    (RuntimeError, r"meshgrid.*0-D or 1-D.*\(2, 2\)", lambda: Tensor.ones(2, 2).meshgrid(Tensor.ones(3))),
]


@pytest.mark.parametrize("error, message, build", CASES, ids=[m[:40] for _, m, _ in CASES])
def test_bad_input_raises(error, message, build):
    with pytest.raises(error, match=message):
        build()


def test_in_range_indices_keep_their_values():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert Tensor(x)[Tensor([2, -1, 0, -3])].tolist() == x[[2, -1, 0, -3]].tolist()
    assert Tensor(x)[:, Tensor([3, -4])].tolist() == x[:, [3, -4]].tolist()
    t = Tensor.zeros(3).contiguous()
    t[Tensor([-1, 0])] = 1.0
    assert t.tolist() == [1.0, 0.0, 1.0]
    index = np.array([[0, 3], [2, 2], [1, 0]])
    expected = torch.tensor(x).gather(1, torch.tensor(index)).numpy()
    assert Tensor(x).gather(1, Tensor(index)).tolist() == expected.tolist()
    expected = torch.zeros(3, 4).scatter(1, torch.tensor(index), 7.0).numpy()
    assert Tensor.zeros(3, 4).scatter(1, Tensor(index), 7.0).tolist() == expected.tolist()
    embedding = nn.Embedding(10, 4)
    assert embedding(Tensor([9, 0])).tolist() == embedding.weight.numpy()[[9, 0]].tolist()
    assert Tensor(x)[Tensor(-3)].tolist() == x[-3].tolist() and Tensor(x)[:, Tensor(True).cast("int32")].tolist() \
        == x[:, 1].tolist()
    # a padded constant is not known (its pad is zeros): a divisor padded with zeros isn't taken for the constant
    assert Tensor.full((2,), 4).pad(((1, 0),))._known_values() is None


def test_losses_skip_ignore_index_and_one_hot_infers_classes():
    logits = np.random.randn(3, 4).astype(np.float32)
    expected = F.cross_entropy(torch.tensor(logits), torch.tensor([0, -100, 3])).item()
    assert np.isclose(Tensor(logits).cross_entropy(Tensor([0, -100, 3])).item(), expected, rtol=1e-5)
    expected = F.nll_loss(torch.tensor(logits), torch.tensor([7, 1, 2]), ignore_index=7).item()
    assert np.isclose(Tensor(logits).nll_loss(Tensor([7, 1, 2]), ignore_index=7).item(), expected, rtol=1e-5)
    expected = F.cross_entropy(torch.tensor(logits), torch.tensor([-1, 2, 3]), ignore_index=-1).item()
    assert np.isclose(Tensor(logits).sparse_categorical_crossentropy(Tensor([-1, 2, 3])).item(), expected, rtol=1e-5)
    assert Tensor([2, 0]).one_hot().tolist() == F.one_hot(torch.tensor([2, 0])).tolist()
    assert Tensor([2, 0]).one_hot(4).tolist() == F.one_hot(torch.tensor([2, 0]), 4).tolist()
    assert (Tensor([1, 0]) + 1).one_hot().tolist() == [[0, 0, 1], [0, 1, 0]]     # a lazy tensor is read back too
    with pytest.raises(RuntimeError, match="non-negative"):
        (Tensor([1, 0]) - 1).one_hot()


def test_a_lazy_index_is_not_computed_for_the_check():
    # not realized: no values known when the op is built, and none are read back for the check (as before: 0)
    assert Tensor.arange(3)[Tensor([0, 4]) + 1].tolist() == [1, 0]


def test_a_jitted_step_checks_on_the_calls_that_run_python():
    @TinyJit
    def step(labels):
        return Tensor.ones(2, 3).cross_entropy(labels).realize()
    assert np.isclose(step(Tensor([0, 1])).item(), np.log(3))
    with pytest.raises(IndexError, match="Target 3"):       # the capture runs the Python, so it checks
        step(Tensor([0, 3]))
    for _ in range(2):
        assert np.isclose(step(Tensor([2, 1])).item(), np.log(3))


@pytest.mark.parametrize("stride, dilation, kernel", [(1, 1, (3, 3)), (1, 2, (3, 2)), (1, 1, (2, 4))])
def test_conv_padding_same_and_valid_match_torch(stride, dilation, kernel):
    x, w = np.random.randn(1, 2, 7, 6).astype(np.float32), np.random.randn(3, 2, *kernel).astype(np.float32)
    for padding in ("same", "valid"):
        expected = F.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, dilation=dilation, padding=padding)
        out = Tensor(x).conv2d(Tensor(w), stride=stride, dilation=dilation, padding=padding)
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
    layer = nn.Conv2d(2, 3, kernel, dilation=dilation, padding="same")
    assert layer(Tensor(x)).shape == (1, 3, 7, 6)


def test_pooling_padding_at_half_the_kernel_and_onnx_pairs_still_work():
    x = np.random.randn(1, 1, 6, 6).astype(np.float32)
    expected = F.avg_pool2d(torch.tensor(x), 3, padding=1).numpy()
    np.testing.assert_allclose(Tensor(x).avg_pool2d(3, padding=1).numpy(), expected, rtol=1e-5)
    expected = F.max_pool2d(torch.tensor(x), (2, 4), padding=(1, 2)).numpy()
    np.testing.assert_allclose(Tensor(x).max_pool2d((2, 4), padding=(1, 2)).numpy(), expected)
    # (before, after) pairs, as ONNX gives them, may pad past half the kernel (ONNX's averagepool_2d_pads)
    assert Tensor(x).avg_pool2d(3, stride=1, padding=(2, 2, 2, 2)).shape == (1, 1, 8, 8)


def test_check_cost_on_a_realized_index():
    index = Tensor(np.random.randint(0, 10, 128).astype(np.int32))
    seconds = min(timeit.repeat(lambda: index._check_index(0, 10, 0), number=200, repeat=5)) / 200
    assert seconds < 200e-6         # a few microseconds: one host read of 128 values and a compare
