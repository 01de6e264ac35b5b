"""Indexing (t[...], t[...] = v) and einsum, composed from movement ops and one-hot selections.

Basic indices (ints, slices, None, Ellipsis) are pure movement ops; integer tensors select with a one-hot mask and
a sum, which is a reduce the scheduler fuses like any other."""
from __future__ import annotations
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import prod
from tinygrad_core.ops import is_symbolic


class IndexingOps:
    """Tensor methods that select, sort and scatter (mixed into Tensor, as NNOps and CreationOps are)."""


def _normalize(t, indices) -> list:
    indices = list(indices) if isinstance(indices, tuple) else [indices]
    from tinygrad_core.tensor import Tensor
    indices = [Tensor(i, device=t.device) if isinstance(i, list) else i for i in indices]
    for i in indices:
        if not (i is None or i is Ellipsis or isinstance(i, (int, slice, Tensor)) or is_symbolic(i)) or \
                isinstance(i, bool):
            raise TypeError(f"can't index with {type(i).__name__}: use ints, slices, None, ... or integer tensors")
    consumed = sum(1 for i in indices if i is not None and i is not Ellipsis)
    if consumed > t.ndim:
        raise IndexError(f"too many indices ({consumed}) for a tensor of shape {t.shape}")
    ellipses = [n for n, i in enumerate(indices) if i is Ellipsis]    # `is`: == on a Tensor is elementwise
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if ellipses:
        at = ellipses[0]
        return indices[:at] + [slice(None)] * (t.ndim - consumed) + indices[at + 1:]
    return indices + [slice(None)] * (t.ndim - consumed)


