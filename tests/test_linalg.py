"""dot, matmul, @ and einsum against numpy, forward and backward, over the shapes numpy's matmul accepts; and the
16-bit and small-int matmuls fuzzers found wrong, against PyTorch."""
import numpy as np
import pytest
import torch
from helpers import assert_close, check, rand_array

from tinygrad_core import Tensor, dtypes

MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
                 ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((1, 4), (4, 1))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes):
    check(lambda a, b: a @ b, np.matmul, shapes=shapes)


@pytest.mark.parametrize("shapes", MATMUL_SHAPES[:4], ids=str)
def test_dot_and_matmul_methods(shapes):
    check(lambda a, b: a.dot(b), np.matmul, shapes=shapes)
    check(lambda a, b: a.matmul(b), np.matmul, shapes=shapes)


def test_matmul_non_contiguous():
    check(lambda a, b: a.T @ b.flip(0), lambda a, b: a.T @ b[::-1], shapes=[(4, 3), (4, 2)])
    check(lambda a, b: a[:, ::2] @ b.permute(1, 0), lambda a, b: a[:, ::2] @ b.T, shapes=[(3, 6), (5, 3)])


def test_matmul_int_and_mixed():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    out = Tensor(a) @ Tensor(b)
    assert out.dtype == dtypes.int32
    assert_close(out.numpy(), a @ b)
    mixed = Tensor(a) @ Tensor(b.astype(np.float32))
    assert mixed.dtype == dtypes.float32
    assert_close(mixed.numpy(), a @ b.astype(np.float32))


def test_matmul_empty_inner():
    out = Tensor(np.zeros((2, 0), np.float32)) @ Tensor(np.zeros((0, 3), np.float32))
    assert_close(out.numpy(), np.zeros((2, 3), np.float32))


def test_linear():
    check(lambda x, w, b: x.linear(w, b), lambda x, w, b: x @ w + b, shapes=[(2, 3), (3, 4), (4,)])
    check(lambda x, w: x.linear(w), lambda x, w: x @ w, shapes=[(2, 3), (3, 4)])


EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ijk,ik->j", [(2, 3, 4), (2, 4)]),
    ("i j , j k -> i k", [(2, 3), (3, 2)]),
    ("abc,cd,de->abe", [(2, 2, 3), (3, 2), (2, 2)]),
]


@pytest.mark.parametrize("formula,shapes", EINSUM, ids=[e[0] for e in EINSUM])
def test_einsum(formula, shapes):
    check(lambda *ts: Tensor.einsum(formula, *ts), lambda *xs: np.einsum(formula.replace(" ", ""), *xs), shapes=shapes)


def test_einsum_list_operands():
    a, b = rand_array((2, 3)), rand_array((3, 2), seed=1)
    assert_close(Tensor.einsum("ij,jk->ik", [Tensor(a), Tensor(b)]).numpy(), a @ b)


def test_einsum_errors():
    with pytest.raises(RuntimeError, match="2 operands"):
        Tensor.einsum("ij,jk->ik", Tensor.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"'ijk'.*\(2, 3\)"):
        Tensor.einsum("ijk->i", Tensor.ones(2, 3))
    with pytest.raises(RuntimeError, match="3 and 4"):
        Tensor.einsum("ij,jk->ik", Tensor.ones(2, 3), Tensor.ones(4, 2))


@pytest.mark.parametrize("a_shape", [(3, 5), (5,), (2, 3, 5)], ids=str)
def test_wide_matmul_through_packed_panels(a_shape):
    # a right operand with rows 4 KiB or more apart is copied into column panels first (schedule._pack_panels)
    a, b = rand_array(a_shape, seed=1), rand_array((5, 1024), seed=2)
    g = rand_array(a_shape[:-1] + (1024,), seed=3)
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    out = ta @ tb
    (out * Tensor(g)).sum().backward()
    assert_close(out.numpy(), a @ b, rtol=1e-5)
    g2, a2 = g.reshape(-1, 1024), a.reshape(-1, 5)
    assert_close(ta.grad.numpy(), (g2 @ b.T).reshape(a_shape), rtol=1e-5)
    assert_close(tb.grad.numpy(), a2.T @ g2, rtol=1e-5)


# ---- found by fuzzing: differential fuzzers' reduced cases against PyTorch CPU (docs/FUZZING.md); each comment
# says the wrong answer it gave ----
@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_a_16_bit_matmul_multiplies_and_adds_in_float32(dtype):
    # products in half overflowed: 60000 * 2 - 60000 * 2 was inf - inf = NaN (PyTorch 0); and its gradients too
    a, b = np.array([[60000.0, 60000.0], [1.5, -2.25]]), np.array([[2.0, 1.0], [-2.0, 3.0]])
    dt = dtypes.bfloat16 if dtype == "bfloat16" else dtypes.float16
    ta, tb = Tensor(a, dtype=dt, requires_grad=True), Tensor(b, dtype=dt, requires_grad=True)
    out = ta @ tb
    out.sum().backward()
    td = torch.bfloat16 if dtype == "bfloat16" else torch.float16
    pa, pb = torch.tensor(a, dtype=td, requires_grad=True), torch.tensor(b, dtype=td, requires_grad=True)
    (pa @ pb).sum().backward()
    assert out.dtype == dt
    for got, expected in ((out, pa @ pb), (ta.grad, pa.grad), (tb.grad, pb.grad)):
        assert_close(got.float().numpy(), expected.float(), atol=0, rtol=1e-2)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_small_int_matmul_keeps_its_dtype_and_wraps_as_it(dtype):
    # the product was int32 (15000 for int8 100 * 100 + 100 * 50): PyTorch and tinygrad keep int8, wrapped (-104)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(0)
    a, b = (rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype) for shape in ((5, 70), (70, 3)))
    a[0, :2], b[:2, 0] = info.max, info.max
    got, want = Tensor(a) @ Tensor(b), torch.tensor(a) @ torch.tensor(b)
    assert got.dtype == getattr(dtypes, dtype) and got.numpy().tolist() == want.numpy().tolist()
