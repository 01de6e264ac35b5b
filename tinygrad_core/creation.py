"""Making tensors: constants, ranges, and random numbers (a counter-based hash computed on the device).

Mixed into Tensor as class methods, so `Tensor.rand(2, 3)` and `Tensor.zeros_like(t)` read as in tinygrad."""
from __future__ import annotations
import ctypes
import gzip
import math
import pathlib
import weakref
from typing import TYPE_CHECKING
import numpy as np
from tinygrad_core.device import Buffer, Device
from tinygrad_core.dtype import dtypes, to_dtype
from tinygrad_core.helpers import argfix, fetch, prod
from tinygrad_core import sizes as sym
from tinygrad_core.ops import UOp, is_symbolic
from tinygrad_core.elementwise import has_float64
from tinygrad_core.buffers import buffer_uop, buffer_of
if TYPE_CHECKING:
    from tinygrad_core.tensor import Tensor

# the one-element offset buffers of random-number kernels, and how many numbers each draws (for TinyJit)
random_offset_buffers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _checked_shape(shape: tuple, what: str = "sizes", negative_ok: bool = False) -> tuple:
    """Ints (numpy's too) or symbolic sizes, as plain ints; a float or a str would only fail in the code generator."""
    for s in shape:
        if isinstance(s, bool) or not (isinstance(s, (int, np.integer)) or is_symbolic(s)):
            raise TypeError(f"{what} must be ints (or symbolic sizes), got {type(s).__name__} {s!r} in {shape}")
        if not negative_ok and not is_symbolic(s) and s < 0:
            raise ValueError(f"can't make a tensor with a negative size: {shape}")
    return tuple(s if is_symbolic(s) else int(s) for s in shape)


