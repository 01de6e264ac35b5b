"""TinyJit: run a function's kernels again without running its Python.

The first call runs normally (and compiles); the second call records every kernel launched (runner + buffers);
later calls replay the recording with the new input buffers swapped in. No graph is built, nothing is scheduled, and
a kernel without Variables goes straight to its program (`_launcher`). Sizes made of Variables are part of the
recording unbound: a call with other values replays it with those values."""
import functools
import weakref
from dataclasses import dataclass
from tinygrad_core.buffers import buffer_leaf, buffer_of, buffer_uop, realized
from tinygrad_core.creation import random_offset_buffers
from tinygrad_core.engine import realize
from tinygrad_core.helpers import DEBUG, JIT, GlobalCounters
from tinygrad_core.multi import parts_of, realized_view
from tinygrad_core.ops import Ops, UOp, is_symbolic
from tinygrad_core.sizes import rebind, unbind
from tinygrad_core.tensor import Tensor


class JitError(RuntimeError):
    """TinyJit's error type, under tinygrad's name (programs written for tinygrad import it to catch)."""


def _key(value, inputs: list, values: dict):
    """A hashable stand-in for one argument (a call with another key captures again): tensors are collected into
    inputs, Variables lose their values, other values keep their type and exact value (2 and 2.0, or 0.0 and -0.0,
    compute differently)."""
    if isinstance(value, Tensor):
        inputs.append(value)
        return (Tensor, unbind(value.shape, values)) if isinstance(value.device, tuple) else Tensor
    if is_symbolic(value):
        return unbind(value, values)
    if isinstance(value, (list, tuple, dict)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return type(value), tuple((k, _key(v, inputs, values)) for k, v in items)
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"TinyJit can't tell whether a {type(value).__name__} argument changed between calls; pass "
                       f"it as a Tensor or as a hashable value") from None
    return type(value), repr(value) if isinstance(value, float) else value


def _map_tensors(ret, fn):
    """ret (a tensor, or a list, tuple or dict of them, nested) with fn applied to each tensor in it."""
    if isinstance(ret, Tensor):
        return fn(ret)
    if isinstance(ret, dict):
        return {k: _map_tensors(v, fn) for k, v in ret.items()}
    if not isinstance(ret, (list, tuple)):
        return ret
    items = [_map_tensors(r, fn) for r in ret]
    return ret._make(items) if hasattr(ret, "_make") else type(ret)(items)      # (a namedtuple takes fields)


def _tensors_out(ret) -> list:
    _map_tensors(ret, (found := []).append)
    return found


def _renew(views: list, written: set | None, values: dict, moved: dict = {}):
    """Point each (tensor, the plain view holding its value) that views a buffer in written (None: any buffer) at a
    new version of it, as an ASSIGN does: graphs built on it afterwards are new nodes, never answered by
    buffers.realized with a value from before the write. A buffer in moved is replaced by the leaf given there."""
    # (a sharded tensor's view: one per part, each on a buffer)
    leaves = [leaf for _, view in views for part in parts_of(view) if (leaf := buffer_leaf(part)) is not None]
    # one past the newest version any of them holds (in version order, so the newest is written last)
    latest = {leaf.arg[0]: leaf.arg[1] + 1 for leaf in sorted(leaves, key=lambda leaf: leaf.arg[1])
              if written is None or leaf.arg[0] in written}
    new = moved | {buf: buffer_uop(buf, version) for buf, version in latest.items()}     # (one node per buffer)

    def renewed(view: UOp) -> UOp:
        if (leaf := buffer_leaf(view)) is None or (fresh := new.get(leaf.arg[0])) is None:
            return view
        return fresh if view is leaf else fresh.reshape(rebind(view.arg, values) if values else view.arg)
    for t, view in views:
        if (parts := tuple(map(renewed, parts_of(view)))) != parts_of(view):
            t.uop = view.replace(src=parts) if view.op is Ops.MULTI else parts[0]


def _views(tensors) -> list:
    return [(t, realized.get(t.uop, t.uop)) for t in tensors]


