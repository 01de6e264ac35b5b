"""Optimizers (SGD, LARS, Muon, Adam, AdamW, LAMB, OptimizerGroup) and learning-rate schedules.

A step writes every parameter in place with assign() and realizes parameters and optimizer state in one
Tensor.realize_all, so the whole update is one schedule (and a TinyJit around a training step captures it). Unlike
tinygrad 0.14, a step outside training mode is allowed: older tinygrad programs (the seed's among them) never switch it
on, and programs written for 0.14 step inside it anyway."""
import math
import warnings
import numpy as np
from tinygrad_core.helpers import flatten, partition
from tinygrad_core.tensor import Tensor


class Optimizer:
    """Holds the parameters and the learning rate. Tensors passed with requires_grad=None are switched to True (as
    in tinygrad); ones with requires_grad=False (BatchNorm's running statistics) are realized with each step."""

    def __init__(self, params: list[Tensor], lr: float):
        if lr < 0:
            raise ValueError(f"the learning rate must be >= 0, got {lr}")
        if isinstance(params, Tensor):      # (iterated, it would give views of its rows, and train none of them)
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors, but got Tensor")
        unique = list({id(p): p for p in params}.values())
        for p in unique:
            if not isinstance(p, Tensor):
                raise TypeError(f"an optimizer trains Tensors, but one of the params is {type(p).__name__} {p!r}")
            if p.requires_grad is None:
                p.requires_grad_(True)
        self.params, self.buffers = partition(unique, lambda p: p.requires_grad)
        if not self.params:
            raise ValueError("the optimizer got no tensor to train: pass the model's parameters "
                             "(e.g. nn.state.get_parameters(model)), with requires_grad left at None or True")
        self.device = self.params[0].device
        # the learning rate is a tensor so that a schedule can change it under a jitted step
        self.state: list[Tensor] = []
        self.lr = self._new_state(value=lr)

    def _new_state(self, like: Tensor | None = None, value: float = 0.0) -> Tensor:
        """A state tensor with a buffer of its own: made from host memory, because equal lazy graphs
        (Tensor.zeros(n).contiguous() twice) are one node in the graph and would realize into one shared buffer."""
        shape, device, dtype = (like.shape, like.device, like.dtype) if like is not None else ((), self.device, None)
        t = Tensor(np.full(shape, value, dtype=np.float32), device=device, dtype=dtype, requires_grad=False)
        t = t if like is None else t.shard_like(like)      # (a sharded parameter's state is sharded as it is)
        self.state.append(t)
        return t

    def _realize_state(self):
        Tensor.realize_all(*self.params, *self.buffers, *self.state)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        """Update every parameter that has a gradient, then realize parameters and state together."""
        Tensor.realize_all(*self.schedule_step())

    def schedule_step(self) -> list[Tensor]:
        """Assign the updates without running them; returns the tensors to realize. Realize them together with
        the loss (Tensor.realize_all(loss, *opt.schedule_step())) to run forward, backward and update as one
        schedule: every kernel that reads a parameter runs before the kernel that overwrites it."""
        if not (with_grad := [(i, p, p.grad) for i, p in enumerate(self.params) if p.grad is not None]) and \
                not getattr(self, "warned", False):          # (a step that does nothing says so, once)
            self.warned = True
            warnings.warn("optimizer step(): no parameter has a gradient, nothing was updated (call "
                          "loss.backward() first, with the parameters in the loss's graph)", stacklevel=3)
        self._update(with_grad)
        return [*self.params, *self.buffers, *self.state]

    def _update(self, with_grad: list[tuple[int, Tensor, Tensor]]):
        """Assign the new value of each (index, parameter, gradient) and of the optimizer's state."""
        raise NotImplementedError

    def get_lr(self) -> float:
        return float(self.lr.item())

    def set_lr(self, lr: float):
        self.lr.assign(Tensor(float(lr), device=self.device, dtype=self.lr.dtype)).realize()


class OptimizerGroup(Optimizer):
    """Several optimizers stepped as one (say Muon for the matrices and AdamW for the rest): one schedule_step."""

    def __init__(self, *optimizers: Optimizer):     # no Optimizer.__init__: the members hold parameters and lr
        self.optimizers = optimizers
        self.params, self.buffers = flatten(o.params for o in optimizers), flatten(o.buffers for o in optimizers)

    def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]     # noqa: E704

    def schedule_step(self) -> list[Tensor]:
        return [t for o in self.optimizers for t in o.schedule_step()]


