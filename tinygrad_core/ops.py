"""The primitive op contract: the Ops enum, the UOp graph node, and the exact meaning of every op.

Tensor methods build UOp graphs from the graph-level ops; the codegen lowers them to the kernel-level ops that a
backend's renderer sees. `REFERENCE` below is the one written definition of what each ALU op computes: the
reference backend executes it and the conformance suite checks every other backend against it."""
from __future__ import annotations
from enum import Enum, auto
import math
import weakref
import numpy as np
from tinygrad_core.dtype import DType, dtypes, INTS, f32_to_bf16, bf16_to_f32, truncate_value


class Ops(Enum):
    __hash__ = object.__hash__      # (Enum's hashes the name, in Python: every node's key holds an op)
    # --- elementwise (the ALU ops): they appear both in tensor graphs and in kernels ---
    EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIP = auto(); NEG = auto(); TRUNC = auto()  # noqa: E702
    ADD = auto(); SUB = auto(); MUL = auto(); FDIV = auto(); IDIV = auto(); MOD = auto(); MAX = auto()  # noqa: E702
    CMPLT = auto(); CMPNE = auto(); AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto()  # noqa: E702
    WHERE = auto(); MULACC = auto()  # noqa: E702
    CAST = auto(); BITCAST = auto()  # noqa: E702
    # --- tensor graph ops ---
    BUFFER = auto()        # a realized buffer; arg = (Buffer, version), shape is (size,)
    DEVICE = auto()        # names a device; the source of CONSTs
    CONST = auto()         # a scalar constant (shape ()), broadcast by movement ops
    REDUCE_AXIS = auto()   # arg = (Ops.ADD | Ops.MAX | Ops.MUL, axes)
    RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); PAD = auto(); SHRINK = auto(); FLIP = auto()  # noqa: E702
    CONTIGUOUS = auto()    # forces its source into a buffer of its own
    DETACH = auto()        # identity that stops gradients
    COPY = auto()          # moves a value to another device; arg = device name
    ASSIGN = auto()        # src = (target, value): write value into target's buffer, or (target, value, view): into
                           # view, a view (GroupOp.VIEW ops) of target; either way the node is target's value after it
    CUSTOM = auto()        # a user Function: the value of src[0], with arg.backward as its gradient rule
    GATHER = auto()        # src = (x, index): x's elements at index along axis arg (shape: x's, index's in place of
                           # that axis); lowered to a load whose address is read from index (indexing.py's gather)
    BIND = auto()          # a Variable with its value for this computation; src = (DEFINE_VAR, CONST)
    MULTI = auto()         # one value on several devices: src = its part on each, arg = the whole shape (multi.py)
    # --- kernel ops: what a renderer receives, in order ---
    SINK = auto()          # the root of a kernel graph
    DEFINE_GLOBAL = auto() # a kernel argument buffer; arg = its position
    DEFINE_VAR = auto()    # an int kernel argument (a symbolic size, a Variable); arg = (name, min, max)
    SPECIAL = auto()       # a parallel index; arg = (name, size): "gidxN" = group id, "lidxN" = id in the group,
                           # along launch dimension N (0, 1, 2: the global_size/local_size tuples' positions);
                           # with symbolic sizes, size is the largest the launch can be (the launch gives the count)
    RANGE = auto()         # a serial loop counter; src = (end,); arg = loop id
    ENDRANGE = auto()      # closes the loop of src[0]
    DEFINE_ACC = auto()    # an accumulator; src = (initial value,)
    UPDATE_ACC = auto()    # src = (accumulator, value): the accumulator holds value from here on (a reduce's step)
    INPUT = auto()         # in a kernel AST, a whole buffer argument as a value: src = (DEFINE_GLOBAL,), arg = its
                           # element count; lowered to LOADs (codegen/lower.py), so no renderer ever sees one
    LOAD = auto()          # src = (buffer, index) or (buffer, index, valid): reads 0 where valid is False
    STORE = auto()         # src = (buffer, index, value) or (..., valid): writes only where valid is True
    REDUCE = auto()        # before linearizing: src = (value, *ranges), arg = the combining ALU op, or WMMA (value
                           # is a WMMA adding into its own tile: the loop's value is that tile; codegen/tensor_cores.py)
    # --- local memory (renderers with has_shared): an array each thread group has its own copy of ---
    DEFINE_LOCAL = auto()  # arg = (name, element count), dtype = element type; src[0] of LOADs and STOREs like a buffer
    BARRIER = auto()       # every thread of the group waits here until all have arrived; src = what must be done by
                           # then (the local STOREs about to be read, or the update that read them before they are
                           # overwritten). LOADs from local memory take the BARRIER they follow as src[2] (no gate)
    # --- tensor cores (renderers that declare them): one warp multiplies 16x16 tiles; arg[0] is the TensorCore ---
    WMMA_ACC = auto()      # the warp's accumulator tile, zeroed
    WMMA = auto()          # src = (acc, a_buf, a_index, b_buf, b_index): acc += A tile @ B tile; arg = (tc, a_ld,
                           # a_row_major, b_ld, b_row_major): element (i, j) of a tile is at index + i*ld + j when
                           # row-major, index + i + j*ld otherwise
    WMMA_STORE = auto()    # src = (buffer, index, acc): element (i, j) to index + i*arg[1] + j, in the buffer's type