def _launcher(runner, bufs: list, var_vals: dict, args: list[int]):
    """What a replay calls, with the memory of Capture.buffers and the call's Variable values, to run one recorded
    kernel on bufs (the recording's list, whose input slots each call fills; args: their places in Capture.buffers):
    a kernel without Variables goes to its program with its sizes worked out once (what realize.launch counts is
    counted per replay), anything else through realize.launch."""
    if not isinstance(runner, realize.CompiledRunner) or var_vals:
        return lambda memory, values: realize.launch(runner, bufs, {**var_vals, **values} if values else var_vals)
    program, sizes = runner.program, {"global_size": runner.global_size, "local_size": runner.local_size}
    return lambda memory, values: program(*[memory[i] for i in args], **sizes)


def _buffers_read(tensors) -> set:
    """The buffers the tensors' graphs (or their values) read."""
    nodes = realize.reachable(t.uop for t in tensors)
    return {r.base.arg[0] for u in nodes if (r := realized.get(u, u)).base.op is Ops.BUFFER}


def _unrealized(tensors) -> list:
    """The tensors without a buffer that can get one (not empty, no symbolic size)."""
    return [t for t in tensors if buffer_of(t.uop) is None and t.numel() != 0 and not any(map(is_symbolic, t.shape))]


def drop_unseen(recording: list, inputs: list, ret) -> list:
    """The recording without the kernels whose results no one can read after a replay. backward() fills .grad for
    every float tensor of the graph, the batch passed in too, and computes it before the step overwrites the weights
    it reads; a replay's inputs are other tensors, which get no .grad. So the kernels only the capture's input
    gradients read (an MLP's x.grad: a third of its step's matmul work) would compute what no one sees."""
    grads = {id(t.grad) for t in inputs if t.grad is not None} - {id(t) for t in _tensors_out(ret)}
    needed = _buffers_read(t for t in list(Tensor._live.values()) if id(t) not in grads)
    kept = []
    for kernel in reversed(recording):      # (a kernel that is kept needs what it reads)
        if kernel[1][0] in needed or not isinstance(kernel[0], realize.CompiledRunner):
            kept.append(kernel)
            needed.update(kernel[1])
    return kept[::-1]


def plan_memory(recording: list, inputs: set):
    """Buffers only the recording's compiled kernels use (written before they are read, no live tensor's graph
    reaching them; a copy or a host-side runner reads a buffer whole, at its own size) share memory: each takes the
    memory of earlier ones whose last kernel ran before its first (the smallest that is large enough, else the
    largest, which then grows), as tinygrad's memory planner does. Returns the shared buffers, their memory given
    back: their values are dead between replays."""
    live = _buffers_read(list(Tensor._live.values())) | inputs | \
        {buf for runner, bufs, _ in recording if not isinstance(runner, realize.CompiledRunner) for buf in bufs}
    first, last = {}, {}
    for i, (_, bufs, _) in enumerate(recording):
        for j, buf in enumerate(bufs):
            first.setdefault(buf, (i, j))
            last[buf] = i
    slots: list[list] = []      # [last kernel, nbytes, buffers]
    # (a kernel that writes a buffer first may also read it: x.assign(x + 1) reads the value from before the replay)
    for buf in sorted((b for b, (i, j) in first.items() if j == 0 and b not in live and b not in recording[i][1][1:]),
                      key=first.__getitem__):
        free = [s for s in slots if s[0] < first[buf][0] and s[2][0].device == buf.device]
        fits = [s for s in free if s[1] >= buf.nbytes]
        slot = min(fits, key=lambda s: s[1]) if fits else max(free, key=lambda s: s[1], default=None)
        if slot is None:
            slots.append(slot := [0, 0, []])
        slot[0], slot[1] = last[buf], max(slot[1], buf.nbytes)
        slot[2].append(buf)
    shared = {b: max(bufs, key=lambda b: b.nbytes) for _, _, bufs in slots for b in bufs}
    for _, bufs, _ in recording:
        bufs[:] = [shared.get(b, b) for b in bufs]
    return [buf.deallocate() or buf for buf in dict.fromkeys(shared.values())]


