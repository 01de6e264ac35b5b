"""Neural-network layers: plain objects holding parameter Tensors, called like functions.

They sit on top of Tensor (their math is Tensor ops from tensor.py and nn_ops.py); optim, state and datasets live
beside them. Initialisation follows PyTorch's defaults, attribute names follow tinygrad's (weight, bias, running_*)."""
import math
import numpy as np
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import make_tuple, prod
from tinygrad_core.tensor import Tensor


class Layer:
    """What every layer shares: .parameters() lists its tensors (those of sub-layers included)."""

    def parameters(self) -> list[Tensor]:
        from tinygrad_core.nn.state import get_parameters
        return get_parameters(self)


def _filled(shape, value: float, dtype=dtypes.float32, requires_grad: bool | None = None) -> Tensor:
    """A tensor with a buffer of its own, from host memory: Tensor.ones(n) in two layers would be one graph node and
    so realize into one shared buffer, and an optimizer updating one layer's weight would update both."""
    return Tensor(np.full(make_tuple(shape, 1), value, dtype=np.float32), dtype=dtype, requires_grad=requires_grad)


def _affine_parameters(shape, affine: bool) -> tuple[Tensor | None, Tensor | None]:
    """A norm's weight (ones) and bias (zeros), each with a buffer of its own; neither without affine."""
    return (_filled(shape, 1.0), _filled(shape, 0.0)) if affine else (None, None)


def _conv_parameters(layer, cin: int, cout: int, kernel_size, groups: int, bias: bool, transposed: bool = False):
    """A convolution's kernel_size, weight and bias, as PyTorch makes them: the weight (cout, cin // groups,
    *kernel_size), transposed (cin, cout // groups, *kernel_size), and fan_in from weight.shape[1:]."""
    if not groups > 0:
        raise ValueError(f"groups must be a positive integer, got {groups}")
    if cin % groups or cout % groups:
        raise ValueError(f"in_channels ({cin}) and out_channels ({cout}) must both be divisible by groups ({groups})")
    layer.kernel_size = make_tuple(kernel_size, layer.dims)
    rows = (cin, cout // groups) if transposed else (cout, cin // groups)
    # kaiming_uniform with a=sqrt(5) gives PyTorch's U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    layer.weight = Tensor.kaiming_uniform(*rows, *layer.kernel_size, a=math.sqrt(5))
    layer.bias = _uniform_bias(cout, rows[1] * prod(layer.kernel_size)) if bias else None


def _uniform_bias(size: int, fan_in: int) -> Tensor:
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0     # (PyTorch's bound for no inputs)
    return Tensor.uniform(size, low=-bound, high=bound)


class Linear(Layer):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features) as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        # kaiming_uniform with a=sqrt(5) gives PyTorch's U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        self.weight = Tensor.kaiming_uniform(out_features, in_features, a=math.sqrt(5))
        self.bias = _uniform_bias(out_features, in_features) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight.T, self.bias)


class Conv2d(Layer):
    """2-d cross-correlation; weight (out_channels, in_channels // groups, *kernel_size). padding may be 'same'."""
    dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True):
        self.stride, self.dilation, self.groups, self.padding = stride, dilation, groups, padding
        _conv_parameters(self, in_channels, out_channels, kernel_size, groups, bias)

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                        padding=self.padding)


class Conv1d(Conv2d):
    """1-d convolution over (batch, channels, length); weight (out_channels, in_channels // groups, kernel_size)."""
    dims = 1


class ConvTranspose2d(Layer):
    """The transpose (gradient) of Conv2d; weight (in_channels, out_channels // groups, *kernel_size)."""
    dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 dilation=1, groups: int = 1, bias: bool = True):
        self.stride, self.padding, self.output_padding = stride, padding, output_padding
        self.dilation, self.groups = dilation, groups
        _conv_parameters(self, in_channels, out_channels, kernel_size, groups, bias, transposed=True)

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride,
                                  dilation=self.dilation, padding=self.padding, output_padding=self.output_padding)