class GroupOp:
    UNARY = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.NEG, Ops.TRUNC}
    BINARY = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.AND, Ops.OR,
              Ops.XOR, Ops.SHL, Ops.SHR}
    TERNARY = {Ops.WHERE, Ops.MULACC}
    ALU = UNARY | BINARY | TERNARY
    ELEMENTWISE = ALU | {Ops.CAST, Ops.BITCAST}
    MOVEMENT = {Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP}
    VIEW = MOVEMENT | {Ops.DETACH}      # what a view of another tensor's memory is made of (t[1:3], t.T, t.detach())
    COMPARISON = {Ops.CMPLT, Ops.CMPNE}
    # what every backend must render: all but the ops the core rewrites into these (codegen/decompose.py's RULES)
    REQUIRED = ELEMENTWISE - {Ops.NEG, Ops.SUB, Ops.FDIV, Ops.MAX, Ops.SHL, Ops.SHR, Ops.MULACC}


# ---------------------------------------------------------------------------------------------------------------
# The reference semantics. Each entry takes numpy arrays of the op's input dtype and returns the exact result.
# Integer arithmetic wraps (two's complement). Division and modulo of integers truncate toward zero (C rules).
# FDIV is IEEE float division, correctly rounded (on integers it is unspecified: Tensor.div casts them to float).
# MAX returns NaN when either input is NaN. Float->int casts truncate toward zero and saturate: past the target's
# range a value gives its min or max, NaN gives 0 (LLVM's fptosi.sat, OpenCL's convert_T_sat, PTX's cvt; C leaves
# it undefined). A reduce's accumulator update acc + a*b may round once (a fused multiply-add, as BLAS's) or twice,
# as the backend declares; MULACC likewise. Integer division (and modulo) by zero, and of the most negative
# integer by -1, are unspecified. SHL/SHR shift amounts must be in [0, bits). Anything "unspecified" is excluded
# from conformance checks.
# ---------------------------------------------------------------------------------------------------------------
def _idiv(a, b):
    if a.dtype.kind == "f":
        raise TypeError("IDIV is for integers; divide floats with FDIV")
    b = np.where(b == 0, 1, b).astype(a.dtype)
    q = a // b
    return np.where((a % b != 0) & ((a < 0) != (b < 0)), q + 1, q).astype(a.dtype)


