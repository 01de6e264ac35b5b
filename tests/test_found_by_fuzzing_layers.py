"""Wrong answers a differential fuzzer of the layer-level ops (conv, pooling, normalization, indexing, losses; forward
and gradients against PyTorch CPU) found; each test is the reduced case."""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tinygrad_core import Tensor, dtypes, nn


def both(*arrays, grad=True):
    return ([Tensor(a, requires_grad=grad) for a in arrays],
            [torch.tensor(a, requires_grad=grad) for a in arrays])


def test_setitem_on_a_lazy_tensor_passes_the_gradient_to_its_inputs_and_the_value():
    # it was written into a buffer of its own: both gradients came back 0
    (x, v), (tx, tv) = both(np.array([7.0, -4.0, -2.0], np.float32), np.array(3.0, np.float32))
    w = np.array([1.0, 2.0, 3.0], np.float32)
    t = x.contiguous()
    t[-1] = v
    (t * Tensor(w)).sum().backward()
    tt = tx.clone()
    tt[-1] = tv
    (tt * torch.tensor(w)).sum().backward()
    assert t.tolist() == [7.0, -4.0, 3.0]
    assert x.grad.tolist() == tx.grad.tolist() == [1.0, 2.0, 0.0]
    assert v.grad.item() == tv.grad.item() == 3.0


def test_conv_transpose2d_multiplies_no_zeros_spread_between_the_inputs():
    # a stride spreads the input with zeros; an inf weight times them made NaN where torch (adding each input
    # element's products into the output) has finite values
    w = np.ones((1, 1, 2, 2), np.float32)
    w[0, 0, 0, 0] = math.inf
    (x, wt), (tx, twt) = both(np.ones((1, 1, 2, 2), np.float32), w, grad=False)
    got = x.conv_transpose2d(wt, stride=2, padding=(0, 1)).numpy()
    expected = F.conv_transpose2d(tx, twt, stride=2, padding=(0, 1)).numpy()
    assert not np.isnan(expected).any()
    np.testing.assert_array_equal(got, expected)


def test_conv_transpose2d_with_an_output_axis_of_size_zero_raises():
    # (was: an empty (2, 1, 8, 0) output, as torch's oneDNN path gives; torch's own shape check, which its other paths
    # and a kernel of size 1 meet, raises "Output size is too small": an empty output is an error here)
    (x, w, b), (tx, tw, tb) = both(np.ones((2, 2, 3, 1), np.float32), np.ones((2, 1, 1, 2), np.float32),
                                   np.ones(1, np.float32))
    with pytest.raises(RuntimeError, match="Output size is too small"):
        x.conv_transpose2d(w, b, stride=(3, 2), padding=(0, 1), output_padding=(1, 0))
    with pytest.raises(RuntimeError, match="output"):
        x.conv_transpose2d(w, b, stride=1, padding=(0, 2))            # (1 - 1) * 1 + 2 - 4: a negative size
    with pytest.raises(RuntimeError):
        F.conv_transpose2d(tx, tw, tb, stride=1, padding=(0, 2))
    # (the case: a kernel of size 1, where torch raises too)
    with pytest.raises(RuntimeError, match="too small"):
        Tensor.ones(1, 2, 2).conv_transpose2d(Tensor.ones(2, 2, 1), padding=1)
    with pytest.raises(RuntimeError, match="too small"):
        F.conv_transpose1d(torch.ones(1, 2, 2), torch.ones(2, 2, 1), padding=1)


def test_avg_pool2d_without_the_padding_counted_keeps_float16():
    x = np.random.default_rng(0).standard_normal((1, 1, 5, 7)).astype(np.float16)
    out = Tensor(x).avg_pool2d((2, 3), stride=3, padding=1, count_include_pad=False)
    ref = F.avg_pool2d(torch.tensor(x), (2, 3), 3, 1, count_include_pad=False)
    assert out.dtype == dtypes.float16 and ref.dtype == torch.float16
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=2e-3)


