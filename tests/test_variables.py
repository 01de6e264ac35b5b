"""Symbolic sizes: Variable("i", 1, 10).bind(5) as a dimension. A kernel is compiled once for a size made of
Variables and launched with each value; TinyJit replays one recording for every value."""
from __future__ import annotations
import math
import numpy as np
import pytest
from tinygrad_core import Device, Tensor, TinyJit, Variable
from helpers import assert_close


def kernels_compiled() -> int:
    return len(Device[Device.DEFAULT].kernel_cache)


def test_a_variable_binds_within_its_range_and_does_size_arithmetic():
    i = Variable("i", 1, 10)
    assert i.bind(5).val == 5 and i.bind(5).unbind() == (i, 5)
    assert (i.bind(5) + 1).val == 6 and (2 * i.bind(5) - 3).val == 7
    assert repr(i.bind(5)) == "i=5" and repr(i * 3 + 1) == "((i*3)+1)"
    with pytest.raises(ValueError, match=r"range is \[1, 10\]"):
        i.bind(11)
    with pytest.raises(ValueError, match="identifier"):
        Variable("not a name", 0, 3)


def test_elementwise_and_reduce_over_a_symbolic_size_compile_once():
    i = Variable("i", 1, 10)
    seen = set()
    for n in (3, 5, 7, 9):
        x = np.random.default_rng(n).standard_normal((4, n)).astype(np.float32)
        a = Tensor(x).reshape(4, i.bind(n))
        assert a.shape[1].val == n
        outs = [a * 2 + 1, a.sum(1), a.max(1), a.mean(1)]
        Tensor.realize_all(*outs)
        for out, expected in zip(outs, (x * 2 + 1, x.sum(1), x.max(1), x.mean(1))):
            assert_close(out.numpy(), expected)
        seen.add(kernels_compiled())
    assert len(seen) == 1, "each new value of i compiled new kernels"


def test_matmul_and_softmax_over_a_symbolic_inner_size():
    i = Variable("i", 1, 16)
    rng = np.random.default_rng(0)
    for n in (2, 11):
        x, w = rng.standard_normal((3, n)).astype(np.float32), rng.standard_normal((n, 4)).astype(np.float32)
        a, b = Tensor(x).reshape(3, i.bind(n)), Tensor(w).reshape(i.bind(n), 4)
        assert_close((a @ b).numpy(), x @ w)
        e = np.exp(x - x.max(1, keepdims=True))
        assert_close(a.softmax(1).numpy(), e / e.sum(1, keepdims=True))


def test_shrink_to_a_symbolic_length_reads_a_prefix_of_a_fixed_buffer():
    """The KV-cache pattern: a buffer of the largest size, viewed up to the current position."""
    cache = np.random.default_rng(1).standard_normal((10, 6)).astype(np.float32)
    t = Tensor(cache).realize()
    pos = Variable("pos", 1, 10)
    before = None
    for n in (1, 4, 10):
        view = t.shrink(((0, pos.bind(n)), None))
        assert_close(view.sum(0).numpy(), cache[:n].sum(0))
        assert_close(view.numpy(), cache[:n])
        assert before in (None, kernels_compiled())
        before = kernels_compiled()


def test_a_symbolic_result_reshapes_back_to_plain_sizes():
    i = Variable("i", 1, 10)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    out = (Tensor(x).reshape(2, i.bind(6)) + 1).reshape(3, 4)
    assert out.shape == (3, 4)
    assert_close(out.numpy(), (x + 1).reshape(3, 4))
    with pytest.raises(ValueError, match=r"can't reshape \(2, i=6\) \(12 elements\) to \(5, 2\)"):
        Tensor(x).reshape(2, i.bind(6)).reshape(5, 2)


def test_a_variable_is_a_number_in_tensor_math():
    i = Variable("i", 0, 100)
    for n in (3, 40):
        assert Tensor(i.bind(n)).item() == n
        assert_close((Tensor([1.0, 2.0]) * i.bind(n)).numpy(), np.array([1.0, 2.0]) * n)


def test_kernels_reading_a_variable_work_in_a_later_process(tmp_path, monkeypatch):
    """A program remembered on disk must not lose its Variables: a fresh process (an empty kernel cache, the same
    disk cache) launches it with each value, whether the Variable is a size, a view's bound or a number."""
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    i = Variable("i", 1, 10)
    x = np.arange(100, dtype=np.float32).reshape(10, 10)

    def run(n):
        a = Tensor(x).shrink(((0, 10), (0, i.bind(n))))
        return (Tensor(i.bind(n)).item(), a.mean(1).numpy(), (Tensor([1.0, 2.0]) * i.bind(n)).numpy(),
                Tensor(x)[i.bind(n) - 1].numpy())
    for process in range(2):
        Device[Device.DEFAULT].kernel_cache.clear()
        for n in (3, 7):
            value, means, scaled, row = run(n)
            assert value == n and row.tolist() == x[n - 1].tolist()
            assert_close(means, x[:, :n].mean(1))
            assert_close(scaled, np.array([1.0, 2.0]) * n)