class LARS(Optimizer):
    """LARS (layer-wise adaptive rate scaling), tinygrad's one momentum optimizer: SGD and Muon are settings of it.

    ratio = tcoef * |p| / (|g| + weight_decay * |p|) (1 where a norm is 0; 1 when tcoef=0). With pre_wd,
    g += weight_decay * p first. classic momentum scales g by lr * ratio before the momentum b = momentum * b + g,
    the other kind after it; nesterov uses g + momentum * b instead of b. ns_coefficients orthogonalise the step
    (Muon), and without pre_wd the decay lr * weight_decay * p is added at the end. Then p -= g."""

    def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.9, weight_decay: float = 1e-4,
                 ns_steps: int = 0, ns_coefficients: tuple[float, ...] | None = None, nesterov: bool = False,
                 classic: bool = True, pre_wd: bool = True, tcoef: float = 0.001):
        super().__init__(params, lr)
        if momentum < 0 or (nesterov and momentum == 0):
            raise ValueError(f"momentum must be >= 0 (> 0 with nesterov), got momentum={momentum}, nesterov={nesterov}")
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov
        self.ns_steps, self.ns_coefficients, self.classic, self.pre_wd, self.tcoef = ns_steps, ns_coefficients, \
            classic, pre_wd, tcoef
        self.b = [self._new_state(p) for p in self.params] if momentum else []
        self._realize_state()

    def _update(self, with_grad):
        for i, p, g in with_grad:
            p_norm, g_norm = p.square().sum().sqrt(), g.square().sum().sqrt()     # lazy: never run when tcoef=0
            ratio = ((p_norm > 0) & (g_norm > 0)).where(self.tcoef * p_norm / (g_norm + self.weight_decay * p_norm),
                                                        1.0) if self.tcoef else 1.0
            if self.pre_wd and self.weight_decay:
                g = g + self.weight_decay * p
            if self.classic:
                g = g * ratio * self.lr
            if self.momentum:
                b = self.b[i].assign(self.momentum * self.b[i] + g)
                g = g + self.momentum * b if self.nesterov else b
            if self.ns_coefficients:
                g = _newton_schulz(g.reshape(g.shape[0], -1), self.ns_steps, self.ns_coefficients).reshape(g.shape)
            if not self.classic:
                g = g * ratio * self.lr
            if not self.pre_wd and self.weight_decay:
                g = g + self.weight_decay * self.lr * p
            p.assign(p - g.cast(p.dtype))


def _newton_schulz(g: Tensor, steps: int, coefficients: tuple[float, ...], eps: float = 1e-7) -> Tensor:
    """Muon's orthogonalisation of a matrix: g / |g|, then `steps` times g = sum_k coefficients[k] (g g^T)^k g."""
    if g.shape[0] > g.shape[1]:      # work on the wide side, where g g^T is the smaller square
        return _newton_schulz(g.T, steps, coefficients, eps).T
    g = g / (g.square().sum().sqrt() + eps)
    for _ in range(steps):
        gram, term, g = g @ g.T, g, coefficients[0] * g
        for c in coefficients[1:]:
            term = gram @ term
            g = g + c * term
    return g


