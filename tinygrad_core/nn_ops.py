"""Neural-network ops on Tensor: convolution, pooling, normalization, dropout, losses.

Mixed into Tensor; like every Tensor method they are compositions of movement, elementwise and reduce ops."""
from __future__ import annotations
import functools
import itertools
import math
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import make_tuple, prod, flatten, ceildiv


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
            x = self.pad(tuple(keep + [(0, max(0, o * s - i)) for o, s, i in zip(outs, strides, spatial)]))
            x = x.shrink(tuple(keep + [(0, o * s) for o, s in zip(outs, strides)]))
            x = x.reshape(*lead, *flatten((o, s) for o, s in zip(outs, strides)))
            x = x.shrink(tuple(keep + flatten(((0, o), (0, k)) for o, k in zip(outs, kernel))))
            return x.permute(*range(nl), *[nl + 2 * i for i in range(dims)], *[nl + 2 * i + 1 for i in range(dims)])
        return _overlapping_windows_function().apply(self, kernel=kernel, strides=strides, dilations=dilations,
                                                      outs=outs)

    def _overlapping_windows(self, kernel, strides, dilations, outs):
        dims = len(kernel)
        lead, spatial = self.shape[:-dims], self.shape[-dims:]
        nl = len(lead)
        keep = [(0, s) for s in lead]
        # repeat each spatial axis enough times that windows can be read as rows of a longer axis
        reps = [ceildiv(k * (i + d), i) for k, i, d in zip(kernel, spatial, dilations)]
        x = self.reshape(*lead, *flatten((1, i) for i in spatial))
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
        total = None
        for offsets in itertools.product(*[range(k) for k in kernel]):
            g = windows.shrink(tuple(keep + [(k, k + 1) for k in offsets] + [(0, o) for o in outs]))
            shifts = [divmod(k * d, s) for k, d, s in zip(offsets, dilations, strides)]        # (q, r) per axis
            g = g.reshape(*lead, *outs)
            g = g.pad(tuple(unpadded + [(q, n - q - o) for (q, _), n, o in zip(shifts, rows, outs)]))
            if any(s > 1 for s in strides):
                g = g.reshape(*lead, *flatten((n, 1) for n in rows))
                g = g.pad(tuple(unpadded + flatten(((0, 0), (r, s - 1 - r)) for (_, r), s in zip(shifts, strides))))
            total = g if total is None else total + g
        total = total.reshape(*lead, *[n * s for n, s in zip(rows, strides)])
        return total.shrink(tuple(keep + [(0, i) for i in spatial]))

    def _padding_pairs(self, padding, dims: int) -> list[tuple[int, int]]:
        """padding as an int, per-dim ints, or flat (before, after) pairs from the last dim -> pairs, first dim
        first."""
        if isinstance(padding, int):
            return [(padding, padding)] * dims
        padding = tuple(padding)
        if len(padding) == dims:
            return [(p, p) for p in padding]
        if len(padding) == 2 * dims:
            return [(padding[2 * i], padding[2 * i + 1]) for i in range(dims)][::-1]
        raise ValueError(f"padding {padding} must be an int, {dims} ints or {2 * dims} ints")

    def conv2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0):
        """Cross-correlation like torch.nn.functional.conv2d (also conv1d/conv3d by the weight's rank)."""
        bs, cin = self.shape[:2]
        cout, cin_group, *kernel = weight.shape
        dims = len(kernel)
        if self.ndim != dims + 2:
            raise ValueError(f"conv input {self.shape} needs {dims + 2} dims to match weight {weight.shape}")
        if cin != groups * cin_group:
            raise ValueError(f"conv input has {cin} channels but weight {weight.shape} with groups={groups} expects "
                             f"{groups * cin_group}")
        pads = self._padding_pairs(padding, dims)
        x = self.pad(((0, 0), (0, 0), *pads))
        if any(p != (0, 0) for p in pads):
            # the padded input is copied once so the window's loads need no bounds checks: the conv's inner loop
            # then reads memory unconditionally and vectorises (30x faster on CPU for a padded 3x3 conv)
            x = x.contiguous()
        x = x._pool(tuple(kernel), stride, dilation)                                   # bs, cin, *out, *kernel
        outs, per_group, window = x.shape[2:2 + dims], cout // groups, cin_group * prod(kernel)
        if all(s == 1 for s in make_tuple(stride, dims)) and outs[-1] % 16 == 0:
            # stride 1 and output rows of whole vectors: the product-sum reads the windows in place (neighbouring
            # outputs read neighbouring inputs, so its loads vectorise along the rows; 2-4x faster than im2col here)
            x = x.reshape(bs, groups, cin_group, 1, *outs, *kernel)
            x = x.expand(bs, groups, cin_group, per_group, *outs, *kernel)
            x = x.permute(0, 1, 3, *[4 + i for i in range(dims)], 2, *[4 + dims + i for i in range(dims)])
            w = weight.reshape(1, groups, per_group, *[1] * dims, cin_group, *kernel)
            out = (x * w).sum([-1 - i for i in range(1 + dims)], keepdim=True).reshape(bs, cout, *outs)
        else:
            # strided or short rows: read in place, neighbouring outputs would gather inputs a stride apart, or rows
            # would end mid-vector (5-30x slower). So each output position's window is copied out as one row (im2col)
            # and the convolution is a matmul of rows by the weight; contiguous_backward makes both its gradients
            # matmuls too.
            x = x.permute(0, *range(2, 2 + dims), 1, *range(2 + dims, 2 + 2 * dims)).contiguous()
            # one axis of rows: the weight's gradient is then a reduce over one long axis, which the kernel unrolls
            x = x.reshape(bs * prod(outs), groups, 1, window).contiguous_backward()
            out = (x * weight.reshape(groups, per_group, window)).sum(-1).reshape(bs, *outs, cout)
            # written out as the matmul made it (fused into its consumer, it would be computed in the consumer's
            # order, channels first: 20x slower)
            out = out.contiguous().contiguous_backward().permute(0, 1 + dims, *range(1, 1 + dims))
        return out if bias is None else out + bias.reshape(1, -1, *[1] * dims)

    def conv_transpose2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0, output_padding=0):
        """The gradient of conv2d with respect to its input, as torch.nn.functional.conv_transpose2d."""
        dims = weight.ndim - 2
        kernel = weight.shape[2:]
        strides, dilations = make_tuple(stride, dims), make_tuple(dilation, dims)
        out_pads = make_tuple(output_padding, dims)
        pads = self._padding_pairs(padding, dims)
        # weight (cin, cout/groups, *k) -> (cout, cin/groups, *k), flipped in space
        w = weight.reshape(groups, weight.shape[0] // groups, *weight.shape[1:]).transpose(1, 2)
        w = w.flip(*range(3, 3 + dims)).reshape(-1, weight.shape[0] // groups, *kernel)
        x = self
        if any(s > 1 for s in strides):       # spread the input out with s-1 zeros between elements
            bs_c = x.shape[:2]
            x = x.reshape(*bs_c, *flatten((n, 1) for n in x.shape[2:]))
            x = x.pad(((0, 0), (0, 0), *flatten(((0, 0), (0, s - 1)) for s in strides)))
            x = x.reshape(*bs_c, *[n * s for n, s in zip(x.shape[2::2], strides)])
            x = x.shrink(((0, bs_c[0]), (0, bs_c[1]), *[(0, n - (s - 1)) for n, s in zip(x.shape[2:], strides)]))
        new_pads = flatten(((k - 1) * d - before, (k - 1) * d - after + op)
                           for k, d, (before, after), op in reversed(list(zip(kernel, dilations, pads, out_pads))))
        return x.conv2d(w, bias, groups=groups, dilation=dilation, padding=new_pads)

    def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False):
        kernel = make_tuple(kernel_size, 2)
        pads = self._padding_pairs(padding, 2)
        x = self.pad(((0, 0),) * (self.ndim - 2) + tuple(pads), value=-math.inf) if padding else self
        return x._pool(kernel, stride if stride is not None else kernel, dilation).max(axis=(-2, -1))

    def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, count_include_pad=True):
        kernel = make_tuple(kernel_size, 2)
        pads = self._padding_pairs(padding, 2)
        x = self.pad(((0, 0),) * (self.ndim - 2) + tuple(pads)) if padding else self
        summed = x._pool(kernel, stride if stride is not None else kernel, dilation).sum(axis=(-2, -1))
        if count_include_pad or not padding:
            return summed / prod(kernel)
        ones = self.ones_like().pad(((0, 0),) * (self.ndim - 2) + tuple(pads))
        return summed / ones._pool(kernel, stride if stride is not None else kernel, dilation).sum(axis=(-2, -1))

    def max_pool1d(self, kernel_size=2, stride=None):
        return self._pool((kernel_size,), stride or kernel_size).max(-1)

    # ---- normalization ----
    def batchnorm(self, weight, bias, mean, invstd, axis=1):
        axes = make_tuple(axis, 1)
        shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
        x = self - mean.reshape(shape)
        if weight is not None:
            x = x * weight.reshape(shape)
        out = x * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
        return out + bias.reshape(shape) if bias is not None else out

    def layernorm(self, axis=-1, eps: float = 1e-5):
        y = self - self.mean(axis, keepdim=True)
        return y * (y * y).mean(axis, keepdim=True).add(eps).rsqrt()

    def dropout(self, p: float = 0.5):
        from tinygrad_core.tensor import Tensor
        if not Tensor.training or p == 0:
            return self
        if not 0 <= p < 1:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        keep = Tensor.rand(*self.shape, device=self.device) >= p
        return keep.where(self, 0) * (1 / (1 - p))

    def one_hot(self, num_classes: int = -1):
        from tinygrad_core.tensor import Tensor
        if num_classes == -1:
            num_classes = int(self.max().item()) + 1
        return (self.unsqueeze(-1) == Tensor.arange(num_classes, device=self.device)).cast(dtypes.int32)

    # ---- losses ----
    def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0,
                                        reduction: str = "mean"):
        from tinygrad_core.tensor import Tensor
        if self.shape[:-1] != Y.shape:
            raise ValueError(f"logits {self.shape} need labels of shape {self.shape[:-1]}, got {Y.shape}")
        classes = self.shape[-1]
        log_probs = self.log_softmax(-1)
        keep = (Y != ignore_index)
        target = (Y.unsqueeze(-1) == Tensor.arange(classes, device=self.device)) & keep.unsqueeze(-1)
        picked = -(target.where(log_probs, 0).sum(-1))
        smooth = -log_probs.mean(-1) * keep
        loss = (1 - label_smoothing) * picked + label_smoothing * smooth
        return _reduce_loss(loss, reduction, keep)

    def cross_entropy(self, Y, reduction: str = "mean", label_smoothing: float = 0.0):
        """Y: class indices (like sparse_categorical_crossentropy) or class probabilities of the logits' shape."""
        if Y.shape != self.shape:
            return self.sparse_categorical_crossentropy(Y, reduction=reduction, label_smoothing=label_smoothing)
        classes = self.shape[-1]
        Y = Y * (1 - label_smoothing) + label_smoothing / classes
        return _reduce_loss(-(self.log_softmax(-1) * Y).sum(-1), reduction)

    def binary_crossentropy(self, Y, reduction: str = "mean"):
        return _reduce_loss(-(Y * self.log() + (1 - Y) * (1 - self).log()), reduction)

    def binary_crossentropy_logits(self, Y, reduction: str = "mean"):
        # log(sigmoid(x)) = -softplus(-x): stable for large |x|
        return _reduce_loss((1 - Y) * self + (-self).softplus(), reduction)

    def nll_loss(self, Y, reduction: str = "mean"):
        from tinygrad_core.tensor import Tensor
        target = Y.unsqueeze(-1) == Tensor.arange(self.shape[-1], device=self.device)
        return _reduce_loss(-(target.where(self, 0).sum(-1)), reduction)

    def mse_loss(self, Y, reduction: str = "mean"):
        return _reduce_loss((self - Y).square(), reduction)


def _reduce_loss(loss, reduction: str, keep=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / keep.sum().maximum(1) if keep is not None else loss.mean()
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


@functools.cache
def _overlapping_windows_function():
    # imported here: tensor.py imports this module before it defines Function
    from tinygrad_core.tensor import Function

    class OverlappingWindows(Function):
        """_pool's windows where they overlap, with the gradient written out (see NNOps._unpool)."""

        def forward(self, x, kernel, strides, dilations, outs):
            self.spatial, self.kernel, self.strides, self.dilations = x.shape[-len(kernel):], kernel, strides, dilations
            return x._overlapping_windows(kernel, strides, dilations, outs)

        def backward(self, grad_output):
            return grad_output._unpool(self.spatial, self.kernel, self.strides, self.dilations)
    return OverlappingWindows
