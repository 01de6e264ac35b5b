"""Neural-network Tensor ops against numpy references written from PyTorch's definitions: conv2d,
conv_transpose2d, max/avg pooling, batchnorm, layernorm, dropout, one_hot and the losses; forward and backward."""
import numpy as np
import pytest
from helpers import assert_close, check, rand_array

from tinygrad_core import Tensor, dtypes


def pair(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


def np_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    (sh, sw), (dh, dw), (ph, pw) = pair(stride), pair(dilation), pair(padding)
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    n, _, h, wd = x.shape
    cout, cin_group, kh, kw = w.shape
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, cout, oh, ow), dtype=np.result_type(x, w))
    per_group = cout // groups
    for g in range(groups):
        xs, ws = x[:, g * cin_group:(g + 1) * cin_group], w[g * per_group:(g + 1) * per_group]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * per_group:(g + 1) * per_group] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out if b is None else out + b.reshape(1, -1, 1, 1)


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


def test_loss_errors():
    with pytest.raises(RuntimeError, match=r"\(3, 4\).*\(2,\)"):
        Tensor.ones(3, 4).sparse_categorical_crossentropy(Tensor([0, 1]))
    with pytest.raises(ValueError, match="'avg'"):
        Tensor.ones(3, 4).sparse_categorical_crossentropy(Tensor([0, 1, 2]), reduction="avg")


def test_loss_dtype_is_float():
    assert Tensor.ones(3, 4).sparse_categorical_crossentropy(Tensor([0, 1, 2])).dtype == dtypes.float32
