"""Multi-device tensors (`Tensor.shard`): one value spread over several devices, each holding its part of it.

The scheduler and the kernels stay single-device; this file is the layer above them. A sharded tensor's graph is built
like any other, on nodes whose device is a tuple of devices, and just before scheduling (`lowered`) it is rewritten into
one graph per device, each on that device's part: elementwise ops per part, movement ops with the shard axis mapped
through them, a reduce over the shard axis as a reduce per part then an all-reduce (copies between the devices and
their combination, in one order on every device, so that replicated values are bit-identical), and a copy to one device
as a gather. A MULTI node holds the parts (src, one per device, all of one shape) and the whole shape (arg): its shard
axis is where a part is smaller than the whole, and none when every part is the whole (replicated)."""
import functools
import weakref
from tinygrad_core.device import Device
from tinygrad_core.dtype import dtypes
from tinygrad_core.gradient import GRADIENTS
from tinygrad_core.helpers import prod
from tinygrad_core.ops import Ops, UOp, GroupOp, Unique, is_symbolic
from tinygrad_core.buffers import buffer_of, realized

# whether a multi-device value was ever made: until then realizing skips the rewrite, so that a program on one device
# pays nothing for this file (walking every graph would cost it up to a third of the scheduler's time)
_active = False


def multi(parts: list[UOp], shape: tuple, devices: tuple) -> UOp:
    """The value whose part on each device is parts[i] (one per device, all of one shape), of the whole shape."""
    global _active
    _active = True
    m = UOp(Ops.MULTI, parts[0].dtype, tuple(parts), tuple(shape))
    _devices[m] = tuple(devices)
    return m


# each MULTI node's devices, noted where it is made: a part's own .device walks down its whole graph
_devices: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def devices_of(m: UOp) -> tuple:
    if (found := _devices.get(m)) is None:
        _devices[m] = found = tuple(p.device for p in m.src)
    return found


def axis_of(m: UOp) -> int | None:
    """The axis a MULTI node is sharded on, None when replicated."""
    return next((i for i, (part, whole) in enumerate(zip(m.src[0].shape, m.arg)) if part != whole), None)


def _bounds(shape: tuple, axis: int, count: int, i: int) -> tuple:
    """SHRINK bounds of part i of count equal parts along axis."""
    size = shape[axis] // count
    return tuple((i * size, (i + 1) * size) if d == axis else (0, s) for d, s in enumerate(shape))


def _part(m: UOp, i: int, axis: int | None) -> UOp:
    """What device i holds of m for an op sharded on axis: m's own part, or (m replicated) its share of the whole,
    which needs no data from another device."""
    return m.src[i] if axis_of(m) == axis else m.src[i].shrink(_bounds(m.arg, axis, len(m.src), i))


def _is_multi(u: UOp) -> bool:
    return u.op is Ops.MULTI or (u.op is Ops.DEVICE and isinstance(u.arg, tuple))


def _same_devices(ms: list[UOp]) -> tuple:
    devices = {devices_of(m) for m in ms}
    if len(devices) > 1:
        raise ValueError(f"tensors are on different sets of devices ({' and '.join(map(str, devices))}); move one "
                         f"with .to() or shard both over the same devices")
    return devices.pop()


# ---- the rewrite: each rule gets the logical node and its sources already rewritten ----
def _elementwise(u: UOp, srcs: tuple) -> UOp:
    devices = _same_devices(list(srcs))
    axes = {axis_of(m) for m in srcs} - {None}
    if len(axes) > 1:
        raise RuntimeError(f"{u.op.name} of tensors sharded on different axes {sorted(axes)}: reshard one of them "
                           f"first (.to(device).shard(devices, axis))")
    axis = next(iter(axes), None)
    if u.op is Ops.ASSIGN and axis_of(srcs[0]) is None and axis is not None:
        # a replicated tensor takes a sharded value whole on every device (an all-gather: a model-parallel layer's
        # replicated weights get gradients sharded like its activations)
        srcs, axis = (srcs[0], multi([_gathered(srcs[1], d) for d in devices], u.shape, devices)), None
    return multi([u.replace(src=tuple(_part(m, i, axis) for m in srcs)) for i in range(len(devices))], u.shape,
                 devices)


