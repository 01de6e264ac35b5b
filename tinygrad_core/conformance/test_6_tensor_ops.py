"""Section 6, tensor-level ops forward and backward: each op's value against numpy, and its gradient (through the
core's autograd, run on the backend) against central differences of the numpy function in float64."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tinygrad_core.conformance.harness import assert_close, numeric_gradient
from tinygrad_core.dtype import dtypes

rng = np.random.default_rng(6)


def normal(*shape):
    return rng.standard_normal(shape)


def positive(*shape):
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(*shape):       # kinks (relu, abs, max) are not differentiable at 0: keep inputs off them
    return rng.choice([-1, 1], shape) * rng.uniform(0.2, 2.0, shape)


def distinct(*shape):             # max/min/sort-like ops need one winner per row for a defined gradient
    return rng.permutation(np.arange(int(np.prod(shape)))).reshape(shape) * 0.25 - 1.0


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_conv2d(x, w, padding=1, stride=1):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, _, h, width = x.shape
    out_ch, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (width - kw) // stride + 1
    out = np.zeros((n, out_ch, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out


def np_max_pool2d(x, k=2):
    n, c, h, w = x.shape
    return x[:, :, :h // k * k, :w // k * k].reshape(n, c, h // k, k, w // k, k).max((3, 5))


ONE_HOT = np.eye(5)[rng.integers(0, 5, 4)]
GELU_C = math.sqrt(2 / math.pi)

# (id, inputs, tensor function, numpy function)
CASES = [
    ("add", [normal(3, 4), normal(4)], lambda a, b: a + b, lambda a, b: a + b),
    ("sub", [normal(3, 4), normal(3, 1)], lambda a, b: a - b, lambda a, b: a - b),
    ("mul", [normal(2, 5), normal(2, 5)], lambda a, b: a * b, lambda a, b: a * b),
    ("div", [normal(6), positive(6)], lambda a, b: a / b, lambda a, b: a / b),
    ("pow", [positive(5), normal(5)], lambda a, b: a ** b, lambda a, b: a ** b),
    ("neg", [normal(5)], lambda a: -a, lambda a: -a),
    ("exp", [normal(7)], lambda a: a.exp(), np.exp),
    ("log", [positive(7)], lambda a: a.log(), np.log),
    ("sqrt", [positive(7)], lambda a: a.sqrt(), np.sqrt),
    ("sin", [normal(7)], lambda a: a.sin(), np.sin),
    ("cos", [normal(7)], lambda a: a.cos(), np.cos),
    ("relu", [away_from_zero(9)], lambda a: a.relu(), lambda a: np.maximum(a, 0)),
    ("sigmoid", [normal(8)], lambda a: a.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    ("tanh", [normal(8)], lambda a: a.tanh(), np.tanh),
    ("gelu", [normal(8)], lambda a: a.gelu(), lambda a: 0.5 * a * (1 + np.tanh(GELU_C * (a + 0.044715 * a ** 3)))),
    ("silu", [normal(8)], lambda a: a.silu(), lambda a: a / (1 + np.exp(-a))),
    ("softplus", [normal(8)], lambda a: a.softplus(), lambda a: np.log1p(np.exp(a))),
    ("abs", [away_from_zero(8)], lambda a: a.abs(), np.abs),
    ("maximum", [distinct(6), distinct(6)[::-1].copy()], lambda a, b: a.maximum(b), np.maximum),
    ("where", [normal(6), normal(6)], lambda a, b: (a > 0).where(a * 2, b), lambda a, b: np.where(a > 0, a * 2, b)),
    ("clip", [away_from_zero(9) * 2], lambda a: a.clip(-1.5, 1.5), lambda a: np.clip(a, -1.5, 1.5)),
    ("sum", [normal(3, 4)], lambda a: a.sum(1), lambda a: a.sum(1)),
    ("mean", [normal(3, 4)], lambda a: a.mean(0), lambda a: a.mean(0)),
    ("var", [normal(3, 5)], lambda a: a.var(1), lambda a: a.var(1, ddof=1)),
    ("max", [distinct(3, 4)], lambda a: a.max(1), lambda a: a.max(1)),
    ("softmax", [normal(3, 5)], lambda a: a.softmax(), np_softmax),
    ("log_softmax", [normal(3, 5)], lambda a: a.log_softmax(), lambda a: np.log(np_softmax(a))),
    ("logsumexp", [normal(3, 5)], lambda a: a.logsumexp(1), lambda a: np.log(np.exp(a).sum(1))),
    ("layernorm", [normal(3, 6)], lambda a: a.layernorm(), lambda a: (a - a.mean(-1, keepdims=True)) /
     np.sqrt(a.var(-1, keepdims=True) + 1e-5)),
    ("matmul", [normal(3, 4), normal(4, 5)], lambda a, b: a @ b, lambda a, b: a @ b),
    ("batched-matmul", [normal(2, 3, 4), normal(2, 4, 2)], lambda a, b: a @ b, lambda a, b: a @ b),
    ("conv2d", [normal(2, 2, 5, 5), normal(3, 2, 3, 3)], lambda x, w: x.conv2d(w, padding=1), np_conv2d),
    ("conv2d-stride2", [normal(1, 1, 6, 6), normal(2, 1, 3, 3)], lambda x, w: x.conv2d(w, stride=2),
     lambda x, w: np_conv2d(x, w, padding=0, stride=2)),
    ("max_pool2d", [distinct(1, 2, 4, 6)], lambda x: x.max_pool2d(), np_max_pool2d),
    ("cross_entropy", [normal(4, 5), ONE_HOT], lambda a, y: a.cross_entropy(y),
     lambda a, y: -(np.log(np_softmax(a)) * y).sum(-1).mean()),
    ("reshape-permute", [normal(2, 3, 4)], lambda a: a.reshape(6, 4).permute(1, 0) * 1.5,
     lambda a: a.reshape(6, 4).transpose(1, 0) * 1.5),
    ("pad-shrink-flip", [normal(4, 4)], lambda a: a.pad(((1, 0), (0, 2))).shrink(((0, 4), (1, 6))).flip(0),
     lambda a: np.pad(a, ((1, 0), (0, 2)))[0:4, 1:6][::-1]),
    ("expand", [normal(3, 1)], lambda a: a.expand(3, 4) * 2, lambda a: np.broadcast_to(a, (3, 4)) * 2),
    ("cat", [normal(2, 3), normal(1, 3)], lambda a, b: a.cat(b, dim=0), lambda a, b: np.concatenate([a, b])),
    ("slice", [normal(5, 6)], lambda a: a[1:4, ::2], lambda a: a[1:4, ::2]),
]


@pytest.mark.parametrize("inputs, fn, reference", [pytest.param(c[1], c[2], c[3], id=c[0]) for c in CASES])
def test_forward_and_backward(dut, inputs, fn, reference):
    expected = np.asarray(reference(*inputs))
    weights = np.random.default_rng(len(inputs)).standard_normal(expected.shape)
    tensors = [dut.tensor(x.astype(np.float32), requires_grad=True) for x in inputs]
    out = fn(*tensors)
    assert out.shape == expected.shape, f"shape {out.shape}, numpy gives {expected.shape}"
    loss = (out * dut.tensor(weights.astype(np.float32))).sum()
    grads = loss.gradient(*tensors)
    values = dut.realize_or_compile(out, *grads)
    if values is None:
        return
    assert_close(values[0], expected, "forward", rtol=2e-4, atol=2e-5)
    for k, (got, want) in enumerate(zip(values[1:], numeric_gradient(reference, inputs, weights))):
        assert_close(got, want, f"gradient of input {k}", rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_signed_overflow_wraps_where_the_kernel_reads_it_again(dut, dtype):
    # integer arithmetic wraps (section 4 checks each op alone); in one kernel, a C compiler that takes signed
    # overflow as undefined may fold (x + 1) < 0 to false at the largest x: OpenCL C's did
    if not dut.supports(dtypes.from_np(np.dtype(dtype))):
        pytest.skip(f"{dut.name} doesn't declare {dtype}")
    big = np.iinfo(dtype).max
    x = dut.tensor(np.array([big, big - 1, -5], dtype=dtype))
    values = dut.realize_or_compile((x + 1) < 0, (x * 2) < 0, (-x - 2) > 0)
    if values is None:
        return
    assert values[0].tolist() == [True, False, True], values[0]       # (numpy's, wrapping)
    assert values[1].tolist() == [True, True, True], values[1]
    assert values[2].tolist() == [True, False, True], values[2]
