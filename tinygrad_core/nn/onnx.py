"""ONNX import: run an ONNX model on any backend, with tinygrad 0.14's names.

    from tinygrad_core.nn.onnx import OnnxRunner
    runner = OnnxRunner("model.onnx")                  # a path, the file's bytes or an onnx.ModelProto
    outputs = runner({"input": Tensor(...)})           # named inputs -> {output name: Tensor}

The `onnx` package (`pip install tinygrad-core[onnx]`) only reads the protobuf. Every ONNX op is one function in the
table ONNX_OPS, composed of Tensor ops, so a model runs wherever its tensors live (`runner.to("CL")` moves the
weights). An op that changed meaning between opsets has a dict {first opset: function}. Opsets 11-22 are the target
(docs/ONNX.md lists what the ONNX backend tests show per op); an op missing from the table raises
NotImplementedError naming the op, the node and the opset."""
from __future__ import annotations

import functools
import math

from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import prod
from tinygrad_core.tensor import Tensor

try:
    import onnx
    from onnx import numpy_helper
except ImportError as e:           # (the core itself doesn't need onnx)
    raise ImportError("tinygrad_core.nn.onnx reads models with the onnx package: pip install 'tinygrad-core[onnx]'") \
        from e

# ONNX TensorProto.DataType -> dtype (the rest: strings, complex, float8, int4 ... are refused by name)
DTYPES = {1: dtypes.float32, 2: dtypes.uint8, 3: dtypes.int8, 4: dtypes.uint16, 5: dtypes.int16, 6: dtypes.int32,
          7: dtypes.int64, 9: dtypes.bool, 10: dtypes.float16, 11: dtypes.float64, 12: dtypes.uint32,
          13: dtypes.uint64, 16: dtypes.bfloat16}


def to_dtype(onnx_type: int):
    if onnx_type not in DTYPES:
        raise NotImplementedError(f"ONNX data type {onnx.TensorProto.DataType.Name(onnx_type)} is not supported")
    return DTYPES[onnx_type]


def tensor_from_proto(proto, device=None) -> Tensor:
    """An initializer or tensor attribute as a Tensor (numpy only carries the bytes out of the protobuf)."""
    to_dtype(proto.data_type)
    return Tensor(numpy_helper.to_array(proto), device=device, dtype=DTYPES[proto.data_type])


class OnnxRunner:
    """Runs an ONNX graph: OnnxRunner(model)({name: value}) -> {output name: Tensor}."""

    def __init__(self, model, device: str | None = None, _opsets: dict | None = None):
        if isinstance(model, onnx.GraphProto):                 # a subgraph of If / Loop / Scan
            graph, self.opsets = model, _opsets
        else:
            model = model if isinstance(model, onnx.ModelProto) else \
                onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(model)
            graph = model.graph
            self.opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
        self.device = device
        self.initializers = {t.name: tensor_from_proto(t, device) for t in graph.initializer}
        self.inputs = [i.name for i in graph.input if i.name not in self.initializers]
        self.input_types = {i.name: i.type.tensor_type.elem_type for i in graph.input}
        self.outputs = [o.name for o in graph.output]
        self.nodes = [(n, {a.name: self._attribute(a) for a in n.attribute}) for n in graph.node]
        # a Constant's value as a Tensor now, so that .to() moves it with the weights
        self.nodes = [(n, {"value": Constant(**attrs).to(device)} if n.op_type == "Constant" else attrs)
                      for n, attrs in self.nodes]

    def _attribute(self, a):
        value = onnx.helper.get_attribute_value(a)
        if a.type == onnx.AttributeProto.TENSOR:
            return tensor_from_proto(value, self.device)
        if a.type == onnx.AttributeProto.GRAPH:
            return OnnxRunner(value, self.device, self.opsets)
        if a.type == onnx.AttributeProto.STRING:
            return value.decode()
        return list(value) if isinstance(value, (list, tuple)) else value

    def to(self, device: str) -> OnnxRunner:
        self.device = device
        self.initializers = {k: v.to(device) for k, v in self.initializers.items()}
        self.nodes = [(n, {k: v.to(device) if isinstance(v, (Tensor, OnnxRunner)) else v for k, v in attrs.items()})
                      for n, attrs in self.nodes]
        return self

    def _input(self, name: str, value) -> Tensor:
        if isinstance(value, Tensor):
            return value
        if isinstance(value, list) and value and hasattr(value[0], "shape"):
            raise NotImplementedError(f"ONNX input {name!r} is a sequence; sequences are not supported")
        dtype = to_dtype(self.input_types[name]) if self.input_types.get(name) else None
        if dtype == dtypes.bfloat16 and hasattr(value, "dtype"):      # (numpy has no bfloat16 of its own)
            return Tensor(value.astype("float32"), device=self.device).cast(dtype)
        return Tensor(value, device=self.device, dtype=dtype if not hasattr(value, "dtype") else None)

    def __call__(self, inputs: dict, outer: dict | None = None) -> dict[str, Tensor]:
        missing = [n for n in self.inputs if n not in inputs]
        if missing:
            raise RuntimeError(f"OnnxRunner needs inputs {missing} (the model's inputs are {self.inputs})")
        values = {**(outer or {}), **self.initializers, "": None,
                  **{n: self._input(n, v) if v is not None else None for n, v in inputs.items()}}
        for node, attrs in self.nodes:
            opset = self.opsets.get(node.domain or "ai.onnx", 1)
            fn = select_op(node.op_type, node.name, node.domain, opset)
            if node.op_type in SUBGRAPH_OPS:
                attrs = {**attrs, "outer": values}
            if node.op_type in N_OUTPUT_OPS:
                attrs = {**attrs, "n_outputs": len(node.output)}
            out = fn(*[values[i] for i in node.input], **attrs)
            out = out if isinstance(out, (tuple, list)) else (out,)
            values.update(zip(node.output, out))
        return {name: values[name] for name in self.outputs}


def select_op(op: str, node: str, domain: str, opset: int):
    impl = ONNX_OPS.get(op) if domain in ("", "ai.onnx") else None
    if isinstance(impl, dict):
        impl = impl[max((v for v in impl if v <= opset), default=min(impl))]
    if impl is None:
        raise NotImplementedError(f"ONNX op {(domain + '.' if domain else '') + op} (node {node!r}, opset {opset}) "
                                  "is not supported by tinygrad_core.nn.onnx")
    return impl


