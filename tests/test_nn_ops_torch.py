"""nn ops against torch.nn.functional, values and gradients: pooling (ceil_mode, indices, N-d, integer dtypes),
max_unpool2d, unfold, interpolate, the pad modes, the losses, normalize, attention, and the shape errors of the
convolutions."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, rand_array

from tinygrad_core import Tensor, dtypes


def against_torch(tiny_fn, torch_fn, *arrays, atol=1e-5, rtol=1e-4, grad=True):
    """tiny_fn(*Tensors) vs torch_fn(*torch tensors): the value, then the gradients of every float input for a
    randomly weighted sum of the output (an output may be a tuple: the first is differentiated, all compared)."""
    tiny = [Tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    ref = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    out, expected = tiny_fn(*tiny), torch_fn(*ref)
    outs, expecteds = (out, expected) if isinstance(out, tuple) else ((out,), (expected,))
    for o, e in zip(outs, expecteds):
        assert o.shape == tuple(e.shape), f"shape {o.shape}, torch {tuple(e.shape)}"
    if grad and any(t.requires_grad for t in tiny):
        weights = rand_array(outs[0].shape, 0.5, 1.5, seed=7)
        (outs[0] * Tensor(weights)).sum().backward()
        (expecteds[0] * torch.tensor(weights)).sum().backward()
    for o, e in zip(outs, expecteds):
        assert_close(o.numpy(), e.detach().numpy().astype(o.numpy().dtype), atol, rtol)
    for t, r in zip(tiny, ref):
        if r.grad is not None:
            assert_close(t.grad.numpy(), r.grad.numpy(), atol, rtol, "gradient")


# ---- pooling ----
POOLS = [
    ((1, 1, 5, 5), dict(kernel_size=2, ceil_mode=True)),
    ((1, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 1, 6, 6), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 0), ceil_mode=True)),
    ((1, 1, 8, 8), dict(kernel_size=3, stride=3, padding=1, ceil_mode=True)),   # a last window would start in padding
    ((1, 1, 7, 7), dict(kernel_size=2, stride=2, dilation=2, ceil_mode=True)),
    ((1, 1, 6, 6), dict(kernel_size=2, stride=1)),
]


@pytest.mark.parametrize("shape,kwargs", POOLS, ids=str)
def test_max_pool2d_like_torch(shape, kwargs):
    against_torch(lambda x: x.max_pool2d(**kwargs, return_indices=True),
                  lambda x: F.max_pool2d(x, **kwargs, return_indices=True), rand_array(shape))


@pytest.mark.parametrize("shape,kwargs", [p for p in POOLS if "dilation" not in p[1]], ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_like_torch(shape, kwargs, count_include_pad):
    against_torch(lambda x: x.avg_pool2d(**kwargs, count_include_pad=count_include_pad),
                  lambda x: F.avg_pool2d(x, **kwargs, count_include_pad=count_include_pad), rand_array(shape))


def test_avg_pool3d_excluding_padding():
    # the padding and the reduction follow the kernel's three dims, not the last two
    against_torch(lambda x: x.avg_pool2d(kernel_size=(8, 8, 8), stride=5, padding=1, count_include_pad=False),
                  lambda x: F.avg_pool3d(x, 8, stride=5, padding=1, count_include_pad=False),
                  rand_array((1, 1, 16, 16, 16)))


def test_max_pool3d_and_1d():
    against_torch(lambda x: x.max_pool2d(kernel_size=(2, 3, 2), stride=2, padding=1, return_indices=True),
                  lambda x: F.max_pool3d(x, (2, 3, 2), stride=2, padding=1, return_indices=True),
                  rand_array((1, 2, 5, 6, 4)))
    against_torch(lambda x: x.max_pool1d(3, 2, padding=1, ceil_mode=True, return_indices=True),
                  lambda x: F.max_pool1d(x, 3, 2, padding=1, ceil_mode=True, return_indices=True),
                  rand_array((2, 3, 8)))


def test_max_pool2d_gradient_goes_to_the_first_tied_maximum():
    # windows of equal values (a relu's zeros): torch gives the whole gradient to one element, as its indices say
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 2:, 2:] = 1.0
    against_torch(lambda t: t.max_pool2d(3, stride=1, return_indices=True),
                  lambda t: F.max_pool2d(t, 3, stride=1, return_indices=True), x)


def test_max_pool2d_nan_and_infinities():
    x = np.array([[[[1.0, np.nan, -np.inf], [np.nan, 0.0, -np.inf], [2.0, -np.inf, -np.inf]]]], np.float32)
    against_torch(lambda t: t.max_pool2d(2, stride=1, padding=1, return_indices=True),
                  lambda t: F.max_pool2d(t, 2, stride=1, padding=1, return_indices=True), x)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_max_pool2d_integers_keep_their_dtype(dtype):
    x = rand_array((1, 2, 5, 5), -100 if dtype != np.uint8 else 0, 100, dtype=dtype, seed=3)
    if dtype != np.uint8:
        x[0, 0, 0, 0] = np.iinfo(dtype).min     # the padding must not win over the smallest value
    out = Tensor(x).max_pool2d(3, stride=2, padding=1)
    assert out.numpy().dtype == dtype
    expected = F.max_pool2d(torch.tensor(x.astype(np.float64)), 3, stride=2, padding=1).numpy().astype(dtype)
    assert_close(out.numpy(), expected)


def test_pool_errors():
    with pytest.raises(ValueError, match=r"stride \(0, 0\)"):
        Tensor.ones(1, 1, 4, 4).max_pool2d(2, stride=0)
    with pytest.raises(ValueError, match="padding"):
        Tensor.ones(1, 1, 4, 4).avg_pool2d(2, padding=(1, 1, 1))


def test_max_unpool2d_inverts_max_pool2d():
    x = rand_array((2, 3, 6, 4))
    values, indices = F.max_pool2d(torch.tensor(x), 2, return_indices=True)
    against_torch(lambda v, i: v.max_unpool2d(i), lambda v, i: F.max_unpool2d(v, i, 2), values.numpy(),
                  indices.numpy())
    # output_size for an input the pool cut short, and overlapping windows naming an element twice
    values, indices = F.max_pool2d(torch.tensor(x), 3, stride=1, return_indices=True)
    against_torch(lambda v, i: v.max_unpool2d(i, 3, stride=1, output_size=(6, 4)),
                  lambda v, i: F.max_unpool2d(v, i, 3, stride=1, output_size=(6, 4)),
                  values.numpy(), indices.numpy(), grad=False)
    with pytest.raises(RuntimeError, match=r"indices \(2, 3, 4, 2\).*input \(2, 3, 3, 2\)"):
        Tensor(values.numpy()[:, :, :3]).max_unpool2d(Tensor(indices.numpy()))


@pytest.mark.parametrize("dim,size,step", [(0, 2, 2), (-1, 3, 1), (1, 1, 3), (1, 4, 2), (2, 0, 1)])
def test_unfold(dim, size, step):
    against_torch(lambda x: x.unfold(dim, size, step), lambda x: x.unfold(dim, size, step), rand_array((3, 4, 5)))


def test_unfold_errors():
    with pytest.raises(RuntimeError, match="size 5.*4"):
        Tensor.ones(3, 4).unfold(1, 5, 1)
    with pytest.raises(RuntimeError, match="step 0"):
        Tensor.ones(3, 4).unfold(1, 2, 0)
    with pytest.raises(IndexError, match="axis 2"):
        Tensor.ones(3, 4).unfold(2, 2, 1)


@pytest.mark.parametrize("size", [(7, 3), (2, 9), (5, 5), (1, 1)])
@pytest.mark.parametrize("mode,align_corners", [("bilinear", False), ("bilinear", True), ("nearest", None),
                                                ("nearest-exact", None)])
def test_interpolate(size, mode, align_corners):
    kwargs = {} if align_corners is None else {"align_corners": align_corners}
    against_torch(lambda x: x.interpolate(size, mode=mode, **kwargs),
                  lambda x: F.interpolate(x, size, mode=mode, **kwargs), rand_array((2, 1, 5, 4)))


def test_interpolate_linear_and_trilinear():
    against_torch(lambda x: x.interpolate((9,), align_corners=True), lambda x: F.interpolate(
        x, 9, mode="linear", align_corners=True), rand_array((1, 2, 4)))
    against_torch(lambda x: x.interpolate((3, 5, 2), mode="trilinear"),
                  lambda x: F.interpolate(x, (3, 5, 2), mode="trilinear"), rand_array((1, 1, 2, 3, 4)))


def test_interpolate_errors():
    with pytest.raises(ValueError, match="'bicubic'"):
        Tensor.ones(1, 1, 2, 2).interpolate((4, 4), mode="bicubic")
    with pytest.raises(ValueError, match="align_corners=True"):
        Tensor.ones(1, 1, 2, 2).interpolate((4, 4), mode="nearest", align_corners=True)


# ---- pad modes ----
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [(1, 2), (2, 0, 1, 3), (0, 3, -1, 2), (-2, 1, 0, 0), (1, 1, 1, 1, 1, 1)])
def test_pad_modes(mode, padding):
    shape = {2: (2, 5), 4: (1, 2, 4, 5), 6: (2, 3, 4, 5)}[len(padding)]
    against_torch(lambda x: x.pad(padding, mode=mode), lambda x: F.pad(x, padding, mode=mode), rand_array(shape))


def test_pad_mode_grouped_pairs_and_errors():
    x = rand_array((3, 4))
    assert_close(Tensor(x).pad(((1, 2), None), mode="reflect").numpy(), np.pad(x, ((1, 2), (0, 0)), "reflect"))
    with pytest.raises(ValueError, match=r"reflect pad \(4, 0\) of axis 1.*size 4"):
        Tensor(x).pad((4, 0), mode="reflect")
    with pytest.raises(ValueError, match=r"circular pad \(0, 5\)"):
        Tensor(x).pad((0, 5), mode="circular")
    with pytest.raises(NotImplementedError, match="'wrap'"):
        Tensor(x).pad((1, 1), mode="wrap")


# ---- losses ----
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2, 2, 2), (3,)])
def test_nll_loss(shape, weighted, reduction):
    rng = np.random.default_rng(1)
    target_shape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    y = rng.integers(0, shape[min(1, len(shape) - 1)], target_shape).astype(np.int64)
    if y.ndim:
        y.flat[0] = -100        # ignored
    weight = rand_array((shape[min(1, len(shape) - 1)],), 0.5, 2, seed=4)
    against_torch(lambda x, t: x.log_softmax(min(1, x.ndim - 1)).nll_loss(t, Tensor(weight) if weighted else None,
                                                                          reduction=reduction),
                  lambda x, t: F.nll_loss(x.log_softmax(min(1, x.ndim - 1)), t, torch.tensor(weight) if weighted else
                                          None, reduction=reduction), rand_array(shape), y)


def test_nll_loss_ignore_index_and_edges():
    x, y = rand_array((4, 3)), np.array([2, 1, 2, 0])
    against_torch(lambda a, t: a.nll_loss(t, ignore_index=2), lambda a, t: F.nll_loss(a, t, ignore_index=2), x, y)
    # every label ignored: the mean is 0/0, NaN
    against_torch(lambda a, t: a.nll_loss(t, ignore_index=2), lambda a, t: F.nll_loss(a, t, ignore_index=2),
                  x, np.array([2, 2, 2, 2]), grad=False)
    # a log-probability of -inf off the target doesn't leak a NaN through 0 * -inf
    x[1, 0] = -np.inf
    against_torch(lambda a, t: a.nll_loss(t), lambda a, t: F.nll_loss(a, t), x, y)
    with pytest.raises(RuntimeError, match=r"\(4, 3\).*\(4,\).*\(3,\)"):
        Tensor(x).nll_loss(Tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match=r"weight \(2,\).*3 classes"):
        Tensor(x).nll_loss(Tensor(y), Tensor([1.0, 2.0]))


@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_classes_on_axis_1(smoothing):
    x = rand_array((2, 3, 4, 2))
    probs = np.exp(rand_array((2, 3, 4, 2), seed=2))
    probs = (probs / probs.sum(1, keepdims=True)).astype(np.float32)
    against_torch(lambda a, p: a.cross_entropy(p, label_smoothing=smoothing),
                  lambda a, p: F.cross_entropy(a, p, label_smoothing=smoothing), x, probs)
    y = np.random.default_rng(0).integers(0, 3, (2, 4, 2))
    y[0, 0, 0] = -100
    for reduction in ("mean", "none"):
        against_torch(lambda a, t: a.cross_entropy(t, reduction=reduction, label_smoothing=smoothing),
                      lambda a, t: F.cross_entropy(a, t, reduction=reduction, label_smoothing=smoothing), x, y)


def test_cross_entropy_one_sample():
    against_torch(lambda a, t: a.cross_entropy(t), lambda a, t: F.cross_entropy(a, t), rand_array((5,)), np.array(3))


def test_sparse_categorical_crossentropy_ignores_as_torch():
    # ignored labels count for nothing, in the mean's divisor too; all of them ignored is NaN (0/0)
    x = rand_array((4, 5))
    for y, smoothing in (([1, -1, 3, -1], 0.0), ([1, -1, 3, 2], 0.2), ([-1, -1, -1, -1], 0.0)):
        against_torch(lambda a, t: a.sparse_categorical_crossentropy(t, label_smoothing=smoothing),
                      lambda a, t: F.cross_entropy(a, t, ignore_index=-1, label_smoothing=smoothing),
                      x, np.array(y), grad=y[0] != -1)
    with pytest.raises(ValueError, match="1.5"):
        Tensor(x).sparse_categorical_crossentropy(Tensor([0, 1, 2, 3]), label_smoothing=1.5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy_logits_pos_weight(reduction):
    x = rand_array((3, 4), -30, 30)
    y = rand_array((3, 4), 0, 1, seed=1)
    pos_weight = rand_array((4,), 0.2, 3, seed=2)
    against_torch(lambda a, t: a.binary_crossentropy_logits(t, reduction, pos_weight=Tensor(pos_weight)),
                  lambda a, t: F.binary_cross_entropy_with_logits(a, t, reduction=reduction,
                                                                  pos_weight=torch.tensor(pos_weight)), x, y)


def test_one_hot_infers_classes_and_checks_values():
    y = np.array([[0, 4], [2, 1]])
    assert_close(Tensor(y).one_hot().numpy(), F.one_hot(torch.tensor(y)).numpy().astype(np.int32))
    assert Tensor(y).one_hot(-1).shape == (2, 2, 5)
    with pytest.raises(RuntimeError, match="non-negative, got -1"):
        Tensor([0, -1, 2]).one_hot()
    with pytest.raises(Exception, match="empty"):      # the max that infers the count has nothing to read
        Tensor.zeros(0, dtype=dtypes.int32).one_hot()
    with pytest.raises(RuntimeError, match="float"):
        Tensor([0.0, 1.0]).one_hot(2)
    with pytest.raises(ValueError, match="-3"):
        Tensor([0, 1]).one_hot(-3)


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1)])
def test_normalize(p, dim):
    x = rand_array((3, 4, 2))
    x[1, :, 0] = 0.0              # a zero vector: divided by eps, gradient finite
    against_torch(lambda a: a.normalize(p, dim), lambda a: F.normalize(a, p, dim), x)


# ---- attention ----
@pytest.mark.parametrize("mask", [None, "bool", "float", "causal"])
def test_scaled_dot_product_attention(mask):
    q, k, v = rand_array((2, 3, 4, 8), seed=1), rand_array((2, 3, 6, 8), seed=2), rand_array((2, 3, 6, 5), seed=3)
    arrays = [q, k, v]
    if mask == "bool":
        arrays.append(rand_array((4, 6), seed=4, dtype=np.bool_) | np.eye(4, 6, dtype=np.bool_))
    elif mask == "float":
        arrays.append(rand_array((2, 1, 4, 6), seed=5))
    causal = mask == "causal"
    against_torch(lambda *t: t[0].scaled_dot_product_attention(*t[1:], is_causal=causal),
                  lambda *t: F.scaled_dot_product_attention(*t[:3], attn_mask=t[3] if len(t) > 3 else None,
                                                            is_causal=causal), *arrays)


def test_scaled_dot_product_attention_fully_masked_row_and_gqa():
    q, k, v = rand_array((1, 4, 3, 8), seed=1), rand_array((1, 2, 3, 8), seed=2), rand_array((1, 2, 3, 8), seed=3)
    mask = np.ones((3, 3), np.bool_)
    mask[1] = False               # query 1 attends to nothing: zeros, not NaN
    against_torch(lambda *t: t[0].scaled_dot_product_attention(t[1], t[2], t[3], enable_gqa=True),
                  lambda *t: F.scaled_dot_product_attention(t[0], t[1], t[2], t[3], enable_gqa=True), q, k, v, mask)
    with pytest.raises(RuntimeError, match="not both"):
        Tensor(q).scaled_dot_product_attention(Tensor(q), Tensor(q), Tensor(mask), is_causal=True)


# ---- convolution shape errors, raised when the op is built ----
CONV_ERRORS = [
    ((1, 2, 5, 5), (3, 3, 3, 3), {}, r"\(1, 2, 5, 5\) has 2 channels.*\(3, 3, 3, 3\)"),
    ((1, 2, 5, 5), (3, 1, 3, 3), {"groups": 2}, r"groups=2.*3 output channels"),
    ((1, 2, 5, 5), (3, 2, 3, 3), {"groups": 0}, "groups=0"),
    ((2, 5), (3, 2, 3, 3), {}, r"\(2, 5\) needs 4 dims.*\(3, 2, 3, 3\)"),
    ((1, 2, 5), (3, 2, 3, 3), {}, r"\(1, 1, 2, 5\) has 1 channels.*\(3, 2, 3, 3\)"),    # unbatched: 1 channel
    ((1, 2, 5, 5), (3, 2, 3, 3), {"padding": (1, 1, 1)}, r"padding \(1, 1, 1\)"),
    ((1, 2, 2, 2), (3, 2, 3, 3), {}, r"kernel \(3, 3\).*\(3, 2, 3, 3\).*\(1, 2, 2, 2\) padded to \(2, 2\)"),
    ((1, 2, 5, 5), (3, 2, 3, 3), {"stride": 0}, "stride 0"),
]


@pytest.mark.parametrize("x,w,kwargs,message", CONV_ERRORS, ids=lambda c: str(c))
def test_conv2d_shape_errors(x, w, kwargs, message):
    with pytest.raises(RuntimeError, match=message):
        Tensor.ones(*x).conv2d(Tensor.ones(*w), **kwargs)
    with pytest.raises(RuntimeError):         # torch agrees it is an error
        F.conv2d(torch.ones(x), torch.ones(w), **kwargs)


def test_conv2d_bias_and_conv_transpose2d_errors():
    with pytest.raises(RuntimeError, match=r"bias \(4,\).*\(3,\)"):
        Tensor.ones(1, 2, 5, 5).conv2d(Tensor.ones(3, 2, 3, 3), Tensor.ones(4))
    with pytest.raises(RuntimeError, match=r"\(1, 2, 5, 5\) has 2 channels.*\(3, 2, 3, 3\)"):
        Tensor.ones(1, 2, 5, 5).conv_transpose2d(Tensor.ones(3, 2, 3, 3))
    with pytest.raises(RuntimeError, match="groups=2"):
        Tensor.ones(1, 3, 5, 5).conv_transpose2d(Tensor.ones(3, 2, 3, 3), groups=2)
    with pytest.raises(RuntimeError, match="output_padding 2"):
        Tensor.ones(1, 2, 5, 5).conv_transpose2d(Tensor.ones(2, 2, 3, 3), stride=2, output_padding=2)


@pytest.mark.parametrize("kernel,padding,stride", [((1, 2), (0, 1), (5, 1)), ((2, 2), (1, 1), (7, 3)),
                                                   ((3, 1), (1, 0), (4, 6))])
def test_pools_with_strides_past_the_window(kernel, padding, stride):
    # a stride longer than a window's row used to cut past the end of the repeated rows (ValueError from shrink)
    x = np.random.default_rng(0).random((1, 2, 8, 8)).astype(np.float32)
    for ours, theirs in (("avg_pool2d", F.avg_pool2d), ("max_pool2d", F.max_pool2d)):
        t, tt = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, expected = getattr(t, ours)(kernel, stride, padding=padding), theirs(tt, kernel, stride, padding)
        (out * out).sum().backward()
        (expected * expected).sum().backward()
        np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-6, atol=1e-7)
