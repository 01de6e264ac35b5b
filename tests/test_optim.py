"""Optimizers against updates computed by hand in numpy and against tinygrad 0.14's own optimizers, the training-mode
rule for step(), OptimizerGroup, and the learning-rate schedules."""
import math
import numpy as np
import pytest
from tinygrad_core import Context, Tensor
from tinygrad_core.nn import Linear, BatchNorm2d
from tinygrad_core.nn.optim import (SGD, LARS, Muon, Adam, AdamW, LAMB, OptimizerGroup, StepLR, CosineAnnealingLR,
                                    step_lr, cosine_lr)
from tinygrad_core.nn.state import get_parameters
from helpers import assert_close

STEPS = 3


@pytest.fixture(autouse=True)
def training_mode():
    """The comparisons with tinygrad run in training mode, where tinygrad's optimizers step."""
    with Tensor.train():
        yield


W0 = np.array([[1.0, -2.0, 0.5], [0.3, 0.0, -1.5]], dtype=np.float32)
TARGET = np.array([[1.0, 2.0, 0.5], [3.0, 1.0, 0.25]], dtype=np.float32)
X = np.array([[0.1, -0.2, 0.3], [0.0, 0.5, -0.4]], dtype=np.float32)


def run_quadratic(make_optimizer, steps=STEPS, tensor=Tensor, **tensor_kwargs):
    """Minimise sum(target * w^2 / 2) + sum(w * x): grad = target * w + x, easy to write in numpy. tensor may be
    tinygrad's Tensor class, to run its optimizers on the same problem."""
    w = tensor(W0.copy(), **tensor_kwargs)
    opt = make_optimizer([w])
    history = []
    for _ in range(steps):
        opt.zero_grad()
        loss = (tensor(TARGET, **tensor_kwargs) * w * w / 2).sum() + (w * tensor(X, **tensor_kwargs)).sum()
        loss.backward()
        opt.step()
        history.append(w.numpy().copy())
    return history, (W0.astype(np.float64), TARGET.astype(np.float64), X.astype(np.float64))


def tinygrad_quadratic(name: str, steps=STEPS, **kwargs):
    """tinygrad 0.14's optimizer `name` on the same problem, on its PYTHON device (no compiler needed)."""
    tinygrad = pytest.importorskip("tinygrad")
    from tinygrad.nn import optim as tinygrad_optim
    with tinygrad.Context(DEV="PYTHON", TRAINING=1):
        history, _ = run_quadratic(lambda p: getattr(tinygrad_optim, name)(p, **kwargs), steps, tinygrad.Tensor,
                                   device="PYTHON")
    return history


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1, "classic": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "classic": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.5, "nesterov": True, "weight_decay": 0.05}),
    ("LARS", {"lr": 0.1}),
    ("LARS", {"lr": 0.1, "momentum": 0.8, "weight_decay": 0.01, "tcoef": 0.02, "classic": False, "nesterov": True}),
    ("Muon", {"lr": 0.05}),
    ("Muon", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.0, "ns_steps": 3, "nesterov": False}),
    ("LAMB", {"lr": 0.01, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "b1": 0.8}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1}),
])
def test_optimizers_match_tinygrad(name, kwargs):
    ours, _ = run_quadratic(lambda p: globals()[name](p, **kwargs))
    theirs = tinygrad_quadratic(name, **kwargs)
    assert not np.allclose(theirs[-1], W0)
    for a, b in zip(ours, theirs):
        assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_muon_orthogonalises_the_step():
    # lr=1 and no decay: the first step is the Newton-Schulz image of the gradient, whose singular values are ~1
    w0 = np.random.randn(4, 6).astype(np.float32)
    w = Tensor(w0.copy())
    opt = Muon([w], lr=1.0, weight_decay=0.0, momentum=0.0, nesterov=False)
    (w * Tensor(np.random.randn(4, 6).astype(np.float32))).sum().backward()
    opt.step()
    singular_values = np.linalg.svd(w0 - w.numpy(), compute_uv=False)
    assert np.all((singular_values > 0.6) & (singular_values < 1.3)), singular_values


def test_step_works_in_and_out_of_training_mode():
    # tinygrad 0.14 refuses a step outside training mode; older tinygrad programs (the seed's) never enter it
    w = Tensor([1.0, 2.0])
    opt = SGD([w], lr=0.5)
    (w * w).sum().backward()
    with Tensor.train(False):
        opt.step()
    assert w.numpy().tolist() == [0.0, 0.0]
    opt.zero_grad()
    (w * w + w).sum().backward()
    with Tensor.train(False), Context(TRAINING=1):
        opt.step()
    assert w.numpy().tolist() == [-0.5, -0.5]


def test_optimizer_group_steps_every_member_in_one_schedule():
    a, b = Tensor([1.0, 2.0]), Tensor([[3.0, 4.0]])
    group = OptimizerGroup(SGD([a], lr=0.5), Adam([b], lr=0.1))
    assert group[1].params == [b] and group.params == [a, b]
    (a * a).sum().add((b * 2).sum()).backward()
    group.step()
    assert_close(a.numpy(), [0.0, 0.0])
    assert_close(b.numpy(), [[2.9, 3.9]], atol=1e-6)
    group.zero_grad()
    assert a.grad is None and b.grad is None


def test_bad_hyperparameters_are_refused():
    with pytest.raises(ValueError, match="learning rate.*-0.1"):
        SGD([Tensor([1.0])], lr=-0.1)
    with pytest.raises(ValueError, match="momentum=-1"):
        LARS([Tensor([1.0])], momentum=-1)


def numpy_steps(update, init, steps=STEPS):
    w, target, x = init
    state, out = {}, []
    for t in range(1, steps + 1):
        w = update(w, target * w + x, state, t)
        out.append(w.copy())
    return out