def test_an_unbound_variable_in_a_shape_says_to_bind_it():
    i = Variable("i", 1, 10)
    with pytest.raises(ValueError, match=r"bind one, e\.g\. Variable\('i', 1, 10\)\.bind\(n\)"):
        Tensor.ones(2, 5).reshape(2, i)


def test_one_jit_recording_serves_every_length():
    calls = []

    @TinyJit
    def f(a):
        calls.append(1)
        return (a * a).sum(1).realize()
    i = Variable("i", 1, 12)
    for n in (4, 6, 3, 12, 1, 7):
        x = np.random.default_rng(n).standard_normal((5, n)).astype(np.float32)
        assert_close(f(Tensor(x).reshape(5, i.bind(n))).numpy(), (x * x).sum(1))
    assert len(calls) == 2 and len(f.captures) == 1


def test_a_jitted_attention_step_over_a_growing_sequence():
    """One decoding step attends to the first `pos` cached keys; the output keeps the symbolic size."""
    rng = np.random.default_rng(3)
    keys, values = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
    k, v = Tensor(keys).realize(), Tensor(values).realize()
    pos = Variable("pos", 1, 16)

    @TinyJit
    def attend(q, p):
        scores = (q @ k.shrink(((0, p), None)).T) * (1 / np.sqrt(8))
        weights = scores.softmax(-1)
        return weights.realize(), (weights @ v.shrink(((0, p), None))).realize()
    for n in (3, 5, 9, 16, 2):
        query = rng.standard_normal((1, 8)).astype(np.float32)
        weights, out = attend(Tensor(query), pos.bind(n))
        s = query @ keys[:n].T / np.sqrt(8)
        e = np.exp(s - s.max())
        assert weights.shape[1].val == n
        assert_close(weights.numpy(), e / e.sum())
        assert_close(out.numpy(), (e / e.sum()) @ values[:n])
    assert len(attend.captures) == 1


def test_one_kernel_cant_use_two_values_of_a_variable():
    i = Variable("i", 1, 10)
    a, b = Tensor.ones(2, 3).reshape(2, i.bind(3)), Tensor.ones(2, 2).reshape(2, i.bind(2))
    with pytest.raises(ValueError, match="Variable i is bound to both 3 and 2"):
        (a.sum(1) + b.sum(1)).numpy()


def test_indexing_with_a_symbolic_position():
    cache = np.arange(40, dtype=np.float32).reshape(10, 4)
    t = Tensor(cache).realize()
    pos = Variable("pos", 1, 9)
    for n in (2, 7):
        p = pos.bind(n)
        assert_close(t[:p].numpy(), cache[:n])
        assert_close(t[p - 1].numpy(), cache[n - 1])
        assert_close(t[1:p + 1, 2:].numpy(), cache[1:n + 1, 2:])
    with pytest.raises(IndexError, match="step 1"):
        t[:pos.bind(3):2]


def test_a_nan_constant_is_one_node_so_its_kernel_is_compiled_once():
    from tinygrad_core.dtype import dtypes
    from tinygrad_core.ops import UOp
    nan = lambda sign: UOp.const(dtypes.float32, math.copysign(float("nan"), sign), "CPU")     # (a new float each)
    assert nan(1) is nan(1) and nan(-1) is nan(-1) and nan(1) is not nan(-1)
    i, before = Variable("i", 1, 10), None
    for n in (3, 6, 4):     # (NaN != NaN: each call's graph was new, and each value compiled its kernel again)
        a = Tensor(np.arange(2 * n, dtype=np.float32).reshape(2, n)).reshape(2, i.bind(n))
        assert np.isnan(((a > 2).where(float("nan"), a)).numpy()[1]).all()
        assert before in (None, kernels_compiled())
        before = kernels_compiled()


def test_ops_over_symbolic_sizes_and_their_gradients():
    i = Variable("i", 1, 10)
    w = Tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(2, 10), requires_grad=True)
    seen = set()
    for n in (3, 6, 4):
        x = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
        a = Tensor(x).reshape(2, i.bind(n))
        outs = {"ones": (Tensor.ones(2, i.bind(n)) + a, 1 + x), "cat": (a.cat(Tensor.ones(2, 1), dim=1),
                np.concatenate([x, np.ones((2, 1), np.float32)], 1)), "var": (a.var(1), x.var(1, ddof=1)),
                "flip-pad": (a.flip(1).pad(((0, 0), (1, 2))), np.pad(x[:, ::-1], ((0, 0), (1, 2)))),
                "layernorm": (a.layernorm(), (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5))}
        for name, (out, expected) in outs.items():
            assert_close(out.numpy(), expected, what=name)
        w.grad = None
        (w[:, :i.bind(n)] * a).sum().backward()      # the gradient reaches the first n columns only
        assert_close(w.grad.numpy(), np.pad(x, ((0, 0), (0, 10 - n))))
        seen.add(kernels_compiled())
    assert len(seen) == 1, "kernels were compiled again for new values"
