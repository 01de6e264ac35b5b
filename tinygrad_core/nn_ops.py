"""Neural-network ops on Tensor: convolution, pooling, normalization, dropout, losses.

Mixed into Tensor; like every Tensor method they are compositions of movement, elementwise and reduce ops."""
import functools
import itertools
import math
import numpy as np
from tinygrad_core.dtype import dtypes
from tinygrad_core.elementwise import in_float32
from tinygrad_core.gradient import composite
from tinygrad_core.helpers import make_tuple, prod, flatten, ceildiv
from tinygrad_core.buffers import buffer_of
from tinygrad_core.schedule import conv_reads_windows_in_place


class NNOps:
    # ---- sliding windows: the one trick behind conv and pooling ----
    def _pool(self, kernel: tuple[int, ...], stride=1, dilation=1):
        """(..., *spatial) -> (..., *out_spatial, *kernel): every window laid out as trailing axes, using only
        movement ops (repeat the input, then cut it so each row starts one stride further)."""
        dims = len(kernel)
        lead, spatial = self.shape[:-dims], self.shape[-dims:]
        strides, dilations = make_tuple(stride, dims), make_tuple(dilation, dims)
        outs = [(i - d * (k - 1) - 1) // s + 1 for i, d, k, s in zip(spatial, dilations, kernel, strides)]
        if any(o <= 0 for o in outs):
            raise ValueError(f"window {kernel} (dilation {dilations}) doesn't fit input of spatial size {spatial}")
        nl = len(lead)
        keep = [(0, s) for s in lead]
        if all(k <= s for k, s in zip(kernel, strides)) and all(d == 1 for d in dilations):
            # windows don't overlap: cut the input into stride-sized tiles and keep the first k of each
            x = self.pad(tuple([(0, 0)] * nl + [(0, max(0, o * s - i)) for o, s, i in zip(outs, strides, spatial)]))
            x = x.shrink(tuple(keep + [(0, o * s) for o, s in zip(outs, strides)]))
            x = x.reshape(*lead, *flatten((o, s) for o, s in zip(outs, strides)))
            x = x.shrink(tuple(keep + flatten(((0, o), (0, k)) for o, k in zip(outs, kernel))))
            return x.permute(*range(nl), *[nl + 2 * i for i in range(dims)], *[nl + 2 * i + 1 for i in range(dims)])
        return composite("overlapping_windows", self, value=lambda x: x._overlapping_windows(kernel, strides, dilations,
                         outs), kernel=kernel, strides=strides, dilations=dilations)

    def _overlapping_windows(self, kernel, strides, dilations, outs):
        dims = len(kernel)
        nl = len(self.shape) - dims
        keep = [(0, s) for s in self.shape[:nl]]
        # a stride past the row length (i + d) would cut beyond a row: the end is padded (never read by a window)
        extra = [max(0, o * s - i - d) for o, s, i, d in zip(outs, strides, self.shape[nl:], dilations)]
        x = self.pad(tuple([(0, 0)] * nl + [(0, e) for e in extra])) if any(extra) else self
        lead, spatial = x.shape[:nl], x.shape[nl:]
        # repeat each spatial axis enough times that windows can be read as rows of a longer axis
        reps = [ceildiv(k * (i + d), i) for k, i, d in zip(kernel, spatial, dilations)]
        x = x.reshape(*lead, *flatten((1, i) for i in spatial))
        x = x.expand(*lead, *flatten((r, i) for r, i in zip(reps, spatial)))
        x = x.reshape(*lead, *[r * i for r, i in zip(reps, spatial)])
        # rows of length i+d: row j starts at j*(i+d), i.e. j*d further along the input (the dilation)
        x = x.shrink(tuple(keep + [(0, k * (i + d)) for k, i, d in zip(kernel, spatial, dilations)]))
        x = x.reshape(*lead, *flatten((k, i + d) for k, i, d in zip(kernel, spatial, dilations)))
        # along each row take every s-th element: the window positions
        x = x.shrink(tuple(keep + flatten(((0, k), (0, o * s)) for k, o, s in zip(kernel, outs, strides))))
        x = x.reshape(*lead, *flatten((k, o, s) for k, o, s in zip(kernel, outs, strides)))
        x = x.shrink(tuple(keep + flatten(((0, k), (0, o), (0, 1)) for k, o in zip(kernel, outs))))
        x = x.reshape(*lead, *flatten((k, o) for k, o in zip(kernel, outs)))
        return x.permute(*range(nl), *[nl + 2 * i + 1 for i in range(dims)], *[nl + 2 * i for i in range(dims)])

    def _unpool(self, spatial, kernel, strides, dilations):
        """The gradient of _overlapping_windows: each window element's gradient added to the input element it was
        read from. One shifted copy per kernel position, summed: a kernel of plain loads (autograd through the
        repeat-and-reshape views would make a reduce whose every load divides and takes remainders).

        With stride s the input is laid out in phases, (..., n, s) for each spatial axis: kernel offset k*d = q*s + r
        reads phase r, q phase-rows further on. So each copy is a plain shift along its phase's rows (no zeros
        interleaved, whose gated loads would divide by s), and the phases reshape back to the input's rows."""
        dims = len(kernel)
        lead, outs = self.shape[:-2 * dims], self.shape[-2 * dims:-dims]
        keep, unpadded = [(0, s) for s in lead], [(0, 0)] * len(lead)
        # computed once, kernel axes first: each shifted copy then reads a contiguous block of it
        nl = len(lead)
        windows = self.permute(*range(nl), *range(nl + dims, nl + 2 * dims), *range(nl, nl + dims)).contiguous()
        rows = [ceildiv(i, s) for i, s in zip(spatial, strides)]           # phase-rows per spatial axis
        copies = []
        for offsets in itertools.product(*[range(k) for k in kernel]):
            g = windows.shrink(tuple(keep + [(k, k + 1) for k in offsets] + [(0, o) for o in outs]))
            shifts = [divmod(k * d, s) for k, d, s in zip(offsets, dilations, strides)]        # (q, r) per axis
            g = g.reshape(*lead, *outs)
            g = g.pad(tuple(unpadded + [(q, n - q - o) for (q, _), n, o in zip(shifts, rows, outs)]))
            if any(s > 1 for s in strides):
                g = g.reshape(*lead, *flatten((n, 1) for n in rows))
                g = g.pad(tuple(unpadded + flatten(((0, 0), (r, s - 1 - r)) for (_, r), s in zip(shifts, strides))))
            copies.append(g)
        while len(copies) > 1:      # added as a tree: a chain of k^3 additions would nest too deep to schedule
            copies = [a + b for a, b in zip(copies[::2], copies[1::2])] + copies[len(copies) & ~1:]
        total = copies[0].reshape(*lead, *[n * s for n, s in zip(rows, strides)])
        return total.shrink(tuple(keep + [(0, i) for i in spatial]))

    def _padding_pairs(self, padding, dims: int, error=ValueError) -> list[tuple[int, int]]:
        """padding as an int, per-dim ints, or flat (before, after) pairs from the last dim -> pairs, first dim
        first."""
        if isinstance(padding, int):
            return [(padding, padding)] * dims
        if isinstance(padding, str):
            raise error(f"Invalid padding string: {padding!r}")
        padding = tuple(padding)
        if len(padding) == dims:
            return [(p, p) for p in padding]
        if len(padding) == 2 * dims:
            return [(padding[2 * i], padding[2 * i + 1]) for i in range(dims)][::-1]
        raise error(f"padding {padding} must be an int, {dims} ints or {2 * dims} ints")

    def _check_conv(self, weight, bias, groups: int, in_channels: int, out_channels: int, stride, dilation):
        """The shape errors a convolution would otherwise hit deep inside its windows, raised when it is built, as
        torch raises them."""
        dims = weight.ndim - 2
        if dims < 1 or self.ndim != weight.ndim:
            raise RuntimeError(f"conv input {self.shape} needs {weight.ndim} dims to match weight {weight.shape} "
                               "(batch, channels, then one per spatial dim of the weight), or one fewer unbatched")
        if not isinstance(groups, int) or groups < 1 or in_channels % groups or out_channels % groups:
            raise RuntimeError(f"groups={groups} must be a positive int dividing the {in_channels} input and "
                               f"{out_channels} output channels (input {self.shape}, weight {weight.shape})")
        if self.shape[1] != in_channels:
            raise RuntimeError(f"conv input {self.shape} has {self.shape[1]} channels but weight {weight.shape} with "
                               f"groups={groups} expects {in_channels}")
        strides, dilations = make_tuple(stride, dims), make_tuple(dilation, dims)
        if {len(strides), len(dilations)} != {dims} or any(v < 1 for v in strides + dilations + weight.shape[2:]):
            raise RuntimeError(f"expected stride {stride} and dilation {dilation} to be an integer or a list of {dims} "
                               f"values to match the convolution dimensions, all > 0 (kernel {weight.shape[2:]} too)")
        if bias is not None and bias.shape != (out_channels,):
            raise RuntimeError(f"conv bias {bias.shape} should be ({out_channels},) for weight {weight.shape}")

    @in_float32                      # (as torch: 16-bit products of large values would overflow before the sum)
    def conv2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0):
        """Cross-correlation like torch.nn.functional.conv2d (also conv1d/conv3d by the weight's rank)."""
        self._need_tensors("conv2d", weight=weight, bias=bias)
        if self.ndim == weight.ndim - 1:      # an unbatched (channels, *spatial) input, as torch takes it
            return self[None].conv2d(weight, bias, groups, stride, dilation, padding)[0]
        (cout, cin_group, *kernel), dims = weight.shape, weight.ndim - 2
        self._check_conv(weight, bias, groups, groups * cin_group, cout, stride, dilation)
        if padding in ("same", "valid"):      # 'same' keeps the size, its odd pixel of padding after (as torch)
            if padding == "same" and any(s != 1 for s in make_tuple(stride, dims)):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            totals = [d * (k - 1) if padding == "same" else 0 for k, d in zip(kernel, make_tuple(dilation, dims))]
            padding = flatten((total // 2, total - total // 2) for total in reversed(totals))
        bs, pads = self.shape[0], self._padding_pairs(padding, dims, RuntimeError)
        padded = [n + b + a for n, (b, a) in zip(self.shape[2:], pads)]
        if any(p < d * (k - 1) + 1 for p, k, d in zip(padded, kernel, make_tuple(dilation, dims))):
            raise RuntimeError(f"conv kernel {tuple(kernel)} (dilation {dilation}) of weight {weight.shape} is larger "
                               f"than the input {self.shape} padded to {tuple(padded)}")
        x = self.pad(((0, 0), (0, 0), *pads))
        if any(p != (0, 0) for p in pads) or buffer_of(x.uop) is None:
            # the padded input is copied once so the window's loads need no bounds checks: the conv's inner loop
            # then reads memory unconditionally and vectorises. So is a computed input: the scheduler would otherwise
            # copy its windows out, kernel-size times its size
            x = x.contiguous()
        x = x._pool(tuple(kernel), stride, dilation)                                   # bs, cin, *out, *kernel
        outs, per_group, window = x.shape[2:2 + dims], cout // groups, cin_group * prod(kernel)
        if conv_reads_windows_in_place(x.uop, make_tuple(stride, dims)):      # decided in schedule.py
            x = x.reshape(bs, groups, cin_group, 1, *outs, *kernel)
            x = x.expand(bs, groups, cin_group, per_group, *outs, *kernel)
            x = x.permute(0, 1, 3, *[4 + i for i in range(dims)], 2, *[4 + dims + i for i in range(dims)])
            w = weight.reshape(1, groups, per_group, *[1] * dims, cin_group, *kernel)
            out = (x * w).sum([-1 - i for i in range(1 + dims)], keepdim=True).reshape(bs, cout, *outs)
        else:
            # im2col: each output position's window copied out as one row, and the convolution a matmul of rows by
            # the weight; contiguous_backward makes both its gradients matmuls too
            x = x.permute(0, *range(2, 2 + dims), 1, *range(2 + dims, 2 + 2 * dims)).contiguous()
            # one axis of rows: the weight's gradient is then a reduce over one long axis, which the kernel unrolls
            x = x.reshape(bs * prod(outs), groups, 1, window).contiguous_backward()
            out = (x * weight.reshape(groups, per_group, window)).sum(-1).reshape(bs, *outs, cout)
            # written out as the matmul made it (fused into its consumer, it would be computed in the consumer's
            # order, channels first, not the matmul's)
            out = out.contiguous().contiguous_backward().permute(0, 1 + dims, *range(1, 1 + dims))
        return out if bias is None else out + bias.reshape(1, -1, *[1] * dims)

    @in_float32
    def conv_transpose2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0, output_padding=0):
        """The gradient of conv2d with respect to its input, as torch.nn.functional.conv_transpose2d: each input
        element times the kernel, added into the output at its strided position (no products with zeros spread
        between or around the input, as torch: an inf or NaN weight reaches only the positions it is added into)."""
        self._need_tensors("conv_transpose2d", weight=weight, bias=bias)
        if self.ndim == weight.ndim - 1:      # unbatched, as in conv2d
            return self[None].conv_transpose2d(weight, bias, groups, stride, dilation, padding, output_padding)[0]
        self._check_conv(weight, bias, groups, weight.shape[0], weight.shape[1] * groups, stride, dilation)
        (bs, cin, *spatial), (_, per_group, *kernel), dims = self.shape, weight.shape, weight.ndim - 2
        strides, dilations, extra = (make_tuple(v, dims) for v in (stride, dilation, output_padding))
        pads = self._padding_pairs(padding, dims, RuntimeError)
        full = [(i - 1) * s + d * (k - 1) + 1 + p for i, s, d, k, p in zip(spatial, strides, dilations, kernel, extra)]
        if any(not 0 <= p < max(s, d) for p, s, d in zip(extra, strides, dilations)):
            raise RuntimeError(f"output_padding {output_padding} must be smaller than either stride {stride} or "
                               f"dilation {dilation}")
        if any(f - b - a <= 0 or i == 0 for f, (b, a), i in zip(full, pads, spatial)):     # (PyTorch's message)
            raise RuntimeError(f"conv_transpose of input {self.shape} with weight {weight.shape}, stride {stride}, "
                               f"padding {padding}, dilation {dilation}: the output would be {full} less the padding "
                               f"{pads}. Output size is too small")
        x = self.reshape(bs, groups, cin // groups, 1, *spatial, *[1] * dims)
        w = weight.reshape(1, groups, cin // groups, per_group, *[1] * dims, *kernel)
        products = (x * w).sum(2).reshape(bs, groups * per_group, *spatial, *kernel)      # each element x kernel
        out = products._unpool(full, kernel, strides, dilations).shrink(
            ((0, bs), (0, groups * per_group), *[(b, f - a) for f, (b, a) in zip(full, pads)]))
        return out if bias is None else out + bias.reshape(1, -1, *[1] * dims)

    # ---- pooling: any number of spatial dims, as many as the kernel has ----
    def _pool_args(self, kernel_size, stride, dilation, padding, ceil_mode: bool):
        """-> kernel, strides, dilations and per-dim (before, after) padding; ceil_mode pads the end further, enough
        for a last partial window, unless it would start in the end padding (torch's rule)."""
        kernel = make_tuple(kernel_size, 2)
        dims = len(kernel)
        strides, dilations = make_tuple(kernel if stride is None else stride, dims), make_tuple(dilation, dims)
        if {len(strides), len(dilations)} != {dims}:
            raise RuntimeError(f"pooling stride {strides}, dilation {dilations}: each must be an int or {dims} ints")
        if any(v < 1 for v in kernel + strides + dilations) or self.ndim < dims:
            raise ValueError(f"pooling input {self.shape} with kernel {kernel}, stride {strides} and dilation "
                             f"{dilations}: all must be positive and the input needs {dims} spatial dims")
        pads = self._padding_pairs(padding, dims)
        for (before, _), k in zip(pads if isinstance(padding, int) or len(padding) == dims else (), kernel):
            if 2 * before > k:       # (torch's rule; (before, after) pairs, tinygrad's and ONNX's, may pad more)
                raise RuntimeError(f"pad should be at most half of kernel size, but got pad={before}, kernel_size={k}")
        if ceil_mode:
            for i, (n, k, s, d, (b, a)) in enumerate(zip(self.shape[-dims:], kernel, strides, dilations, pads)):
                outs = ceildiv(n + b + a - d * (k - 1) - 1, s) + 1
                outs -= (outs - 1) * s >= n + b
                pads[i] = (b, a + max(0, (outs - 1) * s + d * (k - 1) + 1 - (n + b + a)))
        return kernel, strides, dilations, pads

    def _padded_windows(self, kernel, strides, dilations, pads, value=0.0):
        x = self.pad(((0, 0),) * (self.ndim - len(kernel)) + tuple(pads), value) if any(map(any, pads)) else self
        return x._pool(kernel, strides, dilations)

    def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False,
                   return_indices=False):
        """Max over each window (as many spatial dims as kernel_size has), as torch's max_pool1d/2d/3d: the gradient
        goes to the one element return_indices names (flat indices into each input plane, int32).

        >>> Tensor([[[[1, 5, 2], [7, 3, 4]]]]).max_pool2d(2, stride=1, return_indices=True)[1].tolist()
        [[[[3, 1]]]]"""
        kernel, strides, dilations, pads = pooling = self._pool_args(kernel_size, stride, dilation, padding, ceil_mode)
        spatial, axes = self.shape[-len(kernel):], tuple(range(-len(kernel), 0))
        n = prod(spatial)
        positions = self.arange(n, device=self.device).reshape(spatial)._padded_windows(*pooling, -1)
        windows = self._padded_windows(*pooling, dtypes.min(self.dtype))
        pooled = composite("max_pool", windows, value=lambda w: w.max(axes), positions=positions, axes=axes, n=n)
        if not return_indices:
            return pooled
        best = windows._pool_choice(positions, axes, n)[1].reshape(pooled.shape)
        return pooled, (best > n).where(best - n - 1, n - best)

    def _pool_choice(self, positions, axes, n: int):
        """For windows of values and of the input positions they read (-1: padding; n: the input's plane size): the
        score of each element and the window's best score, which marks the element torch's max pooling picks: the
        first of tied maxima, or the last NaN (torch's loop keeps replacing a NaN maximum)."""
        is_max = (self == self.max(axes, keepdim=True)) & (positions >= 0)
        score = (self != self).where(n + 1 + positions, is_max.where(n - positions, 0))
        return score, score.max(axes, keepdim=True)

    def max_pool1d(self, kernel_size=2, stride=None, *, dilation=1, padding=0, ceil_mode=False, return_indices=False):
        """max_pool2d over the last axis (options after stride by name: torch orders them differently)."""
        return self.max_pool2d((kernel_size,), stride, dilation, padding, ceil_mode, return_indices)

    def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False,
                   count_include_pad=True):
        """Mean over each window, as torch's avg_pool1d/2d/3d (the spatial dims are as many as kernel_size has): the
        divisor counts the zero padding unless count_include_pad=False, never ceil_mode's extra end padding."""
        kernel, strides, dilations, pads = self._pool_args(kernel_size, stride, dilation, padding, ceil_mode)
        plain = self._padding_pairs(padding, len(kernel))
        axes = tuple(range(-len(kernel), 0))
        # a window of 16-bit floats is summed and divided in float32, as PyTorch's: its sum may pass half's 65504
        wide = self.dtype in (dtypes.float16, dtypes.bfloat16)
        summed = self._padded_windows(kernel, strides, dilations, pads).sum(axes, dtype=dtypes.float32 if wide else None)
        if count_include_pad and pads == plain:
            mean = summed / prod(kernel)
        else:
            spatial = self.shape[-len(kernel):]
            if count_include_pad:     # ones over the padded input, zeros over ceil_mode's extra
                spatial = [n + b + a for n, (b, a) in zip(spatial, plain)]
                pads = [(0, end - a) for (_, end), (_, a) in zip(pads, plain)]
            counted = self.ones(*spatial, device=self.device)._padded_windows(kernel, strides, dilations, pads)
            mean = (summed / counted.sum(axes)).cast(summed.dtype)      # (as the input's dtype: counted is float32)
        return mean.cast(self.dtype) if wide else mean

    def max_unpool2d(self, indices, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None):
        """The inverse of max_pool2d(return_indices=True): each value written at its index of an otherwise zero plane;
        the plane's size is output_size's last dims or the one the pool came from."""
        lead, spatial = self.shape[:2], self.shape[2:]
        if indices.shape != self.shape:
            raise RuntimeError(f"max_unpool2d: indices {indices.shape} must have the shape of the input {self.shape}")
        if output_size is None:
            kernel, strides, dilations, pads = self._pool_args(kernel_size, stride, dilation, padding, False)
            output_size = [(i - 1) * s - b - a + d * (k - 1) + 1
                           for i, k, s, d, (b, a) in zip(spatial, kernel, strides, dilations, pads)]
        output_size = tuple(output_size)[-len(spatial):]
        hits = indices.reshape(*lead, -1, 1) == self.arange(prod(output_size), device=self.device)
        # an index named twice (overlapping windows) holds the same input element: write it once
        plane = hits.where(self.reshape(*lead, -1, 1), 0).sum(-2) / hits.sum(-2).maximum(1)
        return plane.cast(self.dtype).reshape(*lead, *output_size)

    def unfold(self, dim: int, size: int, step: int):
        """Windows of size elements along dim, step apart, as a new last axis; dim becomes the window count (as
        torch.Tensor.unfold).

        >>> Tensor.arange(5).unfold(0, 2, 2).tolist()
        [[0, 1], [2, 3]]"""
        dim = self._axes(dim)[0]
        if size < 0 or step < 1 or size > self.shape[dim]:
            raise RuntimeError(f"unfold: size {size} must be in [0, {self.shape[dim]}] (dim {dim} of {self.shape}) "
                               f"and step {step} positive")
        order = [d for d in range(self.ndim) if d != dim] + [dim]
        windows = self.permute(order)._pool((size,), step)
        return windows.permute(*sorted(range(self.ndim), key=order.__getitem__), self.ndim)

    def interpolate(self, size, mode: str = "linear", align_corners: bool = False):
        """Resamples the last len(size) axes to size, as torch.nn.functional.interpolate: mode 'linear' (also named
        'bilinear', 'trilinear'), 'nearest' or 'nearest-exact'.

        >>> Tensor([[0.0, 1.0]]).interpolate((4,)).tolist()
        [[0.0, 0.25, 0.75, 1.0]]"""
        mode = "linear" if mode in ("bilinear", "trilinear") else mode
        if mode not in ("linear", "nearest", "nearest-exact") or (align_corners and mode != "linear"):
            raise ValueError(f"interpolate mode {mode!r} (align_corners={align_corners}): modes are linear, bilinear, "
                             "trilinear (which take align_corners), nearest and nearest-exact")
        if not 0 < len(size) <= self.ndim or any(not isinstance(n, int) or n < 1 for n in size):
            raise (ValueError if all(isinstance(n, int) for n in size) else TypeError)(
                f"interpolate size {size} must be up to {self.ndim} positive ints for shape {self.shape}")
        integer = mode == "linear" and not dtypes.is_float(self.dtype)
        x, const = (self.cast(dtypes.int64) if integer else self), functools.partial(type(self), device=self.device)
        for axis in range(self.ndim - 1, self.ndim - len(size) - 1, -1):     # the last axis first, as torch's uint8
            n, out, trail = self.shape[axis], size[axis - self.ndim], (1,) * (self.ndim - axis - 1)

            def gather(index):
                index = const(index).cast(dtypes.int32).minimum(n - 1).reshape(out, *trail)
                return x.gather(axis, index.expand(*x.shape[:axis], out, *x.shape[axis + 1:]))
            # the source positions (pos) depend on the sizes alone: computed here, as torch does (float64 for float64
            # input, else float32); not clipped at the end: past the last sample torch splits the weight between it
            # and itself (its clamped neighbour), which keeps an inf from meeting a 0 weight
            at = np.arange(out, dtype=np.float64 if integer or self.dtype == dtypes.float64 else np.float32)
            if mode != "linear":
                x = gather(((at + 0.5) if mode == "nearest-exact" else at) * (n / out))
                continue
            pos = (at * ((n - 1) / max(out - 1, 1)) if align_corners else (at + 0.5) * (n / out) - 0.5).clip(0, None)
            weights = (1 - pos % 1, pos % 1)
            if integer:     # as torch resamples uint8: in 15-bit fixed point (14 if a weight is 1), rounded half up
                bits = 14 if max(map(np.max, weights)) * 32768 + 0.5 >= 32768 else 15
                weights = [np.trunc(w * (1 << bits) + 0.5).astype(np.int64) for w in weights]
            # (a neighbour weighted 0 everywhere, as at an unchanged size, is left out: its NaN would spread)
            x = sum(gather(pos // 1 + i) * const(w).reshape(out, *trail) for i, w in enumerate(weights) if w.any())
            x = ((x + (1 << bits - 1)) >> bits).clip(self.dtype.min, self.dtype.max) if integer else x
        return x.cast(self.dtype)

    def _pad_mode(self, padding, mode: str):
        """Tensor.pad's modes that extend each axis with the tensor's own values: 'reflect' mirrors it about its edge
        element, 'replicate' repeats the edge element, 'circular' wraps around. Negative pads crop: circular crops
        first, the other two after padding (as torch)."""
        if mode not in ("reflect", "replicate", "circular"):
            raise NotImplementedError(f"pad mode {mode!r}: modes are constant, reflect, replicate and circular")
        crop = tuple((min(b, 0), min(a, 0)) for b, a in padding)
        x = self.pad(crop) if mode == "circular" else self
        # only the padded axes, as torch: an unpadded one may be empty (its edge can't be taken)
        for axis, (before, after) in [(d, p) for d, p in enumerate(padding) if p != (0, 0)]:
            before, after, n = max(before, 0), max(after, 0), x.shape[axis]
            if max(before, after) > (n - 1 if mode == "reflect" else n if mode == "circular" else math.inf):
                raise ValueError(f"{mode} pad ({before}, {after}) of axis {axis} must be less than its size {n}"
                                 f"{' (or equal)' if mode == 'circular' else ''}: shape {x.shape}")

            def edge(start, stop):
                return x.shrink(tuple((start, stop) if d == axis else (0, s) for d, s in enumerate(x.shape)))
            if mode == "reflect":
                pieces = edge(1, before + 1).flip(axis), x, edge(n - 1 - after, n - 1).flip(axis)
            elif mode == "replicate":
                sizes = [x.shape[:axis] + (p,) + x.shape[axis + 1:] for p in (before, after)]
                pieces = edge(0, 1).expand(sizes[0]), x, edge(n - 1, n).expand(sizes[1])
            else:
                pieces = edge(n - before, n), x, edge(0, after)
            pieces = [p for p in pieces if p.shape[axis]]
            x = pieces[0].cat(*pieces[1:], dim=axis) if pieces else x      # (none: circular cropped the whole axis)
        return x if mode == "circular" else x.pad(crop)

    # ---- normalization ----
    def batchnorm(self, weight, bias, mean, invstd, axis=1):
        axes = make_tuple(axis, 1)
        shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
        for name, t in (("running_mean", mean), ("invstd", invstd), ("weight", weight), ("bias", bias)):
            if t is not None and t.numel() != prod(shape) and (name != "invstd" or t.ndim == len(axes)):
                raise RuntimeError(f"{name} should contain {prod(shape)} elements not {t.numel()}")
        x = self - mean.reshape(shape)
        if weight is not None:
            x = x * weight.reshape(shape)
        out = x * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
        return out + bias.reshape(shape) if bias is not None else out

    @in_float32                      # (the squares would overflow 16 bits)
    def layernorm(self, axis=-1, eps: float = 1e-5):
        y = self - self.mean(axis, keepdim=True)
        # a variance past the float range leaves y / sqrt(var) undefined (inf / inf): NaN, as PyTorch's Welford mostly
        # gives there (not y * rsqrt(inf) = 0, which returned the bias); + 0 as PyTorch's zero bias: x = mean is +0.0
        return y * (var := (y * y).mean(axis, keepdim=True)).isinf().where(math.nan, var.add(eps).rsqrt()) + 0

    def dropout(self, p: float = 0.5):
        if not 0 <= p <= 1:          # (checked outside training too, as torch)
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        if not type(self).training or p == 0:
            return self
        keep = self.rand_like(dtype=dtypes.float32) >= p
        return keep.where(self, 0) * (1 / (1 - p) if p < 1 else 0)

    def one_hot(self, num_classes: int = -1):
        """int32 (..., num_classes) with a 1 at each value's class; num_classes=-1 reads the tensor to take its max + 1
        (which also checks no value is negative, as torch)."""
        if not dtypes.is_int(self.dtype):
            raise RuntimeError(f"one_hot needs an integer tensor of class indices, got {self.dtype}")
        if num_classes < -1:
            raise ValueError(f"one_hot: num_classes must be -1 (inferred) or non-negative, got {num_classes}")
        # num_classes inferred: the values are read back, realized first so that they are checked below
        x = self.contiguous().realize() if num_classes == -1 and buffer_of(self.uop) is None else self
        num_classes = x.max().item() + 1 if num_classes == -1 else num_classes
        x._check_range(0, num_classes, lambda v: RuntimeError(
            f"Class values must be {'non-negative' if v < 0 else f'smaller than num_classes={num_classes}'}, got {v}"))
        return (x.unsqueeze(-1) == x.arange(num_classes, device=x.device)).cast(dtypes.int32)

    def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12):
        """self divided by its p-norm along dim, the norm held at eps or more (torch.nn.functional.normalize)."""
        x = self._float()
        if p == math.inf:
            return x / x.abs().max(dim, keepdim=True).maximum(eps)
        if p == 0:
            return x / (x != 0).sum(dim, keepdim=True).maximum(eps)
        # clamped before the root: the root's gradient at a zero norm would be 0 * inf
        total = (x * x if p == 2 else x.abs().pow(p)).sum(dim, keepdim=True)
        return x / (total.maximum(eps ** p).pow(1 / p) if eps ** p > 0 else total.pow(1 / p).maximum(eps))

    def scaled_dot_product_attention(self, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                     enable_gqa: bool = False):
        """softmax(self @ key^T / sqrt(head size) + mask) @ value, self the queries (..., L, E), key (..., S, E).
        attn_mask: bool (True attends) or added to the scores; is_causal: query i attends to keys 0..i. A query that
        may attend to nothing gets zeros, as torch."""
        if key.shape[-1] != self.shape[-1]:     # (the matmul would name the key transposed)
            raise RuntimeError(f"attention query {self.shape} and key {key.shape} need the same last (embedding) size")
        if enable_gqa:      # key/value heads shared by groups of query heads
            key, value = (t.repeat_interleave(self.shape[-3] // t.shape[-3], dim=-3) for t in (key, value))
        if is_causal:
            if attn_mask is not None:
                raise RuntimeError("scaled_dot_product_attention: give attn_mask or is_causal=True, not both")
            attn_mask = self.arange(self.shape[-2], device=self.device).unsqueeze(-1) >= \
                self.arange(key.shape[-2], device=self.device)
        scores = (self @ key.transpose(-2, -1)) * (1 / math.sqrt(self.shape[-1]))
        if attn_mask is not None:
            scores = scores + (attn_mask.where(0.0, -math.inf) if attn_mask.dtype == dtypes.bool else attn_mask)
        shut = (scores == -math.inf).all(-1, keepdim=True)
        # a fully masked row's softmax would be 0/0: it is computed on zeros instead, then replaced
        weights = shut.where(0.0, shut.where(0.0, scores).softmax(-1))
        return weights.dropout(dropout_p) @ value

    # ---- losses: class axis 1 (torch), except sparse_categorical_crossentropy's -1 (tinygrad) ----
    def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0,
                                        reduction: str = "mean"):
        """Cross-entropy of logits (..., C) and class indices Y (...); labels equal to ignore_index count for
        nothing, in the mean's divisor too (which makes a mean over nothing NaN, as torch)."""
        self._need_tensors("sparse_categorical_crossentropy", Y=Y)
        if self.shape[:-1] != Y.shape or not dtypes.is_int(Y.dtype):
            raise RuntimeError(f"logits {self.shape} need int labels shaped {self.shape[:-1]}, got {Y.dtype} {Y.shape}")
        if not 0 <= label_smoothing <= 1:
            raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
        Y._check_range(0, self.shape[-1], lambda v: IndexError(f"Target {v} is out of bounds."), ignore_index)
        log_probs = self.log_softmax(-1)
        keep = (Y != ignore_index)
        target = (Y.unsqueeze(-1) == self.arange(self.shape[-1], device=self.device)) & keep.unsqueeze(-1)
        loss = -(target.where(log_probs, 0).sum(-1))
        if label_smoothing:      # (only then: a -inf logit makes the smoothing term inf, where 0 * inf is NaN)
            loss = (1 - label_smoothing) * loss + label_smoothing * keep.where(-log_probs.mean(-1), 0)
        return _reduce_loss(loss, reduction, keep)

    def cross_entropy(self, Y, reduction: str = "mean", label_smoothing: float = 0.0, ignore_index: int = -100):
        """torch.nn.functional.cross_entropy: logits (N, C, d...) or (C,); Y class indices (N, d...) or class
        probabilities of the logits' shape."""
        self._need_tensors("cross_entropy", target=Y)
        axis = min(1, self.ndim - 1)
        logits = self.permute(*[d for d in range(self.ndim) if d != axis], axis)     # classes last
        if Y.shape != self.shape:
            return logits.sparse_categorical_crossentropy(Y, ignore_index, label_smoothing, reduction)
        if not 0 <= label_smoothing <= 1:
            raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
        Y = Y.permute(*[d for d in range(self.ndim) if d != axis], axis) * (1 - label_smoothing)
        return _reduce_loss(-(logits.log_softmax(-1) * (Y + label_smoothing / logits.shape[-1])).sum(-1), reduction)

    def binary_crossentropy(self, Y, reduction: str = "mean"):
        """-(Y log(self) + (1 - Y) log(1 - self)), self probabilities; as in PyTorch, each log is at least -100."""
        return _reduce_loss(composite("binary_crossentropy", *self._to_operand(self._same_shape(Y)), value=lambda p, y: -(
            y * p.log().maximum(-100) + (1 - y) * (1 - p).log().maximum(-100))), reduction)

    def binary_crossentropy_logits(self, Y, reduction: str = "mean", pos_weight=None):
        """binary_crossentropy of sigmoid(self), the positive term weighted by pos_weight (BCEWithLogitsLoss)."""
        # log(sigmoid(x)) = -softplus(-x) and log(1 - sigmoid(x)) = -x - softplus(-x): stable for large |x|
        positive = 1 if pos_weight is None else 1 + (pos_weight - 1) * Y
        return _reduce_loss((1 - self._same_shape(Y)) * self + positive * (-self).softplus(), reduction)

    @in_float32                      # (a 16-bit sum of the losses would round, or overflow, before the mean)
    def nll_loss(self, Y, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        """-self[n, Y[n], d...] * weight[Y[n]] for log-probabilities (N, C, d...) or (C,) and class indices (N, d...);
        the mean divides by the summed weights of the labels counted (torch.nn.functional.nll_loss)."""
        self._need_tensors("nll_loss", target=Y, weight=weight)
        axis = min(1, self.ndim - 1)
        classes = self.shape[axis]
        if self.shape[:axis] + self.shape[axis + 1:] != Y.shape or not dtypes.is_int(Y.dtype):
            raise RuntimeError(f"nll_loss input {self.shape} (classes on axis {axis}) needs an integer target of shape "
                               f"{self.shape[:axis] + self.shape[axis + 1:]}, got {Y.dtype} {Y.shape}")
        Y._check_range(0, classes, lambda v: IndexError(f"Target {v} is out of bounds."), ignore_index)
        if weight is not None and weight.shape != (classes,):
            raise RuntimeError(f"nll_loss weight {weight.shape} should have one entry for each of the {classes} "
                               f"classes of input {self.shape}")
        class_axis = (classes,) + (1,) * (Y.ndim - axis)
        target = (Y.unsqueeze(axis) == self.arange(classes, device=self.device).reshape(class_axis))
        target = target & (Y != ignore_index).unsqueeze(axis)
        weights = target.where(1.0 if weight is None else weight.reshape(class_axis), 0.0)
        # selected with where, not multiplied: a log-probability of -inf elsewhere would make 0 * -inf
        loss = -(target.where(self * weights, 0.0).sum(axis))
        return _reduce_loss(loss, reduction, weights.sum(axis))

    def _same_shape(self, Y):
        """A binary cross-entropy's target tensor of another shape would broadcast: (3, 1) against (3,) is a (3, 3)
        loss. Raised as PyTorch raises it (a Python number target still stands for every element, as in tinygrad)."""
        if isinstance(Y, type(self)) and Y.shape != self.shape:
            raise ValueError(f"Using a target size ({Y.shape}) that is different to the input size ({self.shape})")
        return Y

    def mse_loss(self, Y, reduction: str = "mean"):
        """Mean squared error."""
        return _reduce_loss((self - Y).square(), reduction)


def _reduce_loss(loss, reduction: str, counted=None):
    """counted: how much each element counts in the mean (0 when ignored); the mean over none is NaN."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else \
        loss.sum() / counted.sum() if counted is not None else loss.mean()
