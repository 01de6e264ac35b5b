"""Movement: reshape, permute, expand, pad, shrink, flip and what is made of them (transpose, flatten, squeeze, cat,
split, repeat, rearrange). Each builds a view of the same elements (cat and repeat: views summed or broadcast); none
computes anything.

Mixed into Tensor."""
from __future__ import annotations
import itertools
import math
import re
from typing import TYPE_CHECKING
from tinygrad_core import sizes as sym
from tinygrad_core.creation import _checked_shape
from tinygrad_core.dtype import dtypes, least_upper_dtype
from tinygrad_core.helpers import argfix, prod
from tinygrad_core.ops import UOp, is_symbolic
if TYPE_CHECKING:
    from tinygrad_core.tensor import Tensor


class MovementOps:
    def reshape(self, shape, *args) -> Tensor:
        """A new shape with the same elements; -1 is inferred, None keeps the size at that position (tinygrad)."""
        shape = tuple(self.shape[i] if s is None else s for i, s in enumerate(argfix(shape, *args)))
        if not all(type(s) is int for s in shape + self.shape):     # (plain ints, the common case, need no checks)
            shape = _checked_shape(shape, "reshape sizes", negative_ok=True)
            if any(map(is_symbolic, shape + self.shape)):
                return self._reshape_symbolic(shape)
        if shape.count(-1) > 1:
            raise RuntimeError(f"can't reshape {self.shape} to {shape}: only one dimension can be -1")
        if -1 in shape:
            known = prod(s for s in shape if s != -1)
            if known == 0 or self.numel() % known:
                raise ValueError(f"can't reshape {self.shape} ({self.numel()} elements) to {shape}")
            shape = tuple(self.numel() // known if s == -1 else s for s in shape)
        if prod(shape) != self.numel() or any(s < 0 for s in shape):
            raise ValueError(f"can't reshape {self.shape} ({self.numel()} elements) to {shape} "
                             f"({prod(shape)} elements)")
        return self if shape == self.shape else type(self)(self.uop.reshape(shape))

    def _reshape_symbolic(self, shape) -> Tensor:
        """A reshape from or to sizes made of Variables: the element counts must agree at the bound values."""
        if -1 in shape:
            raise ValueError(f"can't infer a -1 size next to symbolic sizes ({self.shape} to {shape}); give every size")
        new, old = (sym.evaluate(prod(s)) for s in (shape, self.shape))
        if new != old or any(sym.evaluate(s) < 0 for s in shape):
            raise ValueError(f"can't reshape {self.shape} ({old} elements) to {shape} ({new} elements)")
        return self if shape == self.shape else type(self)(self.uop.reshape(shape))

    def view(self, *shape) -> Tensor: return self.reshape(*shape)       # noqa: E704

    def permute(self, order, *args) -> Tensor:
        given = argfix(order, *args)
        if len(given) != self.ndim:
            raise RuntimeError(f"permute order {given} has {len(given)} axes, the tensor has {self.ndim} "
                               f"(shape {self.shape})")
        order = tuple(self._axis(a) for a in given)
        if sorted(order) != list(range(self.ndim)):
            raise RuntimeError(f"permute order {given} isn't a permutation of the {self.ndim} axes of {self.shape}")
        return type(self)(self.uop.permute(order))

    def expand(self, shape, *args) -> Tensor:
        shape = _checked_shape(argfix(shape, *args), "expand sizes", negative_ok=True)
        base = (1,) * (len(shape) - self.ndim) + self.shape
        new = tuple(b if s == -1 and i >= len(shape) - self.ndim else s for i, (s, b) in enumerate(zip(shape, base)))
        if len(shape) < self.ndim or any(isinstance(s, int) and s < 0 or b != 1 and b != s for b, s in zip(base, new)):
            raise ValueError(f"can't expand {self.shape} to {shape}: only size-1 dimensions can grow, and -1 keeps "
                             "a dimension the tensor has")
        return self._broadcast_to(new)

    def pad(self, padding, value: float = 0.0, mode: str = "constant") -> Tensor:
        """padding: ((before, after), ...) per axis, or a flat PyTorch-style (last_before, last_after, ...). mode:
        'constant' (filled with value), 'reflect', 'replicate' or 'circular' (see NNOps._pad_mode)."""
        if padding and not any(isinstance(p, (tuple, list)) or p is None for p in padding):
            if len(padding) % 2 or len(padding) > 2 * self.ndim:
                raise ValueError(f"pad needs {self.ndim} (before, after) pairs for shape {self.shape} (a flat padding "
                                 f"has an even length up to {2 * self.ndim}), got {padding}")
            pairs = [(padding[i], padding[i + 1]) for i in range(0, len(padding), 2)]
            padding = [(0, 0)] * (self.ndim - len(pairs)) + pairs[::-1]
        padding = tuple((0, 0) if p is None else _checked_shape(p, "padding", negative_ok=True) for p in padding)
        if len(padding) != self.ndim or any(len(p) != 2 for p in padding):
            raise ValueError(f"pad needs {self.ndim} (before, after) pairs for shape {self.shape}, got {padding}")
        if mode != "constant":
            return self._pad_mode(padding, mode)
        if any(sym.evaluate(b) < 0 or sym.evaluate(a) < 0 for b, a in padding):   # negative padding crops
            x = self.shrink(tuple((max(0, -b), s - max(0, -a)) for (b, a), s in zip(padding, self.shape)))
            return x.pad(tuple((max(0, b), max(0, a)) for b, a in padding), value)
        if dtypes.is_int(self.dtype) and not (math.isfinite(value) and value == int(value) and
                                              dtypes.min(self.dtype) <= value <= dtypes.max(self.dtype)):
            raise RuntimeError(f"pad value {value} can't be held by {self.dtype} (shape {self.shape})")
        out = type(self)(self.uop.pad(padding))
        if value == 0 and math.copysign(1.0, value) > 0:       # (-0.0 pads too: cat relies on it)
            return out
        region = type(self)(UOp.const(dtypes.bool, True, self.device).broadcast_to(self.shape).pad(padding))
        return region.where(out, value)

    def rearrange(self, formula: str, **sizes) -> Tensor:
        """einops-style axis rearrangement: "b (h w) c -> b h w c" (sizes name the parts of a split group), "..." for
        the axes not named, "1" or "()" for a size-1 axis."""
        if formula.count("->") != 1:
            raise ValueError(f"rearrange needs exactly one '->' in {formula!r}")
        left, right = (_axis_groups(side, formula) for side in formula.split("->"))
        covered = self.ndim - len(left) + 1
        left, right = (_expand_ellipsis(groups, covered) for groups in (left, right))
        names = [n for g in left for n in g]
        if len(left) != self.ndim or sorted(names) != sorted(n for g in right for n in g) or \
                len(set(names)) != len(names) or any(n not in names for n in sizes):
            raise ValueError(f"rearrange {formula!r} doesn't fit shape {self.shape}: each axis name once on each "
                             f"side, one group per axis on the left")
        split = []
        for group, size in zip(left, self.shape):
            known = prod(sizes[n] for n in group if n in sizes)
            unknown = [n for n in group if n not in sizes]
            if len(group) > 1 and (len(unknown) > 1 or size % max(known, 1)):
                raise ValueError(f"rearrange: group {group} of size {size} needs the sizes of all its names but one")
            split += [sizes.get(n, size // max(known, 1)) for n in group]
        x = self.reshape(split).permute([names.index(n) for g in right for n in g])
        size_of = dict(zip([n for g in right for n in g], x.shape))
        return x.reshape([prod(size_of[n] for n in g) for g in right])

    def shrink_to(self, shape, *args) -> Tensor:
        """The leading part of each axis, to this shape (None keeps an axis)."""
        return self.shrink(tuple(None if s is None else (0, s) for s in argfix(shape, *args)))

    def pad_to(self, shape, *args, value: float = 0.0) -> Tensor:
        """Padded at the end of each axis to this shape (None keeps an axis)."""
        shape = argfix(shape, *args)
        if len(shape) != self.ndim:
            raise ValueError(f"pad_to shape {shape} has {len(shape)} axes, the tensor has {self.ndim} ({self.shape})")
        return self.pad(tuple((0, 0 if n is None else n - s) for s, n in zip(self.shape, shape)), value)

    def shrink(self, bounds) -> Tensor:
        bounds = tuple((0, s) if b is None else tuple(b) for b, s in zip(bounds, self.shape))
        if len(bounds) != self.ndim or any(not 0 <= sym.evaluate(b) <= sym.evaluate(e) <= sym.evaluate(s)
                                           for (b, e), s in zip(bounds, self.shape)):
            raise ValueError(f"shrink bounds {bounds} don't fit shape {self.shape}")
        return type(self)(self.uop.shrink(bounds))

    def flip(self, axis, *args) -> Tensor: return type(self)(self.uop.flip(self._axes(argfix(axis, *args))))  # noqa: E704

    def transpose(self, dim0=1, dim1=0) -> Tensor:
        dim0, dim1 = self._axis(dim0), self._axis(dim1)
        if not self.ndim:           # (a 0-d tensor's axes 0 and -1 are the same one)
            return self
        return self.permute([dim1 if d == dim0 else dim0 if d == dim1 else d for d in range(self.ndim)])

    @property
    def T(self) -> Tensor: return self.permute(tuple(reversed(range(self.ndim))))     # noqa: E704

    def flatten(self, start_dim=0, end_dim=-1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        start, end = self._axis(start_dim), self._axis(end_dim)
        if start > end:
            raise RuntimeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} (shape {self.shape})")
        return self.reshape(self.shape[:start] + (prod(self.shape[start:end + 1]),) + self.shape[end + 1:])

    def unflatten(self, dim: int, sizes) -> Tensor:
        dim = self._axis(dim)
        return self.reshape(self.shape[:dim] + tuple(sizes) + self.shape[dim + 1:])

    def squeeze(self, dim=None) -> Tensor:
        dims = self._axes(dim)      # (None: every axis)
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if i not in dims or s != 1))

    def unsqueeze(self, dim: int) -> Tensor:
        dim = self._axis(dim, extra=1)
        return self.reshape(self.shape[:dim] + (1,) + self.shape[dim:])

    def cat(self, *others: Tensor, dim: int = 0) -> Tensor:
        tensors = (self,) + others
        for i, t in enumerate(tensors):
            if not isinstance(t, MovementOps):
                raise TypeError(f"cat takes tensors, got {type(t).__name__} at position {i}")
            if t.ndim == 0:
                raise IndexError(f"a 0-d tensor (at position {i}) can't be concatenated; unsqueeze it or use stack")
            if t.device != self.device:
                raise RuntimeError(f"cat: tensors are on different devices ({self.device} and {t.device})")
        dim = self._axis(dim)
        for t in others:
            if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != dim):
                raise RuntimeError(f"cat along dim {dim}: shapes {self.shape} and {t.shape} differ in another dim")
        dtype = least_upper_dtype(*(t.dtype for t in tensors))
        starts = list(itertools.accumulate((t.shape[dim] for t in tensors), initial=0))     # (and the total, last)
        # each tensor padded out to the whole along dim, the pieces summed: floats pad with -0.0, which adds exactly
        # (-0.0 + x is x, -0.0 included; +0.0 would turn -0.0 to +0.0)
        fill = -0.0 if dtypes.is_float(dtype) and len(tensors) > 1 else 0.0
        pieces = [t.cast(dtype).pad(tuple((start, starts[-1] - start - t.shape[dim]) if d == dim else None
                                          for d in range(self.ndim)), fill) for t, start in zip(tensors, starts)]
        return sum(pieces[1:], pieces[0])

    def repeat(self, repeats, *args) -> Tensor:
        repeats = _checked_shape(argfix(repeats, *args), "repeats", negative_ok=True)
        if len(repeats) < self.ndim or any(r < 0 for r in repeats):     # (expand would read -1 as "keep")
            raise RuntimeError(f"repeat needs a count >= 0 for each of the {self.ndim} dims of {self.shape}: {repeats}")
        shape = (1,) * (len(repeats) - self.ndim) + self.shape
        expanded = self.reshape(tuple(x for s in shape for x in (1, s))).expand(
            tuple(x for r, s in zip(repeats, shape) for x in (r, s)))
        return expanded.reshape(tuple(r * s for r, s in zip(repeats, shape)))

    def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
        if not isinstance(repeats, int) or repeats < 0:     # (expand would read -1 as "keep")
            raise RuntimeError(f"repeat_interleave needs a non-negative int of repeats, got {repeats!r}")
        x = self.flatten() if dim is None else self
        dim = 0 if dim is None else x._axis(dim)
        return x.unsqueeze(dim + 1).expand(x.shape[:dim + 1] + (repeats,) + x.shape[dim + 1:]).flatten(dim, dim + 1)

    def split(self, sizes, dim: int = 0) -> list[Tensor]:
        dim = self._axis(dim)
        if any(s < 0 for s in argfix(sizes)) or sizes == 0 and self.shape[dim]:
            raise RuntimeError(f"split sizes must be >= 0 (0 only for an empty dim), got {sizes} for {self.shape}")
        if isinstance(sizes, int):
            sizes = [min(sizes, self.shape[dim] - i) for i in range(0, max(1, self.shape[dim]), max(1, sizes))]
        if sum(sizes) != self.shape[dim]:
            raise ValueError(f"split sizes {list(sizes)} don't add up to {self.shape[dim]} (dim {dim} of {self.shape})")
        return [self.shrink(tuple((start, start + size) if d == dim else None for d in range(self.ndim)))
                for start, size in zip(itertools.accumulate(sizes, initial=0), sizes)]

    def chunk(self, chunks: int, dim: int = 0) -> list[Tensor]:
        dim = self._axis(dim)
        if chunks <= 0:
            raise ValueError(f"chunk needs a positive number of chunks, got {chunks}")
        return self.split(math.ceil(self.shape[dim] / chunks) if self.shape[dim] else [0] * chunks, dim)


def _axis_groups(side: str, formula: str) -> list[list[str]]:
    """One einops side as groups of names: "b (h w) 1" -> [["b"], ["h", "w"], []]."""
    groups, in_group = [], False
    for token in re.findall(r"\.\.\.|\(|\)|\w+|\S", side):
        if token == "(" and not in_group:
            groups.append([])
            in_group = True
        elif token == ")" and in_group:
            in_group = False
        elif token == "..." or token.isidentifier() or token == "1":
            if not in_group:        # (a name outside parentheses is a group of its own)
                groups.append([])
            groups[-1] += [] if token == "1" else [token]
        else:
            raise ValueError(f"rearrange: can't read {token!r} in {formula!r}")
    if in_group:
        raise ValueError(f"rearrange: unclosed '(' in {formula!r}")
    return groups


def _expand_ellipsis(groups: list[list[str]], covered: int) -> list[list[str]]:
    named = [f"...{i}" for i in range(max(covered, 0))]
    out = []
    for g in groups:
        spliced = [m for n in g for m in (named if n == "..." else [n])]
        out += [[n] for n in spliced] if g == ["..."] else [spliced]     # (a lone "..." is a group per axis)
    return out