def test_interpolate_float64_places_its_samples_in_float64():
    # the source positions were computed in float32: 1.0000000149 where torch gives 1.0
    x = np.array([[[[0.0, -2.0], [2.0, 1.0]]]])
    got = Tensor(x).interpolate((5, 6), mode="bilinear", align_corners=True).numpy()
    expected = F.interpolate(torch.tensor(x), size=(5, 6), mode="bilinear", align_corners=True).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("layer", ["LayerNorm", "GroupNorm", "RMSNorm"])
def test_float16_norm_layers_scale_in_float32_and_return_float16(layer):
    # weight x the output's gradient (60000 x 2.5) overflowed float16 before the normalization's own gradient made it
    # small again (NaN where torch has 19264); and float16 input with the default float32 weight came out float32
    x = np.array([[-8, -3, 5, 6], [4, -6, -2, 7]], np.float16)
    weight = np.array([1.25, 1.125, -1.0, 60000.0], np.float16)
    g = np.array([[1, -2, 1.5, 2], [-1, 0.5, 1, -2]], np.float32)
    m = {"LayerNorm": nn.LayerNorm(4), "GroupNorm": nn.GroupNorm(1, 4), "RMSNorm": nn.RMSNorm(4)}[layer]
    assert m(Tensor(x)).dtype == dtypes.float16
    (tx, tw), (rx, rw) = both(x, weight)
    m.weight = tw
    ref = {"LayerNorm": lambda: F.layer_norm(rx, (4,), rw, None), "GroupNorm": lambda: F.group_norm(rx, 1, rw),
           "RMSNorm": lambda: F.rms_norm(rx, (4,), rw, 1e-6)}[layer]()
    if layer != "RMSNorm":
        m.bias = None if layer == "LayerNorm" else Tensor.zeros(4, dtype=dtypes.float16)
    out = m(tx)
    (out.float() * Tensor(g)).sum().backward()
    (ref.float() * torch.tensor(g)).sum().backward()
    assert out.dtype == dtypes.float16
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.detach().numpy().astype(np.float32), rtol=4e-3,
                               atol=0.1)
    assert np.isfinite(tx.grad.numpy()).all()
    np.testing.assert_allclose(tx.grad.numpy().astype(np.float32), rx.grad.numpy().astype(np.float32), rtol=2e-2,
                               atol=1.0)


def test_conv2d_float16_multiplies_in_float32():
    # 60000 * 60000 overflowed float16 in the products: inf + -inf gave NaN where torch's float32 sum is finite or inf
    x = np.array([[[[60000.0, -60000.0]]]], np.float16)
    w = np.array([[[[60000.0, 60000.0]]]], np.float16)
    (tx, tw), (rx, rw) = both(x, w, grad=False)
    got, expected = tx.conv2d(tw).numpy(), F.conv2d(rx, rw).numpy()
    assert got.dtype == np.float16 and expected.tolist() == [[[[0.0]]]]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_amax_shares_the_gradient_evenly_among_ties(include_self):
    # max's own gradient split it in halves twice (src ties, then src vs self): 0.25, 0.25, 0.5 instead of thirds
    (x, s), (tx, ts) = both(np.array([2.0, 5.0], np.float32), np.array([2.0, 2.0, 1.0], np.float32))
    x.scatter_reduce(0, Tensor([0, 0, 1]), s, "amax", include_self=include_self).sum().backward()
    torch.scatter_reduce(tx, 0, torch.tensor([0, 0, 1]), ts, "amax", include_self=include_self).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    # (torch counts self's 2.0 among the ties even when include_self=False: thirds that add up to 2/3)
    expected = ts.grad.numpy() if include_self else np.array([0.5, 0.5, 1.0])
    np.testing.assert_allclose(s.grad.numpy(), expected, rtol=1e-6)


def test_scatter_reduce_amin_gradient_isnt_shared_with_the_fill_an_inf_equals():
    # where no value lands the fill is +inf: an inf that did land shared its gradient with the 3 fills
    (x, s), (tx, ts) = both(np.array([-3.0, 2.0, 2.0, -math.inf], np.float32),
                            np.array([math.inf, 0.0, -1.0], np.float32))
    w = np.array([0.5, -1.5, 2.0, 3.0], np.float32)
    (x.scatter_reduce(0, Tensor([2, 0, 1]), s, "amin", include_self=False) * Tensor(w)).sum().backward()
    ref = torch.scatter_reduce(tx, 0, torch.tensor([2, 0, 1]), ts, "amin", include_self=False)
    (ref * torch.tensor(w)).sum().backward()
    assert s.grad.tolist() == ts.grad.tolist() == [2.0, 0.5, -1.5]
    assert x.grad.tolist() == tx.grad.tolist()


