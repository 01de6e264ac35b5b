"""cstyle.neighbour_groups: which loads and stores of a linear program one vector access may replace."""
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.dtype import dtypes
from tinygrad_core.ops import Ops, UOp
from tinygrad_core.renderer.cstyle import neighbour_groups

THREAD = UOp(Ops.SPECIAL, sym.INDEX, (), ("gidx0", 16))


def buffer(position: int) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), position)


def load(buf: UOp, index: UOp) -> UOp:
    return UOp(Ops.LOAD, dtypes.float32, (buf, index))


def store(buf: UOp, index: UOp, value: UOp) -> UOp:
    return UOp(Ops.STORE, dtypes.void, (buf, index, value))


def lanes(base: UOp, offsets) -> list[UOp]:
    return [sym.add(base, k) for k in offsets]


def test_four_neighbours_at_an_aligned_base_are_one_group_in_lane_order():
    src, out = buffer(1), buffer(0)
    base = sym.mul(THREAD, 4)
    loads = [load(src, i) for i in lanes(base, range(4))]
    stores = [store(out, i, v) for i, v in zip(lanes(base, range(4)), loads)]
    groups = neighbour_groups([out, src, THREAD, *loads, *stores], (4, 2))
    assert groups[loads[2]] == tuple(loads) and groups[stores[0]] == tuple(stores)


def test_a_base_that_may_be_unaligned_makes_no_group():
    src = buffer(1)
    loads = [load(src, i) for i in lanes(sym.mul(THREAD, 2), range(4))]     # 2*gidx0 is not a multiple of 4
    groups = neighbour_groups([src, THREAD, *loads], (4, 2))
    assert groups[loads[0]] == tuple(loads[:2]) and groups[loads[2]] == tuple(loads[2:])
    shifted = [load(src, i) for i in lanes(sym.mul(THREAD, 4), range(1, 5))]
    assert set(neighbour_groups([src, THREAD, *shifted], (4,))) == set()


def test_a_store_to_the_buffer_between_the_loads_keeps_them_apart():
    buf = buffer(0)
    base = sym.mul(THREAD, 2)
    first, second = (load(buf, i) for i in lanes(base, range(2)))
    # second must see what this store wrote: reading both up front would not
    write = store(buf, sym.add(base, 1), first)
    assert neighbour_groups([buf, THREAD, first, write, second], (2,)) == {}


def test_loads_whose_lane_zero_comes_later_stay_scalar():
    src = buffer(1)
    loads = [load(src, i) for i in lanes(sym.mul(THREAD, 2), range(2))]
    assert neighbour_groups([src, THREAD, loads[1], loads[0]], (2,)) == {}
