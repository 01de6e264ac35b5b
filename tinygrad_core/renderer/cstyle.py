"""C-like source from a linear kernel program: the shared base of the OpenCL C and CUDA C renderers.

A dialect fills in declarations (kernel prefix, thread indices, type names, literals); `render` hands each kernel to
a CKernel, which walks the program once, naming every value, and spells each op as the C expression that computes
exactly what ops.py REFERENCE says. A dialect that spells something its own way (CUDA's half casts, its tensor
cores) does so in a subclass of CKernel."""
from __future__ import annotations
import math
from collections.abc import Callable
from tinygrad_core.dtype import DType, dtypes, UNSIGNED
from tinygrad_core.helpers import prod
from tinygrad_core.ops import Ops, UOp
from tinygrad_core.renderer import Renderer, affine, program_signature

MATH_FUNCTIONS = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"}


class Literal(str):
    """A constant's spelling that knows its value: a division by a constant that can't trap needs no guard."""
    def __new__(cls, text: str, value):
        literal = super().__new__(cls, text)
        literal.value = value
        return literal


def _binary(symbol: str, on_bools: str = "") -> Callable:
    return lambda w, dtype, a, b: f"({a}{on_bools if on_bools and dtype == dtypes.bool else symbol}{b})"


def _math(name: str) -> Callable:
    return lambda w, dtype, x: w.math_call(name, dtype, x)


# op -> (kernel writer, result dtype, *operand expressions) -> C expression. Operands are variable names or literals,
# so an expression may use an operand twice without computing it twice.
BASE_CODE_FOR_OP: dict[Ops, Callable] = {
    **{op: _math(name) for op, name in MATH_FUNCTIONS.items()},
    Ops.RECIP: lambda w, dtype, x: w.reciprocal(dtype, x),
    Ops.FDIV: lambda w, dtype, a, b: w.divide(dtype, a, b),
    Ops.NEG: lambda w, dtype, x: f"(!{x})" if dtype == dtypes.bool else w.negate(dtype, x),
    Ops.ADD: _binary("+", "||"),
    Ops.SUB: _binary("-"),
    Ops.MUL: _binary("*", "&&"),
    Ops.IDIV: lambda w, dtype, a, b: w.int_division(Ops.IDIV, dtype, a, b),
    Ops.MOD: lambda w, dtype, a, b: w.int_division(Ops.MOD, dtype, a, b),
    # REFERENCE: NaN in b wins, else b if a < b, else a (so a NaN in a wins too)
    Ops.MAX: lambda w, dtype, a, b: f"(({b}!={b})?{b}:(({a}<{b})?{b}:{a}))" if dtypes.is_float(dtype) else
             f"(({a}<{b})?{b}:{a})",
    Ops.CMPLT: _binary("<"), Ops.CMPNE: _binary("!="),
    # (bools as logic: PoCL drops a kernel whose one op is a & of two bools from the binary it builds)
    Ops.AND: _binary("&", "&&"), Ops.OR: _binary("|", "||"), Ops.XOR: _binary("^", "!="),
    Ops.SHL: _binary("<<"), Ops.SHR: _binary(">>"),
    Ops.WHERE: lambda w, dtype, c, a, b: f"({c}?{a}:{b})",
    Ops.MULACC: lambda w, dtype, a, b, c: w.multiply_add(dtype, a, b, c),
    Ops.CAST: None, Ops.BITCAST: None,    # rendered by render_cast / render_bitcast, which need both dtypes
}


# the signed integer ops that overflow, as they are written through the unsigned type (CKernel.alu)
WRAPPED = {Ops.ADD: "{}+{}", Ops.SUB: "{}-{}", Ops.MUL: "{}*{}", Ops.MULACC: "{}*{}+{}"}