def getitem(t, indices):
    from tinygrad_core.tensor import Tensor
    indices = _normalize(t, indices)
    # 1. ints and slices: shrink, flip for negative steps, and stride by reshaping
    x, dim, tensor_dims = t, 0, []
    bounds, flips, steps, squeeze = [], [], [], []
    for i in indices:
        if i is None:
            continue
        size = t.shape[dim]
        if is_symbolic(i) or (isinstance(i, slice) and (is_symbolic(i.start) or is_symbolic(i.stop))):
            # a position made of Variables (a KV cache's current length): counted from the start, step 1
            if isinstance(i, slice) and i.step not in (None, 1):
                raise IndexError(f"a slice with a symbolic bound takes step 1, not {i.step}")
            bounds.append((i, i + 1) if not isinstance(i, slice) else
                          (0 if i.start is None else i.start, size if i.stop is None else i.stop))
            steps.append(1)
            flips.append(False)
            if not isinstance(i, slice):
                squeeze.append(dim)
        elif isinstance(i, int):
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            i %= size
            bounds.append((i, i + 1))
            steps.append(1)
            flips.append(False)
            squeeze.append(dim)
        elif isinstance(i, slice):
            start, stop, step = i.indices(size)
            if step > 0:
                bounds.append((start, max(start, stop)))
                flips.append(False)
            else:    # a negative step reads [stop+1, start] backwards
                lo, hi = stop + 1, start + 1
                bounds.append((lo, max(lo, hi)))
                flips.append(True)
            steps.append(abs(step))
        else:
            bounds.append((0, size))
            steps.append(1)
            flips.append(False)
            tensor_dims.append((dim, i))
        dim += 1
    x = x.shrink(tuple(bounds))
    if any(flips):
        x = x.flip(*[d for d, f in enumerate(flips) if f])
    if any(s != 1 for s in steps):
        # pad each axis to a multiple of its step, split it into (n/step, step) and keep column 0
        x = x.pad(tuple((0, (-n) % s) for n, s in zip(x.shape, steps)))
        x = x.reshape(tuple(v for n, s in zip(x.shape, steps) for v in (n // s, s)))
        x = x.shrink(tuple(b for n, s in zip(x.shape[::2], steps) for b in ((0, n), (0, 1))))
        x = x.reshape(x.shape[::2])
    # 2. integer tensors: one-hot select along their dims -> (*index_shape, *other dims)
    index_shape, other_dims = (), list(range(t.ndim))
    if tensor_dims:
        from tinygrad_core.tensor import _broadcast_shape
        index_shape = _broadcast_shape(*[i.shape for _, i in tensor_dims])
        x = _select(x, tensor_dims)
        other_dims = [d for d in range(t.ndim) if d not in {d for d, _ in tensor_dims}]
    # 3. drop int-indexed dims, add None dims, put the index block where numpy puts it
    kept = [d for d in other_dims if d not in squeeze]
    sizes = dict(zip(other_dims, x.shape[len(index_shape):]))
    x = x.reshape(index_shape + tuple(sizes[d] for d in kept))
    tensor_positions = [d for d, _ in tensor_dims]
    together = tensor_positions == list(range(tensor_positions[0], tensor_positions[-1] + 1)) if tensor_dims else True
    layout, dim = [], 0
    for i in indices:
        if i is None:
            layout.append("new")
            continue
        if isinstance(i, slice):
            layout.append(kept.index(dim))
        elif isinstance(i, Tensor) and together and "index" not in layout:
            layout.append("index")
        dim += 1
    if tensor_dims and "index" not in layout:
        layout.insert(0, "index")
    order, shape = [], []
    for item in layout:
        if item == "index":
            order.extend(range(len(index_shape)))
            shape.extend(index_shape)
        elif item == "new":
            shape.append(1)
        else:
            order.append(len(index_shape) + item)
            shape.append(sizes[kept[item]])
    return x.permute(order).reshape(tuple(shape)) if order else x.reshape(tuple(shape))


def _select(x, tensor_dims):
    """x[..., I1, ..., I2, ...] for integer tensors on the given dims -> shape (*broadcast(I), *other dims)."""
    from tinygrad_core.tensor import Tensor, _broadcast_shape
    dims = [d for d, _ in tensor_dims]
    index_shape = _broadcast_shape(*[i.shape for _, i in tensor_dims])
    others = [d for d in range(x.ndim) if d not in dims]
    moved = x.permute(others + dims)                 # (*others, *indexed)
    mask = None
    for k, (d, index) in enumerate(tensor_dims):
        n = x.shape[d]
        if not dtypes.is_int(index.dtype):
            raise TypeError(f"index tensors must be integers, got {index.dtype}")
        index = (index < 0).where(index + n, index)    # negative indices count from the end
        positions = Tensor.arange(n, device=x.device).reshape((1,) * k + (n,) + (1,) * (len(dims) - k - 1))
        hit = index._broadcast_to(index_shape).reshape(index_shape + (1,) * len(dims)) == positions
        mask = hit if mask is None else mask & hit
    other_shape = tuple(x.shape[d] for d in others)
    values = moved.reshape((1,) * len(index_shape) + other_shape + tuple(x.shape[d] for d in dims))
    mask = mask.reshape(index_shape + (1,) * len(others) + tuple(x.shape[d] for d in dims))
    return mask.where(values, 0).sum(tuple(range(-len(dims), 0)), dtype=x.dtype)


def setitem(t, indices, value):
    """t[indices] = value: computes the new tensor with a mask, then assigns it (in place when t is realized)."""
    from tinygrad_core.tensor import Tensor
    positions = Tensor.arange(t.numel(), device=t.device, dtype=dtypes.int32).reshape(t.shape)[indices]
    value = value if isinstance(value, Tensor) else Tensor(value, device=t.device, dtype=t.dtype)
    value = value.cast(t.dtype)
    value = value._broadcast_to(positions.shape) if value.shape != positions.shape else value
    flat_pos, flat_val = positions.flatten(), value.flatten()
    if flat_pos.numel() == 0:
        return
    # which written element lands on each position (the last one wins, as in numpy)
    hits = flat_pos.reshape(1, -1) == Tensor.arange(t.numel(), device=t.device, dtype=dtypes.int32).reshape(-1, 1)
    order = Tensor.arange(1, flat_pos.numel() + 1, device=t.device, dtype=dtypes.int32).reshape(1, -1)
    winner = hits.where(order, 0).max(-1, keepdim=True)
    chosen = (order == winner) & hits
    new = chosen.where(flat_val.reshape(1, -1), 0).sum(-1, dtype=t.dtype)
    written = hits.any(-1)
    t.assign(written.where(new, t.flatten()).reshape(t.shape))


def einsum(formula: str, *operands):
    """Einstein summation: every operand is laid out over all letters, multiplied, and summed over the missing."""
    formula = formula.replace(" ", "")
    inputs, _, output = formula.partition("->")
    specs = inputs.split(",")
    if len(specs) != len(operands):
        raise ValueError(f"einsum {formula!r} names {len(specs)} operands, got {len(operands)}")
    sizes: dict[str, int] = {}
    for spec, op in zip(specs, operands):
        if len(spec) != op.ndim:
            raise ValueError(f"einsum operand {spec!r} has {len(spec)} letters but shape {op.shape}")
        for letter, size in zip(spec, op.shape):
            if sizes.setdefault(letter, size) != size and size != 1:
                raise ValueError(f"einsum letter {letter!r} has sizes {sizes[letter]} and {size}")
    if not _:
        output = "".join(sorted(letter for letter in sizes if sum(s.count(letter) for s in specs) == 1))
    letters = list(output) + sorted(set(sizes) - set(output))
    product = None
    for spec, op in zip(specs, operands):
        # repeated letters in one operand (a diagonal) are taken first
        for letter in set(spec):
            while spec.count(letter) > 1:
                a = spec.index(letter)
                b = spec.index(letter, a + 1)
                n = op.shape[a]
                from tinygrad_core.tensor import Tensor
                eye = Tensor.eye(n, device=op.device, dtype=op.dtype)
                eye_shape = [1] * op.ndim
                eye_shape[a], eye_shape[b] = n, n
                op = (op * eye.reshape(eye_shape)).sum(b)
                spec = spec[:b] + spec[b + 1:]
        order = sorted(range(len(spec)), key=lambda i: letters.index(spec[i]))
        laid = op.permute(order) if order else op
        present = sorted(spec, key=letters.index)
        shape = [sizes[letter] if letter in present else 1 for letter in letters]
        laid = laid.reshape([op.shape[spec.index(letter)] if letter in present else 1 for letter in letters])
        laid = laid.expand(shape) if laid.shape != tuple(shape) and prod(shape) else laid
        product = laid if product is None else product * laid
    summed = tuple(range(len(output), len(letters)))
    return product.sum(summed) if summed else product
