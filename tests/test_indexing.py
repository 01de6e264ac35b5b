"""Indexing against numpy: ints, slices (negative steps too), None, Ellipsis, integer tensors, their mixes and
gradients; and writing: t[...] = v, assign, in-place operators."""
import itertools

import numpy as np
import pytest
import torch
from helpers import assert_close, check, rand_array

from tinygrad_core import Tensor, dtypes

I0 = np.array([2, 0, -1], np.int32)
I1 = np.array([[1, 2], [0, 2]], np.int32)
BASIC = [
    ("int", lambda x: x[1]),
    ("neg_int", lambda x: x[-1]),
    ("two_ints", lambda x: x[1, 2]),
    ("all_ints", lambda x: x[1, 2, 3]),
    ("slice", lambda x: x[1:3]),
    ("slice_open", lambda x: x[:, 2:]),
    ("slice_step", lambda x: x[::2, 1::2]),
    ("slice_step_3", lambda x: x[:, :, ::3]),
    ("slice_neg_bounds", lambda x: x[-2:, :-1]),
    ("slice_neg_step", lambda x: x[::-1]),
    ("slice_neg_step_2", lambda x: x[:, ::-2]),
    ("slice_neg_step_bounds", lambda x: x[:, 2:0:-1, 3:0:-2]),
    ("slice_empty", lambda x: x[2:1]),
    ("slice_clamped", lambda x: x[:, 1:100]),
    ("none", lambda x: x[None]),
    ("none_middle", lambda x: x[:, None, 1]),
    ("ellipsis", lambda x: x[..., 1]),
    ("ellipsis_middle", lambda x: x[1, ..., ::-1]),
    ("ellipsis_none", lambda x: x[..., None]),
    ("mixed", lambda x: x[1:, None, -1, ::2]),
]


@pytest.mark.parametrize("name,index", BASIC, ids=[b[0] for b in BASIC])
def test_basic_indexing(name, index):
    check(index, index, shapes=[(3, 4, 5)], grad=name != "slice_empty")


def test_empty_slice_backward_gives_zero_gradient():
    x = Tensor.ones(3, 4, requires_grad=True)
    x[2:1].sum().backward()
    assert_close(x.grad.numpy(), np.zeros((3, 4), np.float32))


ADVANCED = [
    ("tensor_dim0", lambda x, T: x[T(I0)]),
    ("tensor_dim1", lambda x, T: x[:, T(I0)]),
    ("tensor_2d_index", lambda x, T: x[T(I1)]),
    ("tensor_last_dim", lambda x, T: x[..., T(I0)]),
    ("two_tensors_adjacent", lambda x, T: x[T(I0), T(np.array([0, 3, 1], np.int32))]),
    ("two_tensors_broadcast", lambda x, T: x[T(I0[:, None]), T(np.array([0, 3], np.int32))]),
    ("tensors_separated", lambda x, T: x[T(I0), :, T(np.array([4, 0, 1], np.int32))]),
    ("tensor_and_int", lambda x, T: x[1, T(I0)]),
    ("tensor_and_slice", lambda x, T: x[T(I0), 1:3]),
    ("tensor_and_neg_slice", lambda x, T: x[::-1, T(I1)]),
    ("list_index", lambda x, T: x[[0, 2]]),
    ("tensor_with_none", lambda x, T: x[None, T(I0)]),
]


@pytest.mark.parametrize("name,index", ADVANCED, ids=[a[0] for a in ADVANCED])
def test_tensor_indexing(name, index):
    check(lambda x: index(x, Tensor), lambda x: index(x, np.asarray), shapes=[(3, 4, 5)])


def test_index_on_non_contiguous():
    x = rand_array((4, 5))
    check(lambda t: t.permute(1, 0)[1:4, ::-1], lambda a: a.T[1:4, ::-1], arrays=[x])
    check(lambda t: t.flip(0)[Tensor(I0)], lambda a: a[::-1][I0], arrays=[x])


