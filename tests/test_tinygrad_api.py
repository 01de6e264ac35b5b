"""tinygrad 0.14's Tensor methods that have no other home in the tests: each checked against PyTorch or numpy."""
import numpy as np
import pytest
import torch
from tinygrad_core import Tensor, dtypes


def test_rearrange_as_einops():
    x = np.arange(24).reshape(2, 3, 4)
    t = Tensor(x)
    np.testing.assert_array_equal(t.rearrange("b c d -> (b c) d").numpy(), x.reshape(6, 4))
    np.testing.assert_array_equal(t.rearrange("b c (h w) -> b h c w", h=2).numpy(),
                                  x.reshape(2, 3, 2, 2).transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(t.rearrange("... d -> d ...").numpy(), x.transpose(2, 0, 1))
    assert t.rearrange("b c d -> b 1 c d").shape == (2, 1, 3, 4)
    assert t.rearrange("b c d -> b () (c d)").shape == (2, 1, 12)
    for bad in ("b c -> b c", "b c d -> b c", "b c d -> b c e", "b (c d -> b c d", "b c (h w) -> b c h w"):
        with pytest.raises(ValueError):
            t.rearrange(bad)


def test_logcumsumexp_against_torch():
    for x in ([-1000.0, 0.0, 1.0], [float("-inf"), 2.0, float("-inf")], [[1.0, 2.0], [3.0, -50.0]]):
        for axis in range(np.ndim(x)):
            np.testing.assert_allclose(Tensor(x).logcumsumexp(axis).numpy(),
                                       torch.tensor(x).logcumsumexp(axis).numpy(), rtol=1e-6)
    x = Tensor([0.5, -1.0, 2.0], requires_grad=True)
    x.logcumsumexp().sum().backward()
    tx = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    tx.logcumsumexp(0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)


def test_randperm_and_multinomial_draw_correctly():
    Tensor.manual_seed(3)
    assert sorted(Tensor.randperm(50).tolist()) == list(range(50))
    assert Tensor.randperm(5, dtype=dtypes.int64).dtype == dtypes.int64
    counts = np.bincount(Tensor([1.0, 2.0, 3.0, 4.0]).multinomial(40000, replacement=True).numpy(), minlength=4)
    np.testing.assert_allclose(counts / 40000, [0.1, 0.2, 0.3, 0.4], atol=0.01)
    rows = Tensor([[1.0, 2.0, 3.0, 4.0]]).expand(20000, 4).contiguous().multinomial(2).numpy()
    assert (rows[:, 0] != rows[:, 1]).all()               # without replacement
    np.testing.assert_allclose(np.bincount(rows[:, 0], minlength=4) / 20000, [0.1, 0.2, 0.3, 0.4], atol=0.012)
    assert Tensor([[0.0, 1.0], [1.0, 0.0]]).multinomial(1).tolist() == [[1], [0]]
    with pytest.raises(ValueError, match="without replacement"):
        Tensor([1.0, 1.0]).multinomial(3)


def test_sequential_replace_eq_ne():
    t = Tensor([1.0, -2.0, 3.0])
    assert t.sequential([lambda x: x * 2, Tensor.relu]).tolist() == [2.0, 0.0, 6.0]
    assert t.eq(Tensor([1.0, 0.0, 3.0])).tolist() == [True, False, True]
    assert t.ne(3.0).tolist() == [True, True, False]
    other = Tensor([7.0, 8.0, 9.0])
    assert t.replace(other) is t and t.tolist() == [7.0, 8.0, 9.0]
    with pytest.raises(RuntimeError, match="same shape"):
        t.replace(Tensor([1.0]))


def test_half_matmul_gradients_accumulate_in_float32():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype(np.float16) for _ in range(2))
    x, w = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    (x @ w).sum().backward()
    exact_x, exact_w = np.ones((64, 64)) @ b.astype(np.float64).T, a.astype(np.float64).T @ np.ones((64, 64))
    assert np.abs(x.grad.numpy() - exact_x).max() / np.abs(exact_x).max() < 2e-3
    assert np.abs(w.grad.numpy() - exact_w).max() / np.abs(exact_w).max() < 2e-3