REFERENCE = {
    Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin, Ops.SQRT: np.sqrt, Ops.TRUNC: np.trunc,
    # RECIP is for floats (Tensor.reciprocal casts ints first); on an integer it is 1 // a, rounding down
    Ops.RECIP: lambda a: np.reciprocal(a) if a.dtype.kind == "f" else (1 // np.where(a == 0, 1, a)).astype(a.dtype),
    Ops.NEG: lambda a: np.logical_not(a) if a.dtype == np.bool_ else np.negative(a),
    Ops.ADD: lambda a, b: np.logical_or(a, b) if a.dtype == np.bool_ else np.add(a, b),
    Ops.SUB: np.subtract,
    Ops.MUL: lambda a, b: np.logical_and(a, b) if a.dtype == np.bool_ else np.multiply(a, b),
    Ops.FDIV: np.true_divide, Ops.IDIV: _idiv, Ops.MOD: lambda a, b: (a - b * _idiv(a, b)).astype(a.dtype),
    Ops.MAX: lambda a, b: np.where(b != b, b, np.where(a < b, b, a)),
    Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal,
    Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or, Ops.XOR: np.bitwise_xor,
    Ops.SHL: lambda a, b: np.left_shift(a, np.asarray(b).astype(a.dtype)),
    Ops.SHR: lambda a, b: np.right_shift(a, np.asarray(b).astype(a.dtype)),
    Ops.WHERE: lambda c, a, b: np.where(c, a, b),
    Ops.MULACC: lambda a, b, c: a * b + c,
}


def exec_alu(op: Ops, dtype: DType, *srcs):
    """Run one ALU op (or CAST) with the reference semantics; inputs are numpy arrays or scalars of the op's input
    dtype, the result has `dtype`. This is the oracle the reference backend and the conformance suite share."""
    with np.errstate(all="ignore"):
        if op is Ops.CAST:
            return cast_array(np.asarray(srcs[0]), dtype)
        out = REFERENCE[op](*[np.asarray(s) for s in srcs])
        return np.asarray(out).astype(dtype.np if dtype != dtypes.bfloat16 else np.float32)


def cast_array(x: np.ndarray, dtype: DType) -> np.ndarray:
    """CAST with the reference semantics (bfloat16 values are carried as float32 on the host side of the oracle)."""
    with np.errstate(all="ignore"):
        if dtype == dtypes.bool:
            return x != 0
        if dtype == dtypes.bfloat16:
            return bf16_to_f32(f32_to_bf16(x.astype(np.float32)))
        if x.dtype.kind == "f" and dtype in INTS:      # (compared as floats: the max may round up, and is met)
            t, lo, hi = np.trunc(np.where(x == x, x, 0)).astype(np.float64), dtypes.min(dtype), dtypes.max(dtype)
            inside = np.where((t > lo) & (t < hi), t, 0).astype(dtype.np)
            return np.where(t >= hi, np.array(hi, dtype.np), np.where(t <= lo, np.array(lo, dtype.np), inside))
        return x.astype(dtype.np)


def bitcast_array(x: np.ndarray, source: DType, dtype: DType) -> np.ndarray:
    """BITCAST with the reference semantics: the same bytes read as dtype (bfloat16 carried as float32, as above)."""
    bits = f32_to_bf16(x) if source == dtypes.bfloat16 else np.asarray(x).astype(source.np)
    out = np.ascontiguousarray(bits).view(dtype.np)
    return bf16_to_f32(out) if dtype == dtypes.bfloat16 else out


# ---------------------------------------------------------------------------------------------------------------
# UOp: one immutable node. Nodes are hash-consed (the same op, dtype, sources and arg give the same object), so
# equal subgraphs are shared and can be used as dictionary keys.
# ---------------------------------------------------------------------------------------------------------------
class Unique:
    """An arg that makes a node unlike any other (nodes are otherwise shared when they are built the same way)."""


def arg_key(arg):
    """arg as a key: -0.0 == 0.0 in Python, but they are different constants; NaN != NaN, but it is one constant (of
    its sign)."""
    return (arg if arg == arg else "nan", math.copysign(1.0, arg)) if isinstance(arg, float) else arg


class UOpMeta(type):
    # key -> a weak reference to the node: a plain dict of them (a WeakValueDictionary's Python layers cost more than
    # making the node itself; the JIT makes new nodes on every replay)
    cache: dict[tuple, weakref.ref] = {}

    def __call__(cls, op: Ops, dtype: DType = dtypes.void, src=(), arg=None):
        if op is Ops.CONST and dtype == dtypes.bool and isinstance(arg, (int, float)):
            arg = bool(arg)        # one constant False, not a False and a 0 that whichever came first would stand for
        key = (op, dtype, src, arg_key(arg))
        try:
            if (ref := UOpMeta.cache.get(key)) is not None and (found := ref()) is not None:
                return found
        except TypeError:          # an unhashable arg: don't share
            key = None
        made = cls.__new__(cls)     # (what __init__ would do, without the call)
        made.op, made.dtype, made.src, made.arg, made._shape, made._device = op, dtype, src, arg, None, None
        if key is not None:         # (when it dies, its entry goes, unless a node made since with its key holds it)
            UOpMeta.cache[key] = weakref.ref(made, lambda ref, c=UOpMeta.cache, k=key: c.get(k) is ref and c.pop(k))
        return made


class UOp(metaclass=UOpMeta):
    __slots__ = ("op", "dtype", "src", "arg", "_shape", "_device", "__weakref__")     # (UOpMeta.__call__ sets them)

    def __repr__(self) -> str:
        if is_symbolic(self):
            return SIZES.render(self)
        return f"UOp({self.op.name}, {self.dtype}, arg={self.arg!r}, src=({', '.join(s.op.name for s in self.src)}))"

    def __reduce__(self):   # pickling (for the JIT's and the compile cache's keys) rebuilds through the cache
        return UOp, (self.op, self.dtype, self.src, self.arg)

    # ---- symbolic ints ----
    def bind(self, value: int) -> UOp:
        """This Variable with a value: usable as a size (shapes, shrink bounds) or as a number in tensor math."""
        name, lo, hi = self.arg
        if self.op is not Ops.DEFINE_VAR:
            raise TypeError(f"only a Variable can be bound, not {self!r}")
        if not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"can't bind {name} to {value!r}: its range is [{lo}, {hi}]")
        return UOp(Ops.BIND, self.dtype, (self, UOp(Ops.CONST, self.dtype, (), value)))

    def unbind(self) -> tuple[UOp, int]:
        """(the Variable, its value) of a bound Variable."""
        if self.op is not Ops.BIND:
            raise TypeError(f"{self!r} is not a bound Variable")
        return self.src[0], self.src[1].arg

    @property
    def val(self) -> int:
        """The value of a symbolic int whose Variables are all bound."""
        return SIZES.evaluate(self)

    # ---- graph helpers ----
    def toposort(self) -> list[UOp]:
        """Every node reachable from self, each after all of its sources."""
        return dependency_order([self], lambda node: reversed(node.src))

    def replace(self, **changes) -> UOp:
        get = changes.get
        return UOp(get("op", self.op), get("dtype", self.dtype), get("src", self.src), get("arg", self.arg))

    # ---- shapes (tensor graph nodes only) ----
    @property
    def shape(self) -> tuple[int, ...]:
        if self._shape is None:
            self._shape = _shape_of(self)
        return self._shape

    @property
    def device(self) -> str:
        # kept on the node, as its shape (both follow from the immutable node): every op asks its operands' device,
        # and a chain of n ops walked n nodes down to its buffer each time. (A multi-device value's: its parts'.)
        if self._device is None:
            node = self
            while node._device is None and node.op not in (Ops.BUFFER, Ops.MULTI, Ops.DEVICE, Ops.COPY):
                node = node.src[0]
            self._device = node._device or (node.arg[0].device if node.op is Ops.BUFFER else
                                            tuple(s.device for s in node.src) if node.op is Ops.MULTI else node.arg)
        return self._device

    def view_over(self, new: UOp) -> UOp:
        """This view (GroupOp.VIEW ops over a node) with new in place of the node under it."""
        return self.replace(src=(self.src[0].view_over(new),)) if self.op in GroupOp.VIEW else new

    @property
    def base(self) -> UOp:
        """The node under any movement ops."""
        node = self
        while node.op in GroupOp.MOVEMENT:
            node = node.src[0]
        return node

    # ---- building (used by the tensor layer and the codegen alike) ----
    def alu(self, op: Ops, *others: UOp) -> UOp:
        out_dtype = dtypes.bool if op in GroupOp.COMPARISON else (others[-1].dtype if op is Ops.WHERE else self.dtype)
        return UOp(op, out_dtype, (self,) + others)

    def cast(self, dtype: DType) -> UOp:
        return self if dtype == self.dtype else UOp(Ops.CAST, dtype, (self,))

    def bitcast(self, dtype: DType) -> UOp:
        return UOp(Ops.BITCAST, dtype, (self,))

    def const_like(self, value) -> UOp:
        return UOp.const(self.dtype, value, self.device).broadcast_to(self.shape)

    # arithmetic on graph nodes (gradient.py reads like the math with these); numbers become broadcast constants
    def _operand(self, x) -> UOp:
        return x if isinstance(x, UOp) else self.const_like(x)

    # on symbolic ints (Variables and sizes made of them) the same operators build simplified index expressions
    def __add__(self, x): return SIZES.arithmetic("add", self, x) if is_symbolic(self) else self.alu(Ops.ADD, self._operand(x))  # noqa
    def __radd__(self, x): return SIZES.arithmetic("add", self, x) if is_symbolic(self) else self._operand(x).alu(Ops.ADD, self)  # noqa
    def __sub__(self, x): return SIZES.arithmetic("sub", self, x) if is_symbolic(self) else self.alu(Ops.SUB, self._operand(x))  # noqa
    def __rsub__(self, x): return SIZES.arithmetic("sub", x, self) if is_symbolic(self) else self._operand(x).alu(Ops.SUB, self)  # noqa
    def __mul__(self, x): return SIZES.arithmetic("mul", self, x) if is_symbolic(self) else self.alu(Ops.MUL, self._operand(x))  # noqa
    def __rmul__(self, x): return SIZES.arithmetic("mul", self, x) if is_symbolic(self) else self._operand(x).alu(Ops.MUL, self)  # noqa
    def __neg__(self): return self.alu(Ops.NEG)                               # noqa: E704
    def __truediv__(self, x): return self.alu(Ops.FDIV, self._operand(x))    # noqa: E704
    def lt(self, x): return self.alu(Ops.CMPLT, self._operand(x))             # noqa: E704
    def ne(self, x): return self.alu(Ops.CMPNE, self._operand(x))             # noqa: E704

    def where(self, a, b) -> UOp:
        a = a if isinstance(a, UOp) else UOp.const(b.dtype if isinstance(b, UOp) else dtypes.default_float, a,
                                                   self.device).broadcast_to(self.shape)
        b = b if isinstance(b, UOp) else a.const_like(b)
        return self.alu(Ops.WHERE, a, b)

    @staticmethod
    def const(dtype: DType, value, device: str) -> UOp:
        value = value if is_symbolic(value) else truncate_value(value, dtype)    # a symbolic size: its value, per run
        return UOp(Ops.CONST, dtype, (UOp(Ops.DEVICE, dtypes.void, (), device),), value)

    def broadcast_to(self, shape: tuple[int, ...]) -> UOp:
        return self.reshape((1,) * (len(shape) - len(self.shape)) + self.shape).expand(tuple(shape))   # (or self)

    def reshape(self, shape):
        return self if self.shape == tuple(shape) else UOp(Ops.RESHAPE, self.dtype, (self,), tuple(shape))

    def permute(self, order):
        return self if tuple(order) == tuple(range(len(order))) else UOp(Ops.PERMUTE, self.dtype, (self,), tuple(order))

    def expand(self, shape):
        return self if self.shape == tuple(shape) else UOp(Ops.EXPAND, self.dtype, (self,), tuple(shape))

    def pad(self, padding):
        return self if all(p == (0, 0) for p in padding) else UOp(Ops.PAD, self.dtype, (self,), tuple(padding))

    def shrink(self, bounds):
        return self if all(b == (0, s) for b, s in zip(bounds, self.shape)) else \
            UOp(Ops.SHRINK, self.dtype, (self,), tuple(bounds))

    def flip(self, axes):
        return self if not axes else UOp(Ops.FLIP, self.dtype, (self,), tuple(sorted(axes)))

    def reduce(self, op: Ops, axes):
        axes = tuple(sorted(a for a in axes if self.shape[a] != 1)) if self.shape else ()
        return self if not axes else UOp(Ops.REDUCE_AXIS, self.dtype, (self,), (op, axes))