@pytest.mark.parametrize("momentum,nesterov,wd", [(0.0, False, 0.0), (0.9, False, 0.0), (0.9, True, 0.1),
                                                   (0.0, False, 0.05)])
def test_sgd_matches_hand_computed(momentum, nesterov, wd):
    lr = 0.1
    got, init = run_quadratic(lambda p: SGD(p, lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=wd))

    def update(w, g, state, t):
        g = g + wd * w
        if momentum:
            state["b"] = momentum * state.get("b", 0) + g
            g = g + momentum * state["b"] if nesterov else state["b"]
        return w - lr * g
    for a, b in zip(got, numpy_steps(update, init)):
        assert_close(a, b, atol=1e-6)


def adam_update(lr, b1, b2, eps, wd, decoupled):
    def update(w, g, state, t):
        if not decoupled:
            g = g + wd * w
        state["m"] = b1 * state.get("m", 0) + (1 - b1) * g
        state["v"] = b2 * state.get("v", 0) + (1 - b2) * g * g
        step = (state["m"] / (1 - b1 ** t)) / (np.sqrt(state["v"] / (1 - b2 ** t)) + eps)
        return w - lr * (step + (wd * w if decoupled else 0))
    return update


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adam_matches_hand_computed(wd):
    got, init = run_quadratic(lambda p: Adam(p, lr=0.01, weight_decay=wd))
    for a, b in zip(got, numpy_steps(adam_update(0.01, 0.9, 0.999, 1e-8, wd, decoupled=False), init)):
        assert_close(a, b, atol=1e-6)


def test_adamw_matches_hand_computed():
    got, init = run_quadratic(lambda p: AdamW(p, lr=0.01, b1=0.8, b2=0.99, weight_decay=0.1))
    for a, b in zip(got, numpy_steps(adam_update(0.01, 0.8, 0.99, 1e-8, 0.1, decoupled=True), init)):
        assert_close(a, b, atol=1e-6)


def test_lamb_scales_the_adam_step_by_the_trust_ratio():
    got, init = run_quadratic(lambda p: LAMB(p, lr=0.01, weight_decay=0.0), steps=2)
    adam = adam_update(1.0, 0.9, 0.999, 1e-6, 0.0, decoupled=True)

    def update(w, g, state, t):
        step = w - adam(w, g, state, t)          # the Adam direction with lr=1
        return w - 0.01 * np.linalg.norm(w) / np.linalg.norm(step) * step
    for a, b in zip(got, numpy_steps(update, init, steps=2)):
        assert_close(a, b, atol=1e-5)


def test_optimizer_state_is_realized_tensors_and_params_keep_identity():
    layer = Linear(3, 2)
    params = get_parameters(layer)
    opt = Adam(params, lr=0.01)
    assert all(p.requires_grad for p in params)
    layer(Tensor.randn(4, 3)).sum().backward()
    weight = layer.weight
    opt.step()
    assert layer.weight is weight
    for t in [*opt.params, *opt.state]:
        assert t.uop.op.name in ("BUFFER", "RESHAPE"), "state must be realized after step()"
    assert opt.t.item() == 1
    opt.zero_grad()
    assert layer.weight.grad is None


def test_step_realizes_batchnorm_running_stats_given_as_parameters():
    bn = BatchNorm2d(2)
    opt = SGD(bn.parameters(), lr=0.1)
    assert any(t is bn.running_mean for t in opt.buffers) and not any(t is bn.running_mean for t in opt.params)
    with Tensor.train():
        bn(Tensor.randn(4, 2, 3, 3) + 3).sum().backward()
        opt.step()
    assert bn.running_mean.uop.op.name in ("BUFFER", "RESHAPE")
    assert bn.running_mean.numpy().min() > 0.2


def test_parameters_without_gradient_are_skipped_and_errors():
    a, b = Tensor([1.0, 2.0]), Tensor([3.0])
    opt = SGD([a, b], lr=1.0)
    (a * 2).sum().backward()
    opt.step()
    assert_close(a.numpy(), [-1.0, 0.0])
    assert_close(b.numpy(), [3.0])
    with pytest.raises(ValueError, match="no tensor to train"):
        SGD([Tensor([1.0], requires_grad=False)])
    with pytest.raises(ValueError, match="nesterov"):
        SGD([Tensor([1.0])], nesterov=True)


def test_learning_rate_schedules():
    assert step_lr(1.0, 5, step_size=2, gamma=0.5) == 0.25
    assert cosine_lr(1.0, 0, 10) == 1.0 and abs(cosine_lr(1.0, 5, 10) - 0.5) < 1e-12 and cosine_lr(1.0, 10, 10) == 0
    assert cosine_lr(1.0, 1, 10, warmup_steps=4) == 0.5
    opt = SGD([Tensor([1.0])], lr=0.1)
    sched = StepLR(opt, step_size=1, gamma=0.5)
    sched.step()
    assert math.isclose(opt.get_lr(), 0.05, rel_tol=1e-6)
    cosine = CosineAnnealingLR(opt, T_max=4)
    for _ in range(4):
        cosine.step()
    assert abs(opt.get_lr()) < 1e-7


def test_a_step_without_gradients_warns_once_and_changes_nothing():
    import warnings
    w = Tensor.ones(3, requires_grad=True)
    opt = SGD([w], lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
        opt.step()
    assert sum("no parameter has a gradient" in str(c.message) for c in caught) == 1, [str(c.message) for c in caught]
    assert w.tolist() == [1.0, 1.0, 1.0]
    (w * 2).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # (with gradients: no warning, and a step)
        opt.step()
    assert np.allclose(w.numpy(), 0.8)
