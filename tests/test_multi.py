"""Multi-device tensors (tinygrad_core/multi.py): each result on CPU:0,CPU:1 against the same computation on one
device (and numpy or torch), the bad input that raises when the op is built, training steps and TinyJit over them."""
import numpy as np
import pytest
import torch
from tinygrad_core import Tensor, TinyJit, nn
from tinygrad_core.multi import axis_of, lower
from tinygrad_core.plugins import registry
from helpers import assert_close, rand_array

D = ("CPU", "CPU:1")
A = rand_array((4, 6), seed=1)


def one_and_sharded(fn, *arrays, axes=(None, 0, 1)):
    """fn on one-device tensors, then on the arrays sharded along each of axes: every result must match."""
    expected = fn(*[Tensor(a) for a in arrays]).numpy()
    for axis in axes:
        got = fn(*[Tensor(a).shard(D, axis if axis is None or axis < a.ndim else None) for a in arrays])
        assert isinstance(got.device, tuple) and got.device == D
        assert_close(got.numpy(), expected, what=f"sharded on axis {axis}")


def test_shard_keeps_the_values_and_names_its_devices():
    for axis in (None, 0, 1, -1):
        t = Tensor(A).shard(D, axis)
        assert t.device == D and t.shape == A.shape and t.dtype == Tensor(A).dtype
        assert_close(t.numpy(), A)
        gathered = t.to("CPU:1")
        assert gathered.device == "CPU:1"
        assert_close(gathered.numpy(), A)
    parts = lower(Tensor(A).shard(D, 1).uop)
    assert [p.shape for p in parts.src] == [(4, 3), (4, 3)] and axis_of(parts) == 1
    assert [p.device for p in parts.src] == list(D)
    assert axis_of(lower(Tensor(A).shard(D).uop)) is None


def test_shard_like_shard_in_place_and_to_a_tuple():
    y = Tensor(A).shard(D, 0)
    x = Tensor(A * 2).shard_like(y)
    assert x.device == D and axis_of(lower(x.uop)) == 0
    assert_close(x.numpy(), A * 2)
    t = Tensor(A)
    assert t.shard_(D, 1) is t and t.device == D
    assert_close(t.numpy(), A)
    r = Tensor(A).to(D)                             # tinygrad's x.to(devices): a copy on each
    assert r.device == D and axis_of(lower(r.uop)) is None
    assert_close(Tensor(A).shard_like(Tensor(A).to("CPU:1")).numpy(), A)   # like a one-device tensor: moved there
    assert Tensor(A).shard((("CPU:1"),)).device == "CPU:1"                   # one device: a plain move


def test_elementwise_per_part():
    b = rand_array((4, 6), seed=2)
    one_and_sharded(lambda x, y: (x * y + 1).exp().log() - y / 3, A, b)
    one_and_sharded(lambda x: (x > 0).where(x, -x).sqrt().cast("float16").cast("float32"), A)
    one_and_sharded(lambda x: x.maximum(0.5) + x.sin(), A)
    # a replicated operand beside a sharded one: each device reads its own share of it
    expected = A + b
    for axis in (0, 1):
        assert_close((Tensor(A).shard(D, axis) + Tensor(b).shard(D)).numpy(), expected)


def test_movement_ops_off_the_shard_axis_and_through_it():
    one_and_sharded(lambda x: x.reshape(2, 2, 6).permute(2, 0, 1).flip(0), A, axes=(None, 0))
    one_and_sharded(lambda x: x.T.reshape(3, 2, 4).sum(1), A, axes=(None, 0))
    one_and_sharded(lambda x: x.unsqueeze(1).expand(4, 5, 6)[:, 1:4, :], A, axes=(None, 0))
    one_and_sharded(lambda x: x.pad(((0, 0), (1, 2)), value=3.0)[:, 2:5], A, axes=(None, 0))
    one_and_sharded(lambda x: x.reshape(24), A, axes=(None, 0))


def test_what_would_move_elements_between_devices_raises():
    x = Tensor(A).shard(D, 0)
    for bad in (lambda: x.pad(((1, 0), (0, 0))), lambda: x[1:3], lambda: x.flip(0),
                lambda: Tensor(A).shard(D, 1).reshape(24)):
        with pytest.raises(RuntimeError, match="devices|shard axis"):
            bad().numpy()
    with pytest.raises(RuntimeError, match="different axes"):
        (Tensor(A).shard(D, 0) + Tensor(A).shard(D, 1)).numpy()