def neighbour_groups(uops: list[UOp], widths: tuple[int, ...]) -> dict[UOp, tuple[UOp, ...]]:
    """LOADs (and STOREs) that one vector access can replace: each member -> its group, in lane order.

    A group reads (writes) elements base, base+1, ..., base+n-1 of one buffer, in one loop, under one gate, where base
    is a multiple of n whatever the thread and loop indices are (so the access is n-element aligned); no other access
    to that buffer lies between the group's first and last member, so moving them all to one place changes nothing.
    A load group's lane 0 comes first in the program: its index is then computed before the vector load."""
    position = {u: i for i, u in enumerate(uops)}
    scope: list[int] = []
    candidates: dict[tuple, dict[int, UOp]] = {}
    accesses: dict[UOp, list[int]] = {}       # buffer -> positions of every load and store of it
    for u in uops:
        if u.op is Ops.RANGE:
            scope.append(position[u])
        elif u.op is Ops.ENDRANGE:
            scope.pop()
        elif u.op in (Ops.LOAD, Ops.STORE) and u.src[0].op is Ops.DEFINE_GLOBAL:
            terms, constant = affine(u.src[1])
            gate = u.src[2 if u.op is Ops.LOAD else 3] if len(u.src) == (3 if u.op is Ops.LOAD else 4) else None
            dtype = u.dtype if u.op is Ops.LOAD else u.src[2].dtype
            key = (u.op, u.src[0], gate, dtype, tuple(scope), frozenset(terms.items()))
            candidates.setdefault(key, {})[constant] = u
            accesses.setdefault(u.src[0], []).append(position[u])
    groups: dict[UOp, tuple[UOp, ...]] = {}
    for (op, buffer, _, _, _, terms), by_offset in candidates.items():
        for width in widths:
            if any(coefficient % width for _, coefficient in terms):
                continue
            for start in sorted(by_offset):
                lanes = tuple(by_offset.get(start + k) for k in range(width))
                if start % width or None in lanes or any(lane in groups for lane in lanes):
                    continue
                first, last = min(position[v] for v in lanes), max(position[v] for v in lanes)
                if (op is not Ops.LOAD or position[lanes[0]] == first) and \
                        sum(first <= p <= last for p in accesses[buffer]) == width:
                    groups.update((lane, lanes) for lane in lanes)
    return groups


