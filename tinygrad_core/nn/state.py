"""Model state: find the Tensors inside any object, name them, load them back, store them as safetensors, and read
PyTorch's .pt/.pth files and zip and tar archives.

Sits beside the layers: it only walks Python objects and moves bytes between files and Buffers."""
import collections
import functools
import io
import json
import os
import pathlib
import pickle
import struct
import tarfile
import types
import zipfile
import numpy as np
from tinygrad_core.device import Buffer, Device
from tinygrad_core.dtype import DType, dtypes
from tinygrad_core.helpers import all_int, prod
from tinygrad_core.buffers import buffer_uop
from tinygrad_core.tensor import Tensor
from tinygrad_core.llm.gguf import gguf_load  # noqa: F401  (tinygrad's name for it: nn.state.gguf_load)

# safetensors dtype codes (https://github.com/huggingface/safetensors, "format" section)
SAFETENSORS_DTYPES: dict[DType, str] = {
    dtypes.bool: "BOOL", dtypes.int8: "I8", dtypes.uint8: "U8", dtypes.int16: "I16", dtypes.uint16: "U16",
    dtypes.int32: "I32", dtypes.uint32: "U32", dtypes.int64: "I64", dtypes.uint64: "U64",
    dtypes.float16: "F16", dtypes.bfloat16: "BF16", dtypes.float32: "F32", dtypes.float64: "F64"}