class CreationOps:
    _seed: int = 0
    _rng_counter: int = 0

    # ---- creation ----
    @classmethod
    def empty(cls, *shape, device=None, dtype=None, **kwargs) -> Tensor:
        shape = _checked_shape(argfix(*shape))
        dtype = to_dtype(dtype or dtypes.default_float)
        device = Device.canonicalize(device)
        return cls(buffer_uop(Buffer(device, sym.max_value(prod(shape)), dtype)).reshape(shape), **kwargs)

    @classmethod
    def full(cls, shape, fill_value, device=None, dtype=None, **kwargs) -> Tensor:
        shape = _checked_shape(argfix(shape))
        if not isinstance(fill_value, (bool, int, float, np.number, np.bool_)) and not is_symbolic(fill_value):
            raise TypeError(f"full's fill_value must be a number, got {type(fill_value).__name__} {fill_value!r}")
        dtype = to_dtype(dtype) if dtype is not None else dtypes.from_py(fill_value)
        if dtypes.is_int(dtype) and not is_symbolic(fill_value) and not (
                math.isfinite(fill_value) and dtype.min <= math.trunc(fill_value) <= dtype.max):    # (as PyTorch)
            raise RuntimeError(f"full: value {fill_value} cannot be converted to {dtype} without overflow (it holds "
                               f"{dtype.min} to {dtype.max})")
        return cls(UOp.const(dtype, fill_value, Device.canonicalize(device)).broadcast_to(shape), **kwargs)

    @classmethod
    def zeros(cls, *shape, **kwargs) -> Tensor:
        return cls.full(argfix(*shape), 0.0, **{"dtype": dtypes.default_float} | kwargs)

    @classmethod
    def ones(cls, *shape, **kwargs) -> Tensor:
        return cls.full(argfix(*shape), 1.0, **{"dtype": dtypes.default_float} | kwargs)

    @classmethod
    def arange(cls, start, stop=None, step=1, device=None, dtype=None, **kwargs) -> Tensor:
        start, stop = (0, start) if stop is None else (start, stop)
        if step == 0:
            raise ValueError(f"arange step must be nonzero (start {start}, stop {stop})")
        if not math.isfinite(stop - start) or math.isnan(step):
            raise RuntimeError(f"unsupported range: {start} -> {stop} (step {step}): arange needs finite bounds")
        dtype = to_dtype(dtype) if dtype is not None else dtypes.from_py([start, stop, step])
        n = max(0, math.ceil((stop - start) / step))
        if not dtype.min <= min(ends := (start, start + step * max(n - 1, 0))) <= max(ends) <= dtype.max:
            if dtype != dtypes.default_int:         # (as tinygrad: bool holds 0 and 1, uint8 255)
                raise OverflowError(f"arange [{start}, {stop}) step {step} is not representable in {dtype}")
            dtype = dtypes.int64           # values past int32 (as tinygrad and PyTorch)
        # the values are made on the host and uploaded (converted to dtype there): a constant table, not a computation
        return cls(start + step * np.arange(n, dtype=np.float64), device=device, dtype=dtype, **kwargs)

    @classmethod
    def linspace(cls, start, stop, steps: int, device=None, dtype=None, **kwargs) -> Tensor:
        dtype = to_dtype(dtype or dtypes.default_float)
        if dtype == dtypes.bool or not isinstance(steps, int) or steps < 0:     # (a float steps: TypeError, as PyTorch)
            raise (ValueError if isinstance(steps, int) else TypeError)(
                f"linspace needs a number dtype and an int steps >= 0, got dtype {dtype}, steps {steps!r}")
        if steps == 1:
            return cls([start], device=device, dtype=dtype, **kwargs)
        return (cls.arange(steps, device=device, dtype=dtypes.float32) * ((stop - start) / (steps - 1)) +
                start).cast(dtype).requires_grad_(kwargs.get("requires_grad"))

    @classmethod
    def eye(cls, n: int, m: int | None = None, device=None, dtype=None, *, requires_grad=None, **kwargs) -> Tensor:
        n, m = _checked_shape((n, n if m is None else m))
        rows, cols = cls.arange(n, device=device).reshape(n, 1), cls.arange(m, device=device).reshape(1, m)
        return (rows == cols).cast(to_dtype(dtype or dtypes.default_float)).contiguous().requires_grad_(requires_grad)

    @classmethod
    def from_blob(cls, ptr: int, shape, dtype=None, device=None, **kwargs) -> Tensor:
        """A tensor holding a copy of the host memory at address ptr (tinygrad's shares it; here it is copied)."""
        dtype = to_dtype(dtype or dtypes.default_float)
        count = prod(_checked_shape(argfix(shape)))
        raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
        host = np.frombuffer(raw, dtype=dtype.np).reshape(shape).copy()     # (bfloat16's bits read as uint16s)
        return cls(host, device=device).bitcast(dtype).requires_grad_(kwargs.get("requires_grad"))

    @classmethod
    def from_url(cls, url: str, gunzip: bool = False, **kwargs) -> Tensor:
        """The bytes at url (fetched once, then read from the cache) as a uint8 tensor."""
        data = pathlib.Path(fetch(url)).read_bytes()
        return cls(np.frombuffer(gzip.decompress(data) if gunzip else data, dtype=np.uint8), **kwargs)

    def empty_like(self, dtype=None, device=None) -> Tensor:
        return type(self).empty(self.shape, dtype=dtype or self.dtype, device=device or self.device)

    def const_like(self, value, dtype=None) -> Tensor:
        return self.full_like(value, **({"dtype": dtype} if dtype is not None else {}))

    def full_like(self, fill_value, **kwargs) -> Tensor:
        return type(self).full(self.shape, fill_value, **{"dtype": self.dtype, "device": self.device} | kwargs)

    def zeros_like(self, **kwargs) -> Tensor: return self.full_like(0, **kwargs)  # noqa: E704
    def ones_like(self, **kwargs) -> Tensor: return self.full_like(1, **kwargs)  # noqa: E704

    def rand_like(self, **kwargs) -> Tensor: return self._random_like(type(self).rand, kwargs)    # noqa: E704
    def randn_like(self, **kwargs) -> Tensor: return self._random_like(type(self).randn, kwargs)  # noqa: E704

    def _random_like(self, make, kwargs) -> Tensor:
        if isinstance(self.device, tuple):      # (each device draws its own part, sharded as this tensor: multi.py)
            return self.parts_like(lambda shape, device: make(*shape, device=device, **{"dtype": self.dtype} | kwargs))
        return make(*self.shape, **{"dtype": self.dtype, "device": self.device} | kwargs)

    # ---- randomness: a counter-based hash computed on the device ----
    @classmethod
    def manual_seed(cls, seed: int = 0):
        cls._seed, cls._rng_counter = seed, 0

    @classmethod
    def _next_offset(cls, count: int) -> int:
        offset = (cls._rng_counter + cls._seed * 0x9E3779B9) & 0xFFFFFFFF
        cls._rng_counter += count
        return offset

    @classmethod
    def _refill_offset(cls, buf: Buffer, count: int):
        """Give a captured random-number kernel a fresh offset (TinyJit calls this before each replay)."""
        buf.copyin(np.array([cls._next_offset(count)], dtype=np.uint32))

    @classmethod
    def _random_bits(cls, n: int, device) -> Tensor:
        """n pseudo-random uint32s: a hash of (position + offset), where the offset advances with every call and
        starts from the seed, so runs with one seed repeat. The offset sits in a one-element buffer (not a constant)
        so a TinyJit replay can refresh it and draw new numbers."""
        offset = cls(np.array([cls._next_offset(n)], dtype=np.uint32), device=device)
        random_offset_buffers[buffer_of(offset.uop)] = n
        # spread neighbouring positions over all 32 bits first (the hash below mixes small inputs poorly)
        x = (cls.arange(n, device=device, dtype=dtypes.uint32) + offset) * 0x9E3779B9 + 0x6A09E667
        for _ in range(2):           # two rounds of the "lowbias32" integer hash
            x = (x ^ (x >> 16)) * 0x7FEB352D
            x = (x ^ (x >> 15)) * 0x846CA68B
            x = x ^ (x >> 16)
        return x

    @classmethod
    def rand(cls, *shape, device=None, dtype=None, **kwargs) -> Tensor:
        """Uniform in [0, 1)."""
        shape = _checked_shape(argfix(*shape))
        if dtype is not None and not dtypes.is_float(to_dtype(dtype)):    # (uniform numbers cast to ints are 0)
            raise ValueError(f"rand only supports float dtypes, got {dtype}")
        if isinstance(device, (tuple, list)):
            raise ValueError(f"rand makes a tensor on one device, got {device} (rand_like draws on each of several)")
        bits = cls._random_bits(prod(shape), Device.canonicalize(device))
        values = (bits >> 8).cast(dtypes.float32) * (1.0 / (1 << 24))
        return cls(values.reshape(shape).cast(to_dtype(dtype or dtypes.default_float)).uop, **kwargs)

    @classmethod
    def randn(cls, *shape, dtype=None, **kwargs) -> Tensor:
        """Standard normal, by the Box-Muller transform."""
        shape = _checked_shape(argfix(*shape))
        if dtype is not None and not dtypes.is_float(to_dtype(dtype)):
            raise ValueError(f"randn only supports float dtypes, got {dtype}")
        u = cls.rand(2, *shape, device=kwargs.pop("device", None))
        z = (u[0] * (2 * math.pi)).cos() * (1 - u[1]).log().mul(-2).sqrt()
        return cls(z.cast(to_dtype(dtype or dtypes.default_float)).uop, **kwargs)

    @classmethod
    def randint(cls, *shape, low=0, high=10, device=None, dtype=None, **kwargs) -> Tensor:
        # int64 for bounds past int32, as arange; the arithmetic in float64 where the device has it (float32's
        # rounding took low + r (high - low) past int32, and up to high itself)
        dtype = to_dtype(dtype or (dtypes.int32 if -2**31 <= low and high <= 2**31 else dtypes.int64))
        if not dtype.min <= low < high <= dtype.max + 1:      # (a cast would clamp or wrap every value past the dtype)
            raise ValueError(f"randint needs low < high, both in {dtype} (high exclusive), got low={low}, high={high}")
        r = cls.rand(*shape, device=device, dtype=dtypes.float64 if has_float64(device) else dtypes.float32)
        return (r * (high - low) + low).floor().cast(dtype).requires_grad_(kwargs.get("requires_grad"))

    @classmethod
    def randperm(cls, n: int, device=None, dtype=dtypes.int32, **kwargs) -> Tensor:
        """A random permutation of 0..n-1 (the order that sorts n uniform numbers)."""
        return cls.rand(n, device=device).argsort().cast(to_dtype(dtype)).requires_grad_(kwargs.get("requires_grad"))

    def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
        """Indices drawn with probabilities proportional to self's rows (1-d or 2-d), as torch.multinomial."""
        if not 1 <= self.ndim <= 2 or num_samples < 1:
            raise ValueError(f"multinomial takes 1-d or 2-d weights and num_samples >= 1: {self.shape}, {num_samples}")
        if (known := self._known_values()) is not None and not ((known >= 0) & (known < math.inf)).all():
            raise RuntimeError(f"probability tensor contains either `inf`, `nan` or element < 0 (shape {self.shape})")
        weights = (self if self.ndim == 2 else self.unsqueeze(0)).float()
        if not replacement and num_samples > weights.shape[1]:
            raise ValueError(f"can't draw {num_samples} samples without replacement from {weights.shape[1]}")
        if replacement or num_samples == 1:
            cdf = weights.cumsum(1)
            u = type(self).rand(weights.shape[0], num_samples, 1, device=self.device) * cdf[:, -1:].unsqueeze(1)
            picks = (u >= cdf.unsqueeze(1)).sum(-1).minimum(weights.shape[1] - 1)   # (u can round up to the total)
        else:   # Gumbel top-k: the k largest of log w - log(-log u) are a draw without replacement
            gumbel = -(-type(self).rand(*weights.shape, device=self.device).maximum(1e-20).log()).log()
            picks = (weights.log() + gumbel).topk(num_samples, dim=1)[1]
        return picks.cast(dtypes.int32).reshape(self.shape[:-1] + (num_samples,))     # (a row of picks per row)

    @classmethod
    def uniform(cls, *shape, low=0.0, high=1.0, dtype=None, requires_grad=None, **kwargs) -> Tensor:
        if low > high:
            raise RuntimeError(f"uniform needs low <= high, got low={low}, high={high}")
        out = (cls.rand(*shape, **kwargs) * (high - low) + low).cast(to_dtype(dtype or dtypes.default_float))
        return out.requires_grad_(requires_grad)

    @classmethod
    def normal(cls, *shape, mean=0.0, std=1.0, requires_grad=None, **kwargs) -> Tensor:
        if std < 0:
            raise RuntimeError(f"normal needs std >= 0, got std={std}")
        return (cls.randn(*shape, **kwargs) * std + mean).requires_grad_(requires_grad)

    @classmethod
    def scaled_uniform(cls, *shape, **kwargs) -> Tensor:
        return cls.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(argfix(*shape)) ** -0.5)

    @classmethod
    def glorot_uniform(cls, *shape, **kwargs) -> Tensor:
        shape = argfix(*shape)
        bound = (6 / (shape[0] + prod(shape[1:]))) ** 0.5
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    @classmethod
    def kaiming_uniform(cls, *shape, a: float = 0.01, **kwargs) -> Tensor:
        bound = _kaiming_std(argfix(*shape), a, scale=math.sqrt(3.0))     # (a uniform's std is its bound / sqrt(3))
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    @classmethod
    def kaiming_normal(cls, *shape, a: float = 0.01, **kwargs) -> Tensor:
        return cls.normal(*shape, mean=0.0, std=_kaiming_std(argfix(*shape), a), **kwargs)


def _kaiming_std(shape: tuple, a: float, scale: float = 1.0) -> float:
    """He initialisation's standard deviation (times scale) for weights of this shape (fan in: every axis but the
    first) feeding a leaky ReLU of negative slope a."""
    return scale * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(max(1, prod(_checked_shape(shape)[1:])))