def test_bad_input_raises_when_built():
    with pytest.raises(ValueError, match="different"):
        Tensor(A).shard(D) + Tensor(A).shard(("CPU", "CPU:2"))
    with pytest.raises(ValueError, match="different devices"):
        Tensor(A).shard(D) + Tensor(A)
    with pytest.raises(IndexError, match="out of range"):
        Tensor(A).shard(D, 2)
    with pytest.raises(RuntimeError, match="evenly"):          # tinygrad also needs equal parts ("multi axis uneven")
        Tensor(A).shard(("CPU", "CPU:1", "CPU:2", "CPU:3"), 1)
    with pytest.raises(RuntimeError, match="already on several devices"):
        Tensor(A).shard(D).shard(D, 0)
    with pytest.raises(TypeError, match="tuple of device names"):
        Tensor(A).shard("CPU")
    with pytest.raises(RuntimeError, match="sharded on axis 0, the value on axis 1"):
        Tensor(A).shard(D, 0).assign(Tensor(A).shard(D, 1))


@pytest.mark.parametrize("op", ["sum", "max", "prod", "mean"])
def test_reduce_along_and_across_the_shard_axis(op):
    x = rand_array((4, 6), 0.5, 1.5, seed=3)
    for axis in (None, 0, 1, (0, 1)):
        one_and_sharded(lambda t: getattr(t, op)(axis), x)
    one_and_sharded(lambda t: getattr(t, op)(1, keepdim=True) * t, x)


def test_integer_and_bool_reductions_across_the_shard_axis():
    ints = np.arange(24, dtype=np.int32).reshape(4, 6) - 7
    one_and_sharded(lambda t: t.sum(0) + t.max(1).sum(), ints)
    one_and_sharded(lambda t: (t > 3).any(0).cast("int32") + (t > -8).all(), ints)
    one_and_sharded(lambda t: t.argmax(1) + t.argmax(0).sum(), ints)


def test_an_all_reduce_gives_every_device_the_same_bits():
    x = rand_array((64, 33), seed=4)
    total = Tensor(x).shard(D, 0).sum(0).realize()
    first, second = (Tensor(p).numpy() for p in total.uop.src)
    assert first.tobytes() == second.tobytes()
    assert_close(first, x.sum(0), atol=1e-4)


def test_matmul_sharded_rows_contracted_axis_and_columns():
    x, w = rand_array((8, 6), seed=5), rand_array((6, 4), seed=6)
    expected = torch.tensor(x) @ torch.tensor(w)
    cases = [(0, None), (None, 1), (1, 0), (None, None)]         # data parallel, column parallel, the contracted axis
    for x_axis, w_axis in cases:
        got = Tensor(x).shard(D, x_axis) @ Tensor(w).shard(D, w_axis)
        assert_close(got.numpy(), expected.numpy(), atol=1e-5, what=f"x axis {x_axis}, w axis {w_axis}")


def test_gradients_through_a_sharded_batch_and_to_a_sharded_source():
    x, w = rand_array((8, 5), seed=7), rand_array((5, 3), seed=8)
    labels = np.array([0, 1, 2, 1, 0, 2, 2, 1])
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    expected = torch.nn.functional.cross_entropy((tx @ tw).relu(), torch.tensor(labels))
    expected.backward()
    xs, ws = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True).shard_(D)
    loss = (xs.shard(D, 0) @ ws).relu().sparse_categorical_crossentropy(Tensor(labels).shard(D, 0))
    loss.backward()
    assert_close(loss.numpy(), expected.detach().numpy(), atol=1e-5)
    assert ws.grad.device == D
    assert_close(ws.grad.numpy(), tw.grad.numpy(), atol=1e-5)
    assert xs.grad.device == "CPU"              # the one-device tensor that was sharded gets its gradient there
    assert_close(xs.grad.numpy(), tx.grad.numpy(), atol=1e-5)


