"""Making tensors: from lists, numpy and scalars; zeros ones full empty arange linspace eye; the random
constructors (reproducible with manual_seed, right distribution); *_like; and the basic properties."""
import numpy as np
import pytest
from helpers import assert_close

from tinygrad_core import Device, Tensor, dtypes
from tinygrad_core.plugins import registry


def test_from_list_numpy_scalar():
    assert_close(Tensor([[1.0, 2.0], [3.0, 4.0]]).numpy(), np.array([[1, 2], [3, 4]], np.float32))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_close(Tensor(a).numpy(), a)
    assert Tensor(2.5).shape == () and Tensor(2.5).item() == 2.5
    assert Tensor(7).item() == 7
    assert Tensor(np.float32(1.5)).item() == 1.5 and Tensor(np.float32(1.5)).shape == ()
    assert Tensor(np.int64(3)).dtype == dtypes.int64
    assert Tensor([]).shape == (0,)
    assert Tensor(np.zeros((2, 0, 3), np.float32)).shape == (2, 0, 3)


def test_from_numpy_copies_and_handles_views():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = Tensor(a[:, ::-2])              # a strided numpy view
    assert_close(t.numpy(), a[:, ::-2])
    b = a.copy()
    t2 = Tensor(b)
    b[0, 0] = 100.0                     # the tensor holds its own copy
    assert t2.numpy()[0, 0] == 0.0


def test_numpy_is_a_read_only_snapshot_on_every_backend():
    t = Tensor(np.arange(6, dtype=np.float32)).realize()
    before = t.numpy()
    with pytest.raises(ValueError, match="read-only"):
        before[0] = 5.0
    t.assign(t * 10).realize()                  # written in place: an array read out before keeps its values
    assert before.tolist() == [0, 1, 2, 3, 4, 5] and t.numpy().tolist() == [0, 10, 20, 30, 40, 50]
    assert t.numpy().copy().flags.writeable


def test_a_read_only_array_is_never_written_through_its_tensor():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False                   # (a host-memory backend may use it without a copy)
    t = Tensor(a)
    t.assign(t + 1).realize()
    t[1:3] = Tensor([7.0, 7.0])
    t.realize()
    assert a.tolist() == [0, 1, 2, 3] and t.numpy().tolist() == [1, 7, 7, 4]


def test_numpy_float64_kept_but_list_floats_are_float32():
    assert Tensor(np.array([1.0])).dtype == dtypes.float64
    assert Tensor([1.0]).dtype == dtypes.float32


def test_from_tensor_with_dtype():
    t = Tensor([1.5, 2.5])
    assert Tensor(t, dtype=dtypes.int32).tolist() == [1, 2]


def test_dtype_device_requires_grad_arguments():
    t = Tensor([1, 2], dtype=dtypes.float16, device=Device.DEFAULT, requires_grad=True)
    assert t.dtype == dtypes.float16 and t.device == Device.DEFAULT and t.requires_grad
    assert Tensor([1, 2], device=Device.DEFAULT.lower()).device == Device.DEFAULT