DTYPE_OF_CODE = {code: dt for dt, code in SAFETENSORS_DTYPES.items()}
# the storage classes (torch.FloatStorage) by which torch.save names a tensor's element type
TORCH_DTYPES: dict[str, DType] = {
    "DoubleStorage": dtypes.float64, "FloatStorage": dtypes.float32, "HalfStorage": dtypes.float16,
    "BFloat16Storage": dtypes.bfloat16, "LongStorage": dtypes.int64, "IntStorage": dtypes.int32,
    "ShortStorage": dtypes.int16, "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8, "BoolStorage": dtypes.bool}

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
    if isinstance(obj, (list, tuple, dict)):
        children = [(str(k), v) for k, v in (obj.items() if isinstance(obj, dict) else enumerate(obj))]
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
    return list({id(t): t for t in get_state_dict(obj).values()}.values())


def load_state_dict(model, state_dict: dict, strict: bool = True, realize: bool = True) -> list[Tensor]:
    """Copy state_dict's values into model's tensors in place (so an optimizer holding them keeps working); returns
    the tensors written.

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
        if not isinstance(value, (Tensor, np.ndarray)):
            raise TypeError(f"load_state_dict: {name!r} is a {type(value).__name__} in the state dict, not a Tensor")
        value = value if isinstance(value, Tensor) else Tensor(value, device=target.device)
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
    return written


def _host_bytes(t: Tensor) -> np.ndarray:
    """t's elements as a contiguous host array in its own dtype (bfloat16 as raw uint16 bits), little-endian."""
    if t.numel() == 0:
        return np.zeros((0,), dtype=t.dtype.np)
    return t._whole_buffer().numpy().astype(t.dtype.np.newbyteorder("<"), copy=False)


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
        f.writelines([struct.pack("<Q", len(encoded)), encoded, *chunks])     # (each written as it is: no joined copy)


def safe_load_metadata(path: str | os.PathLike) -> tuple[dict, int]:
    """(header, byte offset where the data starts) of a .safetensors file, every entry checked against the file's
    size, so that a truncated or malformed file fails here, naming itself and the tensor."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw_length = f.read(8)
        if len(raw_length) != 8:
            raise ValueError(f"{path} is not a safetensors file: it is shorter than the 8-byte header length")
        (length,) = struct.unpack("<Q", raw_length)
        if length > size - 8:
            raise ValueError(f"{path} is not a safetensors file: its header length {length} is past the end "
                             f"({size} bytes)")
        try:
            header = json.loads(f.read(length))
        except ValueError as e:         # JSONDecodeError and UnicodeDecodeError both are
            raise ValueError(f"{path} is not a safetensors file: its header is not JSON ({e})") from None
    if not isinstance(header, dict):      # a malformed file is a bad value (ValueError), not a bad argument type
        raise ValueError(f"{path} is not a safetensors file: its header is a {type(header).__name__}")  # noqa: TRY004
    for name, info in header.items():
        if name != "__metadata__":
            _check_entry(f"safe_load: {path}: {name!r}", info, size - 8 - length)
    return header, 8 + length


def _check_entry(where: str, info, data_size: int):
    shape, offsets = (info.get("shape"), info.get("data_offsets")) if isinstance(info, dict) else (None, None)
    if not (isinstance(shape, list) and isinstance(offsets, list) and len(offsets) == 2 and all_int(shape + offsets)):
        raise ValueError(f"{where} needs a dtype, a shape (a list of ints) and data_offsets (two ints), got {info!r}")
    if (dtype := DTYPE_OF_CODE.get(info.get("dtype"))) is None:
        raise TypeError(f"{where} has safetensors dtype {info.get('dtype')!r}, which tinygrad_core lacks")
    if not 0 <= offsets[0] <= offsets[1] <= data_size:
        raise ValueError(f"{where} has data_offsets {offsets}, outside the file's {data_size} bytes of data "
                         f"(is it truncated?)")
    if offsets[1] - offsets[0] != prod(shape) * dtype.itemsize:
        raise ValueError(f"{where} has {offsets[1] - offsets[0]} bytes for shape {tuple(shape)} of {dtype}")


def _host_tensor(host: np.ndarray, dtype: DType, shape: tuple, device: str) -> Tensor:
    """A Tensor holding host's elements, which are already in the device's format (bfloat16 as raw bits)."""
    if prod(shape) == 0:
        return Tensor.zeros(*shape, dtype=dtype, device=device)
    # copied (the file may be overwritten later), then no more: a read-only array of our own is what a host-memory
    # device may borrow
    host = np.array(host)
    host.flags.writeable = False
    return Tensor(buffer_uop(Buffer.from_host(device, host, dtype)).reshape(shape))


def safe_load(path: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
    """Read a .safetensors file into Tensors on device (the default device when None)."""
    header, start = safe_load_metadata(path)
    device = Device.canonicalize(device)
    data = np.memmap(path, dtype=np.uint8, mode="r") if os.path.getsize(path) > start else np.zeros(0, np.uint8)
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            dtype, (begin, end) = DTYPE_OF_CODE[info["dtype"]], info["data_offsets"]
            host = data[start + begin:start + end].view(dtype.np.newbyteorder("<"))
            out[name] = _host_tensor(host, dtype, tuple(info["shape"]), device)
    return out


def _file_bytes(fn: Tensor | str | os.PathLike) -> bytes:
    return fn.numpy().tobytes() if isinstance(fn, Tensor) else pathlib.Path(fn).read_bytes()


def zip_extract(fn: Tensor | str | os.PathLike) -> dict[str, Tensor]:
    """Every file in a zip archive (a path, or a uint8 Tensor of its bytes) as a 1-d uint8 Tensor, by name."""
    with zipfile.ZipFile(io.BytesIO(_file_bytes(fn))) as archive:
        return {name: Tensor(np.frombuffer(archive.read(name), np.uint8)) for name in archive.namelist()
                if not name.endswith("/")}


def tar_extract(fn: Tensor | str | os.PathLike) -> dict[str, Tensor]:
    """Every regular file in a tar archive (optionally compressed; a path or a uint8 Tensor) as a uint8 Tensor."""
    with tarfile.open(fileobj=io.BytesIO(_file_bytes(fn))) as archive:
        return {m.name: Tensor(np.frombuffer(archive.extractfile(m).read(), np.uint8)) for m in archive if m.isfile()}


def torch_load(fn: Tensor | str | os.PathLike, device: str | None = None):
    """What torch.save wrote (the zip format of PyTorch 1.6 and later), read without torch: each tensor becomes a
    Tensor on device, the dicts and lists around them stay. As torch.load(weights_only=True) does, only what a file
    of weights holds is unpickled; any other class is refused by name, since unpickling it could run code."""
    raw, device = _file_bytes(fn), Device.canonicalize(device)
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        raise ValueError(f"torch_load: {fn} is not in torch.save's zip format (PyTorch >= 1.6): load it with torch and "
                         f"save it again with a newer torch.save")
    archive = zipfile.ZipFile(io.BytesIO(raw))
    if not (pickles := [n for n in archive.namelist() if n.endswith("data.pkl")]):
        raise ValueError(f"torch_load: {fn} is a zip file but not one torch.save wrote: it has no data.pkl")
    prefix = pickles[0][:-len("data.pkl")]

    @functools.cache           # views of one tensor share its storage
    def storage(pid: tuple) -> tuple[np.ndarray, DType]:
        _, dtype, key, *_ = pid          # ("storage", element type, file name, device, element count)
        return np.frombuffer(archive.read(f"{prefix}data/{key}"), dtype.np.newbyteorder("<")), dtype

    def rebuild(stored: tuple[np.ndarray, DType], offset: int, size, stride, *_) -> Tensor:
        flat, dtype = stored
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if prod(size) and (offset < 0 or min(stride, default=0) < 0 or last >= len(flat)):
            raise ValueError(f"torch_load: {fn}: a tensor {tuple(size)} at {offset} is past its {len(flat)} elements")
        view = np.lib.stride_tricks.as_strided(flat[offset:], size, [s * flat.itemsize for s in stride])
        return _host_tensor(view, dtype, tuple(size), device)

    allowed = {("collections", "OrderedDict"): collections.OrderedDict, ("torch._utils", "_rebuild_tensor"): rebuild,
               ("torch._utils", "_rebuild_tensor_v2"): rebuild,
               ("torch._utils", "_rebuild_parameter"): lambda data, *_: data,
               **{("torch", name): dt for name, dt in TORCH_DTYPES.items()}}

    class WeightsUnpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str):
            if (module, name) not in allowed:
                raise pickle.UnpicklingError(f"torch_load: {fn} holds a {module}.{name}, refused as unpickling it "
                                             f"could run code; if you trust the file, torch.load() reads it")
            return allowed[(module, name)]

        def persistent_load(self, pid):
            return storage(tuple(pid))
    return WeightsUnpickler(io.BytesIO(archive.read(pickles[0]))).load()


__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata",
           "torch_load", "zip_extract", "tar_extract"]