def test_sort_and_cummax_give_a_nan_its_gradient():
    # the max that restores -0.0 saw the NaN too: its unused gradient was 0 / 0 and made the NaN's gradient NaN
    a = np.array([[[-74.0, math.nan, 15.9, -136.4, 23.6]]], np.float32)
    (x,), (tx,) = both(a)
    w = np.arange(5, dtype=np.float32).reshape(1, 1, 5) + 1
    (x.sort(-2, descending=True)[0] * Tensor(w)).sum().backward()
    (torch.sort(tx, dim=-2, descending=True, stable=True)[0] * torch.tensor(w)).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist() == w.tolist()
    (y,), (ty,) = both(np.array([1.0, math.nan, 3.0], np.float32))
    (y.cummax(0)[0] * Tensor([1.0, 2.0, 3.0])).sum().backward()
    (torch.cummax(ty, 0)[0] * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert y.grad.tolist() == ty.grad.tolist() == [1.0, 5.0, 0.0]


def test_circular_pad_that_crops_a_whole_axis():
    # IndexError: no piece was left to concatenate
    a = np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2)
    out = Tensor(a).pad((-1, -1, 0, 0), mode="circular")
    assert out.shape == tuple(F.pad(torch.tensor(a), (-1, -1, 0, 0), mode="circular").shape) == (2, 1, 2, 0)


def test_linear_interpolate_past_the_last_sample_weighs_it_as_torch():
    # the position was clipped to the last sample, weighing it 1 and the (same) next 0: -inf * 0 made NaN where
    # torch weighs the last sample 0.75 + 0.25
    a = np.array([[[-1e300, -math.inf]]])
    got = Tensor(a).interpolate((4,), mode="linear").numpy()
    expected = F.interpolate(torch.tensor(a), size=(4,), mode="linear").numpy()
    np.testing.assert_array_equal(got, expected)
    assert got[0, 0, 3] == -math.inf


def test_mean_passes_an_infinite_gradient_as_pytorch():
    # the correction that rounds sum / count once has a derivative of 0, which met an inf from above as NaN
    a = Tensor([2.0, 3.0], requires_grad=True)
    (a.mean() * Tensor(-math.inf)).backward()
    np.testing.assert_array_equal(a.grad.numpy(), [-math.inf, -math.inf])


def test_chunk_of_an_empty_axis_gives_every_chunk():
    pieces = Tensor.zeros(2, 0, 1).chunk(4, 1)
    expected = torch.zeros(2, 0, 1).chunk(4, 1)
    assert [p.shape for p in pieces] == [tuple(e.shape) for e in expected]


def test_pow_with_a_zero_derivative_passes_no_infinite_gradient():
    # d(x ** 0)/dx is 0 where PyTorch masks the gradient itself: an inf from above gave NaN
    x, tx = Tensor([2.0, -3.0, 0.0], requires_grad=True), torch.tensor([2.0, -3.0, 0.0], requires_grad=True)
    e, te = Tensor([0.0, 0.0, 1.5], requires_grad=True), torch.tensor([0.0, 0.0, 1.5], requires_grad=True)
    ((x ** e) * math.inf).sum().backward()
    ((tx ** te) * math.inf).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_array_equal(e.grad.numpy(), te.grad.numpy())


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool_of_halves_divides_before_rounding_to_half(count_include_pad):
    # a window of float16s summed in half passed 65504: avg_pool2d of [60000, 60000] was inf (PyTorch: 60000)
    x = np.array([[[[60000, 60000, 60000, 2]]]], np.float16)
    want = F.avg_pool2d(torch.tensor(x), (1, 2), stride=1, padding=(0, 1), count_include_pad=count_include_pad)
    got = Tensor(x).avg_pool2d((1, 2), stride=1, padding=(0, 1), count_include_pad=count_include_pad)
    assert got.dtype == dtypes.float16 and got.numpy().tolist() == want.numpy().tolist()