def dependency_order(roots, sources) -> list[UOp]:
    """Every node reachable from roots through sources(node), each after all of its sources: a depth-first walk
    that goes down the last root, and the last source given, first (toposort gives them reversed)."""
    order, seen, stack = [], set(), [(root, False) for root in roots]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((s, False) for s in sources(node) if s not in seen)
    return order


def reachable(roots, stop=None, resolve=None) -> set[UOp]:
    """Every node of the graphs under roots (each as resolve gives it, once), not looking below a node that stop(node)
    says to stop at (one walk: the graphs overlap). (Either left out costs no call per node: the walks are long.)"""
    seen, stack = set(), list(roots)
    while stack:
        if (node := resolve(stack.pop()) if resolve else stack.pop()) not in seen:
            seen.add(node)
            stack.extend(() if stop and stop(node) else node.src)
    return seen


def reaches(targets: set[UOp], stop=frozenset(), floats_only=False):
    """A memoized test "does this graph contain a node of targets?" that doesn't look below ops in stop (nor below
    nodes that aren't floating point, with floats_only: no gradient flows through those). One memo
    serves every graph asked about: the graphs of live tensors overlap (gradients share the forward pass)."""
    memo: dict[UOp, bool] = {}

    def test(root: UOp) -> bool:
        stack = [(root, False)]
        while stack:
            u, sources_done = stack.pop()
            if u in memo:
                continue
            if u in targets or u.op in stop or not u.src or floats_only and not dtypes.is_float(u.dtype):
                memo[u] = u in targets
            elif sources_done:
                memo[u] = any(memo[s] for s in u.src)
            else:
                stack.append((u, True))
                stack.extend((s, False) for s in u.src if s not in memo)
        return memo[root]
    return test