def _reduce(u: UOp, srcs: tuple) -> UOp:
    (m,), (op, axes) = srcs, u.arg
    parts = [u.replace(src=(p,)) for p in m.src]
    if axis_of(m) not in axes:
        return multi(parts, u.shape, devices_of(m))
    # all-reduce: every device combines all parts in the same order (its own one read in place, the others copied)
    devices, combined = devices_of(m), []
    for i, device in enumerate(devices):
        terms = [r if j == i else UOp(Ops.COPY, r.dtype, (r,), device) for j, r in enumerate(parts)]
        combined.append(functools.reduce(lambda total, term: total.alu(op, term), terms))
    return multi(combined, u.shape, devices)


def _movement(u: UOp, srcs: tuple) -> UOp:
    (m,), axis, count = srcs, axis_of(srcs[0]), len(srcs[0].src)
    if axis is None:
        return multi([u.replace(src=(p,)) for p in m.src], u.shape, devices_of(m))
    if any(map(is_symbolic, m.arg + u.shape)):
        raise NotImplementedError(f"{u.op.name} with symbolic sizes on a sharded tensor isn't supported")
    part_size = m.src[0].shape[axis]
    if u.op is Ops.RESHAPE:
        # the shard axis goes to an axis with the same elements before it and a size that splits evenly, so that each
        # device's part stays one block (else the reshape would move elements between devices)
        new_axis = next((b for b, size in enumerate(u.arg)
                         if prod(u.arg[:b]) == prod(m.arg[:axis]) and size % count == 0 and size), None)
        if new_axis is None:
            raise RuntimeError(f"reshape {m.arg} -> {u.arg} would move elements between devices (the tensor is sharded "
                               f"on axis {axis} over {count}); gather it first (.to(device)) or shard on another axis")
        arg = tuple(s // count if d == new_axis else s for d, s in enumerate(u.arg))
    elif u.op is Ops.EXPAND:
        arg = tuple(part_size if d == axis else s for d, s in enumerate(u.arg))
    elif u.op in (Ops.PAD, Ops.SHRINK) and u.arg[axis] != ((0, 0) if u.op is Ops.PAD else (0, m.arg[axis])):
        raise RuntimeError(f"{u.op.name.lower()} {u.arg} cuts into the shard axis {axis} of {m.arg} (sharded over "
                           f"{count} devices); gather the tensor first (.to(device))")
    elif u.op is Ops.FLIP and axis in u.arg:
        raise RuntimeError(f"flip of the shard axis {axis} would move elements between devices; gather the tensor "
                           f"first (.to(device))")
    else:
        arg = tuple((0, part_size) if d == axis else b for d, b in enumerate(u.arg)) if u.op is Ops.SHRINK else u.arg
    return multi([u.replace(src=(p,), arg=arg) for p in m.src], u.shape, devices_of(m))


def _copy(u: UOp, srcs: tuple) -> UOp:
    (x,), target = srcs, u.arg
    if isinstance(target, tuple):
        if x.op is not Ops.MULTI:                     # one device to several: a copy on each
            return multi([UOp(Ops.COPY, x.dtype, (x,), d) for d in target], u.shape, target)
        if devices_of(x) != target:
            raise RuntimeError(f"can't move a tensor on {devices_of(x)} to {target}: gather it first "
                               f"(.to(device)), then shard it")
        return x
    return _gathered(x, target)


def _gathered(x: UOp, device: str) -> UOp:
    """The whole of MULTI x on device: each part copied there and placed in its block (selected, not added: exact for
    -0.0)."""
    if (axis := axis_of(x)) is None:
        return UOp(Ops.COPY, x.dtype, (x.src[0],), device)
    out = None
    for i, p in enumerate(x.src):
        padding = tuple((b, s - e) for (b, e), s in zip(_bounds(x.arg, axis, len(x.src), i), x.arg))
        piece = UOp(Ops.COPY, x.dtype, (p,), device).pad(padding)
        region = UOp.const(dtypes.bool, True, device).broadcast_to(p.shape).pad(padding)
        out = piece if out is None else region.where(piece, out)
    return out


def _gather(u: UOp, srcs: tuple) -> UOp:
    x, index = srcs
    if axis_of(x) is not None:
        raise RuntimeError(f"indexing into a tensor sharded on axis {axis_of(x)} isn't supported: gather it first")
    devices = _same_devices([x, index])     # (a sharded index gives each device the rows of its part)
    return multi([u.replace(src=(whole, part)) for whole, part in zip(x.src, index.src)], u.shape, devices)


def _rewrite(u: UOp, srcs: tuple) -> UOp:
    if u.op is Ops.CONST and _is_multi(srcs[0]):
        return multi([u.replace(src=(UOp(Ops.DEVICE, dtypes.void, (), d),)) for d in srcs[0].arg], (), srcs[0].arg)
    if u.op is Ops.COPY and (isinstance(u.arg, tuple) or _is_multi(srcs[0])):
        return _copy(u, srcs)
    if u.op is Ops.DEVICE or not any(map(_is_multi, srcs)):
        return u if srcs == u.src else u.replace(src=srcs)
    if not all(map(_is_multi, srcs)):
        raise RuntimeError(f"{u.op.name} mixes one-device and multi-device values; move them to one set of devices")
    rule = RULES.get(u.op) or (_elementwise if u.op in GroupOp.ELEMENTWISE else _movement if u.op in GroupOp.MOVEMENT
                               else None)
    if rule is None:
        raise NotImplementedError(f"{u.op.name} on a multi-device tensor isn't supported")
    return rule(u, srcs)


# (a custom op's value is its forward graph: its backward is already built)
RULES = {Ops.REDUCE_AXIS: _reduce, Ops.GATHER: _gather, Ops.CONTIGUOUS: _elementwise,
         Ops.DETACH: _elementwise, Ops.ASSIGN: _elementwise, Ops.CUSTOM: lambda u, srcs: srcs[0]}

# each node's rewrite, kept while the node lives (nodes the rewrite leaves as they are: in _unchanged, which holds no
# reference to them), so that a graph is rewritten once however often it is realized and built on
_lowered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_unchanged: weakref.WeakSet = weakref.WeakSet()


def lower(root: UOp) -> UOp:
    """root rewritten for one device each: a MULTI node of per-device graphs, or (a one-device root) a one-device
    graph."""
    stack = [(root, False)]
    while stack:
        u, ready = stack.pop()
        if u in _unchanged or u in _lowered:
            continue
        if not ready:
            stack.append((u, True))
            stack.extend((s, False) for s in u.src if s not in _unchanged and s not in _lowered)
            continue
        out = _rewrite(u, tuple(_lowered.get(s, s) for s in u.src))
        if out is u:
            _unchanged.add(u)
        else:
            _lowered[u] = out
    return _lowered.get(root, root)


def lowered(outs: list[UOp]) -> list[UOp]:
    """The one-device nodes to schedule for outs: each part of a multi-device value, a one-device one itself."""
    global _active
    # (x.to(devices) and Tensor(1.0, device=devices) make none: they are roots on several devices, or gathered)
    _active = _active or any(isinstance(s.device, tuple) for u in outs for s in (u, *u.src))
    return [p for u in outs for p in parts_of(lower(u))] if _active else outs


def realized_view(u: UOp) -> UOp | None:
    """The buffer view(s) holding u's value once it has been computed (a MULTI of one per device), else None. A node
    that was rewritten is noted in buffers.realized too (a tensor keeping its graph finds its value there)."""
    if not _active or ((m := lower(u)) is u and u.op is not Ops.MULTI):
        return realized.get(u)
    views = [realized.get(p, p) for p in parts_of(m)]
    if any(buffer_of(v) is None for v in views):
        return None
    view = multi(views, m.arg, devices_of(m)) if m.op is Ops.MULTI else views[0]
    if view is not u:
        realized[u] = view
    return view


def replicated(make, device):
    """make(device), or for a tuple of devices, one made on each (Tensor(data, device=devices))."""
    if isinstance(device, str):
        return make(device)
    parts = [make(d) for d in device]
    return multi(parts, parts[0].shape, device)


def parts_like(t, make):
    """A tensor sharded as t is, each part make(its shape, its device) on that device. Replicated, one is made and
    copied: the copies of a replicated value must be equal (a random draw on each device wouldn't be)."""
    mine = lower(t.uop)
    if axis_of(mine) is None:
        return make(t.shape, t.device[0]).to(t.device)
    return type(t)(multi([make(p.shape, d).uop for p, d in zip(parts_of(mine), devices_of(mine))], t.shape, t.device))


def parts_of(u: UOp) -> tuple:
    """The per-device parts of a MULTI node, (u,) for anything else."""
    return u.src if u.op is Ops.MULTI else (u,)


# ---- what Tensor.assign does for a multi-device target ----
def assign_multi(t, x):
    """Write x into t's buffers in place, each device its part (t is multi-device, x of its shape)."""
    if isinstance(x.device, tuple) and x.device != t.device:
        raise RuntimeError(f"assign device mismatch: the tensor is on {t.device}, the value on {x.device}")
    x = x.cast(t.dtype).to(t.device)
    target_axis, value_axis = axis_of(lower(t.uop)), axis_of(lower(x.uop))
    if target_axis is not None and value_axis not in (None, target_axis):
        raise RuntimeError(f"assign: the tensor is sharded on axis {target_axis}, the value on axis {value_axis}; "
                           f"shard them the same way (shard_like)")
    targets = {buffer_of(p) for p in parts_of(t.uop)}
    if None in targets or any(o is not t and targets & {buffer_of(p) for p in parts_of(o.uop)}
                              for o in list(type(t)._live.values())):
        # a buffer of its own on each device first (also where another tensor shares one: writing it would change
        # that tensor too)
        t.uop = UOp(Ops.CONTIGUOUS, t.dtype, (t.uop,), Unique())
        targets = {buffer_of(p) for p in t.realize().uop.src}
    # what was computed into these buffers isn't there any more: built again, it must be computed again
    for node, view in list(realized.items()):
        if node.op is not Ops.ASSIGN and any(p.base.op is Ops.BUFFER and p.base.arg[0] in targets
                                             for p in parts_of(view)):
            del realized[node]
    t.uop = UOp(Ops.ASSIGN, t.dtype, (t.uop, x.uop))
    return t


def _part_gradients(g: UOp, out: UOp, *parts: UOp) -> tuple:
    """The gradient of each part of a sharded value: its block of g, there (g gathered to its device, then cut). The
    parts of a replicated value are one value: the gradient goes to the first."""
    axis, count = axis_of(out), len(parts)
    whole = [UOp(Ops.COPY, g.dtype, (g,), d) for d in devices_of(out)]
    if axis is None:
        return (whole[0],) + (None,) * (count - 1)
    return tuple(w.shrink(_bounds(out.arg, axis, count, i)) for i, w in enumerate(whole))


GRADIENTS[Ops.MULTI] = _part_gradients


class MultiOps:
    """tinygrad's multi-device Tensor methods, mixed into Tensor."""
    parts_like = parts_like

    def shard(self, devices, axis: int | None = None):
        """This tensor spread over devices: split into equal parts along axis, one per device, or (axis None) a copy
        on each."""
        if isinstance(self.device, tuple):
            raise RuntimeError(f"can't shard a tensor that is already on several devices ({self.device}); shard a "
                               f"one-device tensor (.to(device) gathers one)")
        if not isinstance(devices, (tuple, list)) or not devices:
            raise TypeError(f"shard needs a tuple of device names, got {devices!r}")
        devices = tuple(Device.canonicalize(d) for d in devices)
        if len(devices) == 1:
            return self.to(devices[0])
        if axis is not None:
            if self.ndim == 0:
                raise IndexError("a 0-d tensor has no axis to shard; shard it with axis=None (a copy on each device)")
            axis = self._axis(axis)
            if is_symbolic(self.shape[axis]) or self.shape[axis] % len(devices):
                raise RuntimeError(f"can't shard axis {axis} of shape {self.shape} evenly over {len(devices)} devices "
                                   f"(tinygrad needs equal parts too)")
        parts = [self.uop if axis is None else self.uop.shrink(_bounds(self.shape, axis, len(devices), i))
                 for i in range(len(devices))]
        return type(self)(multi([UOp(Ops.COPY, self.dtype, (p,), d) for p, d in zip(parts, devices)], self.shape,
                                devices))

    def shard_(self, devices, axis: int | None = None):
        """shard() in place: this tensor becomes the sharded one."""
        return self.replace(self.shard(devices, axis))

    def shard_like(self, y):
        """This tensor on y's devices, sharded as y is (a tensor replicated on them takes its parts where it is)."""
        if isinstance(y.device, str):
            return self.to(y.device)
        axis = axis_of(lower(y.uop))
        if isinstance(self.device, str):
            return self.shard(y.device, axis)
        mine = lower(self.uop)
        if self.device != y.device or axis_of(mine) not in (None, axis):
            raise RuntimeError(f"can't reshard a tensor on {self.device} (axis {axis_of(mine)}) like one on {y.device} "
                               f"(axis {axis}); gather it first (.to(device))")
        return self if axis_of(mine) == axis else type(self)(multi([_part(mine, i, axis) for i in
                                                                      range(len(mine.src))], self.shape, y.device))