def test_index_repeated_gradient_accumulates():
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[Tensor([0, 0, 2])].sum().backward()
    assert_close(x.grad.numpy(), [2.0, 0.0, 1.0])


def test_index_int_tensor_values():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    assert_close(Tensor(x)[Tensor(np.array([3, 1], np.int32))].numpy(), x[[3, 1]])
    assert_close(Tensor(x)[1, Tensor(np.array([-1, 0], np.int32))].numpy(), x[1, [-1, 0]])


def test_index_0d_and_item():
    x = Tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x[1, 0].shape == ()
    assert x[1, 0].item() == 3.0
    assert x[-1][-1].item() == 4.0
    assert Tensor(5.0)[None].shape == (1,)
    assert Tensor(5.0)[...].item() == 5.0


def test_index_errors():
    x = Tensor.ones(3, 4)
    with pytest.raises(IndexError, match="3"):
        x[3]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="float"):     # as torch
        x[1.5]


# ---- writing ----
SETITEM = [
    ("int", lambda: 1, 5.0),
    ("slice", lambda: slice(1, 3), -1.0),
    ("row_col", lambda: (1, slice(None, None, 2)), 7.0),
    ("neg_step", lambda: (slice(None), slice(None, None, -2)), 3.0),
    ("ellipsis", lambda: (Ellipsis, 0), 2.5),
    ("tensor_index", lambda: np.array([0, 2], np.int32), 9.0),
]


@pytest.mark.parametrize("name,index,value", SETITEM, ids=[s[0] for s in SETITEM])
def test_setitem_scalar(name, index, value):
    x = rand_array((3, 4))
    t = Tensor(x).realize()
    idx = index()
    t[Tensor(idx) if isinstance(idx, np.ndarray) else idx] = value
    x[idx] = value
    assert_close(t.numpy(), x)


def test_setitem_tensor_value_broadcast():
    x = rand_array((3, 4))
    t = Tensor(x).realize()
    v = rand_array((4,), seed=3)
    t[1:] = Tensor(v)
    x[1:] = v
    assert_close(t.numpy(), x)
    v2 = rand_array((3, 1), seed=4)
    t[:, 2:3] = Tensor(v2)
    x[:, 2:3] = v2
    assert_close(t.numpy(), x)


def test_setitem_is_seen_by_other_references():
    t = Tensor.zeros(2, 3).contiguous().realize()
    alias = t
    t[0, 1] = 4.0
    assert alias.numpy().tolist() == [[0, 4, 0], [0, 0, 0]]


def test_setitem_int_dtype_and_list_value():
    t = Tensor(np.zeros((2, 3), np.int32)).realize()
    t[1] = [1, 2, 3]
    assert t.dtype == dtypes.int32
    assert t.numpy().tolist() == [[0, 0, 0], [1, 2, 3]]


def test_setitem_repeated_index_last_wins():
    t = Tensor([0.0, 0.0, 0.0]).realize()
    t[Tensor([1, 1])] = Tensor([5.0, 6.0])
    x = np.zeros(3, np.float32)
    x[[1, 1]] = [5.0, 6.0]
    assert_close(t.numpy(), x)


def test_assign():
    t = Tensor([1.0, 2.0, 3.0]).realize()
    alias = t
    t.assign(Tensor([4.0, 5.0, 6.0]))
    assert alias.numpy().tolist() == [4.0, 5.0, 6.0]
    t.assign([7.0, 8.0, 9.0])
    assert t.numpy().tolist() == [7.0, 8.0, 9.0]
    t.assign(t * 2)
    assert t.numpy().tolist() == [14.0, 16.0, 18.0]
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        t.assign(Tensor([1.0, 2.0]))


def test_assign_casts_dtype():
    t = Tensor([1, 2, 3]).realize()
    t.assign(Tensor([1.7, 2.2, -3.9]))
    assert t.dtype == dtypes.int32
    assert t.numpy().tolist() == [1, 2, -3]


