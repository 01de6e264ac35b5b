"""Model state: find the Tensors inside any object, name them, load them back, and store them as safetensors.

Sits beside the layers: it only walks Python objects and moves bytes between files and Buffers."""
from __future__ import annotations
import json
import os
import struct
import types
import numpy as np
from tinygrad_core.device import Buffer, Device
from tinygrad_core.dtype import DType, dtypes
from tinygrad_core.helpers import prod
from tinygrad_core.schedule import buffer_of, buffer_uop
from tinygrad_core.tensor import Tensor

# safetensors dtype codes (https://github.com/huggingface/safetensors, "format" section)
SAFETENSORS_DTYPES: dict[DType, str] = {
    dtypes.bool: "BOOL", dtypes.int8: "I8", dtypes.uint8: "U8", dtypes.int16: "I16", dtypes.uint16: "U16",
    dtypes.int32: "I32", dtypes.uint32: "U32", dtypes.int64: "I64", dtypes.uint64: "U64",
    dtypes.float16: "F16", dtypes.bfloat16: "BF16", dtypes.float32: "F32", dtypes.float64: "F64"}
DTYPE_OF_CODE = {code: dt for dt, code in SAFETENSORS_DTYPES.items()}

_NOT_WALKED = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


def get_state_dict(obj, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor reachable from obj through attributes, lists, tuples and dicts, named by its path with dots
    ("l1.weight", "layers.0.bias"), as PyTorch and tinygrad name them; a tensor reachable two ways has both names."""
    out: dict[str, Tensor] = {}
    _walk(obj, prefix, out, set())
    return out


def _walk(obj, name: str, out: dict, entered: set):
    if isinstance(obj, Tensor):
        out[name] = obj
        return
    if isinstance(obj, _NOT_WALKED) or id(obj) in entered:
        return
    if isinstance(obj, (list, tuple)):
        children = [(str(i), v) for i, v in enumerate(obj)]
    elif isinstance(obj, dict):
        children = [(str(k), v) for k, v in obj.items()]
    elif hasattr(obj, "__dict__"):
        children = list(vars(obj).items())
    else:
        return
    entered.add(id(obj))       # only while inside obj: a shared layer gets every name, a cycle doesn't loop
    for key, value in children:
        _walk(value, f"{name}.{key}" if name else key, out, entered)
    entered.discard(id(obj))


def get_parameters(obj) -> list[Tensor]:
    """The Tensors of get_state_dict(obj), each once (a tensor shared by two layers is listed once)."""
    seen: set[int] = set()
    params = []
    for t in get_state_dict(obj).values():
        if id(t) not in seen:
            seen.add(id(t))
            params.append(t)
    return params


def load_state_dict(model, state_dict: dict, strict: bool = True, realize: bool = True) -> None:
    """Copy state_dict's values into model's tensors in place (so an optimizer holding them keeps working).

    Shapes and dtypes must match. With strict=True every model tensor must be in state_dict and every entry of
    state_dict must name a model tensor; strict=False skips both kinds of mismatch."""
    targets = get_state_dict(model)
    if strict:
        if missing := [k for k in targets if k not in state_dict]:
            raise KeyError(f"load_state_dict: the state dict has no {missing[0]!r}, which the model needs"
                           f"{f' (and {len(missing) - 1} more missing)' if len(missing) > 1 else ''}; "
                           f"pass strict=False to keep the model's current values for missing keys")
        if extra := [k for k in state_dict if k not in targets]:
            raise KeyError(f"load_state_dict: the state dict has {extra[0]!r}, which the model doesn't have"
                           f"{f' (and {len(extra) - 1} more extra)' if len(extra) > 1 else ''}; "
                           f"pass strict=False to ignore extra keys")
    written = []
    for name, target in targets.items():
        if name not in state_dict:
            continue
        value = state_dict[name]
        value = value if isinstance(value, Tensor) else Tensor(np.asarray(value), device=target.device)
        if value.shape != target.shape:
            raise ValueError(f"load_state_dict: {name!r} has shape {value.shape} in the state dict but "
                             f"{target.shape} in the model")
        if value.dtype != target.dtype:
            raise TypeError(f"load_state_dict: {name!r} is {value.dtype} in the state dict but {target.dtype} in the "
                            f"model; cast it first (state_dict[{name!r}].cast({target.dtype}))")
        target.assign(value.to(target.device))
        written.append(target)
    if realize and written:
        Tensor.realize_all(*written)


def _host_bytes(t: Tensor) -> np.ndarray:
    """t's elements as a contiguous host array in its own dtype (bfloat16 as raw uint16 bits), little-endian."""
    if t.numel() == 0:
        return np.zeros((0,), dtype=t.dtype.np)
    t.realize()
    buf = buffer_of(t.uop)
    if buf is None:      # a view that isn't the whole buffer: copy it out contiguously first
        buf = buffer_of(t.contiguous().realize().uop)
    return buf.numpy().astype(t.dtype.np.newbyteorder("<"), copy=False)


def safe_save(tensors: dict[str, Tensor], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write tensors to a .safetensors file: 8-byte header length, a JSON header, then the raw bytes."""
    header: dict = {"__metadata__": dict(metadata)} if metadata else {}
    chunks, offset = [], 0
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"safe_save: {name!r} is a {type(t).__name__}, not a Tensor")
        if t.dtype not in SAFETENSORS_DTYPES:
            raise TypeError(f"safe_save: {name!r} has dtype {t.dtype}, which safetensors can't store")
        data = _host_bytes(t).tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)     # the data then starts 8-byte aligned, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for data in chunks:
            f.write(data)


def safe_load_metadata(path: str | os.PathLike) -> tuple[dict, int]:
    """(header, byte offset where the data starts) of a .safetensors file."""
    with open(path, "rb") as f:
        raw_length = f.read(8)
        if len(raw_length) != 8:
            raise ValueError(f"{path} is not a safetensors file: it is shorter than the 8-byte header length")
        (length,) = struct.unpack("<Q", raw_length)
        if length > os.path.getsize(path) - 8:
            raise ValueError(f"{path} is not a safetensors file: its header length {length} is past the end")
        header = json.loads(f.read(length))
    return header, 8 + length


def safe_load(path: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
    """Read a .safetensors file into Tensors on device (the default device when None)."""
    header, start = safe_load_metadata(path)
    device = Device.canonicalize(device)
    data = np.memmap(path, dtype=np.uint8, mode="r") if os.path.getsize(path) > start else np.zeros(0, np.uint8)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in DTYPE_OF_CODE:
            raise TypeError(f"safe_load: {name!r} has safetensors dtype {info['dtype']}, which tinygrad_core lacks")
        dtype, shape = DTYPE_OF_CODE[info["dtype"]], tuple(info["shape"])
        begin, end = info["data_offsets"]
        if end - begin != prod(shape) * dtype.itemsize:
            raise ValueError(f"safe_load: {name!r} has {end - begin} bytes for shape {shape} of {dtype}")
        if prod(shape) == 0:
            out[name] = Tensor.zeros(*shape, dtype=dtype, device=device)
            continue
        # copied out of the file (which may be overwritten later), then no more: a read-only array of our own is
        # what a host-memory device may borrow. The bytes are already in the device's format (bfloat16 included).
        host = np.array(data[start + begin:start + end]).view(dtype.np.newbyteorder("<"))
        host.flags.writeable = False
        out[name] = Tensor(buffer_uop(Buffer.from_host(device, host, dtype)).reshape(shape))
    return out


__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata"]
