"""Movement ops against numpy: reshape view permute expand pad shrink flip transpose flatten unflatten squeeze
unsqueeze contiguous cat stack repeat split chunk gather; forward and backward; hypothesis round trips; and the
empty and 0-d cases fuzzers found wrong, against PyTorch."""
import numpy as np
import pytest
import torch
from helpers import assert_close, check, rand_array
from hypothesis import given, settings
from hypothesis import strategies as st

from tinygrad_core import Tensor

MOVEMENT = [
    ("reshape", (2, 3, 4), lambda x: x.reshape(4, 6), lambda x: x.reshape(4, 6)),
    ("reshape_tuple", (2, 3, 4), lambda x: x.reshape((6, 4)), lambda x: x.reshape(6, 4)),
    ("reshape_minus1", (2, 3, 4), lambda x: x.reshape(-1, 2), lambda x: x.reshape(-1, 2)),
    ("reshape_to_0d", (1, 1), lambda x: x.reshape(()), lambda x: x.reshape(())),
    ("view", (2, 3, 4), lambda x: x.view(3, 8), lambda x: x.reshape(3, 8)),
    ("permute", (2, 3, 4), lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1)),
    ("permute_tuple_neg", (2, 3, 4), lambda x: x.permute((-1, 1, 0)), lambda x: x.transpose(2, 1, 0)),
    ("expand", (3, 1), lambda x: x.expand(2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4))),
    ("expand_minus1", (3, 1), lambda x: x.expand(-1, 5), lambda x: np.broadcast_to(x, (3, 5))),
    ("pad_pairs", (2, 3), lambda x: x.pad(((1, 2), (0, 1))), lambda x: np.pad(x, ((1, 2), (0, 1)))),
    ("pad_flat_torch", (2, 3), lambda x: x.pad((1, 2)), lambda x: np.pad(x, ((0, 0), (1, 2)))),
    ("pad_value", (2, 3), lambda x: x.pad(((1, 1), (1, 1)), value=-3.0),
     lambda x: np.pad(x, ((1, 1), (1, 1)), constant_values=-3.0)),
    ("pad_negative_crops", (4, 5), lambda x: x.pad(((-1, 2), (1, -2))), lambda x: np.pad(x[1:, :-2], ((0, 2), (1, 0)))),
    ("pad_none", (2, 3), lambda x: x.pad((None, (1, 1))), lambda x: np.pad(x, ((0, 0), (1, 1)))),
    ("shrink", (4, 5), lambda x: x.shrink(((1, 3), (0, 4))), lambda x: x[1:3, 0:4]),
    ("shrink_none", (4, 5), lambda x: x.shrink((None, (2, 5))), lambda x: x[:, 2:5]),
    ("flip", (3, 4), lambda x: x.flip(0), lambda x: x[::-1]),
    ("flip_multi", (2, 3, 4), lambda x: x.flip(0, 2), lambda x: x[::-1, :, ::-1]),
    ("flip_neg_axis", (2, 3, 4), lambda x: x.flip(-1), lambda x: x[..., ::-1]),
    ("transpose_default", (3, 4), lambda x: x.transpose(), lambda x: x.T),
    ("transpose_dims", (2, 3, 4), lambda x: x.transpose(0, 2), lambda x: np.swapaxes(x, 0, 2)),
    ("T", (3, 4), lambda x: x.T, lambda x: x.T),
    ("flatten", (2, 3, 4), lambda x: x.flatten(), lambda x: x.reshape(-1)),
    ("flatten_range", (2, 3, 4, 2), lambda x: x.flatten(1, 2), lambda x: x.reshape(2, 12, 2)),
    ("flatten_start", (2, 3, 4), lambda x: x.flatten(1), lambda x: x.reshape(2, 12)),
    ("unflatten", (2, 12), lambda x: x.unflatten(1, (3, 4)), lambda x: x.reshape(2, 3, 4)),
    ("squeeze_all", (1, 3, 1, 4), lambda x: x.squeeze(), lambda x: np.squeeze(x)),
    ("squeeze_dim", (1, 3, 1, 4), lambda x: x.squeeze(2), lambda x: np.squeeze(x, 2)),
    ("squeeze_not_one", (2, 3), lambda x: x.squeeze(0), lambda x: x),
    ("unsqueeze", (3, 4), lambda x: x.unsqueeze(1), lambda x: x[:, None]),
    ("unsqueeze_neg", (3, 4), lambda x: x.unsqueeze(-1), lambda x: x[..., None]),
    ("contiguous", (3, 4), lambda x: x.permute(1, 0).contiguous(), lambda x: np.ascontiguousarray(x.T)),
    ("repeat", (2, 3), lambda x: x.repeat(2, 3), lambda x: np.tile(x, (2, 3))),
    ("repeat_new_dims", (2, 3), lambda x: x.repeat((2, 1, 2)), lambda x: np.tile(x, (2, 1, 2))),
    ("repeat_interleave", (2, 3), lambda x: x.repeat_interleave(2, dim=1), lambda x: np.repeat(x, 2, axis=1)),
    ("chain", (2, 3, 4), lambda x: x.permute(1, 0, 2).reshape(3, 8).flip(1).pad(((0, 1), (1, 0)))[1:, ::3],
     lambda x: np.pad(x.transpose(1, 0, 2).reshape(3, 8)[:, ::-1], ((0, 1), (1, 0)))[1:, ::3]),
]


