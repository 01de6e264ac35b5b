"""Whole programs on CL against numpy: fused elementwise chains, reductions, matmul, convolution, and a few steps of
training a small MLP that must follow the reference backend step for step."""
import numpy as np
from tinygrad_core import Tensor
from tinygrad_core.dtype import dtypes


def test_fused_elementwise_with_broadcast():
    x = np.random.default_rng(0).normal(size=(33, 17)).astype(np.float32)
    y = np.random.default_rng(1).normal(size=(17,)).astype(np.float32)
    got = ((Tensor(x, device="CL") * Tensor(y, device="CL") + 1).relu().exp2() - 0.5).numpy()
    np.testing.assert_allclose(got, np.exp2(np.maximum(x * y + 1, 0)) - 0.5, rtol=1e-5)


def test_reductions_over_each_axis():
    x = np.random.default_rng(2).normal(size=(5, 7, 9)).astype(np.float32)
    t = Tensor(x, device="CL")
    for axis in (0, 1, 2, (0, 2), None):
        np.testing.assert_allclose(t.sum(axis=axis).numpy(), x.sum(axis=axis), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(t.max(axis=axis).numpy(), x.max(axis=axis))


def test_matmul_odd_sizes():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(37, 29)).astype(np.float32), rng.normal(size=(29, 41)).astype(np.float32)
    np.testing.assert_allclose((Tensor(a, device="CL") @ Tensor(b, device="CL")).numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_conv2d_with_padding_reads_only_inside_the_image():
    rng = np.random.default_rng(4)
    x, w = rng.normal(size=(2, 3, 9, 9)).astype(np.float32), rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    got = Tensor(x, device="CL").conv2d(Tensor(w, device="CL"), padding=1).numpy()
    want = Tensor(x, device="PYTHON").conv2d(Tensor(w, device="PYTHON"), padding=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_bfloat16_and_half_arithmetic_round_after_every_op():
    x = np.linspace(-3, 3, 50).astype(np.float32)
    for dtype in (dtypes.bfloat16, dtypes.half):
        on = {dev: ((Tensor(x, device=dev).cast(dtype) * 1.1 + 0.3) * (Tensor(x, device=dev).cast(dtype))).numpy()
              for dev in ("CL", "PYTHON")}
        np.testing.assert_array_equal(on["CL"], on["PYTHON"])


def _train(device: str, steps: int = 3) -> list[float]:
    rng = np.random.default_rng(5)
    x = Tensor(rng.normal(size=(16, 8)).astype(np.float32), device=device)
    labels = Tensor(rng.integers(0, 4, 16).astype(np.int32), device=device)
    w1 = Tensor(rng.normal(0, 0.3, size=(8, 12)).astype(np.float32), device=device, requires_grad=True)
    w2 = Tensor(rng.normal(0, 0.3, size=(12, 4)).astype(np.float32), device=device, requires_grad=True)
    losses = []
    for _ in range(steps):
        loss = (x @ w1).relu().matmul(w2).sparse_categorical_crossentropy(labels)
        loss.backward()
        for w in (w1, w2):
            w.assign(w.detach() - w.grad * 0.5).realize()
            w.grad = None
        losses.append(loss.item())
    return losses


def test_mlp_training_follows_the_reference_backend():
    cl_losses, reference = _train("CL"), _train("PYTHON")
    np.testing.assert_allclose(cl_losses, reference, rtol=1e-4)
    assert cl_losses[-1] < cl_losses[0]


def test_logic_on_one_bool_each_runs():
    # rendered as C's &, a kernel whose one op is the & of two bools went missing from the binary PoCL built from it
    # (INVALID_KERNEL_NAME, a crash at launch); bools are rendered as logic (&&, ||, !=)
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    for i in range(4):
        x, y = Tensor(a[i:i + 1], device="CL"), Tensor(b[i:i + 1], device="CL")
        assert (x & y).numpy()[0] == (a[i] & b[i]) and (x | y).numpy()[0] == (a[i] | b[i])
        assert (x ^ y).numpy()[0] == (a[i] ^ b[i])


def test_rounding_a_nan_literal_gives_nan():
    # PoCL folded trunc(NAN) to an arbitrary finite number (floor of Tensor(nan) read back as -2.5e27)
    for op in ("floor", "ceil", "trunc", "round"):
        assert np.isnan(getattr(Tensor(float("nan"), device="CL"), op)().item()), op
        assert getattr(Tensor(2.5, device="CL"), op)().item() == getattr(np, op if op != "round" else "round")(2.5)


def test_exp_of_a_nan_known_when_compiled_gives_nan():
    # PoCL folded exp2 of a NaN literal to a finite number: sigmoid of an empty mean (0 / 0) read back 0.9999995
    assert np.isnan(Tensor(float("nan"), device="CL").exp2().item())
    assert np.isnan(Tensor(float("nan"), device="CL").exp().item())
    assert np.isnan(Tensor(np.zeros((1, 0, 1), np.float32), device="CL").mean(1).sigmoid().item())
    assert Tensor(1.0, device="CL").exp2().item() == 2.0