class CKernel:
    """The writer of one kernel: the name given to every value, the lines written so far, the helper functions the
    kernel calls. `OPS` says how each op is written: a function of (writer, op, its operands' names) that returns the
    op's own name (a variable or a literal), or None; a dialect's subclass may replace entries. Whatever the writer
    doesn't define, such as the declarations, is its renderer's."""

    def __init__(self, renderer: CStyleRenderer, name: str, uops: list[UOp]):
        self.renderer, self.name, self.uops = renderer, name, uops
        # every value's name; a name prefix -> the last number used with it
        self.names, self.counts = {}, {}
        self.body, self.depth = [], 1
        self.local_dims = [1, 1, 1]                # the group's size along each dimension
        self.helpers_used: set[str] = set()
        # a bool or a type computed as float lives in buffers as another type: its vectors would need conversions
        groups = neighbour_groups(uops, self.vector_widths) if self.supports_float4 else {}
        self.vectors = {u: group for u, group in groups.items() if (group[0].dtype if u.op is Ops.LOAD else
                        u.src[2].dtype) not in (dtypes.bool, *self.float_computed)}
        # a group of vector loads -> the vector's name; a group of vector stores -> how many have come
        self.vector_names, self.stores_waiting = {}, {}
        self.from_memory: set[UOp] = set()          # the values computed from a load (not an index's arithmetic)

    def __getattr__(self, name: str):
        return getattr(self.renderer, name)

    def render(self) -> str:
        for u in self.uops:
            write = self.OPS.get(u.op) or (CKernel.alu if u.op in self.code_for_op else None)
            if write is None:
                raise NotImplementedError(f"{type(self.renderer).__name__} can't render {u.op} (uop {u})")
            if u.op is Ops.LOAD or any(s in self.from_memory for s in u.src):
                self.from_memory.add(u)
            self.names[u] = write(self, u, [self.names.get(s) for s in u.src])
        return self.function()

    def function(self) -> str:
        """The helper functions the kernel called, then the kernel: its signature and the body written."""
        written = {u.src[0] for u in self.uops if u.op in (Ops.STORE, Ops.WMMA_STORE)}
        buffers, variables = program_signature(self.uops)
        args = [f"{self.buffer_prefix}{'' if b in written else 'const '}{self.storage_type(b.dtype)}* {self.names[b]}"
                for b in buffers] + [f"{self.int_arg_prefix} {self.names[v]}" for v in variables]
        helpers: dict[str, str] = {}
        while missing := self.helpers_used - helpers.keys():    # a helper may use another helper
            helpers |= {h: self.helper_source(h) for h in missing}
        # written in a fixed order: a later one may call an earlier one
        lines = self.kernel_preamble(self.uops) + [helpers[h] for h in self.helper_order if h in helpers]
        prefix = self.kernel_prefix.format(local_size=prod(self.local_dims),
                                           local_dims=", ".join(map(str, self.local_dims)))
        return "\n".join([*lines, f"{prefix} {self.name}({', '.join(args)}) {{", *self.body, "}"]) + "\n"

    # ---- writing lines and naming values ----
    def emit(self, line: str):
        self.body.append("  " * self.depth + line)

    def new_name(self, prefix: str) -> str:
        self.counts[prefix] = self.counts.get(prefix, -1) + 1
        return f"{prefix}{self.counts[prefix]}"

    def declare(self, prefix: str, dtype: DType, expression: str) -> str:
        var = self.new_name(prefix)
        self.emit(f"{self.type_name(dtype)} {var} = {expression};")
        return var

    def emit_gated(self, store: str, src: list[str]):
        self.emit(store if len(src) == 3 else f"if ({src[3]}) {store}")

    # ---- the ops that take more than an expression ----
    def special(self, u: UOp, src: list[str]) -> str:
        prefix, dim = u.arg[0][:-1], u.arg[0][-1]
        if prefix == "lidx":
            self.local_dims[int(dim)] = u.arg[1]
        index = self.thread_index[prefix].format(dim, xyz='xyz'[int(dim)])
        self.emit(f"{self.type_name(u.dtype)} {u.arg[0]} = {index}; /* {u.arg[1]} */")
        return u.arg[0]

    def open_loop(self, u: UOp, src: list[str]) -> str:
        var = f"ridx{u.arg}"
        self.emit(f"for ({self.type_name(u.dtype)} {var} = 0; {var} < {src[0]}; {var}++) {{")
        self.depth += 1
        return var

    def close_loop(self, u: UOp, src: list[str]) -> None:
        self.depth -= 1
        self.emit("}")

    def define_local(self, u: UOp, src: list[str]) -> str:
        self.emit(f"{self.local_prefix}{self.type_name(u.dtype)} {u.arg[0]}[{u.arg[1]}];")
        return u.arg[0]

    def update_acc(self, u: UOp, src: list[str]) -> str:
        self.emit(f"{src[0]} = {src[1]};")
        return src[0]

    def load(self, u: UOp, src: list[str]) -> str:
        if u.src[0].op is Ops.DEFINE_LOCAL:
            # local arrays hold the computed type (no storage conversion); src[2] is the BARRIER, not a gate
            return self.declare("val", u.dtype, f"{src[0]}[{src[1]}]")
        if u in self.vectors:
            return self.vector_load_lane(u, src)
        read = f"{src[0]}[{src[1]}]"
        if u.dtype in self.float_computed:
            read = self.from_storage(u.dtype, read)
        # a gated load never touches memory when the gate is false: ?: evaluates only the chosen side
        return self.declare("val", u.dtype, read if len(src) == 2 else f"({src[2]}?{read}:{self.zero(u.dtype)})")

    def store(self, u: UOp, src: list[str]) -> None:
        if u in self.vectors:
            return self.vector_store_lane(u, src)
        value = src[2]
        if u.src[0].op is not Ops.DEFINE_LOCAL and u.src[2].dtype in self.float_computed:
            value = self.to_storage(u.src[2].dtype, value)      # local arrays hold the computed type
        self.emit_gated(f"{src[0]}[{src[1]}] = {value};", src)

    def vector_load_lane(self, u: UOp, src: list[str]) -> str:
        group = self.vectors[u]
        if group not in self.vector_names:       # lane 0, the first of the group in the program
            vector_type = f"{self.type_name(u.dtype)}{len(group)}"
            read = self.vector_load.format(n=len(group), buffer=src[0], index=src[1])
            if len(src) == 3:
                read = f"({src[2]}?{read}:({vector_type})({self.zero(u.dtype)}))"
            self.vector_names[group] = self.new_name("vec")
            self.emit(f"{vector_type} {self.vector_names[group]} = {read};")
        return self.vector_lane.format(self.vector_names[group], group.index(u))

    def vector_store_lane(self, u: UOp, src: list[str]) -> None:
        group = self.vectors[u]
        self.stores_waiting[group] = self.stores_waiting.get(group, 0) + 1
        if self.stores_waiting[group] == len(group):    # the last of the group: every lane's value exists now
            vector_type = f"{self.type_name(u.src[2].dtype)}{len(group)}"
            value = self.vector_value.format(type=vector_type, values=", ".join(self.names[s.src[2]] for s in group))
            self.emit_gated(self.vector_store.format(n=len(group), value=value, buffer=src[0],
                                                     index=self.names[group[0].src[1]]) + ";", src)

    def alu(self, u: UOp, src: list[str]) -> str:
        if u.op in WRAPPED and u in self.from_memory and (unsigned := self.unsigned_twin(u.dtype)):
            # signed overflow is undefined in C, and compilers that can't be told -fwrapv (OpenCL C, nvcc) fold on it
            # ((x + 1) < 0 became false at x = 2**31-1): a tensor's values wrap through the unsigned type, as REFERENCE
            wide = [f"(({unsigned}){x})" for x in src]
            expression = f"(({self.type_names[u.dtype]})({WRAPPED[u.op].format(*wide)}))"
        else:
            expression = self.code_for_op[u.op](self, u.dtype, *src)
        if u.dtype in self.float_computed:
            expression = self.round_to(u.dtype, expression)
        return self.declare("alu", u.dtype, expression)

    # ---- spelling what needs the kernel: the helper functions it calls ----
    def math_call(self, name: str, dtype: DType, x: str) -> str:
        if dtypes.is_int(dtype) or dtype == dtypes.bool:
            if name == "trunc":
                return x
            # REFERENCE computes these in floating point and truncates back to the integer type
            wide = dtypes.float64 if dtypes.float64 in self.supported_dtypes else dtypes.float32
        else:       # half math through float gives the correctly rounded result numpy gives (native half may not)
            wide = dtypes.float32 if dtype == dtypes.float16 and dtype not in self.float_computed else dtype
        return self.render_cast(f"{name}({self.render_cast(x, dtype, wide)})", wide, dtype)

    def divide(self, dtype: DType, a: str, b: str) -> str:
        # half through float: correctly rounded (OpenCL is asked for that where it can), it rounds right to half
        wide = dtypes.float32 if dtype == dtypes.float16 and dtype not in self.float_computed else dtype
        return self.render_cast(f"({self.render_cast(a, dtype, wide)}/{self.render_cast(b, dtype, wide)})", wide, dtype)

    def reciprocal(self, dtype: DType, x: str) -> str:
        if dtypes.is_float(dtype):
            return self.divide(dtype, self.render_const(1, dtype), x)
        # REFERENCE: 1 // x with floor division, and x == 0 reads as x == 1
        return f"(({x}<0)?-1:(({x}<=1)?1:0))" if dtype not in UNSIGNED else f"(({x}<=1)?1:0)"

    def multiply_add(self, dtype: DType, a: str, b: str, c: str) -> str:
        # two roundings, as REFERENCE computes it: the compilers are told not to contract this into an fma.
        # numpy's float16 rounds the product to half (its bfloat16 stand-in, float32, doesn't)
        product = f"({a}*{b})"
        if dtype == dtypes.float16 and dtype in self.float_computed:
            product = self.round_to(dtype, product)
        return f"({product}+{c})"

    def render_cast(self, x: str, source: DType, target: DType) -> str:
        if source == target:
            return x
        if target == dtypes.bool:
            return f"({x}!=0)"
        if dtypes.is_float(source) and target not in (dtypes.bool, *dtypes.floats):   # (saturating, NaN is 0: ops.py)
            wide = dtypes.float64 if source == dtypes.float64 else dtypes.float32
            lo, hi = (self.render_const(v, target) for v in (dtypes.min(target), dtypes.max(target)))
            return f"(({x}!={x})?0:({x}<={self.render_const(lo.value, wide)})?{lo}:({x}>=" \
                   f"{self.render_const(hi.value, wide)})?{hi}:({self.type_names[target]})({x}))"
        if target == dtypes.float16 and target in self.float_computed and source == dtypes.float64:
            self.helpers_used.add("double_to_half")     # from_storage adds the half helpers it calls
            return self.from_storage(target, f"tg_double_to_half({x})")
        if target in self.float_computed:
            widened = x if source == dtypes.float32 or source in self.float_computed else f"(float)({x})"
            return self.round_to(target, widened)
        if source in self.float_computed and target == dtypes.float32:
            return x      # in registers it is a float already
        return f"({self.type_names[target]})({x})"

    def render_bitcast(self, x: str, source: DType, target: DType) -> str:
        if dtypes.bool in (source, target):     # (a bool's byte is 0 or 1; read as one, a 2 is undefined): a cast
            return self.render_cast(x, source, target)
        if source in self.float_computed:
            x, source = self.to_storage(source, x), dtypes.uint16
        if target in self.float_computed:
            return self.from_storage(target, self.bitcast_expression(x, source, dtypes.uint16))
        return self.bitcast_expression(x, source, target)

    def bitcast_expression(self, x: str, source: DType, target: DType) -> str:
        """Reinterpret the bits of x (a dialect spells this its own way)."""
        raise NotImplementedError(f"{type(self.renderer).__name__} doesn't say how to bitcast")

    # ---- float-computed 16-bit types: helpers that move between the stored bits and the float in registers ----
    def from_storage(self, dtype: DType, bits: str) -> str:
        self.helpers_used.add(dtype.name)
        return f"tg_{dtype.name}_to_float({bits})"

    def to_storage(self, dtype: DType, value: str) -> str:
        self.helpers_used.add(dtype.name)
        return f"tg_float_to_{dtype.name}({value})"

    def round_to(self, dtype: DType, value: str) -> str:
        return self.from_storage(dtype, self.to_storage(dtype, value))

    def helper_source(self, name: str) -> str:
        """The C functions a kernel asked for with use_helper(name), written with this dialect's types."""
        ushort, uint = self.type_names[dtypes.uint16], self.type_names[dtypes.uint32]
        prefix = self.helper_prefix

        def as_float(bits: str) -> str:
            return self.bitcast_expression(bits, dtypes.uint32, dtypes.float32)

        def as_uint(value: str) -> str:
            return self.bitcast_expression(value, dtypes.float32, dtypes.uint32)

        if name == "bfloat16":
            widened = as_float(f"(({uint})bits << 16)")
            return f"""{prefix} float tg_bfloat16_to_float({ushort} bits) {{ return {widened}; }}
{prefix} {ushort} tg_float_to_bfloat16(float x) {{
  /* round to nearest even, as dtype.f32_to_bf16; every NaN becomes the quiet NaN 0x7FC0 */
  {uint} bits = {as_uint("x")};
  return (x != x) ? ({ushort})0x7FC0 : ({ushort})((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}}"""
        if name == "half":
            return f"""{prefix} float tg_half_to_float({ushort} h) {{
  {uint} sign = (({uint})h & 0x8000u) << 16, exponent = (({uint})h >> 10) & 0x1Fu, mantissa = ({uint})h & 0x3FFu;
  if (exponent == 0x1Fu) return {as_float("sign | 0x7F800000u | (mantissa << 13)")};   /* inf, NaN */
  if (exponent == 0u) {{ float v = (float)mantissa * 5.9604644775390625e-8f; return sign ? -v : v; }}  /* m * 2^-24 */
  return {as_float("sign | ((exponent + 112u) << 23) | (mantissa << 13)")};
}}
{prefix} {ushort} tg_float_to_half(float x) {{
  /* round to nearest even with subnormals, overflow to inf and NaN payloads as numpy's float32 -> float16 */
  {uint} bits = {as_uint("x")}, sign = (bits >> 16) & 0x8000u, exponent = (bits >> 23) & 0xFFu;
  {uint} mantissa = bits & 0x7FFFFFu;
  if (exponent == 0xFFu) {{
    {uint} nan = 0x7C00u + (mantissa >> 13);
    return ({ushort})(sign | ((mantissa != 0u && nan == 0x7C00u) ? 0x7C01u : nan));
  }}
  int biased = (int)exponent - 112;      /* the half's exponent field */
  if (biased >= 31) return ({ushort})(sign | 0x7C00u);
  if (biased < -10) return ({ushort})sign;
  /* normal: drop 13 mantissa bits; subnormal: put the implicit 1 back and drop 14 - biased bits */
  {uint} m = biased > 0 ? ((({uint})biased << 23) | mantissa) : (mantissa | 0x800000u);
  {uint} shift = biased > 0 ? 13u : ({uint})(14 - biased);
  {uint} h = m >> shift, rest = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  h += (rest > halfway || (rest == halfway && (h & 1u))) ? 1u : 0u;   /* a carry may make it inf: correct */
  return ({ushort})(sign | h);
}}"""
        if name == "double_to_half":
            return f"""{prefix} {ushort} tg_double_to_half(double x) {{
  /* double -> float rounding to odd, then float -> half: together the one correct rounding numpy does */
  float f = (float)x;
  {uint} bits = {as_uint("f")};
  if ((double)f != x && x == x) {{
    if (fabs((double)f) > fabs(x)) bits -= 1u;
    bits |= 1u;
  }}
  return tg_float_to_half({as_float("bits")});
}}"""
        raise NotImplementedError(f"{type(self.renderer).__name__} has no helper {name!r}")

    OPS: dict[Ops, Callable] = {
        Ops.DEFINE_GLOBAL: lambda w, u, src: f"data{u.arg}", Ops.DEFINE_VAR: lambda w, u, src: u.arg[0],
        Ops.CONST: lambda w, u, src: w.render_const(u.arg, u.dtype), Ops.SPECIAL: special,
        Ops.RANGE: open_loop, Ops.ENDRANGE: close_loop,
        Ops.DEFINE_ACC: lambda w, u, src: w.declare("acc", u.dtype, src[0]),
        Ops.UPDATE_ACC: update_acc, Ops.DEFINE_LOCAL: define_local, Ops.BARRIER: lambda w, u, src: w.emit(w.barrier),
        Ops.LOAD: load, Ops.STORE: store,
        Ops.CAST: lambda w, u, src: w.declare("cast", u.dtype, w.render_cast(src[0], u.src[0].dtype, u.dtype)),
        Ops.BITCAST: lambda w, u, src: w.declare("cast", u.dtype, w.render_bitcast(src[0], u.src[0].dtype, u.dtype)),
    }


