"""TinyJit: the first call runs, the second records, later calls replay the kernels with the new inputs."""
from __future__ import annotations
import numpy as np
from tinygrad_core import Tensor, TinyJit
from tinygrad_core.nn import Linear
from tinygrad_core.nn.optim import Adam
from tinygrad_core.nn.state import get_parameters
from helpers import assert_close


def test_replay_computes_with_the_new_inputs_without_running_python():
    calls = []

    @TinyJit
    def f(a, b):
        calls.append(1)
        return (a * b + 1).sum(axis=1)
    rng = np.random.default_rng(0)
    for step in range(5):
        a, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
        out = f(Tensor(a), Tensor(b))
        assert_close(out.numpy(), (a * b + 1).sum(axis=1))
    assert len(calls) == 2      # run, capture; then replays only


def test_a_new_input_shape_captures_again_instead_of_returning_stale_results():
    f = TinyJit(lambda x: (x * 2).realize())
    for n in (3, 3, 3, 5, 5, 5, 3):
        x = np.arange(n, dtype=np.float32) + n
        assert_close(f(Tensor(x)).numpy(), x * 2)


def _train(jit: bool, steps: int = 5) -> list[float]:
    Tensor.manual_seed(7)
    model = [Linear(12, 16), Linear(16, 3)]
    optimizer = Adam(get_parameters(model), lr=0.01)
    rng = np.random.default_rng(1)

    def step(x, y):
        with Tensor.train():
            optimizer.zero_grad()
            loss = model[1](model[0](x).relu()).sparse_categorical_crossentropy(y)
            loss.backward()
            optimizer.step()
            return loss.realize()
    step = TinyJit(step) if jit else step
    x, y = rng.standard_normal((8, 12)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32)
    return [step(Tensor(x), Tensor(y)).item() for _ in range(steps)]     # new tensors, same batch: loss must fall


def test_a_jitted_training_step_gives_the_same_losses():
    plain, jitted = _train(jit=False), _train(jit=True)
    assert_close(np.array(jitted), np.array(plain), atol=1e-6, rtol=1e-5)
    assert plain[-1] < plain[0]          # and it does train


def test_random_numbers_are_fresh_on_every_replay():
    draw = TinyJit(lambda x: (x + Tensor.rand(64)).realize())
    zeros = Tensor.zeros(64).contiguous().realize()
    draws = [draw(zeros).numpy().copy() for _ in range(5)]
    assert all(not np.array_equal(draws[i], draws[i + 1]) for i in range(4))
    assert all(0 <= d.min() and d.max() < 1 for d in draws)
