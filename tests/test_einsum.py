"""einsum beyond plain letters, against torch: '...' broadcasting, implicit outputs, repeated letters (diagonals and
traces), size-1 broadcasting, gradients; and the RuntimeErrors (as in PyTorch) of bad formulas."""
import math

import numpy as np
import pytest
import torch
from helpers import assert_close, rand_array

from tinygrad_core import Tensor

CASES = [
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk", [(5, 1, 2, 3), (4, 3, 2)]),
    ("b...i,b...i->b...", [(2, 3, 4), (2, 1, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i...->...", [(3, 2, 4)]),
    ("...,...->...", [(2, 3), (3,)]),
    ("...ij->ij", [(5, 2, 3)]),
    ("ij...->j", [(2, 3)]),
    ("...", [(2, 3)]),
    ("ba", [(2, 3)]),
    ("Ab,bA", [(2, 3), (3, 2)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("iji->j", [(3, 2, 3)]),
    ("iiii->i", [(2, 2, 2, 2)]),
    ("iijj->ij", [(2, 2, 3, 3)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("i,i->", [(3,), (1,)]),
    ("bij,bjk->bik", [(1, 2, 3), (4, 3, 2)]),
    ("i,j,k->kji", [(2,), (3,), (4,)]),
    ("ij,jk,kl->il", [(2, 0), (0, 3), (3, 2)]),
]


@pytest.mark.parametrize("formula,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_torch(formula, shapes):
    arrays = [rand_array(s, seed=n) for n, s in enumerate(shapes)]
    tensors = [Tensor(a, requires_grad=True) for a in arrays]
    references = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, expected = Tensor.einsum(formula, *tensors), torch.einsum(formula, *references)
    assert_close(out.numpy(), expected.detach().numpy(), 1e-5, 1e-5)
    weights = rand_array(tuple(expected.shape), 0.5, 1.5, seed=9)
    (out * Tensor(weights)).sum().backward()
    (expected * torch.tensor(weights)).sum().backward()
    for t, r in zip(tensors, references):
        assert_close(t.grad.numpy(), r.grad.numpy(), 1e-5, 1e-5)


def test_einsum_diagonal_ignores_nan_off_the_diagonal():
    x = np.array([[1, math.nan], [math.inf, 2]], np.float32)
    assert Tensor.einsum("ii->i", Tensor(x)).tolist() == [1, 2]
    assert Tensor.einsum("ii", Tensor(x)).item() == 3


@pytest.mark.parametrize("formula,shapes,match", [
    ("ij,jk->il", [(2, 3), (3, 4)], "output letter 'l'"),
    ("ij->ii", [(2, 2)], "output letter 'i'"),
    ("ij,jk", [(2, 3)], "names 2 operands, got 1"),
    ("i", [(2,), (2,)], "names 1 operands, got 2"),
    ("ijk->i", [(2, 3)], r"operand 0 has subscripts 'ijk' but shape \(2, 3\)"),
    ("...ijk", [(2, 3)], r"'\.\.\.ijk' but shape \(2, 3\)"),
    ("ij,jk->ik", [(2, 3), (4, 2)], r"letter 'j' has sizes 3 and 4"),
    ("ii->i", [(2, 3)], r"letter 'i' has sizes 2 and 3"),
    ("ii->i", [(1, 3)], r"'i' repeats in 'ii' over sizes 1 and 3"),
    ("i1->i", [(2, 3)], "'1' isn't a subscript"),
    ("i.j->i", [(2, 3)], r"'\.' isn't a subscript"),
])
def test_einsum_errors_name_the_letter_and_shapes(formula, shapes, match):
    with pytest.raises(RuntimeError, match=match):
        Tensor.einsum(formula, *[Tensor.ones(*s) for s in shapes])
