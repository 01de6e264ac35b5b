"""TinyJit: the first call runs, the second records, later calls replay the kernels with the new inputs."""
from __future__ import annotations
import numpy as np
import pytest
from tinygrad_core import Tensor, TinyJit
from tinygrad_core.nn import Linear
from tinygrad_core.nn.optim import Adam
from tinygrad_core.nn.state import get_parameters
from tinygrad_core.buffers import realized
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


def test_outputs_read_lazily_after_a_replay_are_this_calls():
    w = Tensor.rand(4, 3).realize()
    weights = w.numpy().copy()
    f = TinyJit(lambda x: (x @ w).realize())
    rng = np.random.default_rng(3)
    held = []       # graphs of earlier calls kept alive: a replay's outputs must not be answered from them
    for _ in range(6):
        x = rng.standard_normal((5, 4)).astype(np.float32)
        out, expected = f(Tensor(x)), x @ weights
        derived = [out.max(-1), out.sum(), out.argmax(-1), out * 2 + 1]
        held += [t.uop for t in derived]
        assert_close(out.numpy(), expected)
        assert_close(derived[0].numpy(), expected.max(-1))
        assert_close(derived[1].numpy(), expected.sum(), atol=1e-4)
        np.testing.assert_array_equal(derived[2].numpy(), expected.argmax(-1))
        assert_close(derived[3].numpy(), expected * 2 + 1)


def test_outputs_in_tuples_and_dicts_are_fresh_after_a_replay():
    f = TinyJit(lambda x: ((x * 2).realize(), {"sum": x.sum().realize(), "rows": [(x + 1).realize()]}))
    held = []
    for n in range(5):
        x = np.arange(6, dtype=np.float32).reshape(2, 3) * (n + 1)
        doubled, rest = f(Tensor(x))
        held += [doubled.sum().uop, rest["sum"].exp().uop, rest["rows"][0].max().uop]
        assert_close(doubled.sum().numpy(), (x * 2).sum())
        assert_close(rest["sum"].exp().numpy(), np.exp(x.sum()), rtol=1e-5)
        assert_close(rest["rows"][0].max().numpy(), (x + 1).max())


def test_a_changed_python_number_captures_again():
    f = TinyJit(lambda x, k, scale=1.0, offsets=(0.0,): (x * k * scale + offsets[0]).realize())
    x = np.arange(4, dtype=np.float32)
    calls = [((2.0,), {}), ((2.0,), {}), ((3.0,), {}), ((3.0,), {"scale": 0.5}), ((3.0,), {"scale": 0.5}),
             ((3.0,), {"scale": 0.5, "offsets": (1.0,)}), ((3.0,), {"scale": 0.5, "offsets": [7.0]}),
             ((2.0,), {}), ((3.0,), {"scale": 0.5, "offsets": (1.0,)})]
    for args, kwargs in calls:
        k, scale, offset = args[0], kwargs.get("scale", 1.0), kwargs.get("offsets", (0.0,))[0]
        assert_close(f(Tensor(x), *args, **kwargs).numpy(), x * k * scale + offset, what=f"{args} {kwargs}")


def test_zero_and_minus_zero_and_int_and_float_are_different_calls():
    f = TinyJit(lambda x, k: (x * k).realize())
    ones = Tensor([1.0, 2.0])
    for k in (0.0, 0.0, -0.0, -0.0, 0.0):
        assert np.signbit(f(ones, k).numpy()).tolist() == [np.signbit(k)] * 2
    g = TinyJit(lambda x, k: (x * k).realize())
    for k in (2, 2, 2.5, 2):
        out = g(Tensor([1, 2], dtype="int32"), k)
        assert out.dtype == (Tensor([1]) * k).dtype
        assert_close(out.numpy(), np.array([1, 2]) * k)


def test_an_unhashable_argument_is_refused_with_its_type():
    f = TinyJit(lambda x, table: (x * 2).realize())
    with pytest.raises(TypeError, match="ndarray"):
        f(Tensor([1.0]), np.ones(3))


