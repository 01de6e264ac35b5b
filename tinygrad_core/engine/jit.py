"""TinyJit: run a function's kernels again without running its Python.

The first call runs normally (and compiles); the second call records every kernel launched (runner + buffers);
later calls replay the recording with the new input buffers swapped in. No graph is built, nothing is scheduled.
Sizes made of Variables are part of the recording unbound: a call with other values replays it with those values."""
from __future__ import annotations
import functools
from dataclasses import dataclass, field
from tinygrad_core.codegen import symbolic as sym
from tinygrad_core.engine import realize
from tinygrad_core.helpers import DEBUG
from tinygrad_core.ops import is_symbolic
from tinygrad_core.schedule import buffer_of


class JitError(RuntimeError):
    pass


def _tensors_in(args, kwargs) -> list:
    from tinygrad_core.tensor import Tensor
    found = []
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, Tensor))
    return found


def _tensors_out(ret) -> list:
    from tinygrad_core.tensor import Tensor
    if isinstance(ret, Tensor):
        return [ret]
    if isinstance(ret, (list, tuple)):
        return [r for r in ret if isinstance(r, Tensor)]
    if isinstance(ret, dict):
        return [r for r in ret.values() if isinstance(r, Tensor)]
    return []


@dataclass
class Capture:
    kernels: list                                   # (runner, bufs, var_vals)
    input_slots: list                               # (kernel index, buffer index, input index)
    ret: object                                     # what the function returned (its tensors now hold buffers)
    random_slots: list = field(default_factory=list)  # (buffer, count): random-number offsets to refresh per call


class TinyJit:
    """@TinyJit on a function whose tensors in and out have fixed shapes (or sizes made of bound Variables). Inputs are
    realized before each call; outputs come back realized (and are overwritten by the next call, as in tinygrad)."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0
        self.captures: dict[tuple, Capture] = {}
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):      # @TinyJit on a method
        return functools.partial(self.__call__, obj) if obj is not None else self

    def reset(self):
        self.calls, self.captures = 0, {}

    def __call__(self, *args, **kwargs):
        from tinygrad_core.tensor import Tensor
        inputs = _tensors_in(args, kwargs)
        for t in inputs:
            if buffer_of(t.uop) is None:
                t.uop = t.contiguous().uop
        if inputs:
            Tensor.realize_all(*inputs)
        # the values of Variables (in the inputs' shapes, or passed bound) are not part of what is recorded
        values: dict[str, int] = {}
        signature = tuple((sym.unbind(t.shape, values), t.dtype, t.device) for t in inputs) + \
            tuple(sym.unbind(v, values) for v in (*args, *kwargs.values()) if is_symbolic(v))
        self.calls += 1
        if (capture := self.captures.get(signature)) is not None:
            return self._replay(capture, inputs, values)
        if self.calls == 1:
            ret = self.fn(*args, **kwargs)
            if outs := _tensors_out(ret):
                Tensor.realize_all(*outs)
            return ret
        return self._capture(signature, inputs, args, kwargs)

    def _capture(self, signature, inputs, args, kwargs):
        from tinygrad_core.tensor import Tensor
        from tinygrad_core.creation import random_offset_buffers
        before = dict(random_offset_buffers)
        realize.capturing = recording = []
        try:
            ret = self.fn(*args, **kwargs)
            if outs := _tensors_out(ret):
                Tensor.realize_all(*outs)
        finally:
            realize.capturing = None
        input_buffers = {buffer_of(t.uop): k for k, t in enumerate(inputs)}
        slots = [(i, j, input_buffers[b]) for i, (_, bufs, _) in enumerate(recording) for j, b in enumerate(bufs)
                 if b in input_buffers]
        randoms = [(b, n) for b, n in random_offset_buffers.items() if b not in before]
        self.captures[signature] = Capture(recording, slots, ret, randoms)
        if DEBUG >= 1:
            print(f"TinyJit captured {len(recording)} kernels of {getattr(self.fn, '__name__', 'fn')}")
        return ret

    def _replay(self, capture: Capture, inputs, values: dict[str, int]):
        from tinygrad_core.tensor import Tensor
        new_buffers = [buffer_of(t.uop) for t in inputs]
        for buf, count in capture.random_slots:
            Tensor._refill_offset(buf, count)
        kernels = capture.kernels
        for i, j, k in capture.input_slots:
            kernels[i][1][j] = new_buffers[k]
        for runner, bufs, var_vals in kernels:
            realize.launch(runner, bufs, {**var_vals, **values} if values else var_vals)
        if values:      # the outputs' symbolic sizes take this call's values
            for t in _tensors_out(capture.ret):
                t.uop = sym.rebind(t.uop, values)
        return capture.ret