@pytest.mark.parametrize("name,shape,tiny_fn,np_fn", MOVEMENT, ids=[m[0] for m in MOVEMENT])
def test_movement(name, shape, tiny_fn, np_fn):
    check(tiny_fn, np_fn, shapes=[shape])


def test_movement_on_0d_and_empty():
    x = Tensor(2.0)
    assert x.reshape(1, 1).shape == (1, 1)
    assert x.unsqueeze(0).shape == (1,)
    assert x.flatten().shape == (1,)
    assert x.expand(2, 3).numpy().tolist() == [[2.0] * 3] * 2
    e = Tensor(np.zeros((0, 3), np.float32))
    assert e.reshape(3, 0).shape == (3, 0)
    assert e.permute(1, 0).shape == (3, 0)
    assert e.flip(0).shape == (0, 3)


def test_pad_of_empty_tensor():
    e = Tensor(np.zeros((0, 3), np.float32))
    assert e.pad(((1, 1), (0, 0))).numpy().tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dim):
    shapes = [(2, 3), (2, 3), (2, 3)]
    shapes = [tuple(s + i if d == dim % 2 else s for d, s in enumerate(shp)) for i, shp in enumerate(shapes)]
    check(lambda a, b, c: a.cat(b, c, dim=dim), lambda a, b, c: np.concatenate([a, b, c], axis=dim), shapes=shapes)


def test_cat_classmethod_style_and_dtypes():
    a, b = Tensor([1, 2]), Tensor([0.5])
    out = Tensor.cat(a, b)
    assert_close(out.numpy(), [1.0, 2.0, 0.5])
    with pytest.raises(RuntimeError, match=r"\(2, 3\).*\(2, 4\)|\(2, 4\).*\(2, 3\)"):
        Tensor.ones(2, 3).cat(Tensor.ones(2, 4), dim=0)


def test_cat_keeps_every_value_bit_for_bit():
    # pieces are padded with -0.0 and added: -0.0, NaN and infinities come through unchanged
    a = np.array([[-0.0, 1.0], [np.nan, -np.inf]], np.float32)
    b = np.array([[-0.0, np.inf]], np.float32)
    out = Tensor(a).cat(Tensor(b)).numpy()
    expected = np.concatenate([a, b])
    assert out.view(np.uint32).tolist() == expected.view(np.uint32).tolist()
    assert Tensor([-0.0]).pad(((1, 0),), -0.0).numpy().view(np.uint32).tolist() == [0x80000000] * 2


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack(dim):
    check(lambda a, b: Tensor.stack(a, b, dim=dim), lambda a, b: np.stack([a, b], axis=dim), shapes=[(2, 3), (2, 3)])


def test_stack_list():
    ts = [Tensor([1.0, 2.0]), Tensor([3.0, 4.0]), Tensor([5.0, 6.0])]
    assert_close(Tensor.stack(ts).numpy(), [[1, 2], [3, 4], [5, 6]])


def test_split_and_chunk():
    x = rand_array((7, 4))
    parts = Tensor(x).split(3)
    assert [p.shape for p in parts] == [(3, 4), (3, 4), (1, 4)]
    for p, e in zip(parts, np.split(x, [3, 6])):
        assert_close(p.numpy(), e)
    parts = Tensor(x).split([2, 5], dim=0)
    assert_close(parts[1].numpy(), x[2:])
    parts = Tensor(x).split(1, dim=1)
    assert len(parts) == 4 and parts[3].shape == (7, 1)
    chunks = Tensor(x).chunk(3)
    assert [c.shape[0] for c in chunks] == [3, 3, 1]   # as torch.chunk
    assert_close(chunks[2].numpy(), x[6:])
    chunks = Tensor(x).chunk(2, dim=1)
    assert_close(chunks[0].numpy(), x[:, :2])
    with pytest.raises(ValueError, match="7"):
        Tensor(x).split([2, 2])


