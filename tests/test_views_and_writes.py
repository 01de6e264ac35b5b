"""Writes into views and views of written buffers (tinygrad 0.14's rule, and PyTorch's): an assign or setitem through
a movement-op view writes into the buffer it views, and every view of that buffer reads the new values afterwards,
eagerly and under TinyJit. A language model's KV cache (`cache[:, pos:pos+n].assign(kv)`) is this case."""
import numpy as np
import pytest
import torch

from tinygrad_core import GlobalCounters, Tensor, TinyJit, Variable, dtypes
from tests.helpers import DEVICES, assert_close, rand_array


def realized(values, device=None) -> Tensor:
    return Tensor(np.array(values, dtype=np.float32), device=device).contiguous().realize()


# ---- writes through views reach the buffer (tinygrad's own test_setitem / test_assign cases) ----
WRITES = {
    "slice assign": (lambda t: t[:, 1:3].assign(Tensor([[9.0, 8.0], [7.0, 6.0]])),
                     lambda a: a.__setitem__((slice(None), slice(1, 3)), [[9, 8], [7, 6]])),
    "transposed setitem": (lambda t: t.T.__setitem__((2, 0), 5.0), lambda a: a.T.__setitem__((2, 0), 5)),
    "chained setitem": (lambda t: t[1].__setitem__(2, 7.0), lambda a: a[1].__setitem__(2, 7)),
    "setitem on a detached tensor": (lambda t: t.detach().__setitem__((0, 1), 4.0), lambda a: a.__setitem__((0, 1), 4)),
    "through a flip": (lambda t: t.flip(1)[:, 0].assign(Tensor([6.0, 6.0])), lambda a: a.__setitem__((slice(None), -1), 6)),
    "strided slice": (lambda t: t[:, ::2].assign(Tensor([[1.0, 2.0], [3.0, 4.0]])),
                      lambda a: a.__setitem__((slice(None), slice(None, None, 2)), [[1, 2], [3, 4]])),
    "reshaped": (lambda t: t.reshape(6)[4:].assign(Tensor([-1.0, -2.0])), lambda a: a.reshape(6).__setitem__(
        slice(4, None), [-1, -2])),
    "in-place add on a slice": (lambda t: t[0].__iadd__(1.0), lambda a: a[0].__iadd__(1)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", WRITES)
def test_a_write_through_a_view_reaches_the_buffer_and_every_view_of_it(name, device):
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = realized(base, device)
    row, column = t[1], t[:, 2]                           # views taken before the write see it afterwards
    ours, theirs = WRITES[name]
    ours(t)
    expected = base.copy()
    theirs(expected)
    assert_close(t.numpy(), expected, what=name)
    assert_close(row.numpy(), expected[1], what=f"{name}: a row viewed before the write")
    assert_close(column.numpy(), expected[:, 2], what=f"{name}: a column viewed before the write")


def test_views_see_writes_to_their_base_whether_or_not_they_were_read_or_realized():
    a = realized([0, 1, 2, 3, 4])
    v, read, kept = a[1:4], a[1:4], a[1:4].realize()     # (realize() keeps a view a view, as in tinygrad)
    read.numpy()
    a[2] = 100
    for view in (v, read, kept):
        assert view.tolist() == [1, 100, 3]
    b = a.reshape(5, 1)
    a.assign(Tensor([9.0, 8.0, 7.0, 6.0, 5.0]))
    assert b.tolist() == [[9], [8], [7], [6], [5]] and v.tolist() == [8, 7, 6]


def test_graphs_built_before_a_write_keep_the_values_from_before_it():
    t = Tensor.zeros(6).contiguous().realize()
    s0 = t.sum()
    t[:3].assign(1.0)
    s1 = t.sum()
    t[3:].assign(2.0)
    s2 = t.sum()
    assert [s0.item(), s1.item(), s2.item()] == [0.0, 3.0, 9.0]      # (tinygrad's test_lazy_sum_between_writes)
    x = realized([0])
    y0 = x + 0
    x.assign(x + 1)
    y1 = x + 0
    x.assign(x + 1)
    assert [y0.item(), y1.item(), x.item()] == [0, 1, 2]


def test_a_write_reading_other_elements_of_its_own_buffer_reads_them_before_it_writes():
    for shift in (1, -1):
        t, a = realized(np.arange(8)), np.arange(8, dtype=np.float32)
        if shift == 1:
            t[1:].assign(t[:-1] * 10)
            a[1:] = a[:-1] * 10
        else:
            t[:-1].assign(t[1:] * 10)
            a[:-1] = a[1:] * 10
        assert_close(t.numpy(), a)
    x, a = realized(np.arange(16)), np.arange(16, dtype=np.float32)
    flipped = x[::-1]
    flipped.assign(flipped + x)                          # (tinygrad's test_assign_flip)
    assert_close(x.numpy(), a + a[::-1])


def test_a_write_into_part_of_a_buffer_is_one_kernel_storing_only_that_part():
    x = realized([1, 2, 3, 4])
    xs = x[2:4]
    xs.assign(xs + 1)
    GlobalCounters.reset()
    assert x.tolist() == [1, 2, 4, 5] and GlobalCounters.kernel_count == 1
    cache = Tensor.zeros(4, 1024).contiguous().realize()
    GlobalCounters.reset()
    cache[:, 5:6].assign(Tensor.ones(4, 1)).realize()
    assert GlobalCounters.kernel_count == 1 and GlobalCounters.global_ops == 0
    # the kernel stores the four values written (a constant: nothing read), not the 4096 of the buffer
    assert GlobalCounters.global_mem == 4 * 4, GlobalCounters.global_mem
    assert cache.sum().item() == 4 and cache[:, 5].tolist() == [1, 1, 1, 1]


def test_writes_that_cant_be_made_raise():
    t = realized(np.zeros((4, 1)))
    with pytest.raises(RuntimeError, match="expanded"):
        t.expand(4, 3).assign(Tensor.ones(4, 3))
    x = Tensor([1.0, 2.0, 3.0, 4.0]).realize()
    _pending = x * 2.0                                    # tinygrad raises too: the lazy product would see the write
    with pytest.raises(RuntimeError, match="lazy tensor"):
        x[0] = 99.0
    y = x * 2.0
    _view = y[:1]
    with pytest.raises(RuntimeError, match="lazy tensor"):
        y[0] = 99.0


def test_twin_states_made_alike_stay_apart():
    # zeros(3).contiguous() twice is one graph; each is a tensor of its own to write (optimizer states, caches)
    a, b = Tensor.zeros(3).contiguous().realize(), Tensor.zeros(3).contiguous().realize()
    a += 1
    a[0] = 5
    assert a.tolist() == [5, 1, 1] and b.tolist() == [0, 0, 0]


def test_a_write_through_a_bitcast_writes_the_same_bytes():
    a = Tensor([1.0, 2.0, 3.0, 4.0], dtype=dtypes.float32).realize()
    bits = np.array([4.0, 3.0, 2.0, 1.0], np.float32).view(np.uint32)
    a.bitcast(dtypes.uint32).assign(Tensor(bits, dtype=dtypes.uint32)).realize()
    assert a.tolist() == [4.0, 3.0, 2.0, 1.0]


# ---- gradients through writes, against PyTorch's in-place writes ----
def test_gradients_flow_through_writes_into_views_as_in_pytorch():
    w, v = rand_array((4, 3), seed=1), rand_array((2, 3), seed=2)
    tw, tv = torch.tensor(w, requires_grad=True), torch.tensor(v, requires_grad=True)
    z = tw * 2
    z[1:3] = tv * 3                                       # (a write into a view of an intermediate)
    z[0, 1:] += tv[0, :2]
    (z * torch.arange(12.0).reshape(4, 3)).sum().backward()
    ow, ov = Tensor(w, requires_grad=True), Tensor(v, requires_grad=True)
    buf = (ow * 2).contiguous()
    buf[1:3] = ov * 3
    buf[0, 1:] += ov[0, :2]
    (buf * Tensor.arange(12.0).reshape(4, 3)).sum().backward()
    assert_close(ow.grad.numpy(), tw.grad.numpy())
    assert_close(ov.grad.numpy(), tv.grad.numpy())
    z = Tensor([1.0, 2.0, 3.0, 4.0]).realize()
    x = Tensor([10.0, 20.0])
    z[:2] += x                                            # (tinygrad's test_set_iadd_backward)
    z.sum().backward()
    assert z.grad.tolist() == [1, 1, 1, 1] and x.grad.tolist() == [1, 1] and z.tolist() == [11, 22, 3, 4]


# ---- under TinyJit: sequences of writes replay as they ran ----
@pytest.mark.parametrize("device", DEVICES)
def test_a_jitted_sequence_of_assigns_to_one_tensor_replays_as_it_ran(device):
    def step(s, x):
        s.assign(s + x)
        s.assign(s * 2)
        return s.realize()
    results = {}
    for jit in (False, True):
        s = Tensor.zeros(1, device=device).contiguous().realize()
        fn = TinyJit(lambda x, s=s: step(s, x)) if jit else (lambda x, s=s: step(s, x))
        results[jit] = [fn(Tensor([float(i)], device=device)).item() for i in range(1, 6)]
    assert results[False] == results[True] == [2, 8, 22, 52, 114]


@pytest.mark.parametrize("device", DEVICES)
def test_a_kv_cache_written_at_a_symbolic_position_under_tinyjit_matches_the_eager_run(device):
    max_context, dim = 8, 4
    pos = Variable("pos", 0, max_context - 1)
    kvs = [rand_array((1, dim), seed=i) for i in range(max_context)]

    def attend(cache, kv, at):
        cache[at:at + 1, :].assign(kv).realize()
        keys = cache[0:at + 1]                            # the positions written so far
        return (keys * keys.sum(1, keepdim=True)).sum(0).realize()

    eager_cache = Tensor.zeros(max_context, dim, device=device).contiguous().realize()
    jit_cache = Tensor.zeros(max_context, dim, device=device).contiguous().realize()
    jitted = TinyJit(lambda kv, at: attend(jit_cache, kv, at))
    for i, kv in enumerate(kvs):
        expected = np.stack(kvs[:i + 1])[:, 0]
        want = (expected * expected.sum(1, keepdims=True)).sum(0)
        assert_close(attend(eager_cache, Tensor(kv, device=device), i).numpy(), want, rtol=1e-5)
        assert_close(jitted(Tensor(kv, device=device), pos.bind(i)).numpy(), want, rtol=1e-5, what=f"step {i}")
    assert_close(jit_cache.numpy(), np.concatenate(kvs))


def test_attention_with_a_kv_cache_gives_the_logits_of_attention_without_one():
    # the shape of a language model's decode loop: one position at a time, its keys and values written into the cache
    dim, steps = 8, 6
    wq, wk, wv = (Tensor(rand_array((dim, dim), seed=s)) for s in (1, 2, 3))
    xs = Tensor(rand_array((1, steps, dim), seed=4))

    def attention(q, k, v, causal=False):
        scores = q @ k.transpose(1, 2) / dim ** 0.5
        if causal:
            scores = scores + Tensor.ones(steps, steps).triu(1) * -1e9
        return scores.softmax(-1) @ v

    full = attention(xs @ wq, xs @ wk, xs @ wv, causal=True).numpy()
    cache = Tensor.zeros(2, 1, steps, dim).contiguous().realize()
    start = Variable("start", 0, steps - 1)

    @TinyJit
    def decode(x, at):
        cache[:, :, at:at + 1, :].assign(Tensor.stack(x @ wk, x @ wv)).realize()
        keys, values = cache[0, :, 0:at + 1], cache[1, :, 0:at + 1]
        return attention(x @ wq, keys, values).realize()
    out = [decode(xs[:, i:i + 1], start.bind(i)).numpy() for i in range(steps)]
    assert_close(np.concatenate(out, axis=1), full, atol=1e-5)
