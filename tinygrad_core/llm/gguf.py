"""GGUF files (llama.cpp's format): the metadata, and every tensor as a lazy Tensor over the file's bytes.

The file is memory-mapped and read in place: a tensor's blocks are a uint8 Tensor over the mapped bytes (on a host-
memory backend, the same memory), and its values a graph of Tensor ops that dequantizes them, so the dequantization
runs as kernels on every backend and fuses into what reads it (a matmul reads the quantized blocks)."""
from __future__ import annotations
import pathlib
import struct
import numpy as np
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import prod
from tinygrad_core.tensor import Tensor

# metadata value types: struct format (and size), or 8 string, 9 array
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
# ggml tensor types: name, elements per block, bytes per block
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 30: ("BF16", 1, 2), 8: ("Q8_0", 32, 34), 2: ("Q4_0", 32, 18),
         3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 12: ("Q4_K", 256, 144),
         13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210)}


class GGUFError(ValueError):
    """A file that isn't a GGUF this reader can read, with the file and what in it is wrong."""


class _Reader:
    """A cursor over the mapped bytes; every read checks it stays inside the file."""

    def __init__(self, data: np.ndarray, path: str):
        self.data, self.path, self.at = data, path, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise GGUFError(f"{self.path}: truncated: {what} needs {n} bytes at offset {self.at}, the file has "
                            f"{len(self.data)}")
        self.at += n
        return self.data[self.at - n:self.at].tobytes()

    def scalar(self, kind: int, what: str):
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str) -> str:
        raw = self.take(self.scalar(10, what), what)
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            raise GGUFError(f"{self.path}: {what} is not UTF-8 ({e})") from None

    def value(self, kind: int, what: str):
        if kind == 8:
            return self.string(what)
        if kind == 9:
            item, count = self.scalar(4, what), self.scalar(10, what)
            if item in _SCALARS and item != 7:     # (a numeric array at once: a vocabulary's scores are 10^5 floats)
                return np.frombuffer(self.take(count * struct.calcsize(_SCALARS[item]), what), _SCALARS[item]).tolist()
            return [self.value(item, what) for _ in range(count)]
        if kind not in _SCALARS:
            raise GGUFError(f"{self.path}: {what} has an unknown value type {kind}")
        return self.scalar(kind, what)