def test_assign_unrealized_then_read_twice():
    t = Tensor([1.0, 2.0]).realize()
    t.assign(t + 1)
    t.assign(t * 3)
    assert t.numpy().tolist() == [6.0, 9.0]
    assert t.numpy().tolist() == [6.0, 9.0]


def test_inplace_operators():
    t = Tensor([1.0, 2.0]).realize()
    alias = t
    t += 1
    t *= 3
    t -= 1
    t /= 2
    assert_close(alias.numpy(), ((np.array([1.0, 2.0]) + 1) * 3 - 1) / 2)


def test_old_graph_keeps_value_from_before_assign():
    t = Tensor([1.0, 2.0]).realize()
    before = t * 10
    t.assign(Tensor([5.0, 5.0]))
    assert before.numpy().tolist() == [10.0, 20.0]


def test_graph_built_before_a_realized_assign_keeps_the_old_value():
    t = Tensor([1.0, 2.0]).realize()
    before = t * 10
    t.assign(Tensor([5.0, 5.0])).realize()
    assert before.numpy().tolist() == [10.0, 20.0]
    assert (t * 10).numpy().tolist() == [50.0, 50.0]


# ---- where index tensors put their dims (torch's rule, which numpy shares unless an int sits among them) ----
I22 = np.array([[0, 1], [1, 0]])
LAYOUT_ITEMS = {":": slice(None), "1:": slice(1, None), "::2": slice(None, None, 2), "1": 1, "-1": -1, "I": I22,
                "J": np.array([1, 0]), "None": None, "L": [0, -1], "...": Ellipsis}


def _layout_cases():
    rng = np.random.default_rng(0)
    combos = [c for n in (1, 2) for c in itertools.product(LAYOUT_ITEMS, repeat=n)]
    combos += [tuple(rng.choice(list(LAYOUT_ITEMS), n)) for n in (3, 4) for _ in range(60)]
    return [c for c in combos if c.count("...") < 2 and sum(k not in ("None", "...") for k in c) <= 4]


def test_index_tensor_layout_matches_torch_and_numpy():
    x = np.arange(2 * 3 * 4 * 3, dtype=np.float32).reshape(2, 3, 4, 3)
    for combo in _layout_cases():
        index = tuple(LAYOUT_ITEMS[c] for c in combo)
        expected = torch.tensor(x)[tuple(torch.tensor(i) if isinstance(i, np.ndarray) else i for i in index)].numpy()
        got = Tensor(x)[tuple(Tensor(i) if isinstance(i, np.ndarray) else i for i in index)].numpy()
        assert_close(got, expected, what=str(combo))
        if not ({"1", "-1"} & set(combo) and {"I", "J", "L"} & set(combo)):   # numpy counts ints as index arrays
            assert_close(got, x[index], what=f"{combo} against numpy")


def test_index_tensors_around_an_int_and_none_stay_in_place():
    i = np.array([[0, 1], [1, 0]])
    x = rand_array((2, 5, 6, 5, 3, 4))
    out = Tensor(x)[None, Tensor(i), 2, Tensor(i), None]
    assert out.shape == (1, 2, 2, 1, 5, 3, 4)
    assert_close(out.numpy(), x[None, i, 2, i, None])
    assert Tensor(x)[Tensor(i), None, Tensor(i)].shape == x[i, None, i].shape == (2, 2, 1, 6, 5, 3, 4)
    check(lambda t: t[:, Tensor(I0[:2]), None, 1:, Tensor(I0[:2])], lambda a: a[:, I0[:2], None, 1:, I0[:2]],
          shapes=[(2, 3, 4, 3)])