def SGD(params: list[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
        nesterov: bool = False, classic: bool = False) -> LARS:
    """PyTorch's SGD: g = grad + weight_decay * p; with momentum, b = momentum * b + g and g = b (or, nesterov,
    g = g + momentum * b); then p -= lr * g. classic=True accumulates lr * g in b instead (the same unless lr
    changes)."""
    return LARS(params, lr, momentum, weight_decay, nesterov=nesterov, classic=classic, pre_wd=True, tcoef=0.0)


def Muon(params: list[Tensor], lr: float = 0.001, momentum: float = 0.95, weight_decay: float = 0.1, ns_steps: int = 5,
         ns_coefficients: tuple[float, ...] = (3.4445, -4.775, 2.0315), nesterov: bool = True) -> LARS:
    """Muon (https://kellerjordan.github.io/posts/muon/): nesterov momentum, the step orthogonalised by
    newton_schulz (tensors of more than 2 dims as (shape[0], -1) matrices), then decoupled weight decay."""
    return LARS(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False, pre_wd=False,
                tcoef=0.0)


class LAMB(Optimizer):
    """LAMB (layer-wise adaptive moments); with adam=True the trust ratio is 1, which makes it Adam(W).

    Adam's moments with bias correction; weight_decay is decoupled (added to the update, as AdamW does)."""

    def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
                 weight_decay: float = 0.0, adam: bool = False):
        super().__init__(params, lr)
        if not (0 <= b1 < 1 and 0 <= b2 < 1 and eps >= 0 and weight_decay >= 0):     # as torch checks them
            raise ValueError(f"the betas must be in [0, 1) and eps, weight_decay >= 0, got b1={b1}, b2={b2}, "
                             f"eps={eps}, weight_decay={weight_decay}")
        self.b1, self.b2, self.eps, self.weight_decay, self.adam = b1, b2, eps, weight_decay, adam
        self.t = self._new_state()               # the step count
        self.b1_t, self.b2_t = self._new_state(value=1.0), self._new_state(value=1.0)   # b1 ** t, b2 ** t: products
        self.m, self.v = ([self._new_state(p) for p in self.params] for _ in range(2))     # the moments
        self._realize_state()

    def _update(self, with_grad):
        self.t.assign(self.t + 1)
        b1_t, b2_t = self.b1_t.assign(self.b1_t * self.b1), self.b2_t.assign(self.b2_t * self.b2)
        for i, p, g in with_grad:
            m = self.m[i].assign(self.b1 * self.m[i] + (1 - self.b1) * g)
            v = self.v[i].assign(self.b2 * self.v[i] + (1 - self.b2) * (g * g))
            update = (m / (1 - b1_t)) / ((v / (1 - b2_t)).sqrt() + self.eps)
            if self.weight_decay:
                update = update + self.weight_decay * p
            if not self.adam:
                weight_norm, update_norm = p.square().sum().sqrt(), update.square().sum().sqrt()
                update = update * ((weight_norm > 0) & (update_norm > 0)).where(weight_norm / update_norm, 1.0)
            p.assign(p - self.lr * update)


def AdamW(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 0.01) -> LAMB:
    """Adam with decoupled weight decay: p -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)."""
    return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True)


class Adam(LAMB):
    """Adam: p -= lr * m_hat / (sqrt(v_hat) + eps). weight_decay here is PyTorch's L2 penalty (added to the
    gradient, so it passes through the moments); use AdamW for decoupled weight decay."""

    def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr, b1, b2, eps, weight_decay, adam=True)
        self.l2, self.weight_decay = weight_decay, 0.0

    def _update(self, with_grad):
        super()._update([(i, p, g + self.l2 * p) for i, p, g in with_grad] if self.l2 else with_grad)


# ---- learning-rate schedules: plain functions of the step, and small objects that apply them ----
def step_lr(base_lr: float, epoch: int, step_size: int, gamma: float = 0.1) -> float:
    """base_lr * gamma ** (epoch // step_size), as torch.optim.lr_scheduler.StepLR."""
    return base_lr * gamma ** (epoch // step_size)


def cosine_lr(base_lr: float, step: int, total_steps: int, min_lr: float = 0.0, warmup_steps: int = 0) -> float:
    """Linear warmup for warmup_steps, then half a cosine from base_lr down to min_lr at total_steps."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + (base_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


class StepLR:
    """Multiply the optimizer's lr by gamma every step_size calls of step() (call it once per epoch)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1):
        self.optimizer, self.step_size, self.gamma = optimizer, step_size, gamma
        self.base_lr, self.epoch = optimizer.get_lr(), 0

    def step(self):
        self.epoch += 1
        self.optimizer.set_lr(step_lr(self.base_lr, self.epoch, self.step_size, self.gamma))


class CosineAnnealingLR:
    """Anneal the optimizer's lr from its initial value to eta_min over T_max calls of step()."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, warmup_steps: int = 0):
        self.optimizer, self.T_max, self.eta_min, self.warmup_steps = optimizer, T_max, eta_min, warmup_steps
        self.base_lr, self.count = optimizer.get_lr(), 0
        if warmup_steps:
            optimizer.set_lr(cosine_lr(self.base_lr, 0, T_max, eta_min, warmup_steps))

    def step(self):
        self.count += 1
        self.optimizer.set_lr(cosine_lr(self.base_lr, self.count, self.T_max, self.eta_min, self.warmup_steps))


__all__ = ["Optimizer", "OptimizerGroup", "LARS", "SGD", "Muon", "Adam", "AdamW", "LAMB", "step_lr", "cosine_lr",
           "StepLR", "CosineAnnealingLR"]