def mlp_steps(devices, make_optimizer, steps=3, w_axis=None, batch_axis=0, jit=False):
    """Train a two-layer MLP; on devices, the first weight sharded on w_axis, the batch on batch_axis."""
    rng = np.random.default_rng(9)
    w1, w2 = (Tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in ((5, 8), (8, 3)))
    xs, ys = rng.standard_normal((steps, 8, 5)).astype(np.float32), rng.integers(0, 3, (steps, 8))
    if devices:
        w1.shard_(devices, w_axis)
        w2.shard_(devices)
    opt = make_optimizer([w1, w2])

    def step(x, y):
        opt.zero_grad()
        loss = (x @ w1).relu().matmul(w2).sparse_categorical_crossentropy(y).backward()
        opt.step()
        return loss
    step = TinyJit(step) if jit else step
    losses = []
    for x, y in zip(xs, ys):
        x, y = Tensor(x), Tensor(y)
        if devices:
            x, y = x.shard(devices, batch_axis), y.shard(devices, batch_axis)
        losses.append(step(x, y).item())
    return np.array(losses), w1, w2


OPTIMIZERS = {"sgd": lambda ps: nn.optim.SGD(ps, lr=0.1, momentum=0.9), "adam": lambda ps: nn.optim.Adam(ps, lr=0.05)}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_training_steps_match_one_device(name):
    losses, w1, w2 = mlp_steps(None, OPTIMIZERS[name])
    for w_axis, batch_axis in ((None, 0), (1, None)):             # data parallel; the first layer split by columns
        got, s1, s2 = mlp_steps(D, OPTIMIZERS[name], w_axis=w_axis, batch_axis=batch_axis)
        assert_close(got, losses, atol=1e-5, what=f"losses (weight axis {w_axis}, batch axis {batch_axis})")
        assert_close(s1.numpy(), w1.numpy(), atol=1e-5)
        assert_close(s2.numpy(), w2.numpy(), atol=1e-5)
        parts = [Tensor(p).numpy() for p in s2.uop.src]         # replicated: the same bits on every device
        assert parts[0].tobytes() == parts[1].tobytes()


def test_tinyjit_replays_a_sharded_training_step():
    losses, w1, w2 = mlp_steps(None, OPTIMIZERS["adam"], steps=5)
    got, s1, s2 = mlp_steps(D, OPTIMIZERS["adam"], steps=5, jit=True)
    assert_close(got, losses, atol=1e-5)
    assert_close(s1.numpy(), w1.numpy(), atol=1e-5)
    assert_close(s2.numpy(), w2.numpy(), atol=1e-5)


def test_tinyjit_takes_sharded_inputs_and_recaptures_for_another_sharding():
    @TinyJit
    def f(x):
        return (x * 2).sum(0)
    for i in range(4):
        a = rand_array((4, 6), seed=10 + i)
        assert_close(f(Tensor(a).shard(D, 0)).numpy(), (a * 2).sum(0))
    b = rand_array((4, 6), seed=20)
    assert_close(f(Tensor(b).shard(D, 1)).numpy(), (b * 2).sum(0))
    assert_close(f(Tensor(b).shard(D)).numpy(), (b * 2).sum(0))


def test_after_a_replay_a_sharded_tensor_written_by_it_shows_its_new_value():
    w = Tensor(np.ones(4, dtype=np.float32)).shard(D, 0).realize()

    @TinyJit
    def bump():
        w.assign(w + 1).realize()
    bump(), bump()                  # run, capture
    early, same = w * 2, w * 2      # one node: realizing one answers the other
    same.realize()
    bump()                          # replayed: w is now 4 everywhere
    assert_close((w * 2).numpy(), np.full(4, 8.0))
    assert_close(early.numpy(), np.full(4, 6.0))      # built before the replay: the value it had then


def test_assign_writes_each_devices_part_in_place():
    t = Tensor(A).shard(D, 0).realize()
    buffers = [p.base.arg[0] for p in t.uop.src]
    other = t                                       # the same tensor: sees the write
    t.assign(t * 3).realize()
    assert [p.base.arg[0] for p in t.uop.src] == buffers
    assert_close(other.numpy(), A * 3)
    r = Tensor(A).shard(D).realize()
    r.assign(Tensor(A).shard(D, 1) + 1).realize()   # a replicated tensor takes a sharded value whole on each device
    assert_close(r.numpy(), A + 1)
    assert [Tensor(p).numpy().tobytes() for p in r.uop.src] == [(A + 1).tobytes()] * 2