def test_nested_lists_and_tuples_index_as_torch():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = Tensor(x)
    assert_close(t[:, [[0, 2], [-1, 1]]].numpy(), x[:, [[0, 2], [-1, 1]]])      # a list of lists is one 2-D index
    assert_close(t[[[0, 1], [2, 0]]].numpy(), x[[0, 1], [2, 0]])                # a top-level list of lists: a tuple
    assert_close(t[[(1, 0), (2, 0)]].numpy(), x[(1, 0), (2, 0)])
    assert_close(t[(1, 0), ].numpy(), x[[1, 0]])                                # a tuple inside the tuple: a list
    assert_close(t[1, [[-1]], ((0, 3),)].numpy(), x[1, [[-1]], [[0, 3]]])
    assert t[[]].shape == (0, 3, 4)
    assert_close(t[Tensor([-1, -2]), 0].numpy(), x[[-1, -2], 0])


def test_bad_indices_raise_index_error():
    t = Tensor.ones(3, 4)
    for index, match in [((0, [4]), "index 4 is out of bounds for dimension 1 with size 4"),
                         ([-4], "index -4 is out of bounds for dimension 0 with size 3"), (5, "index 5"),
                         ([1.0], "float"), ((0, [1.5, 2]), "ints, not float"), (1.5, "float"),
                         ((slice(None), [True, False]), "ints, not bool"), (Tensor([0.0, 1.0]), "integer tensors"),
                         ((Tensor([0, 1]), Tensor([0, 1, 2])), r"\(2,\) and \(3,\)")]:
        with pytest.raises(IndexError, match=match):
            t[index]


# ---- writing with index tensors, steps, and values that must fit ----
SETITEM_CASES = [
    ("tensor_rows", lambda T: (T(np.array([2, 0])),)),
    ("tensor_2d", lambda T: (T(np.array([[0, 2], [1, 1]])), slice(1, 3))),
    ("tensor_pair", lambda T: (T(np.array([0, 2])), T(np.array([3, -1])))),
    ("separated", lambda T: (T(np.array([0, 1])), slice(None), T(np.array([1, 0])))),
    ("around_int", lambda T: (T(np.array([0, 1])), 1, T(np.array([1, 0])))),
    ("step", lambda T: (slice(None, None, 2), slice(1, None, 3))),
    ("neg_step", lambda T: (slice(None, None, -2), slice(3, 0, -2))),
    ("none_and_ellipsis", lambda T: (None, Ellipsis, 1)),
]


@pytest.mark.parametrize("name,index", SETITEM_CASES, ids=[c[0] for c in SETITEM_CASES])
def test_setitem_like_numpy(name, index):
    x = rand_array((3, 4, 2))
    v = rand_array(x[index(np.asarray)].shape, seed=5)
    t = Tensor(x).realize()
    t[index(Tensor)] = Tensor(v)
    x[index(np.asarray)] = v
    assert_close(t.numpy(), x)


def test_setitem_value_must_broadcast_to_the_selection():
    t = Tensor.zeros(3, 3).contiguous().realize()
    with pytest.raises(ValueError, match=r"\(5,\).*\(3,\)"):
        t[0] = Tensor.ones(5)
    with pytest.raises(ValueError, match=r"\(2, 2\).*\(2, 3\)"):
        t[Tensor([0, 1])] = Tensor.ones(2, 2)
    t[1] = Tensor.ones(1, 1, 3)                        # leading 1s broadcast away, as in numpy
    assert t.numpy().tolist() == [[0, 0, 0], [1, 1, 1], [0, 0, 0]]


def test_setitem_on_a_large_tensor_is_linear_in_its_size():
    # (it used to compare every position with every written element: 90000 x 45000 here)
    t = Tensor.zeros(300, 300).contiguous().realize()
    t[:150, ::2] = 1.0
    expected = np.zeros((300, 300), np.float32)
    expected[:150, ::2] = 1.0
    assert_close(t.numpy(), expected)