def test_an_input_passed_twice_and_then_two_inputs():
    f = TinyJit(lambda a, b: (a * 10 + b).realize())
    x, y = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)
    for a, b in [(x, x)] * 3 + [(x, y), (y, x), (x, x)]:
        ta = Tensor(a)
        assert_close(f(ta, ta if b is a else Tensor(b)).numpy(), a * 10 + b)


def test_an_input_that_is_a_view_is_read_at_this_call():
    f = TinyJit(lambda x: (x * 2).realize())
    for n in range(5):
        base = np.arange(12, dtype=np.float32).reshape(3, 4) + n
        assert_close(f(Tensor(base).T[1:3]).numpy(), base.T[1:3] * 2)
        assert_close(f(Tensor(base)[1:2].reshape(4, 1).T.reshape(2, 2)).numpy(), base[1:2].reshape(2, 2) * 2)


def test_an_output_that_is_an_input_is_this_calls_input():
    f = TinyJit(lambda x, y: (x, (x + y).realize(), y.reshape(2, 2)))
    for n in range(5):
        a, b = np.arange(4, dtype=np.float32) + n, np.ones(4, np.float32) * n
        same, total, reshaped = f(Tensor(a), Tensor(b))
        assert_close(same.numpy(), a)
        assert_close(total.numpy(), a + b)
        assert_close(reshaped.numpy(), b.reshape(2, 2))


def test_an_input_written_in_place_reads_its_new_value():
    f = TinyJit(lambda x: x.assign(x + 1).realize())
    held = []
    for n in range(5):
        x = Tensor(np.full(3, float(n), np.float32))
        held.append(x.sum().realize().uop)      # its sum before the call, kept alive
        f(x)
        assert_close(x.sum().numpy(), 3.0 * (n + 1))


def test_state_written_by_a_replay_reads_its_new_value():
    w = Tensor.zeros(3).contiguous().realize()

    @TinyJit
    def step(x):
        w.assign(w + x).realize()
        return (x * 2).realize()
    held, total = [], np.zeros(3, np.float32)
    for n in range(5):
        x = np.array([1.0, 2.0, 3.0], np.float32) * (n + 1)
        total += x
        assert_close(step(Tensor(x)).numpy(), x * 2)
        held.append(w.sum().uop)
        assert_close(w.sum().numpy(), total.sum())
        assert_close(w.numpy(), total)


def test_the_same_input_at_the_first_call_and_the_capture_then_another():
    f = TinyJit(lambda x: (x * 2 + 1).realize())
    x = Tensor([1.0, 2.0, 3.0])
    before = x * 2 + 1
    held = before.uop           # the graph the capture builds, computed before it and kept alive
    before.realize()
    f(x), f(x)
    for n in range(3):
        y = np.array([4.0, 5.0, 6.0], np.float32) * (n + 1)
        assert_close(f(Tensor(y)).numpy(), y * 2 + 1)
    assert held in realized


def test_keyword_inputs_given_in_another_order():
    f = TinyJit(lambda a, b: (a - b).realize())
    a, b = np.array([5.0, 7.0], np.float32), np.array([1.0, 2.0], np.float32)
    for swap in (False, False, False, True, True, False):
        out = f(b=Tensor(b), a=Tensor(a)) if swap else f(a=Tensor(a), b=Tensor(b))
        assert_close(out.numpy(), a - b)


def test_an_output_fed_back_in_is_read_before_it_is_overwritten():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((3, 3)).astype(np.float32) / 2
    weight = Tensor(w)
    f = TinyJit(lambda x: (x @ weight).realize())
    x, expected = Tensor(np.eye(3, dtype=np.float32)), np.eye(3, dtype=np.float32)
    for _ in range(6):
        x, expected = f(x), expected @ w
        assert_close(x.numpy(), expected)


def test_a_jitted_method_replays_each_instance_with_its_own_weights():
    class Scale:
        def __init__(self, k):
            self.w = Tensor([float(k)] * 2).contiguous().realize()

        @TinyJit
        def __call__(self, x):
            return (x * self.w).realize()
    two, three = Scale(2), Scale(3)
    for _ in range(4):
        assert_close(two(Tensor([1.0, 2.0])).numpy(), [2.0, 4.0])
        assert_close(three(Tensor([1.0, 2.0])).numpy(), [3.0, 6.0])