def gguf_load(file) -> tuple[dict, dict[str, Tensor]]:
    """(metadata, {name: Tensor}) of a GGUF file (a path; or a uint8 Tensor of its bytes, as tinygrad takes): v2 or v3,
    every tensor a lazy Tensor over the memory-mapped file, dequantized as it is read (F32, F16, BF16, Q8_0, Q4_0,
    Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), in PyTorch's dimension order (ggml's reversed)."""
    if isinstance(file, Tensor):
        data, path = file.numpy().view(np.uint8).reshape(-1), "the GGUF tensor"
    else:
        path = str(file)
        data = np.memmap(pathlib.Path(path), dtype=np.uint8, mode="r")
    r = _Reader(data, path)
    if (magic := r.take(4, "the magic")) != b"GGUF":
        raise GGUFError(f"{path}: not a GGUF file (it starts with {magic!r}, not b'GGUF')")
    if (version := r.scalar(4, "the version")) not in (2, 3):
        raise GGUFError(f"{path}: GGUF version {version}; this reader knows versions 2 and 3")
    n_tensors, n_kv = r.scalar(10, "the tensor count"), r.scalar(10, "the metadata count")
    kv = {}
    for _ in range(n_kv):
        key = r.string("a metadata key")
        kv[key] = r.value(r.scalar(4, f"the type of {key}"), key)
    infos = []
    for _ in range(n_tensors):
        name = r.string("a tensor name")
        dims = [r.scalar(10, f"tensor {name}'s shape") for _ in range(r.scalar(4, f"tensor {name}'s rank"))]
        infos.append((name, dims, r.scalar(4, f"tensor {name}'s type"), r.scalar(10, f"tensor {name}'s offset")))
    alignment = kv.get("general.alignment", 32)
    start = -(-r.at // alignment) * alignment
    tensors = {}
    for name, dims, kind, offset in infos:
        if kind not in TYPES:
            raise GGUFError(f"{path}: tensor {name} has ggml type {kind}, which this reader doesn't know (it reads "
                            f"{', '.join(t[0] for t in TYPES.values())})")
        label, per_block, block_bytes = TYPES[kind]
        count = prod(dims)
        if count % per_block:
            raise GGUFError(f"{path}: tensor {name} ({label}) has {count} elements, not whole blocks of {per_block}")
        size, begin = count // per_block * block_bytes, start + offset
        if begin + size > len(data):
            raise GGUFError(f"{path}: tensor {name} lies at bytes {begin}-{begin + size}, past the end of the file "
                            f"({len(data)} bytes)")
        blocks = Tensor(data[begin:begin + size].reshape(-1, block_bytes))    # (read-only memory: used in place)
        tensors[name] = dequantize(blocks, label).reshape(tuple(reversed(dims)))
    return kv, tensors


def _u16(lo: Tensor, hi: Tensor) -> Tensor:
    return lo.cast(dtypes.uint16) | (hi.cast(dtypes.uint16) << 8)


def _half(blocks: Tensor, at: int) -> Tensor:
    """The float16 at byte `at` of each block, as float32, shape (blocks, 1)."""
    return _u16(blocks[:, at], blocks[:, at + 1]).bitcast(dtypes.float16).cast(dtypes.float32).reshape(-1, 1)


def _nibbles(qs: Tensor) -> Tensor:
    """Bytes (..., n) as their 4-bit halves (..., 2, n): the low halves, then the high (ggml's order in a block). A
    shift by (0, 4), not a concatenation: a kernel reading them loads each byte once and selects nothing."""
    return (qs.unsqueeze(-2) >> Tensor([[0], [4]], dtype=dtypes.uint8, device=qs.device)) & 0xF


def _high_bits(qh: Tensor, count: int) -> Tensor:
    """Bit j of the little-endian bytes qh (blocks, count / 8), for j < count: (blocks, count) in {0, 1}."""
    bits = qh.reshape(-1, count // 8, 1) >> Tensor.arange(8, dtype=dtypes.uint8, device=qh.device).reshape(1, 1, 8)
    return (bits & 1).reshape(-1, count)


def _k_scales(scales: Tensor) -> tuple[Tensor, Tensor]:
    """Q4_K's and Q5_K's 12 bytes of 6-bit scales and mins, for its 8 sub-blocks: (blocks, 8) each."""
    low, high = scales[:, 0:4], scales[:, 8:12]
    sc = (low & 63).cat((high & 0xF) | ((low >> 6) << 4), dim=-1)
    mn = (scales[:, 4:8] & 63).cat((high >> 4) | ((scales[:, 4:8] >> 6) << 4), dim=-1)
    return sc.cast(dtypes.float32), mn.cast(dtypes.float32)


def dequantize(blocks: Tensor, kind: str) -> Tensor:
    """The values of ggml blocks (a uint8 Tensor, one block a row) as float32 (F16, BF16: their own type), flat,
    written as Tensor ops (ggml-quants.c's dequantize_row_* say what each block holds)."""
    f32 = dtypes.float32
    if kind in ("F32", "F16", "BF16"):
        wide = {"F32": dtypes.uint32, "F16": dtypes.uint16, "BF16": dtypes.uint16}[kind]
        shifts = Tensor.arange(0, 8 * wide.itemsize, 8, dtype=wide, device=blocks.device)
        word = (blocks.cast(wide) << shifts.reshape(1, -1)).sum(-1, dtype=wide)       # (little-endian bytes)
        return word.bitcast({"F32": f32, "F16": dtypes.float16, "BF16": dtypes.bfloat16}[kind]).reshape(-1)
    if kind == "Q8_0":
        return (_half(blocks, 0) * blocks[:, 2:].bitcast(dtypes.int8).cast(f32)).reshape(-1)
    if kind in ("Q4_0", "Q4_1"):
        q = _nibbles(blocks[:, 4 if kind == "Q4_1" else 2:]).reshape(-1, 32).cast(f32)
        return (_half(blocks, 0) * q + (_half(blocks, 2) if kind == "Q4_1" else _half(blocks, 0) * -8)).reshape(-1)
    if kind in ("Q5_0", "Q5_1"):
        at = 4 if kind == "Q5_1" else 2
        q = (_nibbles(blocks[:, at + 4:]).reshape(-1, 32) | (_high_bits(blocks[:, at:at + 4], 32) << 4)).cast(f32)
        return (_half(blocks, 0) * q + (_half(blocks, 2) if kind == "Q5_1" else _half(blocks, 0) * -16)).reshape(-1)
    if kind in ("Q4_K", "Q5_K"):
        sc, mn = _k_scales(blocks[:, 4:16])
        qs = blocks[:, 48 if kind == "Q5_K" else 16:].reshape(-1, 4, 32)           # 4 chunks of 32 bytes: 64 values
        q = _nibbles(qs).reshape(-1, 8, 32)                                        # 8 sub-blocks of 32
        if kind == "Q5_K":
            q = q | (_high_bits(blocks[:, 16:48], 256).reshape(-1, 32, 8).permute(0, 2, 1) << 4)
        d, dmin = _half(blocks, 0).reshape(-1, 1, 1), _half(blocks, 2).reshape(-1, 1, 1)
        return (d * sc.unsqueeze(-1) * q.cast(f32) - dmin * mn.unsqueeze(-1)).reshape(-1)
    if kind == "Q6_K":
        ql, qh = blocks[:, 0:128].reshape(-1, 2, 2, 32), blocks[:, 128:192].reshape(-1, 2, 1, 32)
        low = _nibbles(ql).transpose(2, 3).reshape(-1, 2, 4, 32)                  # (half, quarter, l)
        high = (qh >> Tensor([[0], [2], [4], [6]], dtype=dtypes.uint8, device=blocks.device)) & 3   # (half, quarter, l)
        q = (low | (high << 4)).bitcast(dtypes.int8).cast(f32) - 32
        scales = blocks[:, 192:208].bitcast(dtypes.int8).cast(f32).reshape(-1, 2, 4, 2, 1)    # one per 16 values
        d = _half(blocks, 208).reshape(-1, 1, 1, 1, 1)
        return (d * scales * q.reshape(-1, 2, 4, 2, 16)).reshape(-1)
    raise GGUFError(f"no dequantization for ggml type {kind}")