def test_small_cnn_with_batchnorm_trains_as_on_one_device():
    """tinygrad's beautiful_mnist_multigpu pattern, small: the model replicated by shard_, the batch sharded on axis
    0, BatchNorm's statistics over the whole batch (an all-reduce), Adam, in a TinyJit."""
    rng = np.random.default_rng(11)
    images, labels = rng.standard_normal((4, 8, 1, 10, 10)).astype(np.float32), rng.integers(0, 4, (4, 8))

    def train(devices):
        Tensor.manual_seed(0)
        layers = [nn.Conv2d(1, 4, 3), Tensor.relu, nn.BatchNorm2d(4), Tensor.max_pool2d, lambda x: x.flatten(1),
                  nn.Linear(64, 4)]
        if devices:
            for x in nn.state.get_state_dict(layers).values():
                x.shard_(devices)
        opt = nn.optim.Adam(nn.state.get_parameters(layers), lr=0.01)

        @TinyJit
        def step(x, y):
            with Tensor.train():
                opt.zero_grad()
                loss = x.sequential(layers).sparse_categorical_crossentropy(y).backward()
                opt.step()
                return loss
        losses = []
        for x, y in zip(images, labels):
            x, y = Tensor(x), Tensor(y)
            losses.append(step(*((x.shard(devices, 0), y.shard(devices, 0)) if devices else (x, y))).item())
        return losses, [t.numpy() for t in nn.state.get_state_dict(layers).values()]
    (losses, state), (got, got_state) = train(None), train(D)
    assert_close(np.array(got), np.array(losses), atol=1e-5)
    for a, b in zip(got_state, state):
        assert_close(a, b, atol=1e-5)


@pytest.mark.parametrize("devices", [("PYTHON", "PYTHON:1"), ("CPU", "PYTHON"), ("CPU", "CL")])
def test_on_the_reference_backend_and_across_backends(devices):
    """PoCL offers one CL device here (no CL:1), so CL is tried beside CPU."""
    registry.discover()
    if "CL" in devices and ("CL" not in registry.backends or registry.backends["CL"].reason is not None):
        pytest.skip("the CL backend isn't usable here")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    t = Tensor(x).shard(devices, 0)
    assert_close((t * 2).sum(0).numpy(), (x * 2).sum(0))
    assert_close((t @ Tensor(x.T).shard(devices)).numpy(), x @ x.T)


def test_a_fresh_process_whose_first_multi_device_values_are_copies_and_constants():
    """Until a sharded value exists realizing skips the rewrite: these make none, and must still be rewritten."""
    import subprocess
    import sys
    code = ("from tinygrad_core import Tensor; D = ('CPU', 'CPU:1'); "
            "print(Tensor([1.0, 2.0]).to(D).numpy().tolist(), (Tensor(2.0, device=D) + 1).item())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["[1.0,", "2.0]", "3.0"], out.stderr



def test_random_draws_follow_the_sharding_and_a_replicated_draw_is_one_value():
    from tinygrad_core import Context
    drawn = Tensor.ones(4, 3).contiguous().shard(D, axis=0).rand_like().realize()
    assert drawn.device == D and drawn.shape == (4, 3)
    parts = [Tensor(p).numpy() for p in lower(drawn.uop).src]
    assert [p.shape for p in parts] == [(2, 3), (2, 3)] and parts[0].tolist() != parts[1].tolist()
    assert all(0 <= p.min() and p.max() < 1 for p in parts)
    replicated = Tensor.ones(4, 3).contiguous().shard(D).randn_like().realize()
    copies = [Tensor(p).numpy() for p in lower(replicated.uop).src]
    np.testing.assert_array_equal(copies[0], copies[1])
    with Context(TRAINING=1):
        dropped = Tensor.ones(8, 4).contiguous().shard(D, axis=0).dropout(0.5).numpy()
    assert set(np.unique(dropped)) <= {0.0, 2.0} and 0 < (dropped == 0).sum() < dropped.size
    with pytest.raises(ValueError, match="one device"):
        Tensor.rand(4, 3, device=D)


def test_a_tuple_of_one_device_is_that_device():
    t = Tensor(A).to_(("CPU:1",))
    assert t.device == "CPU:1" and Tensor(A).shard(["cpu"], axis=0).device == "CPU"
    assert_close((t + Tensor(A).to("CPU:1")).numpy(), A + A)