def test_a_namedtuple_of_outputs_comes_back_as_one_with_this_calls_values():
    from collections import namedtuple
    Pair = namedtuple("Pair", "doubled same")
    f = TinyJit(lambda x: Pair((x * 2).realize(), x))
    for n in range(4):
        x = np.arange(3, dtype=np.float32) + n
        out = f(Tensor(x))
        assert isinstance(out, Pair)
        assert_close(out.doubled.sum().numpy(), (x * 2).sum())
        assert_close(out.same.numpy(), x)


def test_a_value_derived_from_a_weight_before_the_capture_is_recomputed_by_replays():
    w = Tensor(np.arange(4, dtype=np.float32)).contiguous().realize()
    before = w.mean()
    held = before.uop           # the weight's mean, computed before the capture and kept alive
    before.realize()
    f = TinyJit(lambda x: (x - w.mean()).realize())
    x = np.ones(4, np.float32)
    f(Tensor(x)), f(Tensor(x))
    w.assign(Tensor(np.full(4, 10.0, np.float32))).realize()
    assert_close(f(Tensor(x)).numpy(), x - 10)
    assert held in realized


def test_assigning_a_never_realized_weight_reaches_the_replays():
    from tinygrad_core.nn import Linear
    layer = Linear(3, 2)                       # lazy weights until something realizes them
    forward = TinyJit(lambda x: layer(x).realize())
    x = np.ones((1, 3), np.float32)
    for _ in range(3):
        forward(Tensor(x))
    layer.bias.assign(layer.bias + 0.5)
    expected = x @ layer.weight.numpy().T + layer.bias.numpy()
    np.testing.assert_allclose(forward(Tensor(x)).numpy(), expected, rtol=1e-6)


def test_jit_0_runs_the_function_every_call():
    from tinygrad_core import Context
    calls = []
    f = TinyJit(lambda x: calls.append(1) or (x * 2).realize())
    with Context(JIT=0):
        for _ in range(4):
            assert f(Tensor([1.0])).tolist() == [2.0]
    assert len(calls) == 4 and not f.captures


def test_a_capture_inside_another_capture_is_refused_and_a_later_capture_still_works():
    inner = TinyJit(lambda x: (x + 1).realize())
    outer = TinyJit(lambda x: inner(x) * 2)
    x = np.arange(3, dtype=np.float32)
    assert_close(outer(Tensor(x)).numpy(), (x + 1) * 2)      # first calls run: nothing is recorded yet
    with pytest.raises(RuntimeError, match="inside another TinyJit's capture"):
        outer(Tensor(x))                                   # outer records, inner would record too
    f = TinyJit(lambda x: (x * 3).realize())
    for step in range(4):
        assert_close(f(Tensor(x + step)).numpy(), (x + step) * 3)


def test_a_replay_launches_its_kernels_straight_and_counts_them_as_a_run_does(monkeypatch):
    from tinygrad_core import GlobalCounters
    from tinygrad_core.engine import realize
    rng = np.random.default_rng(0)
    w = Tensor(rng.standard_normal((8, 4)).astype(np.float32)).realize()

    def step(x):
        w.assign(w - 0.1 * x.T @ (x @ w)).realize()       # a weight written in place, read next call
        return (x @ w).relu().sum()
    f, expected_w = TinyJit(step), w.numpy().copy()
    xs = [rng.standard_normal((3, 8)).astype(np.float32) for _ in range(5)]
    GlobalCounters.reset()
    step(Tensor(xs[0])).realize()
    counted = GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem
    w.assign(Tensor(expected_w)).realize()
    launched, launch = [], realize.launch
    for i, x in enumerate(xs):
        if i == 2:          # from the first replay on, no kernel goes through realize.launch
            monkeypatch.setattr(realize, "launch", lambda *a, **k: launched.append(a[0]) or launch(*a, **k))
            GlobalCounters.reset()
        out = f(Tensor(x))
        held = w.numpy()            # (read out: the next replay's write must not change this array)
        expected_w = expected_w - 0.1 * x.T @ (x @ expected_w)
        assert_close(out.numpy(), np.maximum(x @ expected_w, 0).sum(), rtol=1e-5)
        assert_close(held, expected_w, rtol=1e-5)
    assert launched == []
    assert (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem) == \
        tuple(3 * c for c in counted)                       # three replays count as three runs do


