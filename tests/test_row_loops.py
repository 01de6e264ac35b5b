"""Row loops (codegen/lower.py): on a renderer that runs parallel indices as a loop (the CPU), each parallel index
loops over the last output axes itself, so the div and mod that split it into coordinates run once per row; a row
whose gates test its counter divided by a small d steps by d; a load whose index stays inside its buffer goes
ungated. The results are the same numbers, bit for bit."""
import numpy as np
import pytest
from tinygrad_core import Device, Tensor
from tinygrad_core.codegen import pipeline
from tinygrad_core.codegen.lower import row_axes
from tinygrad_core.ops import Ops


def _program(t: Tensor):
    return pipeline.program_for([item.ast for item in t.schedule()][-1], Device["CPU"].renderer)[0]


def _inside_loops(program, innermost: bool = False) -> list:
    """The ops of a linear program that sit inside some loop (or in its innermost loop, the last one opened)."""
    depth, inside = 0, []
    for u in program:
        depth += (u.op is Ops.RANGE) - (u.op is Ops.ENDRANGE)
        if u.op is Ops.RANGE and innermost:
            inside = []
        elif depth and u.op is not Ops.ENDRANGE:
            inside.append(u)
    return inside


@pytest.mark.parametrize("grid, rows", [
    ((128, 16, 14, 14), [2, 3]),          # a 14 x 14 image per row (196 elements), 2048 rows
    ((128, 7, 7, 16, 3, 3), [3, 4, 5]),   # an im2col copy: 16 x 3 x 3 per row
    ((128, 784), [1]),
    ((25088, 1, 1, 9), [3]),              # size-1 axes are skipped
    ((2, 100000), []),                    # 2 rows: too few to share among threads
    ((4096,), []),                        # one axis: nothing left to split among threads
])
def test_the_row_is_the_last_axes_up_to_64_elements_while_64_rows_are_left(grid, rows):
    assert row_axes(list(grid), tuple(range(len(grid)))) == rows


def test_the_row_follows_the_parallel_order():
    assert row_axes([128, 16, 14, 14], (0, 2, 3, 1)) == [3, 1]        # channels fastest: rows of 14 x 16


def test_a_permuted_copy_divides_only_outside_its_row_loop():
    x = np.random.default_rng(0).standard_normal((8, 16, 14, 14)).astype(np.float32)
    t = Tensor(x).permute(0, 2, 3, 1).contiguous()
    inside = _inside_loops(_program(t))
    assert Ops.STORE in [u.op for u in inside] and not [u for u in inside if u.op in (Ops.IDIV, Ops.MOD)]
    np.testing.assert_array_equal(t.numpy(), x.transpose(0, 2, 3, 1))


def test_a_row_that_only_reads_at_half_its_index_keeps_one_column_a_trip():
    # nearest upsampling reads column x // 2 and tests nothing: two columns a trip would only break its vector stores
    x = np.random.default_rng(1).standard_normal((64, 4, 7, 7)).astype(np.float32)
    t = Tensor(x).reshape(64, 4, 7, 1, 7, 1).expand(64, 4, 7, 2, 7, 2).reshape(64, 4, 14, 14) * 3.0
    program = _program(t)
    assert [u.op for u in _inside_loops(program, innermost=True)].count(Ops.STORE) == 1
    assert [u.src[0].arg for u in program if u.op is Ops.RANGE][-1] == 14
    np.testing.assert_array_equal(t.numpy(), x.repeat(2, axis=2).repeat(2, axis=3) * np.float32(3.0))


def test_a_strided_convolutions_input_gradient_steps_its_rows_by_the_stride():
    # the input gradient of a stride-2 convolution reads the output gradient at (x + k) // 2 where (x + k) % 2 == 0
    # (a gate): with two columns a trip the gates fold, and no division is left in the loop; the values stay torch's
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((8, 4, 14, 14)).astype(np.float32), rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    tx, tw = Tensor(x, requires_grad=True), Tensor(w)
    (tx.conv2d(tw, stride=2, padding=1) ** 2).sum().backward()
    program = pipeline.program_for(tx.grad.schedule()[-1].ast, Device["CPU"].renderer)[0]
    inner = [u.op for u in _inside_loops(program, innermost=True)]
    assert inner.count(Ops.STORE) == 2 and Ops.IDIV not in inner and Ops.MOD not in inner
    assert [u.src[0].arg for u in program if u.op is Ops.RANGE][-1] == 7           # 14 columns, 2 a trip
    torch = pytest.importorskip("torch")
    px = torch.tensor(x, requires_grad=True)
    (torch.nn.functional.conv2d(px, torch.tensor(w), stride=2, padding=1) ** 2).sum().backward()
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_a_load_that_stays_inside_its_buffer_is_ungated_and_leaves_the_loop():
    # padding (x + b[c]): b's index is the channel, inside b wherever the pad reads; its load needs no gate and is
    # made once per row, outside the row loop (the WHERE of the padding still gives 0 there)
    rng = np.random.default_rng(3)
    x, b = rng.standard_normal((16, 8, 6, 6)).astype(np.float32), rng.standard_normal((8,)).astype(np.float32)
    t = (Tensor(x) + Tensor(b).reshape(1, 8, 1, 1)).pad((1, 1, 1, 1))
    program = _program(t)
    bias_loads = [u for u in program if u.op is Ops.LOAD and u.src[0].arg == 2]
    assert bias_loads and all(len(u.src) == 2 for u in bias_loads)
    assert not set(bias_loads) & set(_inside_loops(program))
    np.testing.assert_array_equal(t.numpy(), np.pad(x + b.reshape(1, 8, 1, 1), ((0, 0), (0, 0), (1, 1), (1, 1))))


def test_an_index_outside_the_axis_still_reads_zero():
    # a gather's address is taken modulo the axis, so its load stays inside the buffer: the zero comes from a WHERE
    # (the index is lazy: one whose values are known when the op is built is range-checked, and raises)
    x = Tensor(np.arange(10, dtype=np.float32).reshape(1, 10).repeat(80, 0))
    picked = x[:, Tensor(np.array([3, 10, -1, 25], np.int32)).contiguous()]
    np.testing.assert_array_equal(picked.numpy(), np.tile(np.array([3, 0, 9, 0], np.float32), (80, 1)))