# ---- helpers: ONNX passes shapes, axes and scalars as tensors (as inputs from some opset) or as attributes ----
def ints(v) -> list[int] | None:
    if v is None:
        return None
    v = v.tolist() if isinstance(v, Tensor) else v
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)]


def scalar(v):
    return v.item() if isinstance(v, Tensor) else v[0] if isinstance(v, list) else v


def axes_of(x: Tensor, axes) -> list[int]:
    return [a + x.ndim if a < 0 else a for a in ints(axes)]


def flat_pads(pads: list[int]) -> list[int]:
    """ONNX pads (all begins, then all ends, first axis first) -> a torch-style flat padding (last axis first)."""
    n = len(pads) // 2
    return [p for d in reversed(range(n)) for p in (pads[d], pads[d + n])]


def auto_pads(x: Tensor, kernel, strides, dilations, pads, auto_pad: str) -> list[int]:
    """The explicit ONNX pads of a conv or pool window, resolving auto_pad SAME_UPPER / SAME_LOWER / VALID."""
    dims = len(kernel)
    if auto_pad in ("NOTSET", "") or auto_pad is None:
        return list(pads or [0] * 2 * dims)
    if auto_pad == "VALID":
        return [0] * 2 * dims
    total = [max(0, (-(-n // s) - 1) * s + (k - 1) * d + 1 - n)
             for n, k, s, d in zip(x.shape[-dims:], kernel, strides, dilations)]
    first = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    return first + [t - f for t, f in zip(total, first)]


def reduce_op(fn):
    """A Reduce* op: axes as attribute (before opset 13/18) or input; no axes reduce all unless noop_with_empty_axes."""
    def reduce(data, axes=None, keepdims=1, noop_with_empty_axes=0):
        axes = ints(axes)
        if not axes:
            if noop_with_empty_axes:
                return data
            axes = list(range(data.ndim))
        return fn(data, tuple(axes_of(data, axes)), bool(keepdims))
    return reduce


def extreme(x, axes, keepdim, fn, empty):
    """max / min, which over an empty axis gives its identity (ONNX's rule; torch refuses)."""
    if any(x.shape[a] == 0 for a in axes):
        shape = [1 if a in axes else s for a, s in enumerate(x.shape) if keepdim or a not in axes]
        return Tensor.full(shape, float(empty) if dtypes.is_float(x.dtype) else
                           (dtypes.min if empty == "-inf" else dtypes.max)(x.dtype), dtype=x.dtype, device=x.device)
    return fn(x, axes, keepdim)


def variadic(fn):
    return lambda *xs: functools.reduce(fn, xs)


def binary(fn):
    return lambda x, y, broadcast=None: fn(x, y)     # (broadcast: opsets before 7 said so explicitly)


# ---- elementwise ----
def Div(x, y):
    return x.div(y, rounding_mode="trunc") if dtypes.is_int(x.dtype) else x / y


def Mod(x, y, fmod=0):
    return x.fmod(y) if fmod else x % y


def Pow(x, y):
    if dtypes.is_int(x.dtype):
        return x.cast(dtypes.float64).pow(y.cast(dtypes.float64)).round().cast(x.dtype)
    return x.pow(y.cast(x.dtype))


def BitShift(x, y, direction):
    """A shift by a negative amount or by the bit width or more gives 0 (-1 for a negative x shifted right)."""
    bits = x.dtype.itemsize * 8
    inside = (y >= 0) & (y < bits)
    safe = inside.where(y, 0)
    if direction == "LEFT":
        return inside.where(x.lshift(safe), 0)
    return inside.where(x.rshift(safe), (x < 0).where(-1, 0).cast(x.dtype) if not dtypes.is_unsigned(x.dtype) else 0)


def Clip(x, min=None, max=None):
    lo, hi = scalar(min), scalar(max)
    return x if lo is None and hi is None else x.clip(lo, hi)


def Cast(x, to, saturate=1, round_mode="up"):
    dtype = to_dtype(to)
    if dtype == dtypes.bool or x.dtype == dtypes.bool or not (dtypes.is_int(dtype) and dtypes.is_float(x.dtype)):
        return x.cast(dtype)
    return x.trunc().cast(dtype)


def CastLike(x, target_type, saturate=1, round_mode="up"):
    return x.cast(target_type.dtype)


def Where(condition, x, y):
    return condition.where(x, y)


def Shrink(x, bias=0.0, lambd=0.5):
    return (x < -lambd).where(x + bias, (x > lambd).where(x - bias, 0)).cast(x.dtype)


def PRelu(x, slope):
    if slope.ndim == 1 and x.ndim > 2 and slope.shape[0] == x.shape[1] != x.shape[-1]:   # (opset 6: per channel)
        slope = channel_shape(x, slope)
    return (x < 0).where(x * slope, x)


def Gelu(x, approximate="none"):
    return x.gelu(approximate=approximate)


def IsInf(x, detect_negative=1, detect_positive=1):
    return x.isinf(bool(detect_positive), bool(detect_negative))


# ---- reductions and softmax ----
def ArgExtreme(largest):
    def arg(x, axis=0, keepdims=1, select_last_index=0):
        y = x.flip(axis) if select_last_index else x
        out = y.argmax(axis, keepdim=bool(keepdims)) if largest else y.argmin(axis, keepdim=bool(keepdims))
        out = x.shape[axis] - 1 - out if select_last_index else out
        return out.cast(dtypes.int64)
    return arg


def along_axis(fn):
    """Softmax-like ops: opset 13 works along axis; before it, on x flattened to 2-d at axis (default 1)."""
    def old(x, axis=1):
        return fn(x.reshape(prod(x.shape[:axis % max(x.ndim, 1)]), -1), -1).reshape(x.shape)
    return {1: old, 13: lambda x, axis=-1: fn(x, axis)}


def hardmax(x, axis):
    return (x.argmax(axis, keepdim=True) == Tensor.arange(x.shape[axis], device=x.device).reshape(
        [-1 if d == axis % x.ndim else 1 for d in range(x.ndim)])).cast(x.dtype)


def _scan(x, axis, exclusive, reverse, scan: str, identity: float):
    """CumSum and CumProd: exclusive shifts the running results one along, starting from the identity."""
    axis = scalar(axis)
    y = x.flip(axis) if reverse else x
    if exclusive:
        pads = [(0, 0)] * x.ndim
        pads[axis] = (1, 0)
        y = y.pad(pads, identity).shrink(tuple((0, s) for s in y.shape))
    y = getattr(y, scan)(axis)
    return y.flip(axis) if reverse else y


def CumSum(x, axis, exclusive=0, reverse=0): return _scan(x, axis, exclusive, reverse, "cumsum", 0)      # noqa: E704


def TopK(x, k, axis=-1, largest=1, sorted=1):
    values, indices = x.topk(scalar(k), axis, bool(largest))
    return values, indices.cast(dtypes.int64)


# ---- shapes and movement ----
def Reshape(data, shape, allowzero=0):
    shape = ints(shape)
    return data.reshape([data.shape[i] if s == 0 and not allowzero else s for i, s in enumerate(shape)])


def Flatten(x, axis=1):
    return x.reshape(prod(x.shape[:axis]), prod(x.shape[axis:]))


def Squeeze(data, axes=None):
    axes = axes_of(data, axes) if axes is not None else [i for i, s in enumerate(data.shape) if s == 1]
    return data.reshape([s for i, s in enumerate(data.shape) if i not in axes])


def Unsqueeze(data, axes):
    ndim = data.ndim + len(ints(axes))
    axes = sorted(a % ndim for a in ints(axes))
    shape = list(data.shape)
    for a in axes:
        shape.insert(a, 1)
    return data.reshape(shape)


def Transpose(data, perm=None):
    return data.permute(perm if perm is not None else list(range(data.ndim))[::-1])


def Concat(*inputs, axis):
    return inputs[0].cat(*inputs[1:], dim=axis)


def Split(x, split=None, axis=0, num_outputs=None, n_outputs=1):
    split, n = ints(split), num_outputs or n_outputs
    if split is None:
        size = -(-x.shape[axis] // n)
        split = [size] * (n - 1) + [x.shape[axis] - size * (n - 1)]
    return x.split(split, axis)


def Slice(data, starts, ends, axes=None, steps=None):
    starts, ends = ints(starts), ints(ends)
    axes = axes_of(data, axes) if axes is not None else list(range(len(starts)))
    steps = ints(steps) or [1] * len(starts)
    index = [slice(None)] * data.ndim
    for a, b, e, s in zip(axes, starts, ends, steps):
        b, e = (max(min(v, 2 ** 62), -2 ** 62) for v in (b, e))   # (INT64_MAX means "to the end")
        index[a] = slice(*slice(b, e, s).indices(data.shape[a]))
        if index[a].stop < 0:                                    # a negative step that runs to the first element
            index[a] = slice(index[a].start, None, s)
    return data[tuple(index)]


def Expand(x, shape):
    shape = ints(shape)
    full = [1] * (len(shape) - x.ndim) + list(x.shape)
    shape = [1] * (x.ndim - len(shape)) + shape
    return x.reshape(full).expand([a if b == 1 else b for a, b in zip(full, shape)])


def Tile(x, repeats):
    return x.repeat(ints(repeats))


def Pad(data, pads, constant_value=None, axes=None, mode="constant", value=0.0):
    pads = ints(pads)
    axes = axes_of(data, axes) if axes is not None else list(range(data.ndim))
    full = [(0, 0)] * data.ndim
    for i, a in enumerate(axes):
        full[a] = (pads[i], pads[i + len(axes)])
    fill = scalar(constant_value) if constant_value is not None else value
    return data.pad(full, fill, mode={"edge": "replicate", "wrap": "circular"}.get(mode, mode))


def Shape(data, end=None, start=0):
    return Tensor(list(data.shape[start:end]), dtype=dtypes.int64, device=data.device)


def Size(data):
    return Tensor(data.numel(), dtype=dtypes.int64, device=data.device)


def Gather(data, indices, axis=0):
    axis %= data.ndim
    indices = (indices < 0).where(indices + data.shape[axis], indices)
    return data[(slice(None),) * axis + (indices,)]


def GatherElements(data, indices, axis=0):
    return data.gather(axis, (indices < 0).where(indices + data.shape[axis], indices))


def GatherND(data, indices, batch_dims=0):
    *lead, k = indices.shape
    b = prod(data.shape[:batch_dims])
    flat = data.reshape(b, *data.shape[batch_dims:])
    idx = indices.reshape(b, -1, k)
    shape = data.shape[batch_dims:batch_dims + k]
    idx = (idx < 0).where(idx + Tensor(list(shape), device=data.device, dtype=idx.dtype), idx)
    batch = Tensor.arange(b, device=data.device).reshape(b, 1).expand(b, idx.shape[1])
    out = flat[(batch, *[idx[..., i] for i in range(k)])]
    return out.reshape(*lead, *data.shape[batch_dims + k:])


def ScatterElements(data, indices, updates, axis=0, reduction="none"):
    indices = (indices < 0).where(indices + data.shape[axis], indices)
    if reduction == "none":
        return data.scatter(axis, indices, updates)
    return data.scatter_reduce(axis, indices, updates, {"add": "sum", "mul": "prod", "max": "amax",
                                                         "min": "amin"}[reduction])


def ScatterND(data, indices, updates, reduction="none"):
    """Each index row of the last axis of indices picks a slice of data; as a scatter over data's flat positions."""
    k = indices.shape[-1]
    strides = [prod(data.shape[i + 1:k]) for i in range(k)]
    rows = (indices * Tensor(strides, device=data.device, dtype=indices.dtype)).sum(-1)      # (...,) slice number
    inner = prod(data.shape[k:])
    flat = data.reshape(prod(data.shape[:k]), inner)
    index = rows.reshape(-1, 1).expand(-1, inner)
    return ScatterElements(flat, index, updates.reshape(-1, inner), 0, reduction).reshape(data.shape)


def Range(start, limit, delta):
    device, dtype = start.device, start.dtype
    start, limit, delta = start.item(), limit.item(), delta.item()
    n = max(math.ceil((limit - start) / delta), 0)
    return Tensor.arange(n, device=device).cast(dtypes.float64).mul(delta).add(start).cast(dtype) if n else \
        Tensor([], dtype=dtype, device=device)


def ConstantOfShape(shape, value=None):
    fill = value.reshape(()) if value is not None else Tensor(0.0, device=shape.device)
    return fill.expand(ints(shape)).contiguous() if shape.numel() else fill.reshape(1).shrink(((0, 0),))


def Constant(value=None, value_float=None, value_floats=None, value_int=None, value_ints=None, sparse_value=None):
    if value is not None:
        return value
    for v, dtype in ((value_float, dtypes.float32), (value_floats, dtypes.float32), (value_int, dtypes.int64),
                     (value_ints, dtypes.int64)):
        if v is not None:
            return Tensor(v, dtype=dtype)
    raise NotImplementedError("ONNX Constant with a sparse_value is not supported")


def EyeLike(x, dtype=None, k=0):
    n, m = x.shape
    rows, cols = Tensor.arange(n, device=x.device).reshape(n, 1), Tensor.arange(m, device=x.device).reshape(1, m)
    return (cols - rows == k).cast(to_dtype(dtype) if dtype is not None else x.dtype)


def Trilu(x, k=None, upper=1):
    k = scalar(k) or 0
    return x.triu(k) if upper else x.tril(k)


def OneHot(indices, depth, values, axis=-1):
    depth = int(scalar(depth))
    indices = (indices < 0).where(indices + depth, indices)
    hot = indices.unsqueeze(-1) == Tensor.arange(depth, device=indices.device)
    out = hot.where(values[1], values[0])
    return out.permute(*range(axis % out.ndim), -1, *range(axis % out.ndim, out.ndim - 1)) if axis != -1 else out


def DepthToSpace(x, blocksize, mode="DCR"):
    b, c, h, w = x.shape
    if mode == "DCR":
        y = x.reshape(b, blocksize, blocksize, c // blocksize ** 2, h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(b, c // blocksize ** 2, blocksize, blocksize, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(b, c // blocksize ** 2, h * blocksize, w * blocksize)


def SpaceToDepth(x, blocksize, mode="DCR"):
    if mode != "DCR":
        raise NotImplementedError(f"ONNX SpaceToDepth mode {mode!r} is not supported (only DCR)")
    b, c, h, w = x.shape
    y = x.reshape(b, c, h // blocksize, blocksize, w // blocksize, blocksize).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(b, c * blocksize ** 2, h // blocksize, w // blocksize)


def Compress(x, condition, axis=None):
    keep = [i for i, c in enumerate(condition.tolist()) if c]
    x, axis = (x.flatten(), 0) if axis is None else (x, axis % x.ndim)
    return x[(slice(None),) * axis + (Tensor(keep, dtype=dtypes.int64, device=x.device),)]


def NonZero(x):
    flat = [i for i, v in enumerate(x.flatten().tolist()) if v]
    coords = [[i // prod(x.shape[d + 1:]) % x.shape[d] for i in flat] for d in range(x.ndim)]
    return Tensor(coords, dtype=dtypes.int64, device=x.device).reshape(x.ndim, len(flat))


def Einsum(*inputs, equation):
    return Tensor.einsum(equation, *inputs)


def CenterCropPad(x, shape, axes=None):
    axes = axes_of(x, axes) if axes is not None else list(range(x.ndim))
    for a, n in zip(axes, ints(shape)):
        have = x.shape[a]
        if n < have:
            x = x[(slice(None),) * a + (slice((have - n) // 2, (have - n) // 2 + n),)]
        elif n > have:
            pads = [(0, 0)] * x.ndim
            pads[a] = ((n - have) // 2, n - have - (n - have) // 2)
            x = x.pad(pads)
    return x


def ReverseSequence(x, sequence_lens, batch_axis=1, time_axis=0):
    t = x.shape[time_axis]
    lens = sequence_lens.reshape([-1 if d == batch_axis else 1 for d in range(x.ndim)])
    steps = Tensor.arange(t, device=x.device).reshape([-1 if d == time_axis else 1 for d in range(x.ndim)])
    index = (steps < lens).where(lens - 1 - steps, steps).expand(x.shape)
    return x.gather(time_axis, index)


# ---- neural network ----
def Gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0, broadcast=None):
    y = (A.T if transA else A) @ (B.T if transB else B)
    y = y * alpha if alpha != 1.0 else y
    return y + C * beta if C is not None else y


def Conv(X, W, B=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
    dims = W.ndim - 2
    strides, dilations = strides or [1] * dims, dilations or [1] * dims
    pads = auto_pads(X, W.shape[2:], strides, dilations, pads, auto_pad)
    return X.conv2d(W, B, group, strides, dilations, flat_pads(pads))


def ConvTranspose(X, W, B=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, output_padding=None,
                  output_shape=None, pads=None, strides=None):
    dims = W.ndim - 2
    strides, dilations = strides or [1] * dims, dilations or [1] * dims
    output_padding = output_padding or [0] * dims
    kernel = W.shape[2:]
    full = [(n - 1) * s + (k - 1) * d + 1 + op
            for n, k, s, d, op in zip(X.shape[2:], kernel, strides, dilations, output_padding)]
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        want = output_shape[-dims:] if output_shape is not None else [n * s for n, s in zip(X.shape[2:], strides)]
        total = [f - w for f, w in zip(full, want)]
        first = [t // 2 if auto_pad != "SAME_LOWER" else t - t // 2 for t in total]
        pads = first + [t - f for t, f in zip(total, first)]
    pads = pads or [0] * 2 * dims
    y = X.conv_transpose2d(W, B, group, strides, dilations, 0, output_padding)
    return y.pad(((0, 0), (0, 0), *[(-b, -e) for b, e in zip(pads[:dims], pads[dims:])]))     # (negative: crop)


def pool_pads(X, kernel_shape, strides, dilations, pads, auto_pad):
    dims = len(kernel_shape)
    strides, dilations = strides or [1] * dims, dilations or [1] * dims
    return strides, dilations, auto_pads(X, kernel_shape, strides, dilations, pads, auto_pad)


def MaxPool(X, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, pads=None, storage_order=0,
            strides=None):
    strides, dilations, pads = pool_pads(X, kernel_shape, strides, dilations, pads, auto_pad)
    y, idx = X.max_pool2d(tuple(kernel_shape), strides, dilations, flat_pads(pads), bool(ceil_mode), True)
    if storage_order:                       # column-major flat positions
        h, w = X.shape[-2:]
        idx = idx % w * h + idx // w
    channel = Tensor.arange(prod(X.shape[:2]), device=X.device).reshape(*X.shape[:2], *[1] * len(kernel_shape))
    return y, (idx.cast(dtypes.int64) + channel * prod(X.shape[2:]))


def AveragePool(X, kernel_shape, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, pads=None,
                strides=None):
    strides, dilations, pads = pool_pads(X, kernel_shape, strides, dilations, pads, auto_pad)
    return X.avg_pool2d(tuple(kernel_shape), strides, dilations, flat_pads(pads), bool(ceil_mode),
                        bool(count_include_pad))


def LpPool(X, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, p=2, pads=None, strides=None):
    strides, dilations, pads = pool_pads(X, kernel_shape, strides, dilations, pads, auto_pad)
    summed = X.abs().pow(p).avg_pool2d(tuple(kernel_shape), strides, dilations, flat_pads(pads), bool(ceil_mode),
                                       True) * prod(kernel_shape)
    return summed.pow(1 / p)


def GlobalAveragePool(X):
    return X.mean(tuple(range(2, X.ndim)), keepdim=True)


def GlobalMaxPool(X):
    return X.max(tuple(range(2, X.ndim)), keepdim=True)


def BatchNormalization(X, scale, B, input_mean, input_var, epsilon=1e-5, momentum=0.9, training_mode=0,
                       spatial=1, is_test=None):
    if training_mode:
        axes = (0, *range(2, X.ndim))
        mean, var = X.mean(axes), X.var(axes, correction=0)
        y = X.batchnorm(scale, B, mean, (var + epsilon).rsqrt())
        return y, input_mean * momentum + mean * (1 - momentum), input_var * momentum + var * (1 - momentum)
    return X.batchnorm(scale, B, input_mean, (input_var + epsilon).rsqrt())


def channel_shape(x, t):
    return t.reshape(1, -1, *[1] * (x.ndim - 2))


def InstanceNormalization(input, scale, B, epsilon=1e-5):
    y = input.layernorm(tuple(range(2, input.ndim)), epsilon)
    return y * channel_shape(input, scale) + channel_shape(input, B)


def LayerNormalization(X, Scale, B=None, axis=-1, epsilon=1e-5, stash_type=1):
    axes = tuple(range(axis % X.ndim, X.ndim))
    x = X.cast(dtypes.float32) if stash_type == 1 and X.dtype != dtypes.float64 else X
    mean = x.mean(axes, keepdim=True)
    inv = ((x - mean).square().mean(axes, keepdim=True) + epsilon).rsqrt()
    y = ((x - mean) * inv).cast(X.dtype) * Scale
    return (y + B if B is not None else y), mean, inv


def GroupNormalization(X, scale, bias, epsilon=1e-5, num_groups=1, stash_type=1):
    y = X.reshape(X.shape[0], num_groups, -1).layernorm(-1, epsilon).reshape(X.shape)
    return y * channel_shape(X, scale) + channel_shape(X, bias)


def RMSNormalization(X, scale, axis=-1, epsilon=1e-5, stash_type=1):
    axes = tuple(range(axis % X.ndim, X.ndim))
    x = X.cast(dtypes.float32) if stash_type == 1 and X.dtype != dtypes.float64 else X
    return (x * (x.square().mean(axes, keepdim=True) + epsilon).rsqrt()).cast(X.dtype) * scale


def LpNormalization(input, axis=-1, p=2):
    norm = input.abs().sum(axis, keepdim=True) if p == 1 else input.square().sum(axis, keepdim=True).sqrt()
    return input / (norm == 0).where(1, norm)


def MeanVarianceNormalization(X, axes=(0, 2, 3)):
    mean = X.mean(tuple(axes), keepdim=True)
    return (X - mean) / ((X - mean).square().mean(tuple(axes), keepdim=True).sqrt() + 1e-9)


def LRN(X, size, alpha=1e-4, beta=0.75, bias=1.0):
    c = X.shape[1]
    sq = X.square().pad(((0, 0), ((size - 1) // 2, size - 1 - (size - 1) // 2), *[(0, 0)] * (X.ndim - 2)))
    window = functools.reduce(Tensor.add, [sq[:, i:i + c] for i in range(size)])
    return X / (bias + alpha / size * window).pow(beta)


def Dropout(data, ratio=None, training_mode=None, seed=None, n_outputs=1):
    training = training_mode is not None and bool(training_mode.item())
    if training and (r := scalar(ratio) if ratio is not None else 0.5) > 0:
        if seed is not None:
            Tensor.manual_seed(seed)
        mask = Tensor.rand(*data.shape, device=data.device) >= r
        return mask.where(data / (1 - r), 0).cast(data.dtype), mask
    return data, Tensor.ones(*data.shape, dtype=dtypes.bool, device=data.device)


def NegativeLogLikelihoodLoss(input, target, weight=None, ignore_index=None, reduction="mean"):
    safe = target if ignore_index is None else (target == ignore_index).where(0, target)
    picked = -input.gather(1, safe.unsqueeze(1)).squeeze(1)
    w = weight[safe] if weight is not None else Tensor.ones(*target.shape, dtype=input.dtype, device=input.device)
    if ignore_index is not None:
        w = (target == ignore_index).where(0, w)
    loss = picked * w
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / w.sum()


def SoftmaxCrossEntropyLoss(scores, labels, weights=None, ignore_index=None, reduction="mean"):
    log_prob = scores.log_softmax(1)
    return NegativeLogLikelihoodLoss(log_prob, labels, weights, ignore_index, reduction), log_prob


# ---- Resize: each resized axis is a matmul with a (n_in, n_out) matrix of the taps' weights, built in Python ----
def source_coordinate(y, n_in, n_out, scale, mode, roi):
    """Where output position y samples the input, by coordinate_transformation_mode."""
    if mode == "align_corners":
        return 0.0 if n_out == 1 else y * (n_in - 1) / (n_out - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        span = (roi[1] - roi[0]) * (n_in - 1)
        return roi[0] * (n_in - 1) + (span / 2 if n_out == 1 else y * span / (n_out - 1))
    if mode == "pytorch_half_pixel":
        return -0.5 if n_out == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        return n_in / 2 * (1 - n_out / (scale * n_in)) + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5                   # half_pixel


def cubic(x, a):
    x = abs(x)
    if x <= 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0


def tap_weights(ratio, scale, mode, nearest_mode, a, antialias):
    """The weights of the taps around a source coordinate, ratio in (0, 1] past the tap before it."""
    if mode == "nearest":
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": ratio == 1,
              "ceil": True}[nearest_mode]
        return [0.0, 1.0] if up or ratio == 1 else [1.0, 0.0]
    s = min(scale, 1.0) if antialias else 1.0
    reach = 1 if mode == "linear" else 2
    start = math.floor(-reach / s) + 1
    kernel = (lambda x: max(0.0, 1 - abs(x))) if mode == "linear" else functools.partial(cubic, a=a)
    w = [kernel((i - ratio) * s) for i in range(start, 2 - start)]
    return [v / sum(w) for v in w] if antialias else w


def resize_matrix(n_in, n_out, scale, mode, opts, roi):
    rows, outside = [], []
    for y in range(n_out):
        x = source_coordinate(y, n_in, n_out, scale, opts["coordinate_transformation_mode"], roi)
        base = math.ceil(x) - 1
        w = tap_weights(x - base, scale, mode, opts["nearest_mode"], opts["cubic_coeff_a"], opts["antialias"])
        taps = range(base - len(w) // 2 + 1, base + len(w) // 2 + 1)
        if opts["exclude_outside"]:
            w = [v if 0 <= t < n_in else 0.0 for v, t in zip(w, taps)]
            w = [v / sum(w) for v in w]
        row = [0.0] * n_in
        for v, t in zip(w, taps):
            row[min(max(t, 0), n_in - 1)] += v
        crop = opts["coordinate_transformation_mode"] == "tf_crop_and_resize" and not 0 <= x <= n_in - 1
        rows.append([0.0] * n_in if crop else row)
        outside.append(crop)
    return rows, outside


def Resize(X, roi=None, scales=None, sizes=None, antialias=0, axes=None, coordinate_transformation_mode="half_pixel",
           cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
           mode="nearest", nearest_mode="round_prefer_floor"):
    axes = axes_of(X, axes) if axes is not None else list(range(X.ndim))
    roi = [float(v) for v in roi.tolist()] if roi is not None and roi.numel() else None
    scales = [float(v) for v in scales.tolist()] if scales is not None and scales.numel() else None
    if scales is not None:
        sizes = [int(X.shape[a] * f) for a, f in zip(axes, scales)]
    else:
        sizes = ints(sizes)
        scales = [n / X.shape[a] for a, n in zip(axes, sizes)]
        if keep_aspect_ratio_policy != "stretch":
            f = (min if keep_aspect_ratio_policy == "not_larger" else max)(scales)
            scales, sizes = [f] * len(axes), [int(X.shape[a] * f + 0.5) for a in axes]
    opts = {"coordinate_transformation_mode": coordinate_transformation_mode, "nearest_mode": nearest_mode,
            "cubic_coeff_a": cubic_coeff_a, "exclude_outside": exclude_outside, "antialias": antialias}
    y = X.cast(dtypes.float32) if not dtypes.is_float(X.dtype) else X
    for i, (a, n, f) in enumerate(zip(axes, sizes, scales)):
        axis_roi = (roi[i], roi[i + len(axes)]) if roi is not None else (0.0, 1.0)
        if n == X.shape[a] and f == 1 and axis_roi == (0.0, 1.0):
            continue
        rows, outside = resize_matrix(X.shape[a], n, f, mode, opts, axis_roi)
        w = Tensor(rows, dtype=y.dtype, device=X.device).T
        y = (y.transpose(a, -1) @ w).transpose(a, -1)
        if any(outside):
            mask = Tensor(outside, device=X.device).reshape([-1 if d == a else 1 for d in range(X.ndim)])
            y = mask.where(extrapolation_value, y)
    return y.round().cast(X.dtype) if not dtypes.is_float(X.dtype) else y


def Upsample(X, scales, mode="nearest"):
    return Resize(X, scales=scales, mode=mode, coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def Attention(Q, K, V, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None, is_causal=0,
              kv_num_heads=None, q_num_heads=None, qk_matmul_output_mode=0, scale=None, softcap=0.0,
              softmax_precision=None, left_window_size=-1, right_window_size=-1):
    """Opset 23's scaled dot-product attention: 3-d inputs (batch, seq, heads * size) or 4-d (batch, heads, seq,
    size); a bool or additive mask, causal from past_key's length on, grouped kv heads, softcap."""
    three_d = Q.ndim == 3
    if three_d:
        Q, K, V = (t.reshape(t.shape[0], t.shape[1], h, -1).transpose(1, 2)
                   for t, h in ((Q, q_num_heads), (K, kv_num_heads), (V, kv_num_heads)))
    K = past_key.cat(K, dim=2) if past_key is not None else K
    V = past_value.cat(V, dim=2) if past_value is not None else V
    present_k, present_v = K, V
    nq, nkv = Q.shape[2], K.shape[2]
    bias = Tensor.zeros(nq, nkv, dtype=Q.dtype, device=Q.device)
    if attn_mask is not None:
        if attn_mask.shape[-1] < nkv:
            fill = False if attn_mask.dtype == dtypes.bool else float("-inf")
            attn_mask = attn_mask.pad([(0, 0)] * (attn_mask.ndim - 1) + [(0, nkv - attn_mask.shape[-1])], fill)
        bias = bias + (attn_mask.where(0.0, float("-inf")).cast(Q.dtype) if attn_mask.dtype == dtypes.bool
                       else attn_mask)
    offset = past_key.shape[2] if past_key is not None else 0
    if nonpad_kv_seqlen is not None:
        offset = (nonpad_kv_seqlen - nq).reshape(-1, 1, 1, 1)
    diff = Tensor.arange(nq, device=Q.device).reshape(nq, 1) + offset - Tensor.arange(nkv, device=Q.device)
    allowed = diff >= 0 if is_causal else None
    for size, ok in ((left_window_size, lambda d: d <= left_window_size),
                     (right_window_size, lambda d: -d <= right_window_size)):
        if size >= 0:
            allowed = ok(diff) if allowed is None else allowed & ok(diff)
    if allowed is not None:
        bias = allowed.where(bias, float("-inf"))
    if nonpad_kv_seqlen is not None:
        kept = Tensor.arange(nkv, device=Q.device) < nonpad_kv_seqlen.reshape(-1, 1, 1, 1)
        bias = kept.where(bias, float("-inf"))
    if K.shape[1] != Q.shape[1]:
        K, V = (t.repeat_interleave(Q.shape[1] // t.shape[1], 1) for t in (K, V))
    s = math.sqrt(scale if scale is not None else 1 / math.sqrt(Q.shape[-1]))
    qk = (Q * s) @ (K * s).transpose(-1, -2)
    if softcap > 0:
        qk = (qk / softcap).tanh() * softcap
    scores = qk + bias
    qk_out = scores if qk_matmul_output_mode == 2 else qk
    masked = bias.max(-1, keepdim=True) == float("-inf")
    scores = scores.cast(to_dtype(softmax_precision)) if softmax_precision is not None else scores
    probs = masked.where(0.0, masked.where(0.0, scores).softmax(-1)).cast(Q.dtype)
    qk_out = probs if qk_matmul_output_mode == 3 else qk_out
    out = probs @ V
    if three_d:
        out = out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1)
    return out, present_k, present_v, qk_out.cast(Q.dtype)


def CumProd(x, axis, exclusive=0, reverse=0): return _scan(x, axis, exclusive, reverse, "cumprod", 1)    # noqa: E704


def per_axis(x, t, axis, block_size=0):
    """A scale or zero point broadcast against x: a scalar, one value per slice of axis, or per block of it."""
    if t.ndim == 0 or t.numel() == 1:
        return t.reshape(())
    if block_size:
        t = t.repeat_interleave(block_size, axis % x.ndim).shrink(tuple((0, s) for s in x.shape))
        return t
    return t.reshape([-1 if d == axis % x.ndim else 1 for d in range(x.ndim)])


def QuantizeLinear(x, y_scale, y_zero_point=None, axis=1, block_size=0, output_dtype=0, saturate=1, precision=0):
    dtype = y_zero_point.dtype if y_zero_point is not None else to_dtype(output_dtype) if output_dtype else dtypes.uint8
    if dtype not in (dtypes.uint8, dtypes.int8, dtypes.uint16, dtypes.int16):
        raise NotImplementedError(f"ONNX QuantizeLinear to {dtype} is not supported")
    zero = per_axis(x, y_zero_point, axis, block_size).cast(dtypes.float32) if y_zero_point is not None else 0
    y = (x.cast(dtypes.float32) / per_axis(x, y_scale, axis, block_size).cast(dtypes.float32)).round() + zero
    return y.clip(dtypes.min(dtype), dtypes.max(dtype)).cast(dtype)


def DequantizeLinear(x, x_scale, x_zero_point=None, axis=1, block_size=0, output_dtype=0):
    zero = per_axis(x, x_zero_point, axis, block_size).cast(dtypes.float32) if x_zero_point is not None else 0
    scale = per_axis(x, x_scale, axis, block_size)
    return ((x.cast(dtypes.float32) - zero) * scale.cast(dtypes.float32)).cast(scale.dtype)


def DynamicQuantizeLinear(x):
    lo, hi = x.min().minimum(0), x.max().maximum(0)
    scale = (hi - lo) / 255
    zero = (-lo / scale).round().clip(0, 255)
    return (x / scale).round().add(zero).clip(0, 255).cast(dtypes.uint8), scale, zero.cast(dtypes.uint8)


def BitCast(x, to):
    return x.bitcast(to_dtype(to))


def OptionalHasElement(x=None):
    return Tensor(x is not None, device=x.device if x is not None else None)


def OptionalGetElement(x):
    return x


def window(coefficients):
    """Hann / Hamming / Blackman windows: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)."""
    def make(size, output_datatype=1, periodic=1):
        n = int(scalar(size))
        arg = Tensor.arange(n, device=size.device).cast(dtypes.float64) * (2 * math.pi / (n if periodic else n - 1))
        a0, a1, a2 = coefficients
        return (a0 - a1 * arg.cos() + a2 * (2 * arg).cos()).cast(to_dtype(output_datatype))
    return make


def MaxUnpool(X, I, output_shape=None, kernel_shape=None, pads=None, strides=None):
    dims = len(kernel_shape)
    strides, pads = strides or [1] * dims, pads or [0] * 2 * dims
    spatial = ints(output_shape)[-dims:] if output_shape is not None else \
        [(n - 1) * s - pads[d] - pads[d + dims] + k
         for d, (n, k, s) in enumerate(zip(X.shape[2:], kernel_shape, strides))]
    n = prod(X.shape[:2]) * prod(spatial)
    out = Tensor.zeros(n, dtype=X.dtype, device=X.device).scatter(0, I.flatten(), X.flatten())
    return out.reshape(*X.shape[:2], *spatial)


def RotaryEmbedding(X, cos_cache, sin_cache, position_ids=None, interleaved=0, num_heads=0, rotary_embedding_dim=0):
    four_d = X.ndim == 4              # (batch, heads, seq, size); 3-d is (batch, seq, heads * size)
    x = X if four_d else X.reshape(X.shape[0], X.shape[1], num_heads, -1).transpose(1, 2)
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos, sin = cos_cache.unsqueeze(1), sin_cache.unsqueeze(1)          # (batch, 1, seq, rot / 2)
    rot = rotary_embedding_dim or x.shape[-1]
    part, rest = x[..., :rot], x[..., rot:]
    if interleaved:
        a, b = part[..., 0::2], part[..., 1::2]
    else:
        a, b = part[..., :rot // 2], part[..., rot // 2:]
    ra, rb = a * cos - b * sin, b * cos + a * sin
    part = ra.unsqueeze(-1).cat(rb.unsqueeze(-1), dim=-1).flatten(-2) if interleaved else ra.cat(rb, dim=-1)
    y = part.cat(rest, dim=-1)
    return y if four_d else y.transpose(1, 2).reshape(X.shape)


def If(cond, then_branch, else_branch, outer):
    branch = then_branch if cond.item() else else_branch
    return tuple(branch({}, outer).values())


ONNX_OPS = {
    # elementwise
    "Identity": lambda x: x, "Abs": Tensor.abs, "Neg": Tensor.neg, "Exp": Tensor.exp, "Log": Tensor.log,
    "Sqrt": Tensor.sqrt, "Reciprocal": Tensor.reciprocal, "Floor": Tensor.floor, "Ceil": Tensor.ceil,
    "Round": Tensor.round, "Sign": Tensor.sign, "Relu": Tensor.relu, "Sigmoid": Tensor.sigmoid, "Tanh": Tensor.tanh,
    "Sin": Tensor.sin, "Cos": Tensor.cos, "Tan": Tensor.tan, "Asin": Tensor.asin, "Acos": Tensor.acos,
    "Atan": Tensor.atan, "Sinh": Tensor.sinh, "Cosh": Tensor.cosh, "Asinh": Tensor.asinh, "Acosh": Tensor.acosh,
    "Atanh": Tensor.atanh, "Erf": Tensor.erf, "Softplus": Tensor.softplus, "Softsign": Tensor.softsign,
    "Mish": Tensor.mish, "HardSwish": Tensor.hardswish, "IsNaN": Tensor.isnan, "IsInf": IsInf,
    "Not": Tensor.logical_not, "BitwiseNot": Tensor.bitwise_not,
    "Elu": lambda x, alpha=1.0: x.elu(alpha), "Celu": lambda x, alpha=1.0: x.celu(alpha),
    "Selu": lambda x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875: x.selu(alpha, gamma),
    "LeakyRelu": lambda x, alpha=0.01: x.leakyrelu(alpha),
    "HardSigmoid": lambda x, alpha=0.2, beta=0.5: x.hardsigmoid(alpha, beta),
    "ThresholdedRelu": lambda x, alpha=1.0: (x > alpha).where(x, 0).cast(x.dtype),
    "Swish": lambda x, alpha=1.0: x * (x * alpha).sigmoid(), "Shrink": Shrink, "Gelu": Gelu, "PRelu": PRelu,
    "Clip": Clip, "Cast": Cast, "CastLike": CastLike, "Where": Where,
    "Add": binary(Tensor.add), "Sub": binary(Tensor.sub), "Mul": binary(Tensor.mul), "Div": Div, "Pow": Pow,
    "Mod": Mod, "Equal": binary(Tensor.__eq__), "Less": binary(Tensor.__lt__), "LessOrEqual": binary(Tensor.__le__),
    "Greater": binary(Tensor.__gt__), "GreaterOrEqual": binary(Tensor.__ge__),
    "And": binary(Tensor.bitwise_and), "Or": binary(Tensor.bitwise_or), "Xor": binary(Tensor.bitwise_xor),
    "BitwiseAnd": binary(Tensor.bitwise_and), "BitwiseOr": binary(Tensor.bitwise_or),
    "BitwiseXor": binary(Tensor.bitwise_xor), "BitShift": BitShift,
    "Max": variadic(Tensor.maximum), "Min": variadic(Tensor.minimum), "Sum": variadic(Tensor.add),
    "Mean": lambda *xs: variadic(Tensor.add)(*xs) / len(xs),
    # reductions
    "ReduceSum": reduce_op(lambda x, a, k: x.sum(a, k)), "ReduceMean": reduce_op(lambda x, a, k: x.mean(a, k)),
    "ReduceMax": reduce_op(lambda x, a, k: extreme(x, a, k, Tensor.max, "-inf")),
    "ReduceMin": reduce_op(lambda x, a, k: extreme(x, a, k, Tensor.min, "inf")),
    "ReduceProd": reduce_op(lambda x, a, k: x.prod(a, k)),
    "ReduceL1": reduce_op(lambda x, a, k: x.abs().sum(a, k)),
    "ReduceL2": reduce_op(lambda x, a, k: x.square().sum(a, k).sqrt().cast(x.dtype)),
    "ReduceSumSquare": reduce_op(lambda x, a, k: x.square().sum(a, k)),
    "ReduceLogSum": reduce_op(lambda x, a, k: x.sum(a, k).log()),
    "ReduceLogSumExp": reduce_op(lambda x, a, k: x.logsumexp(a, k)),
    "ArgMax": ArgExtreme(True), "ArgMin": ArgExtreme(False), "CumSum": CumSum, "TopK": TopK,
    "Softmax": along_axis(Tensor.softmax), "LogSoftmax": along_axis(Tensor.log_softmax), "Hardmax": along_axis(hardmax),
    # shapes and movement
    "Reshape": Reshape, "Flatten": Flatten, "Squeeze": Squeeze, "Unsqueeze": Unsqueeze, "Transpose": Transpose,
    "Concat": Concat, "Split": Split, "Slice": Slice, "Expand": Expand, "Tile": Tile, "Pad": Pad, "Shape": Shape,
    "Size": Size, "Gather": Gather, "GatherElements": GatherElements, "GatherND": GatherND,
    "ScatterElements": ScatterElements, "Scatter": ScatterElements, "ScatterND": ScatterND, "Range": Range,
    "ConstantOfShape": ConstantOfShape, "Constant": Constant, "EyeLike": EyeLike, "Trilu": Trilu, "OneHot": OneHot,
    "DepthToSpace": DepthToSpace, "SpaceToDepth": SpaceToDepth, "Compress": Compress, "NonZero": NonZero,
    "Einsum": Einsum, "CenterCropPad": CenterCropPad, "ReverseSequence": ReverseSequence,
    # neural network
    "MatMul": binary(Tensor.matmul), "Gemm": Gemm, "Conv": Conv, "ConvTranspose": ConvTranspose,
    "MaxPool": MaxPool, "AveragePool": AveragePool, "LpPool": LpPool, "GlobalAveragePool": GlobalAveragePool,
    "GlobalMaxPool": GlobalMaxPool, "BatchNormalization": BatchNormalization,
    "InstanceNormalization": InstanceNormalization, "LayerNormalization": LayerNormalization,
    "GroupNormalization": GroupNormalization, "RMSNormalization": RMSNormalization,
    "LpNormalization": LpNormalization, "MeanVarianceNormalization": MeanVarianceNormalization, "LRN": LRN,
    "Dropout": Dropout, "NegativeLogLikelihoodLoss": NegativeLogLikelihoodLoss,
    "SoftmaxCrossEntropyLoss": SoftmaxCrossEntropyLoss, "If": If, "Resize": Resize, "Upsample": Upsample,
    "Attention": Attention, "CumProd": CumProd, "QuantizeLinear": QuantizeLinear,
    "DequantizeLinear": DequantizeLinear, "DynamicQuantizeLinear": DynamicQuantizeLinear, "BitCast": BitCast,
    "OptionalHasElement": OptionalHasElement, "OptionalGetElement": OptionalGetElement,
    "HannWindow": window((0.5, 0.5, 0.0)), "HammingWindow": window((25 / 46, 21 / 46, 0.0)),
    "BlackmanWindow": window((0.42, 0.5, 0.08)), "MaxUnpool": MaxUnpool, "RotaryEmbedding": RotaryEmbedding,
}
SUBGRAPH_OPS = {"If"}                   # get the values of the enclosing graph
N_OUTPUT_OPS = {"Split", "Dropout"}     # get how many outputs the node names
