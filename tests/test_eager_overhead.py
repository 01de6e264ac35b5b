"""The Python work of an eager op and an eager realize: what each skips when it can't matter (bench/compare.py's matmul
512 times `(a @ b).realize()` with no TinyJit, so this work is paid on every call)."""
import math

import numpy as np
import pytest

from tinygrad_core import Device, Tensor
from tinygrad_core.engine.realize import kept_nodes
from tinygrad_core import schedule as schedule_module
from tinygrad_core.schedule import create_schedule


def test_an_op_on_tensors_does_not_ask_for_the_default_device(monkeypatch):
    a, b = Tensor([[1.0, 2.0], [3.0, 4.0]]).realize(), Tensor([[5.0, 6.0], [7.0, 8.0]]).realize()

    def asked(self):
        raise AssertionError("Device.DEFAULT was asked")
    monkeypatch.setattr(type(Device), "DEFAULT", property(asked))
    out = ((a @ b) * 2 + a).sum(0)          # (the results' devices come from their operands)
    monkeypatch.undo()
    np.testing.assert_allclose(out.numpy(), ((a.numpy() @ b.numpy()) * 2 + a.numpy()).sum(0))


def test_the_live_tensors_are_listed_only_when_a_buffer_may_be_freed():
    a = Tensor.rand(4, 4).realize()

    def never():
        raise AssertionError("the live tensors were listed")
    single = (a + 1).uop                     # one kernel, the output's: nothing it makes can be freed
    assert kept_nodes(create_schedule([single]), [single], [], never) == {single}
    # a reduce broadcast into the output is a kernel of its own: its buffer is freed unless a live tensor reads it
    two = (a - a.max(1, keepdim=True)).uop
    schedule = create_schedule([two])
    assert len(schedule) == 2
    with pytest.raises(AssertionError, match="listed"):
        kept_nodes(schedule, [two], [], never)
    assert two in kept_nodes(schedule, [two], [], list)


def _planned_again(monkeypatch) -> list:
    """Counts the schedules planned from scratch (not replayed from a recipe) from here on."""
    planned, find_roots = [], schedule_module._find_roots
    monkeypatch.setattr(schedule_module, "_find_roots", lambda *a: planned.append(1) or find_roots(*a))
    return planned


def test_a_graph_built_again_over_other_buffers_replays_its_plan(monkeypatch):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((8, 16), dtype=np.float32) for _ in range(6)]
    planned = _planned_again(monkeypatch)
    for x, w, b in (arrays[:3], arrays[3:]):      # two kernels: the max broadcast back is one of its own
        t = (Tensor(x) @ Tensor(w).T + Tensor(b)[:, :8])
        out = (t - t.max(1, keepdim=True)).exp()
        np.testing.assert_allclose(out.numpy(), np.exp((x @ w.T + b[:, :8]) - (x @ w.T + b[:, :8]).max(1, keepdims=True)),
                                   rtol=1e-5)
    assert len(planned) == 1


def test_graphs_alike_but_for_which_buffers_they_share_are_planned_apart(monkeypatch):
    x, y = Tensor([1.0, 2.0, 3.0]).realize(), Tensor([4.0, 5.0, 6.0]).realize()
    planned = _planned_again(monkeypatch)
    np.testing.assert_equal((x * y).numpy(), [4.0, 10.0, 18.0])
    np.testing.assert_equal((x * x).numpy(), [1.0, 4.0, 9.0])      # one buffer read twice: not x * y's plan
    np.testing.assert_equal((y * x).numpy(), [4.0, 10.0, 18.0])    # x * y's, over the buffers in the other order
    z = x + 0                                                       # computed by now: a buffer, not a graph
    z.realize()
    np.testing.assert_equal((z * y).numpy(), [4.0, 10.0, 18.0])
    assert len(planned) == 3


def test_constants_equal_in_python_but_not_in_value_are_planned_apart(monkeypatch):
    x = Tensor([1.0, -2.0]).realize()
    assert np.signbit((x * 0.0).numpy()).tolist() == [False, True]
    assert np.signbit((x * -0.0).numpy()).tolist() == [True, False]
    planned = _planned_again(monkeypatch)       # NaN != NaN, but a graph adding NaN is one structure: replayed
    assert np.isnan((x + math.nan).numpy()).all() and np.isnan((x + math.nan).numpy()).all()
    assert len(planned) == 1


def test_writes_are_not_replayed():
    w = Tensor([1.0, 2.0]).realize()
    before = dict(schedule_module.recipes)
    for _ in range(3):
        w.assign(w * 2).realize()
    np.testing.assert_equal(w.numpy(), [8.0, 16.0])
    assert not set(schedule_module.recipes) - set(before)


def test_a_matmul_whose_operand_is_packed_replays_the_packing(monkeypatch):
    rng = np.random.default_rng(1)
    planned = _planned_again(monkeypatch)
    for _ in range(2):          # rows of w 4 KiB apart: a kernel packs w into panels first (schedule._pack_panels)
        x, w = rng.standard_normal((4, 8), dtype=np.float32), rng.standard_normal((8, 1024), dtype=np.float32)
        items = (Tensor(x) @ Tensor(w)).schedule()
        out = (Tensor(x) @ Tensor(w))
        np.testing.assert_allclose(out.numpy(), x @ w, rtol=1e-5, atol=1e-5)
    assert len(planned) == 1 and len(items) == (2 if Device[Device.DEFAULT].renderer.simd_width else 1)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_the_fuzzers_graphs_replayed_from_their_recipes_give_the_same_values(device, monkeypatch):
    """Each graph built twice: the second time over new buffers, from the recipe the first planned (a replay that
    read a buffer in another's place, or ran a kernel of another graph, would change a value)."""
    fuzz = pytest.importorskip("tinygrad_core.conformance.fuzz")
    pytest.importorskip("torch")
    replays, replay = [], schedule_module._replay
    monkeypatch.setattr(schedule_module, "_replay", lambda *a: replays.append(1) or replay(*a))
    seeds, replayed = range(3000, 3000 + (40 if device == "CPU" else 10)), 0
    for seed in seeds:
        nodes = fuzz.generate(seed)
        first, count = fuzz.run(nodes, "tiny", device=device), len(replays)
        second = fuzz.run(nodes, "tiny", device=device)
        replayed += len(replays) > count      # (a graph with a write or a transfer is planned again)
        for a, b in zip(first, second):
            np.testing.assert_array_equal(a, b, err_msg=f"seed {seed}")
    assert replayed >= len(seeds) * 3 // 4