def test_properties():
    t = Tensor.ones(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.numel() == 24 and len(t) == 2
    assert t.dtype == dtypes.float32
    assert isinstance(t.device, str)
    assert Tensor(1.0).ndim == 0 and Tensor(1.0).numel() == 1
    assert "(2, 3, 4)" in repr(t)


def test_to_and_detach_and_clone():
    t = Tensor([1.0, 2.0], requires_grad=True)
    same = t.to(Device.DEFAULT)
    assert same.device == Device.DEFAULT and same.tolist() == [1.0, 2.0]
    assert t.to(Device.DEFAULT.lower()).device == Device.DEFAULT
    d = t.detach()
    assert d.tolist() == [1.0, 2.0] and not d.requires_grad
    c = t.clone()
    assert c.tolist() == [1.0, 2.0]


def test_to_other_device_when_available():
    others = [b.name for b in registry.usable() if b.name != Device.DEFAULT]
    if not others:
        pytest.skip("only one backend installed")
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.to(others[0])
    assert y.device == others[0]
    assert_close((y * 2).numpy(), [2.0, 4.0, 6.0])
    (y * 2).sum().backward()
    assert x.grad.device == Device.DEFAULT
    assert_close(x.grad.numpy(), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("shape", [(3,), (2, 3), (), (0, 2)], ids=str)
def test_zeros_ones_full_empty(shape):
    assert_close(Tensor.zeros(*shape).numpy(), np.zeros(shape, np.float32))
    assert_close(Tensor.ones(shape).numpy(), np.ones(shape, np.float32))
    assert_close(Tensor.full(shape, 3.5).numpy(), np.full(shape, 3.5, np.float32))
    assert Tensor.empty(*shape).shape == shape


def test_creation_dtypes():
    assert Tensor.zeros(2, dtype=dtypes.int32).dtype == dtypes.int32
    assert Tensor.ones(2, dtype="float16").dtype == dtypes.float16
    assert Tensor.full((2,), 3).dtype == dtypes.int32
    assert Tensor.full((2,), True).dtype == dtypes.bool
    assert Tensor.full((2,), 2.0, dtype=dtypes.int8).tolist() == [2, 2]
    assert Tensor.empty(2, 2, dtype=dtypes.uint8).dtype == dtypes.uint8
    assert Tensor.zeros(2, requires_grad=True).requires_grad


@pytest.mark.parametrize("args", [(5,), (2, 7), (1, 10, 3), (5, 0, -1), (0.5, 3.0, 0.5), (3, 3), (-2, 2)], ids=str)
def test_arange(args):
    t = Tensor.arange(*args)
    expected = np.arange(*args)
    assert_close(t.numpy(), expected.astype(np.float32 if expected.dtype.kind == "f" else np.int32))
    assert t.dtype == (dtypes.float32 if expected.dtype.kind == "f" else dtypes.int32)


def test_arange_dtype():
    assert Tensor.arange(4, dtype=dtypes.float32).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert Tensor.arange(4, dtype=dtypes.int64).dtype == dtypes.int64


@pytest.mark.parametrize("args", [(0, 1, 5), (-1, 1, 3), (2, 2, 4), (0, 10, 1), (1, 0, 6)], ids=str)
def test_linspace(args):
    assert_close(Tensor.linspace(*args).numpy(), np.linspace(*args).astype(np.float32), atol=1e-6)


@pytest.mark.parametrize("args", [(3,), (2, 4), (4, 2), (1,)], ids=str)
def test_eye(args):
    assert_close(Tensor.eye(*args).numpy(), np.eye(*args, dtype=np.float32))
    assert Tensor.eye(*args, dtype=dtypes.int32).dtype == dtypes.int32


def test_like_constructors():
    base = Tensor(np.ones((2, 3), np.float16))
    for t, value in ((base.zeros_like(), 0), (base.ones_like(), 1), (base.full_like(7), 7)):
        assert t.shape == (2, 3) and t.dtype == dtypes.float16 and t.device == base.device
        assert_close(t.numpy(), np.full((2, 3), value, np.float16))
    assert base.zeros_like(dtype=dtypes.int32).dtype == dtypes.int32
    r = Tensor.ones(3, 4).rand_like()
    assert r.shape == (3, 4) and r.dtype == dtypes.float32
    assert Tensor.ones(3, 4).randn_like().shape == (3, 4)


# ---- randomness ----
def test_rand_range_and_distribution():
    x = Tensor.rand(4000).numpy()
    assert x.dtype == np.float32 and x.shape == (4000,)
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 0.03 and abs(x.var() - 1 / 12) < 0.01
    assert len(np.unique(x)) > 3900


def test_randn_distribution():
    x = Tensor.randn(4000).numpy()
    assert abs(x.mean()) < 0.07 and abs(x.std() - 1) < 0.05
    assert np.isfinite(x).all()
    assert Tensor.randn(2, 3).shape == (2, 3) and Tensor.randn((2, 3)).shape == (2, 3)


def test_randint():
    x = Tensor.randint(2000, low=-3, high=4).numpy()
    assert x.dtype == np.int32
    assert set(np.unique(x).tolist()) == set(range(-3, 4))
    assert Tensor.randint(2, 2, high=5, dtype=dtypes.int64).dtype == dtypes.int64


def test_uniform_and_normal():
    u = Tensor.uniform(3000, low=-2.0, high=6.0).numpy()
    assert u.min() >= -2.0 and u.max() < 6.0 and abs(u.mean() - 2.0) < 0.2
    n = Tensor.normal(3000, mean=5.0, std=0.5).numpy()
    assert abs(n.mean() - 5.0) < 0.05 and abs(n.std() - 0.5) < 0.03
    assert Tensor.uniform(2, 2, requires_grad=True).requires_grad


def test_manual_seed_reproducible():
    Tensor.manual_seed(42)
    a, b = Tensor.rand(5).numpy(), Tensor.randn(3).numpy()
    Tensor.manual_seed(42)
    assert_close(Tensor.rand(5).numpy(), a)
    assert_close(Tensor.randn(3).numpy(), b)
    Tensor.manual_seed(43)
    assert not np.array_equal(Tensor.rand(5).numpy(), a)


def test_successive_random_calls_differ():
    assert not np.array_equal(Tensor.rand(8).numpy(), Tensor.rand(8).numpy())


def test_random_dtype():
    assert Tensor.rand(3, dtype=dtypes.float16).dtype == dtypes.float16
    assert Tensor.randn(3, dtype=dtypes.float64).dtype == dtypes.float64


def test_init_helpers_shapes_and_bounds():
    g = Tensor.glorot_uniform(4, 6).numpy()
    assert g.shape == (4, 6) and np.abs(g).max() <= (6 / 10) ** 0.5
    k = Tensor.kaiming_uniform(8, 3, 3, 3).numpy()
    assert k.shape == (8, 3, 3, 3) and np.abs(k).max() <= np.sqrt(3) * np.sqrt(2 / (1 + 0.01 ** 2)) / np.sqrt(27)
    s = Tensor.scaled_uniform(4, 4).numpy()
    assert np.abs(s).max() <= 0.25


def test_data_and_conversions():
    t = Tensor([[1.5, 2.5]])
    assert t.tolist() == [[1.5, 2.5]]
    assert float(Tensor(2.5)) == 2.5 and int(Tensor(3)) == 3 and bool(Tensor(True))
    assert np.asarray(t.data()).tolist() == [[1.5, 2.5]]