def Variable(name: str, min_value: int, max_value: int) -> UOp:
    """A named int in [min_value, max_value] that sizes can be made of: a kernel compiled for a size made of Variables
    serves every value they take (`Variable("i", 1, 10).bind(5)` gives the Variable a value)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a Variable's name must be a Python identifier, got {name!r}")
    if not 0 <= min_value <= max_value:
        raise ValueError(f"Variable {name}: need 0 <= min_value <= max_value, got [{min_value}, {max_value}]")
    return UOp(Ops.DEFINE_VAR, dtypes.index, (), (name, min_value, max_value))


def is_symbolic(u) -> bool:
    """u is a symbolic int: a Variable, a bound Variable, or index arithmetic over them and plain constants."""
    if not isinstance(u, UOp) or (u.op not in (Ops.DEFINE_VAR, Ops.BIND) and u.dtype != dtypes.index):
        return False
    if (found := _symbolic.get(u)) is None:
        found = _symbolic[u] = u.op in (Ops.DEFINE_VAR, Ops.BIND) or (u.op in GroupOp.ALU and any(
            is_symbolic(s) for s in u.src) and all(is_symbolic(s) or (s.op is Ops.CONST and not s.src) for s in u.src))
    return found


_symbolic: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# Symbolic sizes (sizes.py) build on UOp, so this module doesn't import them: sizes.py puts itself here when imported
# (importing tinygrad_core does), for the arithmetic, values and text of symbolic ints
SIZES = None


def _shape_of(u: UOp) -> tuple[int, ...]:
    op, arg = u.op, u.arg
    if op is Ops.BUFFER:
        return (arg[0].size,)
    if op is Ops.INPUT:
        return (arg,)
    if op is Ops.CONST or not u.src:      # a scalar; kernel-level leaves (DEFINE_GLOBAL, SPECIAL, ...) have no shape
        return ()
    if op in (Ops.RESHAPE, Ops.EXPAND, Ops.MULTI):
        return arg
    src_shape = u.src[0].shape
    if op is Ops.PERMUTE:
        return tuple(src_shape[i] for i in arg)
    if op is Ops.PAD:
        return tuple(s + before + after for s, (before, after) in zip(src_shape, arg))
    if op is Ops.SHRINK:
        return tuple(end - start for start, end in arg)
    if op is Ops.REDUCE_AXIS:
        return tuple(1 if i in arg[1] else s for i, s in enumerate(src_shape))
    return src_shape[:arg] + u.src[1].shape + src_shape[arg + 1:] if op is Ops.GATHER else src_shape


def cos_uop(x: UOp) -> UOp:
    """cos from the SIN primitive as 1 - 2 sin^2(x/2): halving is exact, where sin(pi/2 - x) would round pi/2 - x
    in x's precision (cos(1e7) in float32 would be off in the first digit). 16-bit floats compute in float32: they
    would round sin^2 (sin's gradient at 7.85 in float16 was 20% off)."""
    w = x.cast(dtypes.float32) if x.dtype in (dtypes.float16, dtypes.bfloat16) else x
    s = (w * 0.5).alu(Ops.SIN)
    return (w.const_like(1.0) - s * s * 2.0).cast(x.dtype)


def identity_element(op: Ops, dtype: DType):
    """What a reduce's accumulator starts at: 0 (False) for ADD, 1 (True) for MUL, the smallest value for MAX."""
    if op not in (Ops.ADD, Ops.MUL, Ops.MAX):
        raise ValueError(f"{op} is not a reduce op; use Ops.ADD, Ops.MUL or Ops.MAX")
    return dtypes.min(dtype) if op is Ops.MAX else (op is Ops.MUL) if dtype == dtypes.bool else int(op is Ops.MUL)
