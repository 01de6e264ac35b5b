"""Section 8, a small conv net trained a few steps with SGD: the losses and final weights match the reference
backend's (tinygrad-python, which executes the reference semantics), and the loss goes down."""
from __future__ import annotations

import numpy as np

from tinygrad_core.conformance.harness import REFERENCE_BACKEND, REFERENCE_INSTALL, assert_close, not_covered
from tinygrad_core.device import BackendUnavailable, Device
from tinygrad_core.dtype import dtypes
from tinygrad_core.tensor import Tensor

STEPS, LR = 4, 0.1


def initial_state():
    rng = np.random.default_rng(8)
    params = {"conv1": rng.standard_normal((4, 1, 3, 3)) * 0.4, "bias1": np.zeros(4),
              "conv2": rng.standard_normal((6, 4, 3, 3)) * 0.2, "fc": rng.standard_normal((6 * 2 * 2, 5)) * 0.2}
    images, labels = rng.standard_normal((8, 1, 8, 8)), rng.integers(0, 5, 8)
    return {k: v.astype(np.float32) for k, v in params.items()}, images.astype(np.float32), np.eye(5)[labels]


def loss_of(p: dict, x: Tensor, targets: Tensor) -> Tensor:
    h = x.conv2d(p["conv1"], p["bias1"], padding=1).relu().max_pool2d()         # 8x8 -> 4x4
    h = h.conv2d(p["conv2"], padding=1).relu().max_pool2d()                     # 4x4 -> 2x2
    logits = h.reshape(h.shape[0], -1) @ p["fc"]
    return -(logits.log_softmax(-1) * targets).sum(-1).mean()


def train(make_tensor, realize) -> tuple[list, dict] | None:
    """STEPS of plain SGD; make_tensor puts host arrays on the device, realize runs (or only compiles) a step."""
    params_np, images, targets = initial_state()
    params = {k: make_tensor(v).contiguous() for k, v in params_np.items()}
    for p in params.values():
        p.requires_grad_(True)
    x, y = make_tensor(images), make_tensor(targets.astype(np.float32))
    losses = []
    for _ in range(STEPS):
        loss = loss_of(params, x, y)
        grads = loss.gradient(*params.values())
        for p, g in zip(params.values(), grads):
            p.assign(p.detach() - LR * g)
        values = realize(loss, *params.values())
        if values is None:
            return None                   # compile-only: one step's kernels are compiled, that is the check
        losses.append(float(values[0]))
    return losses, {k: v.numpy() for k, v in params.items()}


def test_conv_net_trains_like_the_reference(dut):
    result = train(lambda a: dut.tensor(a, dtypes.float32), dut.realize_or_compile)
    if result is None:
        return
    losses, params = result
    assert losses[-1] < losses[0], f"training didn't reduce the loss: {losses}"
    if dut.name == REFERENCE_BACKEND:
        return                            # the reference is checked against numpy in sections 4-6
    try:
        Device[REFERENCE_BACKEND]
    except BackendUnavailable as e:
        not_covered(f"training is compared with the reference backend {REFERENCE_BACKEND}, which can't be used "
                    f"here ({e}); to install it, {REFERENCE_INSTALL}")

    def on_reference(*tensors):
        Tensor.realize_all(*tensors)
        return [t.numpy() for t in tensors]
    ref_losses, ref_params = train(lambda a: Tensor(a, device=REFERENCE_BACKEND, dtype=dtypes.float32), on_reference)
    assert_close(losses, ref_losses, "losses per step", rtol=1e-3, atol=1e-4)
    for name in params:
        assert_close(params[name], ref_params[name], f"trained {name}", rtol=1e-3, atol=1e-4)