class ConvTranspose1d(ConvTranspose2d):
    """The transpose of Conv1d, over (batch, channels, length); weight (in_channels, out_channels // groups, k)."""
    dims = 1


class BatchNorm2d(Layer):
    """Normalises each channel (axis 1) over every other axis.

    In Tensor.training mode it uses the batch's statistics and updates running_mean/running_var
    (running = (1 - momentum) * running + momentum * batch, the variance unbiased, as in PyTorch); otherwise it uses
    the running statistics. The running tensors are returned by parameters() (with requires_grad=False), so an
    optimizer built from them realizes their update with each step instead of letting the lazy graph grow."""

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True,
                 momentum: float = 0.1):
        self.eps, self.momentum, self.track_running_stats = eps, momentum, track_running_stats
        self.weight, self.bias = _affine_parameters(num_features, affine)
        if track_running_stats:
            self.running_mean = _filled(num_features, 0.0, requires_grad=False)
            self.running_var = _filled(num_features, 1.0, requires_grad=False)
            self.num_batches_tracked = _filled(1, 0, dtypes.int32, requires_grad=False)

    def __call__(self, x: Tensor) -> Tensor:
        axes = tuple(a for a in range(x.ndim) if a != 1)
        if Tensor.training or not self.track_running_stats:
            mean = x.mean(axes)
            centered = x - mean.reshape(1, -1, *[1] * (x.ndim - 2))
            var = (centered * centered).mean(axes)
            if Tensor.training and self.track_running_stats:
                self._update_running_stats(mean, var, count=x.numel() // x.shape[1])
        else:
            mean, var = self.running_mean, self.running_var
        return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())

    def _update_running_stats(self, mean: Tensor, var: Tensor, count: int):
        if mean.shape != self.running_mean.shape:     # (as batchnorm says it in eval mode)
            raise RuntimeError(f"running_mean should contain {mean.numel()} elements not {self.running_mean.numel()}")
        unbiased = var.detach() * (count / max(count - 1, 1))
        self.running_mean.assign(self.running_mean * (1 - self.momentum) + mean.detach() * self.momentum)
        self.running_var.assign(self.running_var * (1 - self.momentum) + unbiased * self.momentum)
        self.num_batches_tracked.assign(self.num_batches_tracked + 1)


BatchNorm = BatchNorm1d = BatchNorm3d = BatchNorm2d    # the channels are axis 1 for (N, C), (N, C, L), ... too


def _normalized(x: Tensor, normalize, weight, bias=None, shape=(-1,)) -> Tensor:
    """normalize(x) * weight + bias in float32 at least, rounded once to x's dtype (as torch: the gradient reaching
    the normalized values, weight times the output's, can overflow 16 bits where the input's gradient doesn't)."""
    y = normalize(x.float() if x.dtype.itemsize < 4 else x)
    y = y if weight is None else y * weight.reshape(shape) + (0 if bias is None else bias.reshape(shape))
    return y.cast(x.dtype)


class LayerNorm(Layer):
    """Normalises over the last len(normalized_shape) axes, then scales by weight and shifts by bias."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True):
        self.normalized_shape = make_tuple(normalized_shape, 1)
        self.eps = eps
        self.weight, self.bias = _affine_parameters(self.normalized_shape, elementwise_affine)

    def __call__(self, x: Tensor) -> Tensor:
        n = len(self.normalized_shape)
        if x.shape[-n:] != self.normalized_shape:
            raise ValueError(f"LayerNorm{self.normalized_shape} got input of shape {x.shape}: its last {n} dims must "
                             f"be {self.normalized_shape}")
        return _normalized(x, lambda v: v.layernorm(axis=tuple(range(-n, 0)), eps=self.eps), self.weight, self.bias,
                           self.normalized_shape)


class LayerNorm2d(LayerNorm):
    """LayerNorm over the channels of (N, C, H, W) images: each pixel's C values are normalised together."""

    def __call__(self, x: Tensor) -> Tensor:
        return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class RMSNorm(Layer):
    """x / sqrt(mean(x^2 over the last axis) + eps) * weight, computed in float32 at least (as tinygrad does)."""

    def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
        self.eps = eps
        self.weight = _filled(dim, 1.0) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        return _normalized(x, lambda v: v * (v.square().mean(-1, keepdim=True) + self.eps).rsqrt(), self.weight)


