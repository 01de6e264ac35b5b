"""Indexing (t[...], t[...] = v), sorting, scattering and einsum, composed from movement ops and one-hot selections.

Basic indices (ints, slices, None, Ellipsis) are pure movement ops; integer tensors select with a one-hot mask and
a sum, which is a reduce the scheduler fuses like any other. Sorting ranks by counting comparisons (n^2 per row)."""
import string
import numpy as np
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import broadcast_shape, make_tuple, prod
from tinygrad_core.gradient import composite
from tinygrad_core.ops import GroupOp, Ops, UOp, is_symbolic, reaches
from tinygrad_core.buffers import buffer_of, storage

SCATTER_REDUCES = ("sum", "prod", "mean", "amax", "amin")


class IndexingOps:
    """Tensor methods that select, sort and scatter (mixed into Tensor, as NNOps and CreationOps are)."""

    # ---- sorting ----
    def sort(self, dim: int = -1, descending: bool = False):
        """(values, indices) sorted along dim; stable, NaN sorts as the largest value (as torch.sort, stable=True).

        >>> Tensor([2.0, float('nan'), 1.0, 2.0]).sort()[1].tolist()
        [2, 0, 3, 1]
        """
        return _sort(self, dim, descending, None)

    def argsort(self, dim: int = -1, descending: bool = False):
        """The indices that sort self along dim (stable).

        >>> Tensor([3, 1, 2]).argsort().tolist()
        [1, 2, 0]
        """
        return _sort(self, dim, descending, None)[1]

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True):
        """(values, indices) of the k largest (or smallest) elements along dim, in sorted order, ties by position.

        >>> Tensor([1, 5, 3, 5]).topk(2)[1].tolist()
        [1, 3]
        """
        axis = self._axis(dim)          # (a 0-d tensor takes 0 or -1)
        n = self.shape[axis] if self.ndim else 1
        if not isinstance(k, int) or not 0 <= k <= n:
            raise (ValueError if isinstance(k, int) else TypeError)(
                f"topk: k={k!r} must be an int from 0 to the size {n} of dim {dim} (shape {self.shape})")
        return _sort(self, dim, largest, k)

    def cummax(self, axis: int = 0):
        """(values, indices) of the running maximum along axis; the index is the last one holding it, NaN wins.

        >>> [t.tolist() for t in Tensor([1, 3, 2, 3]).cummax(0)]
        [[1, 3, 3, 3], [0, 1, 1, 3]]
        """
        return _running_extreme(self, axis, largest=True)

    def cummin(self, axis: int = 0):
        """(values, indices) of the running minimum along axis (as torch.cummin).

        >>> [t.tolist() for t in Tensor([2, 1, 3, 1]).cummin(0)]
        [[2, 1, 1, 1], [0, 1, 1, 3]]
        """
        return _running_extreme(self, axis, largest=False)

    # ---- diagonals and triangles ----
    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1):
        """The diagonal over dims dim1 and dim2 (offset > 0: above it), as a last dimension.

        >>> Tensor([[1, 2], [3, 4]]).diagonal().tolist()
        [1, 4]
        """
        dim1, dim2 = self._axes((dim1, dim2))      # (which rejects dim1 == dim2)
        x = self.permute([d for d in range(self.ndim) if d not in (dim1, dim2)] + [dim1, dim2])
        top, left = min(max(0, -offset), x.shape[-2]), min(max(0, offset), x.shape[-1])
        n = max(0, min(x.shape[-2] - top, x.shape[-1] - left))
        x = x.shrink(tuple((0, s) for s in x.shape[:-2]) + ((top, top + n), (left, left + n))).flatten(-2)
        # in a flattened n x n square the diagonal is every (n+1)-th element: pad to n rows of n+1, keep column 0
        x = x.pad(((0, 0),) * (x.ndim - 1) + ((0, n),)).reshape(x.shape[:-1] + (n, n + 1))
        return x.shrink(tuple((0, s) for s in x.shape[:-1]) + ((0, 1),)).reshape(x.shape[:-1])

    def diag(self):
        """A square matrix with self (1-D) on its diagonal, or the diagonal of self (2-D), as torch.diag.

        >>> Tensor([1, 2]).diag().tolist()
        [[1, 0], [0, 2]]
        """
        if self.ndim == 2:
            return self.diagonal()
        if self.ndim != 1:
            raise ValueError(f"diag takes a 1-D or 2-D tensor, got shape {self.shape}")
        n = self.shape[0]
        return self.unsqueeze(-1).pad(((0, 0), (0, n))).flatten().shrink(((0, n * n),)).reshape(n, n)

    def triu(self, diagonal: int = 0):
        """self with the elements below the given diagonal set to 0 (over the last two dims).

        >>> Tensor([[1, 2], [3, 4]]).triu().tolist()
        [[1, 2], [0, 4]]
        """
        return _triangle(self, diagonal, upper=True)

    def tril(self, diagonal: int = 0):
        """self with the elements above the given diagonal set to 0 (over the last two dims).

        >>> Tensor([[1, 2], [3, 4]]).tril().tolist()
        [[1, 0], [3, 4]]
        """
        return _triangle(self, diagonal, upper=False)

    # ---- rearranging ----
    def roll(self, shifts, dims=None):
        """Shift elements along dims, wrapping around (dims=None: over the flattened tensor).

        >>> Tensor([1, 2, 3, 4]).roll(1).tolist()
        [4, 1, 2, 3]
        """
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        shifts, dims = make_tuple(shifts, 1), [self._axes(d)[0] for d in make_tuple(dims, 1)]
        if len(shifts) != len(dims):
            raise RuntimeError(f"roll: {len(shifts)} shifts {shifts} for {len(dims)} dims {dims}")
        x = self
        for dim, shift in zip(dims, shifts):
            n = x.shape[dim]
            if n:   # two copies side by side, then the window that starts n - shift in
                start = n - shift % n
                x = x.repeat([2 if d == dim else 1 for d in range(x.ndim)])
                x = x.shrink(tuple((start, start + n) if d == dim else (0, s) for d, s in enumerate(x.shape)))
        return x

    def meshgrid(self, *args, indexing: str = "ij"):
        """Coordinate grids from 1-D tensors ("ij": matrix order, "xy": the first two swapped, as numpy).

        >>> [g.tolist() for g in Tensor([1, 2]).meshgrid(Tensor([3, 4, 5]))][1]
        [[3, 4, 5], [3, 4, 5]]
        """
        if indexing not in ("ij", "xy"):
            raise RuntimeError(f"meshgrid indexing must be 'ij' or 'xy', got {indexing!r}")
        if (bad := next((t for t in (self, *args) if t.ndim > 1), None)) is not None:
            raise RuntimeError(f"meshgrid: expected 0-D or 1-D tensors, got one of shape {bad.shape}")
        tensors = [t.reshape(-1) for t in (self, *args)]
        axes = list(range(len(tensors)))
        if indexing == "xy" and len(tensors) > 1:
            axes[0], axes[1] = 1, 0
        shape = [tensors[axis].shape[0] for axis in axes]     # (axes swaps at most two: it is its own inverse)
        return tuple(t.reshape([-1 if d == axis else 1 for d in range(len(shape))]).expand(shape)
                     for axis, t in zip(axes, tensors))

    # ---- masks ----
    def masked_fill(self, mask, value):
        """value where mask (bool, broadcast) is True, self elsewhere.

        >>> Tensor([1, 2, 3]).masked_fill(Tensor([True, False, True]), 0).tolist()
        [0, 2, 0]
        """
        _check_bool(self, mask, "masked_fill")
        return mask.where(value, self).cast(self.dtype)

    def masked_select(self, mask, size: int | None = None, fill_value=0):
        """The elements of self where mask (bool, broadcast against self) is True, flattened. Their count is read back
        to the host; pass size to get that many instead (padded with fill_value), without reading anything back.

        >>> Tensor([[1, 2], [3, 4]]).masked_select(Tensor([True, False])).tolist()
        [1, 3]
        """
        _check_bool(self, mask, "masked_select")
        shape = broadcast_shape(self.shape, mask.shape)
        return _compact(mask._broadcast_to(shape).flatten(), self._broadcast_to(shape).flatten(), size, fill_value)

    def nonzero(self, size: int | None = None, fill_value=0):
        """The coordinates (int32, one row each) of the non-zero elements, in row-major order.

        >>> Tensor([[0, 5], [7, 0]]).nonzero().tolist()
        [[0, 1], [1, 0]]
        """
        flat = self.flatten() != 0
        positions = _compact(flat, type(self).arange(flat.shape[0], device=self.device, dtype=dtypes.int32), size, -1)
        coords = [(positions // prod(self.shape[d + 1:])) % n for d, n in enumerate(self.shape)]
        if not coords:
            return type(self).zeros(positions.shape[0], 0, dtype=dtypes.int32, device=self.device)
        return (positions == -1).unsqueeze(-1).where(fill_value, type(self).stack(*coords, dim=-1))

    # ---- index values known when the op is built ----
    def _check_range(self, low: int, high: int, error, skip=None):
        """Raise error(value) for the first value of self outside [low, high) (skip: one value let through, a loss's
        ignore_index) when the values are known now (_known_values: a plain buffer, not lazy, not sharded). A lazy
        index is not computed for the check; a TinyJit replay runs no Python, so checks nothing."""
        if (values := self._known_values()) is None:
            return
        bad = values[((values < low) | (values >= high)) & (values != skip if skip is not None else True)]
        if bad.size:
            raise error(bad[0].item())

    def _check_index(self, low: int, n: int, dim: int, error=IndexError):
        """torch's error for an index into dim (of size n) below low (-n: counted from the end allowed) or past n."""
        self._check_range(low, n, lambda v: error(f"index {v} is out of bounds for dimension {dim} with size {n}"))

    # ---- scattering ----
    def scatter(self, dim: int, index, src, reduce: str | None = None):
        """self with src written at index along dim: out[index[i][j]][j] = src[i][j] for dim 0 (the last write wins);
        src may be a number; reduce='add' or 'multiply' combines it with what is there instead.

        >>> Tensor.zeros(3, dtype='int32').scatter(0, Tensor([2, 0]), Tensor([5, 6])).tolist()
        [6, 0, 5]
        """
        if reduce not in (None, "add", "multiply"):
            raise RuntimeError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")
        if reduce is not None and hasattr(src, "shape"):     # (torch deprecates it; tinygrad refuses it so)
            raise TypeError(f"scatter: reduce={reduce!r} takes a number as src, not a tensor; use scatter_reduce")
        src = src if hasattr(src, "shape") else type(self).full(index.shape, src, dtype=self.dtype, device=self.device)
        if reduce is not None:
            return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod")
        hits, values = _scatter_hits(self, dim, index, src, "scatter")
        if hits is None:
            return self
        later = type(self).arange(hits.shape[-1], device=self.device)
        last = hits & (hits.where(later, -1).max(-1, keepdim=True) == later)
        return hits.any(-1).where(_pick(last, values, -1), self)

    def scatter_reduce(self, dim: int, index, src, reduce: str, include_self: bool = True):
        """self combined with src at index along dim by reduce ('sum', 'prod', 'mean', 'amax' or 'amin'); with
        include_self=False the positions src reaches start from src alone.

        >>> Tensor([1, 1]).scatter_reduce(0, Tensor([0, 0, 1]), Tensor([2, 3, 4]), "sum").tolist()
        [6, 5]
        """
        if reduce not in SCATTER_REDUCES:
            raise RuntimeError(f"scatter_reduce: reduce must be one of {SCATTER_REDUCES}, got {reduce!r}")
        hits, values = _scatter_hits(self, dim, index, src, "scatter_reduce")
        if hits is None:
            return self
        if reduce in ("amax", "amin"):
            combined = _scatter_extreme(values._broadcast_to(hits.shape), self, hits, reduce == "amax", include_self)
        else:
            picked = hits.where(values, 1 if reduce == "prod" else False if self.dtype == dtypes.bool else 0)
            combined = picked.prod(-1) if reduce == "prod" else picked.sum(-1)
            combined = (combined * self if reduce == "prod" else combined + self) if include_self else combined
        if reduce == "mean":
            count = (hits.sum(-1) + int(include_self)).maximum(1).cast(self.dtype)
            combined = combined // count if not dtypes.is_float(self.dtype) else combined / count
        return (combined if include_self else hits.any(-1).where(combined, self)).cast(self.dtype)


def _pick(mask, values, axis, signed_zero: bool = False):
    """The one value where mask is True along axis (0 where none is). NaN and inf come through; -0.0 comes out as
    +0.0, as a sum's accumulator starts at +0.0, unless signed_zero asks for a max to pick the zeros (it can't
    stand in for the sum: a max's gradient would be shared with the fill wherever the value is -inf; it sees only
    the zeros, as a NaN in it would make its unused gradient 0 / 0)."""
    out = mask.where(values, False if values.dtype == dtypes.bool else 0).sum(axis, dtype=values.dtype)
    if not signed_zero or not dtypes.is_float(values.dtype) or not mask.shape[axis]:
        return out
    return (out == 0).where((mask & (values == 0)).where(values, -float("inf")).max(axis), out)


def _same(a, b):
    return (a == b) | (a.isnan() & b.isnan()) if dtypes.is_float(a.dtype) else a == b


def _sort(x, dim, descending: bool, count: int | None):
    """(values, int32 indices) of the first count elements of x sorted along dim: each element's rank is how many
    elements go before it (smaller, or equal and earlier), and rank r's value is picked out with a one-hot mask."""
    if x.ndim == 0:
        return x, x.full_like(0, dtype=dtypes.int32)
    dim = x._axes(dim)[0]
    moved = x.transpose(dim, -1)
    mine, other = moved.unsqueeze(-1), moved.unsqueeze(-2)      # (column i, row j) views: (..., n, 1) and (..., 1, n)
    n = mine.shape[-2]
    count = n if count is None else count
    before = other > mine if descending else other < mine
    if dtypes.is_float(x.dtype):   # NaN goes last ascending and first descending, as in torch
        before = before | (other.isnan() & mine.isnan().logical_not() if descending else
                           mine.isnan() & other.isnan().logical_not())
    positions = type(x).arange(n, device=x.device, dtype=dtypes.int32)
    earlier = positions.reshape(1, n) < positions.reshape(n, 1)
    rank = (before | (_same(mine, other) & earlier)).sum(-1)
    at_rank = rank.unsqueeze(-2) == type(x).arange(count, device=x.device, dtype=dtypes.int32).reshape(count, 1)
    return _pick(at_rank, other, -1, True).transpose(dim, -1), _pick(at_rank, positions, -1).transpose(dim, -1)


def _running_extreme(x, axis, largest: bool):
    """cummax / cummin: the extreme of each prefix (a scan), at the last index holding it (torch moves the index on
    ties and on every NaN once one is seen: the running max of the positions that hold their prefix's extreme); the
    value is read from that index, so -0.0 and +0.0 come out as torch's."""
    axis = x._axis(axis)           # (checked for a 0-d or empty tensor too)
    if x.ndim == 0 or 0 in x.shape:
        return x, x.full_like(0, dtype=dtypes.int32)
    moved = (x if largest else x._flip_order()).transpose(axis, -1)
    best = moved._scan(lambda rows, mask: mask.where(rows, dtypes.min(moved.dtype)).max(-1), type(x).maximum)
    positions = type(x).arange(moved.shape[-1], device=x.device, dtype=dtypes.int32)
    index = _same(moved, best).where(positions, -1)._scan(lambda rows, mask: mask.where(rows, -1).max(-1),
                                                           type(x).maximum)
    picked = composite("running_pick", x.transpose(axis, -1), value=lambda x: _take(x, index), index=index)
    return picked.transpose(axis, -1), index.transpose(axis, -1)


def _triangle(x, diagonal: int, upper: bool):
    if not isinstance(diagonal, (int, np.integer)):
        raise TypeError(f"{'triu' if upper else 'tril'}: diagonal must be an int, got {type(diagonal).__name__} "
                        f"{diagonal!r}")
    if x.ndim < 2:
        raise RuntimeError(f"{'triu' if upper else 'tril'} needs at least 2 dimensions, got shape {x.shape}")
    rows, cols = x.shape[-2:]
    offset = type(x).arange(cols, device=x.device) - type(x).arange(rows, device=x.device).reshape(rows, 1)
    keep = offset >= diagonal if upper else offset <= diagonal
    return keep.where(x, False if x.dtype == dtypes.bool else 0)


def _check_bool(x, mask, name: str):
    x._need_tensors(name, mask=mask)
    if mask.dtype != dtypes.bool:
        raise RuntimeError(f"{name} takes a bool mask, got {mask.dtype} (compare it, e.g. mask != 0)")


def _compact(flags, values, size: int | None, fill_value):
    """values (1-D) where flags is True, in order: slot k takes the element after k others, found by a binary search
    in the running count of the flags (count x log n loads by address, where a one-hot selection was count x n)."""
    n, counts = flags.shape[0], flags.cumsum()
    total = int(counts[-1].item()) if n else 0
    count = total if size is None else size
    slots = type(values).arange(count, device=values.device, dtype=dtypes.int32)
    if not n or not count:
        return slots.full_like(fill_value, dtype=values.dtype)
    at, step = slots.zeros_like(), 1 << (n.bit_length() - 1)
    while step:             # at: how many elements have a running count <= k, by halving steps
        probe = at + step
        at = ((probe <= n) & (_take(counts, (probe - 1).minimum(n - 1)) <= slots)).where(probe, at)
        step //= 2
    at = at.minimum(n - 1)
    out = composite("compact", values, value=lambda values: _take(values, at), counts=counts, flags=flags, take=_take)
    return out if count <= total else (slots < total).where(out, fill_value).cast(values.dtype)


def _take(x, index):
    """x[..., index[..., i]] along x's last axis, each row its own (index's rows are x's): loads by address
    (Ops.GATHER) from the flat rows. No gradient: the running pick and the compaction carry theirs."""
    n, lead = x.shape[-1], index.shape[:-1]
    rows = type(x).arange(prod(lead), device=x.device, dtype=dtypes.int32).reshape(*lead, 1) * n
    flat = (index.cast(dtypes.int32) + rows).flatten().contiguous()
    return type(x)(UOp(Ops.GATHER, x.dtype, (x.contiguous().flatten().uop, flat.uop), 0)).reshape(index.shape)


def _scatter_hits(t, dim, index, src, name: str):
    """For each position of t: which src elements along dim land there (a new last axis), and those src values;
    (None, None) when index is empty."""
    if not dtypes.is_int(index.dtype):
        raise RuntimeError(f"{name}: index must be an integer tensor, got {index.dtype}")
    if not index.ndim == t.ndim == src.ndim:
        raise RuntimeError(f"{name}: self {t.shape}, index {index.shape} and src {src.shape} need the same rank")
    dim = t._axes(dim)[0]
    index._check_index(0, t.shape[dim], dim, RuntimeError)
    if any(i > s or (d != dim and i > n) for d, (i, s, n) in enumerate(zip(index.shape, src.shape, t.shape))):
        raise RuntimeError(f"{name}: index {index.shape} must be no larger than src {src.shape} in every dim, nor "
                           f"than self {t.shape} outside dim {dim}")
    if src.dtype != t.dtype:
        raise RuntimeError(f"{name}: src dtype {src.dtype} differs from self dtype {t.dtype}")
    if index.numel() == 0:
        return None, None
    targets = type(t).arange(t.shape[dim], device=t.device, dtype=index.dtype)
    # target position where dim was, source position on the new last axis
    hits = (index.unsqueeze(-1) == targets).transpose(dim, -1)
    values = src.shrink(tuple((0, i) for i in index.shape)).unsqueeze(-1).transpose(dim, -1)
    padding = tuple((0, 0) if d == dim else (0, n - i) for d, (n, i) in enumerate(zip(t.shape, index.shape)))
    return hits.pad(padding + ((0, 0),)), values.pad(padding + ((0, 0),))


# ---------------------------------------------------------------------------------------------------------------
# t[indices] and t[indices] = v
# ---------------------------------------------------------------------------------------------------------------
def _index_tensor(t, index, dim: int):
    """A (nested) list of ints, or an integer tensor, as an int tensor with negative indices counted from the end."""
    size = t.shape[dim]
    if not isinstance(index, type(t)):
        values = np.asarray(index)
        if values.size and values.dtype.kind not in "iu":
            raise IndexError(f"index {index} along dim {dim} must hold ints, not {values.dtype} (masks: masked_select)")
        if values.size and not -size <= values.min() <= values.max() < size:
            bad = values.min() if values.min() < -size else values.max()
            raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
        return type(t)((values % max(size, 1)).astype(np.int32), device=t.device)
    if not dtypes.is_int(index.dtype):
        raise IndexError(f"tensors used as indices must be integer tensors, got {index.dtype} along dim {dim}")
    if index.device != t.device:
        raise RuntimeError(f"indices are on {index.device}, the indexed tensor on {t.device}: move one with .to()")
    index._check_index(-size, size, dim)
    return ((index < 0) & (index >= -size)).where(index + size, index)   # (a lazy one out of range reads as 0)


def _normalize(t, indices) -> list:
    # a list of ints is one index; any other list reads as a tuple of indices, as in tinygrad and torch
    if not isinstance(indices, (tuple, list)) or isinstance(indices, list) and all(isinstance(i, int) for i in indices):
        indices = [indices]
    indices = list(indices)
    for i in indices:
        if not (i is None or i is Ellipsis or isinstance(i, (int, slice, type(t), list, tuple)) or is_symbolic(i)) \
                or isinstance(i, bool):
            raise IndexError(f"can't index with {type(i).__name__} {i!r}: use ints, slices, None, ... or int tensors")
    consumed = sum(1 for i in indices if i is not None and i is not Ellipsis)
    if consumed > t.ndim:
        raise IndexError(f"too many indices ({consumed}) for a tensor of shape {t.shape}")
    ellipses = [n for n, i in enumerate(indices) if i is Ellipsis]    # `is`: == on a Tensor is elementwise
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    at = ellipses[0] if ellipses else len(indices)
    return indices[:at] + [slice(None)] * (t.ndim - consumed) + indices[at + 1:]


def _basic(t, indices):
    """The ints, slices and None of (normalized) indices as movement ops on t: (view, [(axis of the view, index
    tensor)], undo), where undo puts a tensor of the view's shape back where the view came from, 0 elsewhere."""
    dim, bounds, flips, steps, view_shape, tensors = 0, [], [], [], [], []
    for i in indices:
        if i is None:
            view_shape.append(None)
            continue
        size, step = t.shape[dim], 1
        if is_symbolic(i) or (isinstance(i, slice) and (is_symbolic(i.start) or is_symbolic(i.stop))):
            # a position made of Variables (a KV cache's current length): counted from the start, step 1
            if isinstance(i, slice) and i.step not in (None, 1):
                raise IndexError(f"a slice with a symbolic bound takes step 1, not {i.step}")
            bounds.append((i, i + 1) if not isinstance(i, slice) else
                          (0 if i.start is None else i.start, size if i.stop is None else i.stop))
        elif isinstance(i, int):
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            bounds.append((i % size, i % size + 1))
        elif isinstance(i, slice):
            start, stop, step = i.indices(size)
            lo, hi = (start, stop) if step > 0 else (stop + 1, start + 1)    # a negative step reads [lo, hi) backwards
            bounds.append((lo, max(lo, hi)))
        else:
            bounds.append((0, size))
            tensors.append((len(view_shape), _index_tensor(t, i, dim)))
        flips.append(step < 0)
        steps.append(abs(step))
        if not (isinstance(i, int) or is_symbolic(i)):
            view_shape.append(dim)      # a dim that stays: its size is known once the movement ops are applied
        dim += 1
    flipped = [d for d, f in enumerate(flips) if f]
    x = t.shrink(tuple(bounds))
    x = x.flip(*flipped) if flipped else x
    if any(s != 1 for s in steps):
        # pad each axis to a multiple of its step, split it into (n/step, step) and keep column 0
        x = x.pad(tuple((0, (-n) % s) for n, s in zip(x.shape, steps)))
        x = x.reshape(tuple(v for n, s in zip(x.shape, steps) for v in (n // s, s)))
        x = x.shrink(tuple(b for n, s in zip(x.shape[::2], steps) for b in ((0, n), (0, 1))))
        x = x.reshape(x.shape[::2])
    strided = x.shape

    def undo(v):
        v = v.reshape(strided)
        if any(s != 1 for s in steps):    # each kept element heads a group of step, the rest of which was skipped
            v = v.reshape(tuple(d for n in strided for d in (n, 1)))
            v = v.pad(tuple(p for s in steps for p in ((0, 0), (0, s - 1))))
            v = v.reshape(tuple(n * s for n, s in zip(strided, steps))).shrink(tuple((0, b - a) for a, b in bounds))
        v = v.flip(*flipped) if flipped else v
        return v.pad(tuple((lo, size - hi) for (lo, hi), size in zip(bounds, t.shape)))
    return x.reshape(tuple(1 if d is None else strided[d] for d in view_shape)), tensors, undo


def _index_mask(x, tensors):
    """hits[*index_shape, *indexed sizes]: True where the (broadcast) index tensors point; index_shape; the indexed axes
    and the other axes of x."""
    try:
        index_shape = broadcast_shape(*[i.shape for _, i in tensors])
    except ValueError as e:
        raise IndexError(f"index tensors can't be broadcast together: {e}") from None
    hits = None
    for k, (axis, index) in enumerate(tensors):
        n = x.shape[axis]
        positions = type(x).arange(n, device=x.device).reshape((1,) * k + (n,) + (1,) * (len(tensors) - k - 1))
        hit = index._broadcast_to(index_shape).reshape(index_shape + (1,) * len(tensors)) == positions
        hits = hit if hits is None else hits & hit
    axes = [axis for axis, _ in tensors]
    return hits, index_shape, axes, [d for d in range(x.ndim) if d not in axes]


def _layout(tensors, block: int, ndim: int) -> list[int]:
    """The permute from (*index dims, *other dims) to numpy's order: adjacent index tensors (no slice or None
    between them; ints don't count, nor 0-d tensors, which index as ints do in torch) put the index dims where they
    stood; separated ones put them first."""
    axes = [a - sum(not i.ndim and b < a for b, i in tensors) for a, i in tensors if i.ndim] or [0]
    at = axes[0] if axes == list(range(axes[0], axes[0] + len(axes))) else 0
    return list(range(block, block + at)) + list(range(block)) + list(range(block + at, ndim))


def getitem(t, indices):
    x, tensors, _ = _basic(t, _normalize(t, indices))
    if not tensors:
        return x
    if len(tensors) == 1:          # one index tensor: a load at the index read, not a one-hot sum over the axis
        axis, index = tensors[0]
        return composite("gather", x, index.contiguous(), value=lambda x, index: type(x)(
            UOp(Ops.GATHER, x.dtype, (x.uop, index.uop), axis)), axis=axis)
    hits, index_shape, axes, others = _index_mask(x, tensors)
    other_shape, indexed = tuple(x.shape[d] for d in others), prod(x.shape[a] for a in axes)
    # as (selections, rest, indexed) with one reduce axis: the CPU opts tile a 2-D output well, while one shaped
    # (128, 1, 28, 28) (MNIST rows) got no tile; and leading index dims are merged before they move, as a reshape of
    # a permuted view costs index arithmetic in every load
    if axes == list(range(len(axes))):
        values = x.reshape(indexed, prod(other_shape)).permute(1, 0).reshape(1, prod(other_shape), indexed)
    else:
        values = x.permute(others + axes).reshape(1, prod(other_shape), indexed)
    out = _pick(hits.reshape(prod(index_shape), 1, indexed), values, -1).reshape(index_shape + other_shape)
    return out.permute(_layout(tensors, len(index_shape), out.ndim))


def setitem(t, indices, value):
    """t[indices] = value: the value is put back through the selection's movement ops (and, for index tensors, a
    one-hot mask over the indexed dims), then assigned (in place when t is realized)."""
    x, tensors, undo = _basic(t, _normalize(t, indices))
    value = value if isinstance(value, type(t)) else type(t)(value, device=t.device, dtype=t.dtype)
    if value.uop is x.uop:       # t[i] += v: the view t[i] was written in place already
        return
    _refuse_other_uses(t, value, x)
    selection = x.shape
    if tensors:
        hits, index_shape, axes, others = _index_mask(x, tensors)
        order = _layout(tensors, len(index_shape), len(index_shape) + len(others))
        selection = tuple((index_shape + tuple(x.shape[d] for d in others))[d] for d in order)
    while value.ndim > len(selection) and value.shape[0] == 1:    # leading 1s broadcast away, as in numpy
        value = value.reshape(value.shape[1:])
    try:
        fits = broadcast_shape(value.shape, selection) == selection
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"can't assign a value of shape {value.shape} to a selection of shape {selection} "
                         f"(t[{indices!r}] of a tensor of shape {t.shape}): it must broadcast to the selection")
    value, written = value.cast(t.dtype)._broadcast_to(selection), t.full(x.shape, True, device=t.device)
    in_buffer = isinstance(t.device, str) and storage(t.uop).op in (Ops.BUFFER, Ops.ASSIGN)
    if in_buffer and not tensors:        # a view of a buffer: written through
        return x.assign(value)
    if tensors:
        if not prod(selection):
            return
        # the last write to a position wins, as in numpy: number the writes and keep the highest that hits
        count, other_shape = prod(index_shape), tuple(x.shape[d] for d in others)
        hits = hits.reshape((count,) + hits.shape[len(index_shape):] + (1,) * len(others))
        writes = t.arange(count, device=t.device).reshape((count,) + (1,) * (hits.ndim - 1))
        hits = hits & (writes == hits.where(writes, -1).max(0))
        value = value.permute(sorted(range(len(order)), key=order.__getitem__))
        value = _pick(hits, value.reshape((count,) + (1,) * len(axes) + other_shape), 0)
        back = sorted(range(x.ndim), key=(axes + others).__getitem__)
        value, written = value.permute(back), hits.any(0)._broadcast_to(value.shape).permute(back)
    # a lazy target takes the new graph (its gradient then reaches t's inputs and the value), a buffer is written
    (t.assign if in_buffer or buffer_of(t.uop) is not None else t.replace)(
        undo(written).where(undo(value.reshape(x.shape)), t))


def _refuse_other_uses(t, value, view):
    """tinygrad's rule: a setitem on a tensor that a lazy graph elsewhere reads (other than the value written, or a
    view of the same buffer) raises, as the graph would see the new values or the old depending on when it ran."""
    if not any(u.op is Ops.BUFFER for u in t.uop.toposort()):
        return
    reads, shared, inside = reaches({t.uop}), storage(t.uop), set(value.uop.toposort())
    for other in list(type(t)._live.values()):
        if other is not t and other is not view and other.uop not in inside and buffer_of(other.uop) is None and reads(other.uop) and \
                not (shared.op is Ops.BUFFER and other.uop.op in GroupOp.VIEW and storage(other.uop) is shared):
            raise RuntimeError(f"can't setitem on a tensor of shape {t.shape} that a lazy tensor of shape "
                               f"{other.shape} reads: realize that one first, or write a clone()")


# ---------------------------------------------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------------------------------------------
def einsum(formula: str, *operands):
    """Einstein summation: every operand is laid out over all letters, multiplied, and summed over the missing."""
    formula = formula.replace(" ", "")
    inputs, arrow, output = formula.partition("->")
    written = inputs.split(",")
    if len(written) != len(operands):
        raise RuntimeError(f"einsum {formula!r} names {len(written)} operands, got {len(operands)}")
    if bad := sorted(set(inputs.replace("...", "") + output.replace("...", "")) - set(string.ascii_letters + ",")):
        raise RuntimeError(f"einsum {formula!r}: {bad[0]!r} isn't a subscript; use letters a-z, A-Z and '...'")
    # '...' stands for the dims the letters don't name, with letters of their own, broadcast right-aligned
    spare = [c for c in string.ascii_letters if c not in formula]
    covered = [op.ndim - len(s) + 3 if "..." in s else 0 for s, op in zip(written, operands)]
    rank = max(covered, default=0)
    specs = [s.replace("...", "".join(spare[rank - n:rank])) for s, n in zip(written, covered)]
    ellipsis = "".join(spare[:rank])
    if not arrow:
        output = ellipsis + "".join(sorted(c for c in set(inputs) if c.isalpha() and inputs.count(c) == 1))
    output = output.replace("...", ellipsis)
    sizes: dict[str, int] = {}
    for n, (spec, op) in enumerate(zip(specs, operands)):
        if len(spec) != op.ndim:
            raise RuntimeError(f"einsum operand {n} has subscripts {written[n]!r} but shape {op.shape} "
                               f"({op.ndim} dims)")
        for letter, size in zip(spec, op.shape):
            if sizes.get(letter, 1) not in (1, size) and size != 1:
                raise RuntimeError(f"einsum letter {letter!r} has sizes {sizes[letter]} and {size} "
                                 f"(operand shapes {[o.shape for o in operands]})")
            sizes[letter] = size if sizes.get(letter, 1) == 1 else sizes[letter]
    for letter in output:
        if letter not in sizes or output.count(letter) > 1:
            raise RuntimeError(f"einsum output letter {letter!r} must appear once in the output and in some input "
                             f"(formula {formula!r})")
    letters = list(output) + sorted(set(sizes) - set(output))
    product = None
    for spec, op in zip(specs, operands):
        # a letter repeated in one operand takes its diagonal (it becomes the last dim)
        while repeated := next((c for c in spec if spec.count(c) > 1), None):
            a, b = spec.index(repeated), spec.index(repeated, spec.index(repeated) + 1)
            if op.shape[a] != op.shape[b]:
                raise RuntimeError(f"einsum letter {repeated!r} repeats in {spec!r} over sizes {op.shape[a]} and "
                                 f"{op.shape[b]} (shape {op.shape})")
            op, spec = op.diagonal(0, a, b), "".join(c for k, c in enumerate(spec) if k not in (a, b)) + repeated
        order = sorted(range(len(spec)), key=lambda i: letters.index(spec[i]))
        laid = op.permute(order).reshape([op.shape[spec.index(c)] if c in spec else 1 for c in letters])
        product = laid if product is None else product * laid
    product = product._broadcast_to(tuple(sizes[c] for c in letters))
    summed = tuple(range(len(output), len(letters)))
    return product.sum(summed) if summed else product


def _scatter_extreme(values, t, hits, largest: bool, include_self: bool):
    """scatter_reduce's amax/amin of the values landing at each position (and of t's value, with include_self)."""
    def value(values, t):
        picked = hits.where(values, dtypes.min(t.dtype) if largest else dtypes.max(t.dtype))
        out = picked.max(-1) if largest else picked.min(-1)
        out = (out.maximum(t) if largest else out.minimum(t)) if include_self else out
        return out, {"ties": hits & _same(values, out.unsqueeze(-1)), "self_tie": _same(t, out) & include_self}
    return composite("scatter_extreme", values, t, value=value)