@dataclass
class Capture:
    kernels: list               # (runner, bufs, var_vals)
    input_slots: list           # (kernel index, buffer index, input index)
    ret: object                 # what the function returned (its tensors now hold buffers)
    random_slots: list          # (buffer, count): random-number offsets to refresh per call
    input_buffers: dict         # the capture's input buffers -> their input index
    outputs: list               # (returned tensor, the view it held after the capture)
    returned_inputs: dict       # id of a returned tensor that was an input -> that input's index
    written: set                # buffers the kernels write, other than the inputs
    viewers: weakref.WeakSet    # the tensors on those buffers (weights, optimizer state, gradients, outputs)
    planned: list               # buffers only the kernels use (plan_memory), given back after each replay
    # (every buffer the kernels use, once, the ones they write first; how many they write; (place, input index))
    buffers: tuple
    launches: list              # per kernel, what runs it (_launcher)
    counts: list                # what the kernels run straight add to GlobalCounters' kernel_count, ops, mem


class TinyJit:
    """@TinyJit on a function whose tensors in and out have fixed shapes (or sizes made of bound Variables). Inputs are
    realized before each call; outputs come back realized (and are overwritten by the next call, as in tinygrad).
    Other arguments (numbers, strings, lists of them) are part of what is recorded: another value captures again."""

    def __init__(self, fn):
        self.fn = fn
        self.reset()
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):      # @TinyJit on a method
        return functools.partial(self.__call__, obj) if obj is not None else self

    def reset(self):
        self.calls, self.captures = 0, {}       # captures: signature -> Capture

    def __call__(self, *args, **kwargs):
        if not JIT:                       # JIT=0: run the function as written, every call
            return self.fn(*args, **kwargs)
        inputs, values = [], {}         # values: of the Variables in the inputs' shapes, or passed bound
        structure = (_key(args, inputs, values), _key(kwargs, inputs, values))
        Tensor.realize_all(*[t.replace(t.contiguous()) for t in inputs if buffer_of(t.uop) is None])
        # (a sharded input: each part is one, as a one-device tensor)
        inputs = [t if part is t.uop else type(t)(part) for t in inputs for part in parts_of(t.uop)]
        buffers = [buffer_of(t.uop) for t in inputs]
        # an input passed twice is one kernel argument in the recording: a call with two distinct ones captures anew
        signature = structure + tuple((unbind(t.shape, values), t.dtype, t.device, buffers.index(b))
                                      for t, b in zip(inputs, buffers))
        self.calls += 1
        if (capture := self.captures.get(signature)) is not None:
            return self._replay(capture, inputs, buffers, values)
        if self.calls == 1:
            ret = self.fn(*args, **kwargs)
            Tensor.realize_all(*_tensors_out(ret))
            return ret
        return self._capture(signature, inputs, args, kwargs)

    def _capture(self, signature, inputs, args, kwargs):
        # lazy tensors that exist before the call (a layer's weights that nothing has realized yet) get buffers
        # now: computed inside the recorded kernels instead, they would keep their first value however they change
        Tensor.realize_all(*_unrealized(list(Tensor._live.values())))
        before = dict(random_offset_buffers)
        # new versions of every buffer a tensor holds (inputs, weights): what an earlier call computed from them must
        # be computed, and so recorded, again, not found in buffers.realized (a replay after the weights change would
        # read it). Tensors keeping a graph for backward() keep it
        existing = list(Tensor._live.values())
        _renew([(t, t.uop) for t in existing], None, {})
        with realize.recorder as recording:
            ret = self.fn(*args, **kwargs)
            # a tensor the call changed and left lazy (w.assign(...) not realized) is changed by every replay too
            Tensor.realize_all(*_tensors_out(ret), *_unrealized(existing))
        for t in _tensors_out(ret):     # (a replay's outputs have no graph either: the activations under it can go)
            t.uop = realized_view(t.uop) or t.uop
        recording[:] = drop_unseen(recording, inputs, ret)
        input_buffers = {buffer_of(t.uop): k for k, t in enumerate(inputs)}
        planned = plan_memory(recording, set(input_buffers))
        slots = [(i, j, input_buffers[b]) for i, (_, bufs, _) in enumerate(recording) for j, b in enumerate(bufs)
                 if b in input_buffers]
        randoms = [(b, n) for b, n in random_offset_buffers.items() if b not in before]
        returned_inputs = {id(t): k for t in _tensors_out(ret) for k, x in enumerate(inputs) if t is x}
        outputs = _views(t for t in _tensors_out(ret) if id(t) not in returned_inputs)
        written = {bufs[0] for _, bufs, _ in recording} - set(input_buffers)
        # found once here, not among all live tensors per replay: a replay then costs what its state costs
        viewers = weakref.WeakSet(t for t, view in _views(list(Tensor._live.values())) if any(
            (leaf := buffer_leaf(p)) is not None and leaf.arg[0] in written for p in parts_of(view)))
        # (the kernels _launcher runs straight: realize.launch counts the others itself)
        straight = [r for r, _, var_vals in recording if isinstance(r, realize.CompiledRunner) and not var_vals]
        counts = [len(straight), sum(r.flops for r in straight), sum(r.mem_estimate for r in straight)]
        writes = list(dict.fromkeys(bufs[0] for _, bufs, _ in recording))
        place = {b: i for i, b in enumerate(dict.fromkeys(writes + [b for _, bufs, _ in recording for b in bufs]))}
        self.captures[signature] = Capture(
            recording, slots, ret, randoms, input_buffers, outputs, returned_inputs, written, viewers, planned,
            (list(place), len(writes), [(place[b], k) for b, k in input_buffers.items() if b in place]),
            [_launcher(*k, [place[b] for b in k[1]]) for k in recording], counts)
        if DEBUG >= 1:
            print(f"TinyJit captured {len(recording)} kernels of {getattr(self.fn, '__name__', 'fn')}")
        return ret

    def _replay(self, capture: Capture, inputs, given: list, values: dict[str, int]):
        # an input the kernels write (an output fed back in) would be overwritten while it is read: use a copy
        new_buffers = [buffer_of(t.clone().realize().uop) if b in capture.written else b for t, b in zip(inputs, given)]
        for buf, count in capture.random_slots:
            Tensor._refill_offset(buf, count)
        for i, j, k in capture.input_slots:
            capture.kernels[i][1][j] = new_buffers[k]
        buffers, n, places = capture.buffers
        for i, k in places:
            buffers[i] = new_buffers[k]
        # the memory of every buffer, taken once: a planned buffer gets its memory back, and one the kernels write
        # while it shares an array's gets memory of its own (before any kernel runs, so all read that one)
        memory = [b.prepare_write().opaque for b in buffers[:n]] + [b.opaque for b in buffers[n:]]
        for launch in capture.launches:
            launch(memory, values)
        for name, count in zip(("kernel_count", "global_ops", "global_mem"), capture.counts):
            setattr(GlobalCounters, name, getattr(GlobalCounters, name) + count)
        for buf in capture.planned:     # (another TinyJit, an eval after a training step, can use the memory)
            buf.deallocate()
        # every tensor on a buffer just written (outputs, weights an optimizer updated, an input written in place)
        # shows as a freshly computed one
        _renew(_views([*capture.viewers, *inputs]) + capture.outputs, set(buffers[:n]), values)
        moved = {b: buffer_leaf(realized.get(inputs[k].uop, inputs[k].uop)) for b, k in capture.input_buffers.items()}
        _renew(capture.outputs, set(), values, moved)       # outputs that are views of an input follow the new one
        return _map_tensors(capture.ret, lambda t: inputs[capture.returned_inputs[id(t)]]
                            if id(t) in capture.returned_inputs else t)
