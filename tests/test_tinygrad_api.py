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


def test_unknown_dtype_name_raises_tinygrads_and_torchs_class():
    """tinygrad looks a dtype name up with getattr (AttributeError); torch raises TypeError: both clauses catch it."""
    x = Tensor([1.0, 2.0])
    for call in (lambda: x.sum(dtype=""), lambda: x.prod(dtype=""), lambda: x.cast("flaot32")):
        for cls in (AttributeError, TypeError):
            with pytest.raises(cls, match="unknown dtype"):
                call()
    with pytest.raises(TypeError):
        torch.tensor([1.0, 2.0]).sum(dtype="")
    np.testing.assert_array_equal(x.sum(dtype="float64").numpy(), torch.tensor([1.0, 2.0]).sum(dtype=torch.float64))
    assert x.prod(dtype=dtypes.int32).dtype == dtypes.int32


@pytest.mark.parametrize("sizes", [((64, 64), (10, 10)), ((12, 20), (9, 31)), ((9, 31), (20, 12)), ((1, 5), (3, 1))])
@pytest.mark.parametrize("align_corners", [False, True])
def test_uint8_bilinear_interpolate_is_torchs_exactly(sizes, align_corners):
    """uint8 is resampled in fixed point, one axis at a time, as torch does (float math, or a uint8 difference that
    wrapped, was off by up to 128); floats stay as torch's, gradient included."""
    (size_in, size_out), rng = sizes, np.random.default_rng(1)
    x = rng.integers(0, 256, (2, 3) + size_in).astype(np.uint8)
    expected = torch.nn.functional.interpolate(torch.tensor(x), size=size_out, mode="bilinear",
                                               align_corners=align_corners)
    got = Tensor(x).interpolate(size_out, mode="linear", align_corners=align_corners)
    assert got.dtype == dtypes.uint8
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    f = rng.standard_normal((2, 3) + size_in).astype(np.float32)
    t, tt = Tensor(f, requires_grad=True), torch.tensor(f, requires_grad=True)
    w = rng.standard_normal((2, 3) + size_out).astype(np.float32)
    (t.interpolate(size_out, align_corners=align_corners) * Tensor(w)).sum().backward()
    (torch.nn.functional.interpolate(tt, size=size_out, mode="bilinear", align_corners=align_corners) *
     torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), atol=1e-5)


def test_hand_written_sigmoid_is_ieee_as_torch():
    """exp(x) / (1 + exp(x)) computed as written, as torch does: NaN where exp overflows (inf / inf), and the small
    values kept. tinygrad 0.14 rewrites x / (1 + x) into 1 - 1 / (1 + x), which gives 1.0 at 300 (its test asserts
    that gradient 0) but 0.0 instead of 2e-9 at -20: the rewrite is not taken here."""
    values = [-20.0, -10.0, 0.5, 300.0]
    x, tx = Tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    out, expected = x.exp() / (1 + x.exp()), tx.exp() / (1 + tx.exp())
    out.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
    assert out.numpy()[0] > 0 and np.isnan(out.numpy()[3])