def test_gathering_rows_by_an_index_tensor_reads_only_those_rows():
    # X[idx] on (N, 1, 28, 28) uint8 rows (the MNIST batch idiom) loads at the index read: no reduce over N, whose
    # one-hot sum took seconds per batch
    from tinygrad_core.ops import Ops
    x = rand_array((600, 1, 28, 28), 0, 255, dtype=np.uint8)
    idx = np.random.default_rng(1).integers(-600, 600, 128)
    out = Tensor(x)[Tensor(idx).realize()]
    assert not any(u.op is Ops.REDUCE_AXIS for item in out.schedule() for u in item.ast.toposort())
    assert_close(out.numpy(), x[idx])
    assert_close(Tensor(x)[:, 0, Tensor([[3, -1], [0, 27]])].numpy(), x[:, 0, [[3, -1], [0, 27]]])
    w = Tensor(rand_array((5, 3)), requires_grad=True)
    w[Tensor([4, 0, 4])].sum().backward()            # the gradient adds back, repeats included
    assert_close(w.grad.numpy(), np.array([[1.0] * 3, [0.0] * 3, [0.0] * 3, [0.0] * 3, [2.0] * 3]))


def test_setitem_at_a_symbolic_position():
    from tinygrad_core import Variable
    cache = Tensor.zeros(6, 2).contiguous().realize()
    pos = Variable("pos", 0, 5)
    cache[pos.bind(3)] = Tensor([1.0, 2.0])
    cache[pos.bind(1):pos.bind(1) + 1] = Tensor([[3.0, 4.0]])
    assert cache.numpy().tolist() == [[0, 0], [3, 4], [0, 0], [1, 2], [0, 0], [0, 0]]


def test_an_index_tensor_out_of_range_below_reads_zero_as_above():
    # as in tinygrad, a value outside [-size, size) in a lazy index tensor reads 0 (its values aren't known when the
    # op is built; a realized one raises: test_bad_input_values.py); -11 on an axis of 10 was counted from the end
    # twice and read x[9]
    x = Tensor(np.arange(10.0))
    np.testing.assert_array_equal(x[Tensor([-11, -10, -1, 10, 11, -21]).contiguous()].numpy(), [0, 0, 9, 0, 0, 0])


# ---- found by fuzzing: differential fuzzers' reduced cases against PyTorch CPU (docs/FUZZING.md); each comment
# says the wrong answer it gave ----
def test_setitem_on_a_lazy_tensor_passes_the_gradient_to_its_inputs_and_the_value():
    # it was written into a buffer of its own: both gradients came back 0
    x, v = Tensor([7.0, -4.0, -2.0], requires_grad=True), Tensor(3.0, requires_grad=True)
    tx, tv = torch.tensor([7.0, -4.0, -2.0], requires_grad=True), torch.tensor(3.0, requires_grad=True)
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


def test_a_0d_index_tensor_indexes_as_an_int_does():
    # in torch a 0-d index tensor is an int: t[Tensor(1), :, i] put i's axis first, (2, 3) where torch has (3, 2)
    x, i = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5), [1, 0]
    for ours, theirs in (((Tensor(1), slice(None), Tensor(i)), (torch.tensor(1), slice(None), torch.tensor(i))),
                         ((Tensor(i), slice(None), Tensor(0), Tensor(i)), (torch.tensor(i), slice(None),
                                                                           torch.tensor(0), torch.tensor(i))),
                         ((slice(None), Tensor(2), None, Tensor(i)), (slice(None), torch.tensor(2), None,
                                                                      torch.tensor(i)))):
        want = torch.tensor(x)[theirs]
        assert Tensor(x)[ours].numpy().tolist() == want.tolist()
        t, value = Tensor(x).contiguous().realize(), np.arange(want.numel()).reshape(want.shape)
        t[ours] = Tensor(value)
        expected = torch.tensor(x).clone()
        expected[theirs] = torch.tensor(value)
        assert t.numpy().tolist() == expected.tolist()