def test_split_backward():
    x = rand_array((5, 3))
    check(lambda t: t.split([2, 3])[1] * 2 + t.split([2, 3])[0].sum(), lambda a: a[2:] * 2 + a[:2].sum(), arrays=[x])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
    x = rand_array((3, 4))
    idx = rand_array((2, 4) if dim == 0 else (3, 3), 0, 3 if dim == 0 else 4, dtype=np.int32, seed=7)
    check(lambda t: t.gather(dim, Tensor(idx)), lambda a: np.take_along_axis(a, idx, axis=dim), arrays=[x])


def test_gather_3d():
    x = rand_array((2, 3, 4))
    idx = rand_array((2, 2, 4), 0, 3, dtype=np.int32, seed=8)
    check(lambda t: t.gather(1, Tensor(idx)), lambda a: np.take_along_axis(a, idx, axis=1), arrays=[x])


def test_movement_of_int_and_bool():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert_close(Tensor(x).permute(1, 0).flip(0).numpy(), x.T[::-1])
    assert_close(Tensor(x).pad(((1, 0), (0, 1)), value=-1).numpy(), np.pad(x, ((1, 0), (0, 1)), constant_values=-1))
    b = x % 3 == 0
    assert_close(Tensor(b).pad(((0, 1), (0, 0))).numpy(), np.pad(b, ((0, 1), (0, 0))))
    assert_close(Tensor(b).repeat(2, 1).numpy(), np.tile(b, (2, 1)))


# ---- properties ----
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None)
@given(shapes, st.data())
def test_reshape_permute_round_trip(shape, data):
    x = rand_array(tuple(shape))
    order = data.draw(st.permutations(range(len(shape))))
    inverse = tuple(np.argsort(order))
    t = Tensor(x).permute(order)
    assert_close(t.numpy(), x.transpose(order))
    assert_close(t.permute(inverse).numpy(), x)
    flat = t.reshape(-1)
    assert_close(flat.numpy(), x.transpose(order).reshape(-1))
    assert_close(flat.reshape(t.shape).permute(inverse).numpy(), x)


@settings(max_examples=20, deadline=None)
@given(shapes, st.data())
def test_pad_shrink_round_trip(shape, data):
    x = rand_array(tuple(shape))
    pads = [(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape]
    padded = Tensor(x).pad(pads)
    assert_close(padded.numpy(), np.pad(x, pads))
    back = padded.shrink(tuple((b, b + s) for (b, _), s in zip(pads, shape)))
    assert_close(back.numpy(), x)


@settings(max_examples=20, deadline=None)
@given(shapes, st.data())
def test_flip_twice_is_identity(shape, data):
    x = rand_array(tuple(shape))
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    assert_close(Tensor(x).flip(*axes).numpy(), np.flip(x, axes))
    assert_close(Tensor(x).flip(*axes).flip(*axes).numpy(), x)


# ---- found by fuzzing: differential fuzzers' reduced cases against PyTorch CPU (docs/FUZZING.md); each comment
# says the wrong answer it gave ----
def test_the_gradient_through_a_strided_view_of_an_empty_tensor():
    # the scalar's gradient sums over no elements, read through a reshape of a 0-sized view: its index math divided
    # by the size 0 (ZeroDivisionError inside codegen); fuzzer CPU 13277
    x = Tensor(np.zeros((1, 0, 0), np.float32), requires_grad=True)
    s = Tensor(np.float32(-2.25), requires_grad=True)
    (x * s)[:, ::-2, ::-3].sum().backward()
    assert x.grad.shape == (1, 0, 0) and s.grad.numpy() == 0


def test_chunk_of_an_empty_axis_gives_every_chunk():
    pieces = Tensor.zeros(2, 0, 1).chunk(4, 1)
    expected = torch.zeros(2, 0, 1).chunk(4, 1)
    assert [p.shape for p in pieces] == [tuple(e.shape) for e in expected]


def test_a_0d_tensor_gathers_with_a_0d_index():
    # it failed inside with IndexError (tuple index out of range); torch.gather takes a 0-d tensor and index
    x = Tensor(2.5, requires_grad=True)
    y = x.gather(0, Tensor(0))
    y.backward()
    assert y.shape == () and y.item() == torch.gather(torch.tensor(2.5), 0, torch.tensor(0)).item()
    assert x.grad.item() == 1.0
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.gather(-1, Tensor([1]).reshape(()))
