"""Buffer lifetimes: a schedule frees what it made once nothing can read it again, and TinyJit's replays share
memory among the buffers only their kernels use (bench/memory.py measures tinygrad's MNIST examples)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close

from tinygrad_core import Tensor, TinyJit
from tinygrad_core.device import Buffer
from tinygrad_core.helpers import GlobalCounters

N, LINKS = 1 << 16, 8          # 256 KB float32 buffers, a chain of 8 of them
BYTES = N * 4
RTOL = 1e-3                    # float32 sums of N terms, in a backend's order (CL's are 4e-4 from numpy's)


@pytest.fixture
def peak(monkeypatch):
    """peak() -> the most bytes allocated at once (GlobalCounters.mem_used) since the last peak(reset=True)."""
    seen = [0]
    allocate = Buffer.ensure_allocated

    def tracked(self):
        out = allocate(self)
        seen[0] = max(seen[0], GlobalCounters.mem_used)
        return out
    monkeypatch.setattr(Buffer, "ensure_allocated", tracked)

    def read(reset=False):
        value, seen[0] = seen[0], GlobalCounters.mem_used if reset else seen[0]
        return value
    return read


def chain(x: Tensor) -> Tensor:
    for i in range(LINKS):      # each link its own kernel and buffer
        x = (x * 1.5 + i).contiguous()
    return x.sum()


def chain_np(x: np.ndarray) -> np.float32:
    for i in range(LINKS):
        x = x * np.float32(1.5) + np.float32(i)
    return x.astype(np.float64).sum()


def test_a_chain_of_intermediates_peaks_at_two_of_them_not_all(peak):
    x = Tensor(np.linspace(-1, 1, N, dtype=np.float32)).realize()
    peak(reset=True)
    start = GlobalCounters.mem_used
    out = chain(x).item()
    assert peak() - start <= 2 * BYTES + 4096          # (all eight used to be held until the schedule ended)
    assert GlobalCounters.mem_used - start <= 4096
    assert_close(np.array(out), chain_np(x.numpy()), rtol=RTOL)


def test_an_intermediate_a_live_tensor_holds_keeps_its_value():
    x = Tensor(np.arange(8, dtype=np.float32)).realize()
    held = (x + 1).contiguous()
    out = (held * 2).contiguous().sum()
    assert out.item() == 2 * (np.arange(8) + 1).sum()
    kernels = GlobalCounters.kernel_count
    assert_close(held.numpy(), np.arange(8, dtype=np.float32) + 1)
    assert GlobalCounters.kernel_count == kernels          # read from its buffer, not computed again


def test_an_eval_of_a_trainable_model_frees_its_activations(peak):
    # argmax and == carry no gradient: the result's graph isn't kept for a backward, nor its activations' buffers
    w = Tensor(np.eye(256, dtype=np.float32), requires_grad=True).realize()
    x = Tensor(np.ones((N // 256, 256), dtype=np.float32)).realize()
    peak(reset=True)
    start = GlobalCounters.mem_used
    for _ in range(3):
        h = x
        for _ in range(LINKS):
            h = (h @ w).relu().contiguous()
        assert (h.argmax(axis=1) == 0).mean().item() == 1.0
    assert peak() - start <= 3 * BYTES + 8192
    del h                   # (the last one's buffer is h's)
    assert GlobalCounters.mem_used - start <= 8192


def test_accumulating_through_assign_keeps_no_graph(peak):
    w = Tensor(np.full(N, 0.5, dtype=np.float32), requires_grad=True).realize()
    total = Tensor.zeros(()).contiguous().realize()
    start = GlobalCounters.mem_used
    for _ in range(4):
        total.assign(total + chain(Tensor.ones(N) * w))
        total.realize()
    assert GlobalCounters.mem_used - start <= 4096      # (each step's eight buffers were kept through the ASSIGN)
    assert_close(total.numpy(), 4 * chain_np(np.full(N, 0.5, np.float32)), rtol=RTOL)


def test_a_jitted_chain_replays_in_shared_memory_with_fresh_outputs(peak):
    step = TinyJit(lambda x: chain(x).realize())
    start = GlobalCounters.mem_used
    data = [np.random.default_rng(i).standard_normal(N).astype(np.float32) for i in range(4)]
    outs = []
    for d in data:
        x = Tensor(d).realize()
        peak(reset=True)
        outs.append(step(x))
        assert peak() - GlobalCounters.mem_used <= 2 * BYTES + 4096
    capture = next(iter(step.captures.values()))
    assert len({b for _, bufs, _ in capture.kernels for b in bufs}) <= 5     # input, 2 shared, the sum and its output
    assert GlobalCounters.mem_used - start <= len(data) * (BYTES + 4096)      # (the inputs, still held in data's x)
    # each returned output is this call's (the jit overwrites it on the next call, as tinygrad's does)
    assert_close(np.array(outs[-1].item()), chain_np(data[-1]), rtol=RTOL)


def test_backward_after_realize_reads_the_kept_activations():
    # a realized loss keeps its graph for a later backward, and the buffers of its activations with it
    x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)

    def grad_kernels(realize_first: bool) -> tuple[int, np.ndarray]:
        w = Tensor(np.eye(8, dtype=np.float32), requires_grad=True)
        h = (Tensor(x) @ w).contiguous()
        loss, h = (h * h).sum(), None
        if realize_first:
            loss.realize()
        loss.backward()
        return len(w.grad.schedule()), w.grad.numpy()
    (after, grad), (fresh, expected) = grad_kernels(True), grad_kernels(False)
    assert after < fresh            # the forward's kernels aren't run again
    assert_close(grad, expected)
    assert_close(grad, x.T @ (2 * x), rtol=1e-5)


def test_micro_batches_hold_nothing_of_the_ones_before():
    # gradient accumulation: each micro-batch's graph passes a custom op (contiguous_backward, as conv2d's im2col
    # does) and is read by a lazy running statistic (BatchNorm's). The custom op used to keep its input Tensor, and
    # backward gave it a .grad; reached from the statistic, both stayed live with their buffers, one more set a batch
    w = Tensor(np.full(N, 0.5, dtype=np.float32), requires_grad=True).realize()
    stat, grads = Tensor.zeros(()).contiguous().realize(), Tensor.zeros(N).contiguous().realize()
    data = [np.random.default_rng(i).standard_normal(N).astype(np.float32) for i in range(6)]

    def micro_batch(d: np.ndarray):
        x, y = (Tensor(d) * 2).contiguous(), (Tensor(d) + 1).contiguous()
        loss = (x.contiguous_backward() * y * w).mean()
        stat.assign(stat * 0.9 + loss.detach() * 0.1)
        w.grad = None
        loss.backward()
        assert x.grad is not None          # (held here, the custom op's input still takes its .grad, as in tinygrad)
        grads.assign(grads + w.grad)
        Tensor.realize(loss, grads)
    held = []
    for d in data:
        micro_batch(d)
        held.append((GlobalCounters.mem_used, len(Tensor._live)))
    assert held[-1][0] - held[1][0] <= 4096 and held[-1][1] <= held[1][1], held
    assert_close(grads.numpy(), sum(2 * d * (d + 1) for d in data) / N, rtol=1e-5)
    expected = 0.0
    for d in data:
        expected = 0.9 * expected + 0.1 * (d.astype(np.float64) * (d + 1)).mean()
    assert_close(stat.numpy(), np.float32(expected), rtol=RTOL)
