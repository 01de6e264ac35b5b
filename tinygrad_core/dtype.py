"""Data types: what a tensor element is, how types promote, how they map to numpy.

Every backend declares which of these it supports; the core never assumes more."""
from dataclasses import dataclass
import numpy as np


@dataclass(frozen=True, eq=False)   # each dtype is a single object: identity is equality (and fast to hash)
class DType:
    priority: int      # order in the promotion lattice (bigger wins within a kind)
    itemsize: int      # bytes per element
    name: str
    fmt: str           # numpy/struct format character ("" for bfloat16, which numpy lacks)

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    def __reduce__(self):           # unpickle to the same single object
        return to_dtype, (self.name,)

    @property
    def bitsize(self) -> int:
        return 1 if self.name == "bool" else 8 * self.itemsize

    @property
    def min(self):
        """The smallest value this type holds (-inf for floats, False for bool); dtypes.min(dt) is dt.min."""
        if self in INTS:
            return 0 if self in UNSIGNED else -2 ** (self.bitsize - 1)
        return -float("inf") if self in FLOATS else False

    @property
    def max(self):
        return 2 ** self.bitsize - 1 + self.min if self in INTS else float("inf") if self in FLOATS else True

    @property
    def np(self):
        """The numpy dtype that holds this type's values on the host (bfloat16 is held as its raw bits)."""
        return np.dtype("uint16") if self.name == "bfloat16" else np.dtype(self.fmt)


class dtypes:
    bool = DType(0, 1, "bool", "?")
    int8 = DType(1, 1, "char", "b")
    uint8 = DType(2, 1, "uchar", "B")
    int16 = DType(3, 2, "short", "h")
    uint16 = DType(4, 2, "ushort", "H")
    int32 = DType(5, 4, "int", "i")
    uint32 = DType(6, 4, "uint", "I")
    int64 = DType(7, 8, "long", "q")
    uint64 = DType(8, 8, "ulong", "Q")
    float16 = DType(9, 2, "half", "e")
    bfloat16 = DType(10, 2, "bfloat16", "")
    float32 = DType(11, 4, "float", "f")
    float64 = DType(12, 8, "double", "d")
    void = DType(-1, 0, "void", "")   # the type of nodes that carry no value (SINK, STORE, ...)
    # aliases a PyTorch or tinygrad user types
    half, float, double = float16, float32, float64
    char, uchar, short, ushort = int8, uint8, int16, uint16
    int, uint, long, ulong = int32, uint32, int64, uint64
    default_float = float32
    default_int = int32
    index = int32       # the type of index arithmetic inside kernels
    uints, sints = (uint8, uint16, uint32, uint64), (int8, int16, int32, int64)
    ints, floats = uints + sints, (float16, bfloat16, float32, float64)
    all = floats + ints + (bool,)
    int8s, int16s, int32s, int64s = (uint8, int8), (uint16, int16), (uint32, int32), (uint64, int64)

    is_float = staticmethod(lambda dt: dt in FLOATS)
    is_int = staticmethod(lambda dt: dt in INTS)
    is_unsigned = staticmethod(lambda dt: dt in UNSIGNED)
    is_bool = staticmethod(lambda dt: dt == dtypes.bool)

    @staticmethod
    def finfo(dt: DType) -> tuple[int, int]:
        """(exponent bits, mantissa bits) of a float type, as tinygrad gives them."""
        if dt not in FLOATS:
            raise ValueError(f"finfo needs a floating point type, got {dt}")
        return {dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7), dtypes.float32: (8, 23), dtypes.float64: (11, 52)}[dt]

    @staticmethod
    def from_np(npdtype) -> DType:
        npdtype = np.dtype(npdtype)
        for dt in ALL:
            if dt.fmt and np.dtype(dt.fmt) == npdtype:
                return dt
        raise TypeError(f"numpy dtype {npdtype} has no tinygrad_core equivalent; convert it with .astype(np.float32) "
                        f"first")

    @staticmethod
    def from_py(x) -> DType:
        if isinstance(x, (list, tuple)):
            return max((dtypes.from_py(v) for v in x), key=lambda d: d.priority, default=dtypes.default_float)
        return dtypes.bool if isinstance(x, bool) else dtypes.default_int if isinstance(x, int) else dtypes.default_float

    min = staticmethod(lambda dt: dt.min)       # the older spelling of dt.min and dt.max, kept for programs using it
    max = staticmethod(lambda dt: dt.max)


ALL = tuple(sorted(dtypes.all, key=lambda d: d.priority))      # every dtype, in promotion order
UNSIGNED, INTS, FLOATS = dtypes.uints, dtypes.ints, dtypes.floats
BY_NAME = {name: dt for name, dt in vars(dtypes).items() if isinstance(dt, DType)}


def _to_np_dtype(dt: DType):
    """The numpy scalar type tinygrad's tests compare a dtype's values in (bfloat16 as float32)."""
    return np.float32 if dt == dtypes.bfloat16 else dt.np.type


class UnknownDType(TypeError, AttributeError):
    """An unknown dtype: a TypeError as in PyTorch, an AttributeError as tinygrad's getattr(dtypes, name) raises."""


def to_dtype(x) -> DType:
    """Accept a DType, a name ("float32", "half"), or a numpy dtype; refuse anything else clearly."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x in BY_NAME:
        return BY_NAME[x]
    try:
        return dtypes.from_np(x)
    except TypeError:
        raise UnknownDType(f"unknown dtype {x!r}; use one of dtypes.{', dtypes.'.join(dt.name for dt in ALL)} "
                           f"(or a name like 'float32')") from None


def least_upper_dtype(*dts: DType) -> DType:
    """numpy-like promotion, with tinygrad's choices: any float beats any int; signed+unsigned of the same size
    widens (uint64 with a signed int becomes float32, as there is no wider int); float16+bfloat16 is float32."""
    dts = tuple(set(dts))
    if len(dts) == 1:
        return dts[0]
    kind = {d: 0 if d == dtypes.bool else 2 if d in FLOATS else 1 for d in dts}
    pool = [d for d in dts if kind[d] == max(kind.values())]     # (two or more types: bool is never all of them)
    if set(pool) == {dtypes.float16, dtypes.bfloat16}:
        return dtypes.float32
    # (floats, never unsigned, take the widest, as ints of one signedness do)
    signed, unsigned = [d for d in pool if d not in UNSIGNED], [d for d in pool if d in UNSIGNED]
    if not signed or not unsigned:
        return max(pool, key=lambda d: d.priority)
    need = max(max(d.itemsize for d in signed), 2 * max(d.itemsize for d in unsigned))
    return {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}.get(need, dtypes.default_float)


def truncate_value(x, dt: DType):
    """A Python number as a value of dt would hold it (wrapping ints, rounding floats)."""
    if dt == dtypes.bool:
        return bool(x)
    if dt in INTS:      # wrapped into [min, max], modulo 2^bits
        return (int(x) - dt.min) % (1 << dt.bitsize) + dt.min
    if dt == dtypes.bfloat16:
        return float(bf16_to_f32(f32_to_bf16(np.array([x], np.float32)))[0])
    return float(np.array(x, dtype=dt.np))


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (round to nearest even; NaN stays NaN)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return np.where(np.isnan(x), np.uint16(0x7FC0), (rounded >> 16).astype(np.uint16))


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
