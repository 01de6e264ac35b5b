"""The Python work of an eager op and an eager realize: what each skips when it can't matter (bench/compare.py's matmul
512 times `(a @ b).realize()` with no TinyJit, so this work is paid on every call)."""
import numpy as np
import pytest

from tinygrad_core import Device, Tensor
from tinygrad_core.engine.realize import kept_nodes
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
