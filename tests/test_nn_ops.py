"""Neural-network Tensor ops, forward and backward: against numpy references written from PyTorch's definitions
(conv2d, conv_transpose2d, max/avg pooling, batchnorm, layernorm, dropout, one_hot, the losses) and against
torch.nn.functional (pooling with ceil_mode, indices, N-d and integer dtypes, max_unpool2d, unfold, interpolate, the
pad modes, the losses, normalize, attention, the shape errors of the convolutions)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import against_torch, assert_close, check, np_conv2d, pair, rand_array

from tinygrad_core import Tensor, dtypes, nn

nan = math.nan


def np_conv_transpose2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, output_padding=0):
    (sh, sw), (dh, dw), (ph, pw), (oph, opw) = pair(stride), pair(dilation), pair(padding), pair(output_padding)
    n, cin, h, wd = x.shape
    _, cout_group, kh, kw = w.shape
    cin_group = cin // groups
    full_h, full_w = (h - 1) * sh + dh * (kh - 1) + 1 + oph, (wd - 1) * sw + dw * (kw - 1) + 1 + opw
    full = np.zeros((n, cout_group * groups, full_h, full_w), dtype=np.result_type(x, w))
    for g in range(groups):
        xs, ws = x[:, g * cin_group:(g + 1) * cin_group], w[g * cin_group:(g + 1) * cin_group]
        for i in range(kh):
            for j in range(kw):
                full[:, g * cout_group:(g + 1) * cout_group, i * dh:i * dh + sh * (h - 1) + 1:sh,
                     j * dw:j * dw + sw * (wd - 1) + 1:sw] += np.einsum("nchw,co->nohw", xs, ws[:, :, i, j])
    oh, ow = full_h - 2 * ph, full_w - 2 * pw
    out = full[:, :, ph:ph + oh, pw:pw + ow]
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def np_pool(x, kernel, stride, dilation=1, padding=0, pad_value=0.0, reduce=np.max):
    (kh, kw), (dh, dw), (ph, pw) = pair(kernel), pair(dilation), pair(padding)
    sh, sw = pair(stride if stride is not None else kernel)
    x = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(ph, ph), (pw, pw)], constant_values=pad_value)
    h, w = x.shape[-2:]
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    windows = np.stack([np.stack([x[..., i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]
                                  for j in range(ow)], -3) for i in range(oh)], -4)   # ..., oh, ow, kh, kw
    return reduce(windows, axis=(-2, -1))


# ---- convolution ----
CONV_CASES = [
    {"x": (1, 2, 5, 5), "w": (3, 2, 3, 3)},
    {"x": (2, 2, 5, 4), "w": (2, 2, 2, 3), "bias": True},
    {"x": (1, 2, 6, 6), "w": (2, 2, 3, 3), "stride": 2},
    {"x": (1, 2, 5, 5), "w": (2, 2, 3, 3), "padding": 1},
    {"x": (1, 2, 4, 5), "w": (2, 2, 3, 2), "padding": (2, 1)},
    {"x": (1, 1, 7, 7), "w": (2, 1, 3, 3), "dilation": 2},
    {"x": (1, 4, 5, 5), "w": (4, 2, 3, 3), "groups": 2, "bias": True},
    {"x": (1, 3, 4, 4), "w": (3, 1, 2, 2), "groups": 3},                 # depthwise
    {"x": (1, 2, 7, 6), "w": (4, 1, 3, 2), "groups": 2, "stride": (2, 1), "padding": 1, "dilation": (1, 2)},
    {"x": (1, 2, 3, 3), "w": (2, 2, 1, 1)},
    {"x": (3, 4, 7, 7), "w": (6, 2, 3, 3), "groups": 2, "stride": 2, "padding": 1, "bias": True},   # im2col rows
    {"x": (2, 3, 8, 8), "w": (5, 3, 2, 2), "stride": 2},                 # windows side by side
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items() if k != "x"))
def test_conv2d(case):
    kwargs = {k: case[k] for k in ("stride", "padding", "dilation", "groups") if k in case}
    shapes = [case["x"], case["w"]] + ([(case["w"][0],)] if case.get("bias") else [])
    check(lambda x, w, *b: x.conv2d(w, b[0] if b else None, **kwargs),
          lambda x, w, *b: np_conv2d(x, w, b[0] if b else None, **kwargs), shapes=shapes, atol=1e-4)


def test_conv2d_flat_torch_padding():
    # (left, right, top, bottom) as torch.nn.functional.pad orders them
    check(lambda x, w: x.conv2d(w, padding=(1, 0, 2, 1)),
          lambda x, w: np_conv2d(np.pad(x, ((0, 0), (0, 0), (2, 1), (1, 0))), w), shapes=[(1, 1, 4, 4), (1, 1, 3, 3)])


def test_conv2d_non_contiguous_input():
    check(lambda x, w: x.permute(0, 1, 3, 2).conv2d(w, padding=1), lambda x, w: np_conv2d(x.transpose(0, 1, 3, 2), w,
          padding=1), shapes=[(1, 2, 5, 4), (2, 2, 3, 3)], atol=1e-4)


CONV_T_CASES = [
    {"x": (1, 2, 3, 3), "w": (2, 3, 3, 3)},
    {"x": (2, 2, 3, 4), "w": (2, 2, 2, 2), "stride": 2, "bias": True},
    {"x": (1, 2, 4, 4), "w": (2, 1, 3, 3), "padding": 1},
    {"x": (1, 2, 3, 3), "w": (2, 2, 3, 3), "stride": 2, "padding": 1, "output_padding": 1},
    {"x": (1, 1, 3, 3), "w": (1, 2, 2, 2), "dilation": 2},
    {"x": (1, 4, 3, 3), "w": (4, 1, 3, 3), "groups": 2, "stride": 2},
    {"x": (1, 2, 3, 2), "w": (2, 2, 3, 2), "stride": (2, 1), "padding": (1, 0)},
]


@pytest.mark.parametrize("case", CONV_T_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items() if k != "x"))
def test_conv_transpose2d(case):
    kwargs = {k: case[k] for k in ("stride", "padding", "dilation", "groups", "output_padding") if k in case}
    cout = case["w"][1] * case.get("groups", 1)
    shapes = [case["x"], case["w"]] + ([(cout,)] if case.get("bias") else [])
    check(lambda x, w, *b: x.conv_transpose2d(w, b[0] if b else None, **kwargs),
          lambda x, w, *b: np_conv_transpose2d(x, w, b[0] if b else None, **kwargs), shapes=shapes, atol=1e-4)


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


# ---- pooling ----
POOL_CASES = [
    {"shape": (1, 2, 4, 4)},
    {"shape": (1, 1, 5, 5), "kernel_size": (3, 3), "stride": 1},
    {"shape": (2, 1, 6, 5), "kernel_size": (2, 3), "stride": (2, 1)},
    {"shape": (1, 1, 5, 5), "kernel_size": 2, "stride": 1, "dilation": 2},
    {"shape": (1, 2, 5, 5), "kernel_size": 3, "stride": 2, "padding": 1},
    {"shape": (3, 4, 4), "kernel_size": 2},                              # no batch dim
]


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_max_pool2d(case):
    kwargs = {k: v for k, v in case.items() if k != "shape"}
    kernel, stride = kwargs.get("kernel_size", (2, 2)), kwargs.get("stride")
    check(lambda x: x.max_pool2d(**kwargs),
          lambda x: np_pool(x, kernel, stride, kwargs.get("dilation", 1), kwargs.get("padding", 0), -np.inf, np.max),
          shapes=[case["shape"]])


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_avg_pool2d(case):
    kwargs = {k: v for k, v in case.items() if k != "shape"}
    kernel, stride = kwargs.get("kernel_size", (2, 2)), kwargs.get("stride")
    check(lambda x: x.avg_pool2d(**kwargs),
          lambda x: np_pool(x, kernel, stride, kwargs.get("dilation", 1), kwargs.get("padding", 0), 0.0, np.mean),
          shapes=[case["shape"]])


def test_avg_pool2d_count_include_pad_false():
    def ref(x):
        sums = np_pool(x, 3, 2, 1, 1, 0.0, np.sum)
        counts = np_pool(np.ones_like(x), 3, 2, 1, 1, 0.0, np.sum)
        return sums / counts
    check(lambda x: x.avg_pool2d(3, stride=2, padding=1, count_include_pad=False), ref, shapes=[(1, 2, 5, 5)])


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


# ---- unfold and interpolate ----
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


# ---- normalization ----
def test_batchnorm():
    def ref(x, w, b, mean, invstd):
        shape = (1, -1, 1, 1)
        return (x - mean.reshape(shape)) * w.reshape(shape) * invstd.reshape(shape) + b.reshape(shape)
    mean, invstd = rand_array((3,), seed=11), rand_array((3,), 0.5, 2, seed=12)
    check(lambda x, w, b: x.batchnorm(w, b, Tensor(mean), Tensor(invstd)),
          lambda x, w, b: ref(x, w, b, mean.astype(np.float64), invstd.astype(np.float64)),
          shapes=[(2, 3, 2, 2), (3,), (3,)])


def test_batchnorm_training_statistics_and_no_affine():
    x = rand_array((4, 3, 2, 2))
    t = Tensor(x)
    mean = t.mean(axis=(0, 2, 3))
    invstd = (t.var(axis=(0, 2, 3), correction=0) + 1e-5).rsqrt()
    out = t.batchnorm(None, None, mean, invstd)
    expected = (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5)
    assert_close(out.numpy(), expected, atol=1e-4)


@pytest.mark.parametrize("axis", [-1, (1, 2), 1])
def test_layernorm(axis):
    def ref(x):
        m = x.mean(axis, keepdims=True)
        return (x - m) / np.sqrt(((x - m) ** 2).mean(axis, keepdims=True) + 1e-5)
    check(lambda x: x.layernorm(axis), ref, shapes=[(2, 3, 4)], atol=1e-4)


def test_layernorm_eps():
    check(lambda x: x.layernorm(eps=0.5), lambda x: (x - x.mean(-1, keepdims=True)) /
          np.sqrt(x.var(-1, keepdims=True) + 0.5), shapes=[(3, 4)])


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1)])
def test_normalize(p, dim):
    x = rand_array((3, 4, 2))
    x[1, :, 0] = 0.0              # a zero vector: divided by eps, gradient finite
    against_torch(lambda a: a.normalize(p, dim), lambda a: F.normalize(a, p, dim), x)


# ---- dropout ----
def test_dropout_is_identity_outside_training():
    x = rand_array((4, 5))
    assert_close(Tensor(x).dropout(0.5).numpy(), x)
    with Tensor.train(False):
        assert_close(Tensor(x).dropout(0.9).numpy(), x)


def test_dropout_in_training():
    x = np.ones((50, 40), np.float32)
    with Tensor.train():
        t = Tensor(x, requires_grad=True)
        out = t.dropout(0.25)
        out.sum().backward()
        values = out.numpy()
    kept = values != 0
    assert_close(values[kept], np.full(kept.sum(), 1 / 0.75, np.float32))
    assert 0.2 < 1 - kept.mean() < 0.3
    assert_close(t.grad.numpy(), kept / 0.75)        # the gradient flows through the same mask
    with Tensor.train():
        assert_close(Tensor(x).dropout(0.0).numpy(), x)
        with pytest.raises(ValueError, match="1.5"):
            Tensor(x).dropout(1.5)


def test_dropout_masks_differ_between_calls():
    with Tensor.train():
        a = Tensor.ones(100).dropout(0.5).numpy()
        b = Tensor.ones(100).dropout(0.5).numpy()
    assert not np.array_equal(a, b)


# ---- one_hot ----
def test_one_hot():
    y = np.array([0, 2, 1, 3], np.int32)
    assert_close(Tensor(y).one_hot(5).numpy(), np.eye(5, dtype=np.int32)[y])
    assert_close(Tensor(y).one_hot().numpy(), np.eye(4, dtype=np.int32)[y])
    y2 = np.array([[0, 1], [2, 0]], np.int32)
    assert_close(Tensor(y2).one_hot(3).numpy(), np.eye(3, dtype=np.int32)[y2])


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


# ---- losses ----
def np_log_softmax(x, axis=-1):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def np_sparse_ce(logits, y, ignore_index=-1, label_smoothing=0.0, reduction="mean"):
    logp = np_log_softmax(logits)
    keep = y != ignore_index
    picked = -np.take_along_axis(logp, np.where(keep, y, 0)[..., None], -1)[..., 0]
    loss = ((1 - label_smoothing) * picked + label_smoothing * -logp.mean(-1)) * keep
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / max(keep.sum(), 1)


Y = np.array([1, 0, 3], np.int32)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_sparse_categorical_crossentropy(reduction, smoothing):
    check(lambda x: x.sparse_categorical_crossentropy(Tensor(Y), label_smoothing=smoothing, reduction=reduction),
          lambda x: np_sparse_ce(x, Y, label_smoothing=smoothing, reduction=reduction), shapes=[(3, 4)])


def test_sparse_categorical_crossentropy_ignore_index():
    y = np.array([1, -1, 3, 2], np.int32)
    check(lambda x: x.sparse_categorical_crossentropy(Tensor(y)), lambda x: np_sparse_ce(x, y), shapes=[(4, 4)])
    y5 = np.array([1, 5, 3, 5], np.int32)
    check(lambda x: x.sparse_categorical_crossentropy(Tensor(y5), ignore_index=5),
          lambda x: np_sparse_ce(x, y5, ignore_index=5), shapes=[(4, 6)])


def test_sparse_categorical_crossentropy_batched():
    y = np.array([[0, 2], [1, 1]], np.int32)
    check(lambda x: x.sparse_categorical_crossentropy(Tensor(y)), lambda x: np_sparse_ce(x, y), shapes=[(2, 2, 3)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_indices(reduction):
    check(lambda x: x.cross_entropy(Tensor(Y), reduction=reduction),
          lambda x: np_sparse_ce(x, Y, reduction=reduction), shapes=[(3, 4)])


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_with_probabilities(smoothing):
    probs = np_log_softmax(rand_array((3, 4), seed=5).astype(np.float64))
    probs = np.exp(probs).astype(np.float32)
    target = probs * (1 - smoothing) + smoothing / 4

    def ref(x):
        return -(np_log_softmax(x) * target).sum(-1).mean()
    check(lambda x: x.cross_entropy(Tensor(probs), label_smoothing=smoothing), ref, shapes=[(3, 4)])


def test_cross_entropy_label_smoothing_indices():
    check(lambda x: x.cross_entropy(Tensor(Y), label_smoothing=0.3),
          lambda x: np_sparse_ce(x, Y, label_smoothing=0.3), shapes=[(3, 4)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy(reduction):
    y = np.array([[1, 0, 1], [0, 0, 1]], np.float32)
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    check(lambda p: p.binary_crossentropy(Tensor(y), reduction=reduction),
          lambda p: red(-(y * np.log(p) + (1 - y) * np.log(1 - p))), shapes=[(2, 3)], low=0.05, high=0.95)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy_logits(reduction):
    y = np.array([[1, 0, 1], [0, 0.3, 1]], np.float32)
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    check(lambda x: x.binary_crossentropy_logits(Tensor(y), reduction=reduction),
          lambda x: red(np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))), shapes=[(2, 3)], low=-4, high=4)


def test_binary_crossentropy_logits_extreme_values():
    x = np.array([-200.0, -50.0, 0.0, 50.0, 200.0], np.float32)
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0], np.float32)
    expected = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    out = Tensor(x).binary_crossentropy_logits(Tensor(y), reduction="none").numpy()
    assert np.isfinite(out).all()
    assert_close(out, expected, rtol=1e-5)


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


def test_loss_errors():
    with pytest.raises(RuntimeError, match=r"\(3, 4\).*\(2,\)"):
        Tensor.ones(3, 4).sparse_categorical_crossentropy(Tensor([0, 1]))
    with pytest.raises(ValueError, match="'avg'"):
        Tensor.ones(3, 4).sparse_categorical_crossentropy(Tensor([0, 1, 2]), reduction="avg")


def test_loss_dtype_is_float():
    assert Tensor.ones(3, 4).sparse_categorical_crossentropy(Tensor([0, 1, 2])).dtype == dtypes.float32


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


# ---- found by fuzzing: differential fuzzers' reduced cases against PyTorch CPU (docs/FUZZING.md); each comment
# says the wrong answer it gave ----
@pytest.mark.parametrize("size, align_corners", [((3,), False), ((3,), True), ((6,), False)])
def test_a_neighbour_weighted_zero_doesnt_spread_its_nan_through_interpolate(size, align_corners):
    # at an unchanged size every second neighbour has weight 0: [1, -104, nan] came out [1, nan, nan]
    x = np.array([[[1.0, -104.0, nan]]], np.float32)
    got = Tensor(x).interpolate(size, align_corners=align_corners).numpy()
    assert_close(got, F.interpolate(torch.tensor(x), size=size, mode="linear", align_corners=align_corners), atol=0,
                 rtol=2e-7)


@pytest.mark.parametrize("ours, theirs, x, w, kwargs", [
    ("conv2d", F.conv2d, (4, 7, 6), (6, 2, 3, 3), {"groups": 2, "stride": 2, "padding": 1}),
    ("conv2d", F.conv1d, (4, 9), (6, 4, 3), {"padding": 1}),
    ("conv2d", F.conv3d, (2, 5, 4, 5), (3, 2, 2, 2, 2), {}),
    ("conv_transpose2d", F.conv_transpose2d, (4, 5, 5), (4, 3, 3, 3), {"stride": 2, "padding": 1,
                                                                       "output_padding": 1})])
def test_convolutions_take_an_unbatched_input_as_torch_does(ours, theirs, x, w, kwargs):
    # a (channels, *spatial) input raised "needs 4 dims"; torch convolves it as a batch of one
    rng = np.random.default_rng(1)
    values = [rng.standard_normal(s).astype(np.float32) for s in (x, w, (w[1] if "transpose" in ours else w[0],))]
    a, t = [Tensor(v, requires_grad=True) for v in values], [torch.tensor(v, requires_grad=True) for v in values]
    y, u = getattr(a[0], ours)(a[1], a[2], **kwargs), theirs(*t, **kwargs)
    y.square().sum().backward()
    u.square().sum().backward()
    assert_close(y.numpy(), u, rtol=1e-5, atol=1e-5)
    for g, h in zip(a, t):
        assert_close(g.grad.numpy(), h.grad, rtol=1e-4, atol=1e-4)
    layer = nn.Conv2d(3, 5, 3)
    assert layer(Tensor.ones(3, 8, 8)).numpy().tolist() == layer(Tensor.ones(1, 3, 8, 8))[0].numpy().tolist()


def test_conv_transpose2d_multiplies_no_zeros_spread_between_the_inputs():
    # a stride spreads the input with zeros; an inf weight times them made NaN where torch (adding each input
    # element's products into the output) has finite values
    x, w = np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 2, 2), np.float32)
    w[0, 0, 0, 0] = math.inf
    got = Tensor(x).conv_transpose2d(Tensor(w), stride=2, padding=(0, 1)).numpy()
    expected = F.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=2, padding=(0, 1)).numpy()
    assert not np.isnan(expected).any()
    np.testing.assert_array_equal(got, expected)


def test_conv_transpose2d_with_an_output_axis_of_size_zero_raises():
    # (was: an empty (2, 1, 8, 0) output, as torch's oneDNN path gives; torch's own shape check, which its other paths
    # and a kernel of size 1 meet, raises "Output size is too small": an empty output is an error here)
    shapes = [(2, 2, 3, 1), (2, 1, 1, 2), (1,)]
    x, w, b = (Tensor.ones(*shape, requires_grad=True) for shape in shapes)
    tx, tw, tb = (torch.ones(shape, requires_grad=True) for shape in shapes)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        x.conv_transpose2d(w, b, stride=(3, 2), padding=(0, 1), output_padding=(1, 0))
    with pytest.raises(RuntimeError, match="output"):
        x.conv_transpose2d(w, b, stride=1, padding=(0, 2))            # (1 - 1) * 1 + 2 - 4: a negative size
    with pytest.raises(RuntimeError):
        F.conv_transpose2d(tx, tw, tb, stride=1, padding=(0, 2))
    # (the case: a kernel of size 1, where torch raises too)
    with pytest.raises(RuntimeError, match="too small"):
        Tensor.ones(1, 2, 2).conv_transpose2d(Tensor.ones(2, 2, 1), padding=1)
    with pytest.raises(RuntimeError, match="too small"):
        F.conv_transpose1d(torch.ones(1, 2, 2), torch.ones(2, 2, 1), padding=1)


def test_conv2d_float16_multiplies_in_float32():
    # 60000 * 60000 overflowed float16 in the products: inf + -inf gave NaN where torch's float32 sum is finite or inf
    x = np.array([[[[60000.0, -60000.0]]]], np.float16)
    w = np.array([[[[60000.0, 60000.0]]]], np.float16)
    got, expected = Tensor(x).conv2d(Tensor(w)).numpy(), F.conv2d(torch.tensor(x), torch.tensor(w)).numpy()
    assert got.dtype == np.float16 and expected.tolist() == [[[[0.0]]]]
    np.testing.assert_array_equal(got, expected)


def test_avg_pool2d_without_the_padding_counted_keeps_float16():
    x = np.random.default_rng(0).standard_normal((1, 1, 5, 7)).astype(np.float16)
    out = Tensor(x).avg_pool2d((2, 3), stride=3, padding=1, count_include_pad=False)
    ref = F.avg_pool2d(torch.tensor(x), (2, 3), 3, 1, count_include_pad=False)
    assert out.dtype == dtypes.float16 and ref.dtype == torch.float16
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=2e-3)


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool_of_halves_divides_before_rounding_to_half(count_include_pad):
    # a window of float16s summed in half passed 65504: avg_pool2d of [60000, 60000] was inf (PyTorch: 60000)
    x = np.array([[[[60000, 60000, 60000, 2]]]], np.float16)
    want = F.avg_pool2d(torch.tensor(x), (1, 2), stride=1, padding=(0, 1), count_include_pad=count_include_pad)
    got = Tensor(x).avg_pool2d((1, 2), stride=1, padding=(0, 1), count_include_pad=count_include_pad)
    assert got.dtype == dtypes.float16 and got.numpy().tolist() == want.numpy().tolist()


def test_interpolate_float64_places_its_samples_in_float64():
    # the source positions were computed in float32: 1.0000000149 where torch gives 1.0
    x = np.array([[[[0.0, -2.0], [2.0, 1.0]]]])
    got = Tensor(x).interpolate((5, 6), mode="bilinear", align_corners=True).numpy()
    expected = F.interpolate(torch.tensor(x), size=(5, 6), mode="bilinear", align_corners=True).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-15)


def test_linear_interpolate_past_the_last_sample_weighs_it_as_torch():
    # the position was clipped to the last sample, weighing it 1 and the (same) next 0: -inf * 0 made NaN where
    # torch weighs the last sample 0.75 + 0.25
    a = np.array([[[-1e300, -math.inf]]])
    got = Tensor(a).interpolate((4,), mode="linear").numpy()
    expected = F.interpolate(torch.tensor(a), size=(4,), mode="linear").numpy()
    np.testing.assert_array_equal(got, expected)
    assert got[0, 0, 3] == -math.inf


def test_circular_pad_that_crops_a_whole_axis():
    # IndexError: no piece was left to concatenate
    a = np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2)
    out = Tensor(a).pad((-1, -1, 0, 0), mode="circular")
    assert out.shape == tuple(F.pad(torch.tensor(a), (-1, -1, 0, 0), mode="circular").shape) == (2, 1, 2, 0)


@pytest.mark.parametrize("mode", ["replicate", "reflect", "circular"])
def test_a_mode_pad_leaves_an_empty_unpadded_axis_alone(mode):
    # every axis was padded, also the ones with (0, 0): replicate and reflect failed on the empty batch axis
    x = np.zeros((0, 1, 3), np.float32)
    for pad in ([0, 0], [1, 1], [2, 0]):
        assert Tensor(x).pad(pad, mode=mode).shape == F.pad(torch.tensor(x), pad, mode=mode).shape
    y = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    assert_close(Tensor(y).pad([2, 1], mode=mode).numpy(), F.pad(torch.tensor(y), [2, 1], mode=mode), atol=0,
                 rtol=2e-7)


def test_layernorm_of_the_mean_itself_is_positive_zero():
    # (x - mean) rsqrt(var) kept -0.0 - 0.0 = -0.0; PyTorch adds its zero bias, so it's +0.0
    got = Tensor([[0.0, 0.0, -0.0], [1.0, -0.0, -1.0], [-0.0, -0.0, -0.0]]).layernorm().numpy()
    expected = F.layer_norm(torch.tensor([[0.0, 0.0, -0.0], [1.0, -0.0, -1.0], [-0.0, -0.0, -0.0]]), (3,))
    assert_close(got, expected, atol=0, rtol=1e-6)
    assert (np.signbit(got) == np.signbit(expected.numpy())).all()