class CStyleRenderer(Renderer):
    has_local = True
    code_for_op = BASE_CODE_FOR_OP
    # ---- the declarations a dialect fills in ----
    kernel_prefix = "void"            # may use {local_size}: the threads per group this kernel is written for, and
                                      # {local_dims}: the group's size along each dimension ("16, 16, 1")
    buffer_prefix = ""                # before a buffer argument's element type
    int_arg_prefix = "const int"      # how a symbolic size (DEFINE_VAR) is passed
    # SPECIAL name prefix ("gidx", "lidx") -> C expression; {} is the dimension (0, 1, 2), {xyz} its letter
    thread_index: dict[str, str] = {}
    barrier = ""                      # the statement a BARRIER becomes
    local_prefix = ""                 # before a local-memory array's declaration (DEFINE_LOCAL)
    helper_prefix = "static inline"   # before the small helper functions some kernels need
    helper_order = ("bitcast", "half", "double_to_half", "bfloat16")
    type_names: dict[DType, str] = {}
    storage_type_names: dict[DType, str] = {}   # a buffer's element type where it differs from type_names
    literal_suffix: dict[DType, str] = {}
    # with supports_float4: n neighbouring elements loaded or stored at once ({type} is the vector type, e.g. float4)
    vector_widths: tuple[int, ...] = (4, 2)
    vector_load = ""                  # from {buffer} + {index}, of {n} elements
    vector_store = ""                 # {value} to {buffer} + {index}
    vector_value = "({type})({values})"
    vector_lane = "{}.s{}"
    infinity, nan = "INFINITY", "NAN"
    half_literal = "((half){})"       # a float literal made a half
    # types that live in buffers as 16-bit patterns but are computed on as float, rounded after every op
    float_computed: frozenset[DType] = frozenset({dtypes.bfloat16})
    kernel_writer: type[CKernel] = CKernel    # writes one kernel (a dialect may spell more in a subclass)

    def render(self, name: str, uops: list[UOp]) -> str:
        self.check_dtypes(uops)
        return self.kernel_writer(self, name, uops).render()

    def kernel_preamble(self, uops: list[UOp]) -> list[str]:
        """Lines before the kernel (pragmas, includes); dialects extend this."""
        return []

    # ---------------------------------------------------------------------------------------------------------
    # Spelling values: what depends on the declarations only (the kernel writer spells what needs the kernel)
    # ---------------------------------------------------------------------------------------------------------
    def type_name(self, dtype: DType) -> str:
        return "float" if dtype in self.float_computed else self.type_names[dtype]

    def storage_type(self, dtype: DType) -> str:
        return self.type_names[dtypes.uint16] if dtype in self.float_computed else \
            self.storage_type_names.get(dtype, self.type_names[dtype])

    def render_const(self, value, dtype: DType) -> Literal:
        if dtype == dtypes.bool:
            return Literal("1" if value else "0", value)
        if dtypes.is_float(dtype):
            value = float(value)
            if math.isfinite(value):
                text = repr(value) + ("f" if dtype != dtypes.float64 else "")
            else:
                text = self.nan if math.isnan(value) else self.infinity if value > 0 else f"-{self.infinity}"
                if dtype == dtypes.float64:
                    text = f"(double){text}"
            if dtype == dtypes.float16 and dtype not in self.float_computed:
                text = self.half_literal.format(text)
        else:
            value, suffix = int(value), self.literal_suffix.get(dtype, "")
            # -2147483648 is a negated literal too large for its type: spell it as an expression
            smallest = dtype not in UNSIGNED and dtype.itemsize >= 4 and value == dtypes.min(dtype)
            text = f"({value + 1}{suffix}-1)" if smallest else f"{value}{suffix}"
        return Literal(f"({text})" if text.startswith("-") else text, value)

    def zero(self, dtype: DType) -> str:
        return self.render_const(0, dtype if dtype not in self.float_computed else dtypes.float32)

    def unsigned_twin(self, dtype: DType) -> str | None:
        """The unsigned type a signed int of 32 or 64 bits wraps through (its overflow is undefined in C); else None."""
        if dtypes.is_int(dtype) and dtype not in UNSIGNED and dtype.itemsize >= 4:
            return self.type_names[{4: dtypes.uint32, 8: dtypes.uint64}[dtype.itemsize]]
        return None

    def negate(self, dtype: DType, x: str) -> str:
        if unsigned := self.unsigned_twin(dtype):
            # through the unsigned type: negating the smallest value wraps, as REFERENCE does, instead of being UB
            return f"(({self.type_names[dtype]})(0-({unsigned}){x}))"
        return f"(-{x})"

    def int_division(self, op: Ops, dtype: DType, a: str, b: str) -> str:
        """C's / and % truncate toward zero, as REFERENCE does. A divisor of 0 (or -1 with the smallest value) would
        trap on many devices; REFERENCE divides by 1 instead (so x // 0 == x and x % 0 == x), and so do we."""
        symbol = "/" if op is Ops.IDIV else "%"
        signed = dtype not in UNSIGNED
        if isinstance(b, Literal) and b.value not in (0, -1):
            return f"({a}{symbol}{b})"
        safe = f"((({b}==0)|({b}==-1))?1:{b})" if signed else f"(({b}==0)?1:{b})"
        if op is Ops.IDIV:
            return f"(({b}==-1)?{self.negate(dtype, a)}:({a}/{safe}))" if signed else f"({a}/{safe})"
        return f"(({b}==0)?{a}:({a}%{safe}))"



__all__ = ["BASE_CODE_FOR_OP", "MATH_FUNCTIONS", "CKernel", "CStyleRenderer", "Literal"]