def test_a_replay_costs_a_few_python_calls_per_kernel():
    # what a replay does per kernel, not per tensor it renews: the calls of chains of 4 and 24 kernels (each step
    # realized on its own, all on two buffers the plan shares) differ by the launches of 20 kernels. Counted, not
    # timed: other work on the machine doesn't change a count (a replay took 16 calls a kernel, now 6)
    import cProfile
    import pstats

    def chain(n: int):
        def f(x):
            for _ in range(n):
                x = (x * 1.5 + 1).contiguous().realize()
            return x
        return f

    def calls_per_replay(n: int) -> float:
        f, x = TinyJit(chain(n)), Tensor(np.ones(64, np.float32), device="CPU").realize()     # (its launch code)
        for _ in range(3):
            f(x)
        with cProfile.Profile() as profile:
            for _ in range(5):
                out = f(x)
        expected = np.ones(64, np.float32)
        for _ in range(n):
            expected = expected * np.float32(1.5) + np.float32(1)
        assert_close(out.numpy(), expected)         # (the replays read x, never their own output)
        return pstats.Stats(profile).total_calls / 5
    per_kernel = (calls_per_replay(24) - calls_per_replay(4)) / 20
    assert per_kernel <= 8, per_kernel


def _descent(returns_input_grad: bool):
    """A jitted gradient step on w; backward() fills x.grad for the batch too (as tinygrad's does), computed before
    the step overwrites the w it reads."""
    w = Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))

    @TinyJit
    def step(x):
        loss = (x @ w).relu().sum()
        loss.backward()
        w.assign(w - 0.1 * w.grad)
        w.grad = None
        return (loss.realize(), x.grad.realize()) if returns_input_grad else loss.realize()
    return w, step


@pytest.mark.parametrize("returns_input_grad", [False, True])
def test_a_replay_skips_the_kernels_only_the_inputs_gradient_reads(returns_input_grad):
    # a replay's inputs are other tensors, which get no .grad: a kernel that only the capture's x.grad reads would
    # compute what no one sees. Returned, x.grad is an output like any other
    from tinygrad_core.buffers import buffer_of
    w, step = _descent(returns_input_grad)
    w_ref, batches = w.numpy(), []
    for i in range(4):
        x = np.random.default_rng(i).standard_normal((2, 4)).astype(np.float32)
        batches.append(Tensor(x))
        out = step(batches[-1])
        loss, grad_x = out if returns_input_grad else (out, None)
        live = (x @ w_ref > 0).astype(np.float32)         # d loss / d (x @ w)
        np.testing.assert_allclose(loss.item(), np.maximum(x @ w_ref, 0).sum(), rtol=1e-6)
        if returns_input_grad:
            np.testing.assert_allclose(grad_x.numpy(), live @ w_ref.T, rtol=1e-6)
        w_ref = w_ref - np.float32(0.1) * (x.T @ live)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=1e-6)
    (capture,) = step.captures.values()
    written = {bufs[0] for _, bufs, _ in capture.kernels}
    assert (buffer_of(batches[1].grad.uop) in written) == returns_input_grad      # (the second call captures)


def test_an_assign_the_function_leaves_lazy_is_replayed_too():
    # the step returns only its loss and leaves w.assign(...) lazy: the capture records it anyway, or every replay
    # would leave w as it was (tinygrad 0.14 does: w off by 0.2 from the second replay on)
    w = Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))

    @TinyJit
    def step(x):
        loss = (x @ w).sum()
        loss.backward()
        w.assign(w - 0.1 * w.grad)
        w.grad = None
        return loss.realize()
    w_ref = w.numpy()
    for i in range(5):
        x = np.random.default_rng(i).standard_normal((2, 4)).astype(np.float32)
        np.testing.assert_allclose(step(Tensor(x)).item(), (x @ w_ref).sum(), rtol=1e-5)
        w_ref = w_ref - np.float32(0.1) * (x.T @ np.ones((2, 3), np.float32))
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=1e-6)