class GroupNorm(Layer):
    """Splits the channels into num_groups groups and normalises each group over its channels and positions."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.weight, self.bias = _affine_parameters(num_channels, affine)

    def __call__(self, x: Tensor) -> Tensor:
        # (and as torch, not a single value per group in a batch of one: its output would be the bias, its gradient 0)
        if x.ndim < 2 or x.shape[1] != self.num_channels or x.numel() == self.num_groups:
            raise ValueError(f"GroupNorm({self.num_groups}, {self.num_channels}) got input {x.shape}: it takes the "
                             "channels on axis 1 and, as torch, more than one value per group across the batch")
        return _normalized(x, lambda v: v.reshape(v.shape[0], self.num_groups, -1).layernorm(axis=-1, eps=self.eps)
                           .reshape(v.shape), self.weight, self.bias, (1, -1) + (1,) * (x.ndim - 2))


class InstanceNorm(GroupNorm):
    """Normalises each channel of each sample over its positions: GroupNorm with one channel per group. affine
    defaults to True, as in tinygrad (PyTorch's InstanceNorm2d defaults to False)."""

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
        super().__init__(num_features, num_features, eps, affine)
        self.num_features = num_features


class Embedding(Layer):
    """Row lookup: integer indices of any shape -> (*shape, embed_size). weight ~ N(0, 1) as in PyTorch."""

    def __init__(self, vocab_size: int, embed_size: int):
        self.vocab_size, self.embed_size = vocab_size, embed_size
        self.weight = Tensor.randn(vocab_size, embed_size)

    def __call__(self, idx: Tensor) -> Tensor:
        Tensor._need_tensors("embedding", indices=idx)
        if not dtypes.is_int(idx.dtype):
            raise TypeError(f"Embedding needs integer indices, got {idx.dtype}; use idx.cast(dtypes.int32)")
        idx._check_range(0, self.vocab_size, lambda v: IndexError(f"index out of range in self: {v} of "
                                                                  f"{self.vocab_size} rows"))
        return self.weight[idx]      # rows read by address; the gradient adds back into the rows read


class LSTMCell(Layer):
    """One LSTM step: (x, (h, c)) -> (h', c'), the gates in PyTorch's order (input, forget, cell, output); weights and
    biases ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) as in PyTorch. hc=None starts from zeros."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        bound = 1 / math.sqrt(hidden_size)
        self.weight_ih, self.weight_hh = (Tensor.uniform(4 * hidden_size, n, low=-bound, high=bound)
                                          for n in (input_size, hidden_size))
        self.bias_ih, self.bias_hh = (Tensor.uniform(4 * hidden_size, low=-bound, high=bound) if bias else None
                                      for _ in range(2))

    def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        h, c = hc or (Tensor.zeros(x.shape[0], self.weight_hh.shape[1], dtype=x.dtype, device=x.device),) * 2
        gates = x.linear(self.weight_ih.T, self.bias_ih) + h.linear(self.weight_hh.T, self.bias_hh)
        i, f, g, o = gates.chunk(4, dim=1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        return o.sigmoid() * c.tanh(), c


class Dropout(Layer):
    """Zeroes each element with probability p in Tensor.training mode (scaling the rest by 1/(1-p))."""

    def __init__(self, p: float = 0.5):
        if not 0 <= p < 1:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        return x.dropout(self.p)


from tinygrad_core.nn import optim, state, datasets  # noqa: E402  (they import the layers' Tensor)

__all__ = ["Layer", "Linear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "BatchNorm", "BatchNorm1d",
           "BatchNorm2d", "BatchNorm3d", "LayerNorm", "LayerNorm2d", "RMSNorm", "GroupNorm", "InstanceNorm",
           "Embedding", "LSTMCell", "Dropout", "optim", "state", "datasets"]
