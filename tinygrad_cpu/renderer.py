"""Linear kernel program -> LLVM IR text, the first step of the CPU backend (compiler.py turns it into machine code).

Each kernel becomes `void name(ptr buf0, ..., i32 var0, ..., i64 start, i64 end)` whose body runs once for every
parallel index gidx0 in [start, end): runtime.py hands slices of that range to different threads. Index arithmetic is
i32, or i64 in kernels the core lowered with 64-bit indices (buffers of 2**31 elements or more)."""
from __future__ import annotations
import hashlib
import struct
from collections.abc import Callable
import numpy as np
from tinygrad_core.dtype import DType, dtypes, FLOATS, INTS, UNSIGNED
from tinygrad_core.ops import Ops, UOp, GroupOp
from tinygrad_core.renderer import Renderer, affine, program_signature
from tinygrad_core.renderer.kernel_opts import KernelOpts
from tinygrad_cpu import mathlib
from tinygrad_cpu.opts import simd_opts

# the type a value has in registers; bfloat16 is computed as float and rounded after every op (as the reference does)
REGISTER_TYPE = {dtypes.bool: "i1", dtypes.int8: "i8", dtypes.uint8: "i8", dtypes.int16: "i16", dtypes.uint16: "i16",
                 dtypes.int32: "i32", dtypes.uint32: "i32", dtypes.int64: "i64", dtypes.uint64: "i64",
                 dtypes.float16: "half", dtypes.bfloat16: "float", dtypes.float32: "float", dtypes.float64: "double"}
# the type a value has in memory: bools are bytes, bfloat16 is its 16 raw bits
MEMORY_TYPE = REGISTER_TYPE | {dtypes.bool: "i8", dtypes.bfloat16: "i16"}
INTRINSIC_SUFFIX = {"half": "f16", "float": "f32", "double": "f64"}

# Fast-math flags. Every float op rounds as written: an elementwise a*b + c rounds twice, as PyTorch and the reference
# compute it (one FMA would turn x*y - x*y into the rounding error of x*y instead of 0). The exception is a reduce's
# multiply-accumulate, acc + a*b, where the core means a running sum of products: `contract` on the accumulator's add
# and on the product it adds lets LLVM make one FMA of them, as BLAS (PyTorch's matmul) does: a matmul's and a
# convolution's inner loops are compute bound, and one FMA does the work of a multiply and an add.
# Reduce accumulators also get `reassoc` when their loop reads memory element by element (and is not too short, see
# _loop_strides), so LLVM can split the sum into SIMD lanes of partial sums; the result then differs from a strict
# left-to-right sum by rounding only. (Where the loop strides through memory, as in a matmul's column of B, vectorising
# it would need gathers: those kernels keep strict order and LLVM's SLP vectoriser works across the register tile of
# accumulators instead.) NaN/inf handling is never relaxed; half gets no flags.
# loads whose index advances by more than this many elements per trip of a loop get prefetched (see load())
PREFETCH_STRIDE = 32
PREFETCH_TRIPS = 8             # how many loop trips ahead a prefetch asks for a strided load's cache line
# Kernels doing less work than this in all (some tens of microseconds) ask LLVM not to vectorise or unroll their loops:
# there it would save microseconds at most, yet it doubles the compile time, which a fresh process's first steps wait on
SMALL_KERNEL_WORK = 1 << 16

# what one op costs, roughly, in simple instructions: for the work estimate that decides how many threads to use
OP_COST = {Ops.EXP2: 20, Ops.LOG2: 20, Ops.SIN: 30, Ops.IDIV: 8, Ops.MOD: 8, Ops.RECIP: 4, Ops.FDIV: 4, Ops.SQRT: 4}


def is_float(dt: DType) -> bool:
    return dt in FLOATS


def is_signed(dt: DType) -> bool:
    return dt in INTS and dt not in UNSIGNED


def render_const(value, dt: DType) -> str:
    """A constant as an LLVM IR literal (floats in the exact hexadecimal form LLVM wants)."""
    ty = REGISTER_TYPE[dt]
    if dt == dtypes.bool:
        return "true" if value else "false"
    if dt in INTS:
        bits = 8 * dt.itemsize
        value = int(value) & ((1 << bits) - 1)
        return str(value - (1 << bits) if value >= 1 << (bits - 1) else value)
    if ty == "half":
        return "0xH" + np.array(value, dtype=np.float16).view(np.uint16).item().to_bytes(2, "big").hex().upper()
    # float and double literals are both written as the 64-bit pattern of the (exactly representable) value
    exact = float(np.float32(value)) if ty == "float" else float(value)
    return "0x" + struct.pack(">d", exact).hex().upper()


class LLVMRenderer(Renderer):
    device = "CPU"
    supports_float4 = False
    max_upcast = 256                   # an 8 x 32 register tile of float32 accumulators (16 AVX-512 registers)
    max_unroll = 1                     # LLVM unrolls loops itself; the core's unrolled chains only serialise sums
    cache_programs = True              # the IR depends on the kernel, this module and simd_width only
    panel_columns = 64                 # a matmul weight read down its columns is packed (schedule.py's _pack_panels)
    # every ALU op is rendered natively (nothing is left to codegen/decompose.py)
    code_for_op = {op: op.name for op in GroupOp.ALU | {Ops.CAST, Ops.BITCAST}}

    def __init__(self, simd_width: int = 64):
        self.simd_width = simd_width   # bytes per vector register of the host CPU (64: AVX-512, 32: AVX2, 16: SSE)
        self.simd_registers = 32 if simd_width >= 64 else 16      # AVX-512 has 32 vector registers, AVX2 and SSE 16
        # the core keys programs on disk by this package's files and the renderer's attributes: a helper changed in
        # memory (not on disk) reaches the key through this one
        self.helpers_digest = hashlib.sha256(repr(sorted(mathlib.HELPERS.items())).encode()).hexdigest()[:16]

    def kernel_opts(self, value: UOp) -> KernelOpts:
        return simd_opts(value, self)        # tiles by how loads walk memory (opts.py), not as for GPU threads

    def render(self, name: str, uops: list[UOp]) -> str:
        return KernelWriter(name, uops, self.simd_width).render()


class KernelWriter:
    """Writes one kernel function. Every UOp's value gets an IR name (or a literal) in `values`."""

    def __init__(self, name: str, uops: list[UOp], simd_width: int = 64):
        self.name, self.uops, self.simd_width = name, uops, simd_width
        self.values: dict[UOp, str] = {}
        self.lines: list[str] = []
        self.allocas: list[str] = []          # accumulators live in stack slots; LLVM turns them into registers
        self.declarations: set[str] = set()   # `declare` lines for the LLVM intrinsics used
        self.helpers: set[str] = set()        # mathlib functions used (their definitions go into the module)
        self.from_double: set[str] = set()    # floats rounded from doubles (see cast)
        self.temp_count = 0
        self.block = "entry"                  # the basic block being written (phi nodes name their predecessors)
        self.loop_phi_line: dict[UOp, int] = {}
        self.loop_ends: dict[UOp, str] = {}
        self.loop_ids: list[int] = []         # metadata of each loop's back edge (small kernels only, see below)
        users: dict[UOp, list[UOp]] = {}
        for u in uops:
            for s in u.src:
                users.setdefault(s, []).append(u)
        self.users = users
        self.index_only = self._index_only_values()
        self.non_negative = self._non_negative_values()
        wide = any(u.op in (Ops.SPECIAL, Ops.RANGE) and u.dtype.itemsize == 8 for u in uops)
        self.index_type = "i64" if wide else "i32"
        self.load_strides, self.accumulator_updates = self._loop_strides()
        self.multiply_accumulates = self._multiply_accumulates()
        parallel = next((u.arg[1] for u in uops if u.op is Ops.SPECIAL), 1)
        self.small = isinstance(parallel, int) and parallel * self.work_per_index() < SMALL_KERNEL_WORK

    # ---- small helpers ----
    def emit(self, instruction: str) -> str:
        """Append `%tN = instruction` and return %tN."""
        self.temp_count += 1
        name = f"%t{self.temp_count}"
        self.lines.append(f"  {name} = {instruction}")
        return name

    def label(self, name: str):
        self.lines.append(f"{name}:")
        self.block = name

    def call(self, return_type: str, function: str, args: list[tuple[str, str]], declaration: str | None = None) -> str:
        if declaration:
            self.declarations.add(declaration)
        if function in mathlib.HELPERS:
            self.helpers.add(function)
            self.declarations.update(mathlib.HELPER_DECLARATIONS[function])
        return self.emit(f"call {return_type} @{function}({', '.join(f'{t} {v}' for t, v in args)})")

    def intrinsic(self, base: str, ty: str, *args: str) -> str:
        name = f"llvm.{base}.{INTRINSIC_SUFFIX.get(ty, ty)}"
        return self.call(ty, name, [(ty, a) for a in args], f"declare {ty} @{name}({', '.join([ty] * len(args))})")

    def value(self, u: UOp) -> str:
        if u.op is Ops.DEFINE_ACC:         # a use of an accumulator reads its current value
            return self.emit(f"load {REGISTER_TYPE[u.dtype]}, ptr {self.values[u]}")
        return self.values[u]

    def index_value(self, u: UOp) -> str:
        """u as this kernel's index type: a symbolic size (an i32 argument) is sign-extended in a 64-bit kernel."""
        if self.index_type == "i64" and u.dtype == dtypes.int32:
            return self.emit(f"sext i32 {self.value(u)} to i64")
        return self.value(u)

    def _index_only_values(self) -> set[UOp]:
        """Integer adds/muls used only to address memory. The core makes index arithmetic 64-bit wherever 32 bits
        could overflow, so these never do, and marking them `nsw` lets LLVM widen them to 64-bit addresses once
        instead of every iteration."""
        found: set[UOp] = set()
        for u in reversed(self.uops):
            if u.op not in (Ops.ADD, Ops.MUL) or u.dtype not in (dtypes.int32, dtypes.int64):
                continue
            uses = self.users.get(u, [])
            if uses and all((use.op in (Ops.LOAD, Ops.STORE) and use.src[0] is not u and
                             not (use.op is Ops.STORE and use.src[2] is u)) or use in found for use in uses):
                found.add(u)
        return found

    def _non_negative_values(self) -> set[UOp]:
        """Integer values that are never negative: loop and parallel indices, constants >= 0, Variables with a minimum
        >= 0, and sums and products of these. Index arithmetic on them gets `nuw` besides `nsw` (see _index_binary),
        in kernels with a reduce (an accumulator) only: in an elementwise one LLVM would then vectorise its loops with
        gathers where it keeps them scalar now, and lose (E_64_64_32_32 of the seed's CNN: 3x slower; the MNIST CNN's
        E_128_16_3_3_7_7, a transposed copy looping over rows of 7 x 7: 1.5x). In a reduce kernel it vectorises an
        innermost loop, never the parallel loop."""
        found: set[UOp] = set()
        if not any(u.op is Ops.DEFINE_ACC for u in self.uops):
            return found
        for u in self.uops:
            if u.op in (Ops.RANGE, Ops.SPECIAL) or u.op is Ops.CONST and u.dtype in INTS and u.arg >= 0 or \
                    u.op is Ops.DEFINE_VAR and u.arg[1] >= 0 or \
                    u.op in (Ops.ADD, Ops.MUL) and all(s in found for s in u.src):
                found.add(u)
        return found

    def _loop_strides(self) -> tuple[dict[UOp, int], set[UOp]]:
        """How far (in elements) each load inside a loop moves per trip of its innermost loop, and the accumulator
        updates whose loop reads memory contiguously (see the fast-math flags at the top)."""
        open_loops, loop_of = [], {}
        for u in self.uops:
            if u.op is Ops.RANGE:
                open_loops.append(u)
            elif u.op is Ops.ENDRANGE:
                open_loops.pop()
            elif open_loops:
                loop_of[u] = open_loops[-1]
        strides = {u: affine(u.src[1])[0].get(loop_of[u], 0)
                   for u in self.uops if u.op is Ops.LOAD and u in loop_of}
        # trips of each load's loop, where known: a prefetch PREFETCH_TRIPS trips ahead of a shorter loop (a row of a
        # few elements) asks for a line past the loop's end, not one it will read
        self.load_trips = {u: loop_of[u].src[0].arg for u in strides if loop_of[u].src[0].op is Ops.CONST}
        # only loads stepping by one element (or not at all) become plain vector loads along the loop
        strided = {loop_of[u] for u, stride in strides.items() if abs(stride) > 1}
        # a loop of fewer trips than a vector has lanes is unrolled whole by LLVM, and its sums would then be split
        # into lanes along the loop around it, with gathers (a reduce the core unrolled into lanes keeps strict order:
        # the SLP vectoriser puts its accumulators side by side in a vector instead)
        short = {loop for loop in loop_of.values() if loop.src[0].op is Ops.CONST and
                 loop.src[0].arg < self.simd_width // 4}
        updates = {u.src[1] for u in self.uops if u.op is Ops.UPDATE_ACC and u in loop_of and
                   loop_of[u] not in strided | short}
        return strides, updates

    def _multiply_accumulates(self) -> set[UOp]:
        """The adds that update an accumulator and the products they add: all that LLVM may fuse (see the fast-math
        flags at the top)."""
        adds = {u.src[1] for u in self.uops if u.op is Ops.UPDATE_ACC and u.src[1].op is Ops.ADD}
        return adds | {s for add in adds for s in add.src if s.op is Ops.MUL}

    # ---- the function ----
    def render(self) -> str:
        buffers, variables = program_signature(self.uops)
        # noalias: the scheduler only lets a kernel read the buffer it writes (x.assign(f(x))) at the very element it
        # writes, and that read comes first; so no access through one pointer is reordered past a conflicting one
        params = [f"ptr noalias %data{b.arg}" for b in buffers] + [f"i32 %var{i}" for i in range(len(variables))]
        for b in buffers:
            self.values[b] = f"%data{b.arg}"
        for i, v in enumerate(variables):
            self.values[v] = f"%var{i}"
        # the parallel loop: gidx0 runs over [start, end) (the launcher passes both as i64)
        ty = self.index_type
        if ty == "i32":
            self.lines += ["  %first = trunc i64 %start to i32", "  %last = trunc i64 %end to i32"]
        first, last = ("%first", "%last") if ty == "i32" else ("%start", "%end")
        self.lines.append(f"  %run = icmp slt {ty} {first}, {last}")
        self.lines.append("  br i1 %run, label %gidx.body, label %exit")
        self.label("gidx.body")
        self.lines.append(f"  %gidx = phi {ty} [{first}, %entry], [%gidx.next, %LATCH]")
        gidx_phi = len(self.lines) - 1
        for u in self.uops:
            if u.op not in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR):
                self.render_uop(u)
        self.lines[gidx_phi] = self.lines[gidx_phi].replace("%LATCH", f"%{self.block}")
        wraps = "nuw " if self.non_negative else ""       # (see _non_negative_values)
        self.lines += [f"  %gidx.next = add {wraps}nsw {ty} %gidx, 1",
                       f"  %gidx.more = icmp slt {ty} %gidx.next, {last}",
                       f"  br i1 %gidx.more, label %gidx.body, label %exit{self.loop_hint()}", "exit:", "  ret void"]
        signature = ", ".join(params + ["i64 %start", "i64 %end"])
        body = "\n".join(["entry:"] + self.allocas + self.lines)
        return "\n".join([f"; tinygrad_cpu work_per_index={self.work_per_index()} buffers={len(buffers)} "
                          f"vars={len(variables)}",
                          f'define void @"{self.name}"({signature}) nounwind '
                          f'"prefer-vector-width"="{8 * self.simd_width}" {{', body, "}",
                          *sorted(self.declarations), *(mathlib.HELPERS[h] for h in sorted(self.helpers)),
                          *self.loop_metadata()]) + "\n"

    def loop_hint(self) -> str:
        """What ends a loop's back-edge branch: in a small kernel, a reference to metadata saying 'leave this loop
        as written' (each loop needs an id of its own)."""
        if not self.small:
            return ""
        self.loop_ids.append(len(self.loop_ids) + 2)
        return f", !llvm.loop !{self.loop_ids[-1]}"

    def loop_metadata(self) -> list[str]:
        if not self.loop_ids:
            return []
        return ['!0 = !{!"llvm.loop.vectorize.enable", i1 false}', '!1 = !{!"llvm.loop.unroll.disable"}',
                *(f"!{i} = distinct !{{!{i}, !0, !1}}" for i in self.loop_ids)]

    def work_per_index(self) -> int:
        """Roughly how many instructions one parallel index runs (loop trips multiplied in)."""
        trips, work = [1], 0
        for u in self.uops:
            if u.op is Ops.RANGE:
                end = u.src[0]
                trips.append(trips[-1] * (int(end.arg) if end.op is Ops.CONST else 64))
            elif u.op is Ops.ENDRANGE:
                trips.pop()
            elif u.op in GroupOp.ALU or u.op in (Ops.LOAD, Ops.STORE, Ops.CAST):
                work += trips[-1] * OP_COST.get(u.op, 1)
        return max(work, 1)

    def render_uop(self, u: UOp):
        write = self.OPS.get(u.op)
        if write is None:
            raise NotImplementedError(f"the CPU renderer has no rule for {u.op.name}; is the linear program from a "
                                      f"newer tinygrad-core? Upgrade tinygrad-cpu")
        if (value := write(self, u)) is not None:
            self.values[u] = value

    # ---- loops: a RANGE counts 0 .. end-1; the body is skipped when end <= 0 ----
    def open_loop(self, r: UOp) -> str:
        end, loop, ty = self.index_value(r.src[0]), f"loop{r.arg}", self.index_type
        self.loop_ends[r] = end
        self.lines.append(f"  %{loop}.run = icmp sgt {ty} {end}, 0")
        self.lines.append(f"  br i1 %{loop}.run, label %{loop}.body, label %{loop}.exit")
        entry_block = self.block
        self.label(f"{loop}.body")
        self.lines.append(f"  %{loop} = phi {ty} [0, %{entry_block}], [%{loop}.next, %LATCH]")
        self.loop_phi_line[r] = len(self.lines) - 1
        return f"%{loop}"

    def close_loop(self, r: UOp):
        end, loop, ty = self.loop_ends[r], f"loop{r.arg}", self.index_type
        line = self.loop_phi_line[r]
        self.lines[line] = self.lines[line].replace("%LATCH", f"%{self.block}")
        # (0 <= loop < end: the next index wraps neither way, and LLVM must know it of the loads' indices, see
        # _index_binary)
        self.lines.append(f"  %{loop}.next = add nuw nsw {ty} %{loop}, 1")
        self.lines.append(f"  %{loop}.more = icmp slt {ty} %{loop}.next, {end}")
        self.lines.append(f"  br i1 %{loop}.more, label %{loop}.body, label %{loop}.exit{self.loop_hint()}")
        self.label(f"{loop}.exit")

    # ---- accumulators (stack slots, see allocas) ----
    def define_acc(self, u: UOp) -> str:
        slot, ty = f"%acc{u.arg}", REGISTER_TYPE[u.dtype]
        self.allocas.append(f"  {slot} = alloca {ty}")
        self.lines.append(f"  store {ty} {self.value(u.src[0])}, ptr {slot}")
        return slot

    def update_acc(self, u: UOp):
        self.lines.append(f"  store {REGISTER_TYPE[u.dtype]} {self.value(u.src[1])}, ptr {self.values[u.src[0]]}")

    # ---- memory ----
    def address(self, buffer: UOp, index: str) -> str:
        return self.emit(f"getelementptr inbounds {MEMORY_TYPE[buffer.dtype]}, ptr {self.values[buffer]}, "
                         f"{self.index_type} {index}")

    def load(self, u: UOp) -> str:
        buffer, index, valid = u.src[0], self.index_value(u.src[1]), (self.value(u.src[2]) if len(u.src) > 2 else None)
        ty = self.index_type
        if valid is not None:
            # read element 0 instead of an invalid index (every buffer has one, see runtime.py), then discard it:
            # branch-free, so loads under a padding mask still vectorise
            index = self.emit(f"select i1 {valid}, {ty} {index}, {ty} 0")
        mem_type = MEMORY_TYPE[buffer.dtype]
        stride = self.load_strides.get(u, 0)
        if abs(stride) > PREFETCH_STRIDE and valid is None and self.load_trips.get(u, PREFETCH_TRIPS + 1) > \
                PREFETCH_TRIPS and affine(u.src[1])[1] % max(1, 64 // buffer.dtype.itemsize) == 0:
            # a loop striding through memory defeats the hardware prefetcher: ask for the cache line needed
            # PREFETCH_TRIPS trips from now (one prefetch per line; prefetches never fault, even past the end)
            ahead = self.emit(f"add {ty} {index}, {stride * PREFETCH_TRIPS}")
            address = self.emit(f"getelementptr {mem_type}, ptr {self.values[buffer]}, {ty} {ahead}")
            self.lines.append(f"  call void @llvm.prefetch.p0(ptr {address}, i32 0, i32 3, i32 1)")
            self.declarations.add("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)")
        raw = self.emit(f"load {mem_type}, ptr {self.address(buffer, index)}, align {buffer.dtype.itemsize}")
        out = self.from_memory(raw, buffer.dtype)
        if buffer.dtype != u.dtype:
            out = self.cast(out, buffer.dtype, u.dtype)
        if valid is not None:
            out = self.emit(f"select i1 {valid}, {REGISTER_TYPE[u.dtype]} {out}, "
                            f"{REGISTER_TYPE[u.dtype]} {render_const(0, u.dtype)}")
        return out

    def store(self, u: UOp):
        buffer, index, value = u.src[0], self.index_value(u.src[1]), self.value(u.src[2])
        valid = self.value(u.src[3]) if len(u.src) > 3 else None
        if u.src[2].dtype != buffer.dtype:
            value = self.cast(value, u.src[2].dtype, buffer.dtype)
        if valid is not None:
            self.temp_count += 1
            block = f"store{self.temp_count}"
            self.lines.append(f"  br i1 {valid}, label %{block}, label %{block}.done")
            self.label(block)
        raw = self.to_memory(value, buffer.dtype)
        self.lines.append(f"  store {MEMORY_TYPE[buffer.dtype]} {raw}, ptr {self.address(buffer, index)}, "
                          f"align {buffer.dtype.itemsize}")
        if valid is not None:
            self.lines.append(f"  br label %{block}.done")
            self.label(f"{block}.done")

    def from_memory(self, raw: str, dt: DType) -> str:
        if dt == dtypes.bool:
            return self.emit(f"icmp ne i8 {raw}, 0")
        if dt == dtypes.bfloat16:
            wide = self.emit(f"zext i16 {raw} to i32")
            return self.emit(f"bitcast i32 {self.emit(f'shl i32 {wide}, 16')} to float")
        return raw

    def to_memory(self, value: str, dt: DType) -> str:
        if dt == dtypes.bool:
            return self.emit(f"zext i1 {value} to i8")
        if dt == dtypes.bfloat16:
            return self.call("i16", mathlib.BF16_BITS, [("float", value)])
        return value

    def round_bf16(self, value: str) -> str:
        return self.call("float", mathlib.BF16_ROUND, [("float", value)])

    # ---- conversions ----
    def cast(self, x: str, src: DType, dst: DType) -> str:
        src_ty, dst_ty = REGISTER_TYPE[src], REGISTER_TYPE[dst]
        if dst == dtypes.bool:
            return self.emit(f"fcmp une {src_ty} {x}, 0.0" if is_float(src) else
                             f"icmp ne {src_ty} {x}, {render_const(0, src)}") if src != dtypes.bool else x
        if src == dtypes.bool:
            return self.emit(f"uitofp i1 {x} to {dst_ty}" if is_float(dst) else f"zext i1 {x} to {dst_ty}") \
                if dst != dtypes.bfloat16 else self.emit(f"uitofp i1 {x} to float")
        if src in INTS and dst in INTS:
            src_bits, dst_bits = src.itemsize, dst.itemsize
            if src_bits == dst_bits:
                return x
            if src_bits > dst_bits:
                return self.emit(f"trunc {src_ty} {x} to {dst_ty}")
            return self.emit(f"{'sext' if is_signed(src) else 'zext'} {src_ty} {x} to {dst_ty}")
        if src in INTS:            # int -> float
            out = self.emit(f"{'sitofp' if is_signed(src) else 'uitofp'} {src_ty} {x} to {dst_ty}")
            return self.round_bf16(out) if dst == dtypes.bfloat16 else out
        if dst in INTS:            # float -> int: truncate toward zero; saturating, so NaN gives 0, never poison
            if src_ty == "half":
                x, src_ty = self.emit(f"fpext half {x} to float"), "float"
            kind = "fptosi" if is_signed(dst) else "fptoui"
            name = f"llvm.{kind}.sat.{dst_ty}.{INTRINSIC_SUFFIX[src_ty]}"
            return self.call(dst_ty, name, [(src_ty, x)], f"declare {dst_ty} @{name}({src_ty})")
        # float -> float
        if src_ty == "double" and dst_ty == "half":
            return self.call("half", mathlib.F64_TO_F16, [("double", x)])
        if src_ty != dst_ty:
            order = ["half", "float", "double"]
            kind = "fpext" if order.index(dst_ty) > order.index(src_ty) else "fptrunc"
            if x in self.from_double and dst_ty == "half":
                # a fence: LLVM's code generator folds double -> float -> half into one rounding, a call of
                # compiler-rt's __truncdfhf2 (not in the process), and rounding once isn't rounding twice
                x = self.call("float", "llvm.arithmetic.fence.f32", [("float", x)],
                              "declare float @llvm.arithmetic.fence.f32(float)")
            x = self.emit(f"{kind} {src_ty} {x} to {dst_ty}")
            if src_ty == "double" and dst_ty == "float":
                self.from_double.add(x)
        return self.round_bf16(x) if dst == dtypes.bfloat16 and src != dtypes.bfloat16 else x

    def bitcast(self, x: str, src: DType, dst: DType) -> str:
        if src == dtypes.bfloat16:
            x, src = self.to_memory(x, src), dtypes.int16
        if dst == dtypes.bfloat16:
            bits = x if REGISTER_TYPE[src] == "i16" else self.emit(f"bitcast {REGISTER_TYPE[src]} {x} to i16")
            return self.from_memory(bits, dst)
        if REGISTER_TYPE[src] == REGISTER_TYPE[dst]:
            return x
        if dtypes.bool in (src, dst):      # a bool is an i1 in registers and the byte 0 or 1 in memory
            return self.emit(f"zext i1 {x} to i8" if src == dtypes.bool else f"icmp ne i8 {x}, 0")
        return self.emit(f"bitcast {REGISTER_TYPE[src]} {x} to {REGISTER_TYPE[dst]}")

    # ---- arithmetic ----
    def alu(self, u: UOp) -> str:
        in_dtype = u.src[-1].dtype if u.op is Ops.WHERE else u.src[0].dtype
        if self.index_type == "i64" and in_dtype == dtypes.int32 and any(s.dtype == dtypes.int64 for s in u.src):
            in_dtype = dtypes.int64       # 64-bit index arithmetic with a symbolic size (an i32 argument) in it
        operands = [self.index_value(s) if in_dtype == dtypes.int64 else self.value(s) for s in u.src]
        flags = ""
        if is_float(in_dtype) and REGISTER_TYPE[in_dtype] != "half":
            flags = ("reassoc " if u in self.accumulator_updates else "") + \
                ("contract " if u in self.multiply_accumulates else "")
        out = ALU_RULES[u.op](self, REGISTER_TYPE[in_dtype], in_dtype, flags, u, *operands)
        if u.dtype == dtypes.bfloat16 and u.op not in (Ops.WHERE, Ops.TRUNC) and u.op not in GroupOp.COMPARISON:
            out = self.round_bf16(out)
        return out

    # op -> how it is written: a function of (writer, uop) that returns the IR name (or literal) of the op's value, or
    # None for an op without one. (Buffers and Variables are the function's parameters, named before the body.)
    OPS: dict[Ops, Callable[[KernelWriter, UOp], str | None]] = {
        Ops.CONST: lambda w, u: render_const(u.arg, u.dtype), Ops.SPECIAL: lambda w, u: "%gidx",
        Ops.RANGE: open_loop, Ops.ENDRANGE: lambda w, u: w.close_loop(u.src[0]),
        Ops.DEFINE_ACC: define_acc, Ops.UPDATE_ACC: update_acc, Ops.LOAD: load, Ops.STORE: store,
        Ops.CAST: lambda w, u: w.cast(w.value(u.src[0]), u.src[0].dtype, u.dtype),
        Ops.BITCAST: lambda w, u: w.bitcast(w.value(u.src[0]), u.src[0].dtype, u.dtype),
        **dict.fromkeys(GroupOp.ALU, alu),
    }


def _binary(int_op: str, float_op: str, bool_op: str | None = None):
    def rule(w: KernelWriter, ty, dt, flags, u, a, b):
        if dt == dtypes.bool:
            if bool_op is None:
                raise NotImplementedError(f"{u.op.name} is not defined for bool")
            return w.emit(f"{bool_op} i1 {a}, {b}")
        return w.emit(f"{float_op} {flags}{ty} {a}, {b}" if is_float(dt) else f"{int_op} {ty} {a}, {b}")
    return rule


def _index_binary(op: str):
    """Index arithmetic that only addresses memory can't overflow: it gets `nsw` (see _index_only_values), and `nuw`
    too where both operands are never negative (then neither wraps as unsigned numbers either). Without it (and on the
    loop counters, see close_loop) LLVM can't tell that the loads of the lanes a reduce is unrolled into (a batchnorm's
    sums over 16-wide rows) are neighbours: it sees `i | 1` for `i + 1` (i a multiple of 16) and gathers them one by
    one, 7x slower than the vector loads it makes knowing no index wraps (tinygrad_cpu/tests/test_cpu_opts.py)."""
    plain = _binary(op, "f" + op, {"add": "or", "mul": "and"}[op])

    def rule(w: KernelWriter, ty, dt, flags, u, a, b):
        if u not in w.index_only:
            return plain(w, ty, dt, flags, u, a, b)
        return w.emit(f"{op} {'nuw ' if all(s in w.non_negative for s in u.src) else ''}nsw {ty} {a}, {b}")
    return rule


def _idiv(w: KernelWriter, ty, dt, flags, u, a, b):
    # C semantics (truncate toward zero). Division by 0 and MIN / -1 trap on x86; the reference divides by 1
    # instead of 0, and MIN / -1 wraps to MIN, so both are steered around the hardware divide.
    if not is_signed(dt):
        divisor = w.emit(f"select i1 {w.emit(f'icmp eq {ty} {b}, 0')}, {ty} 1, {ty} {b}")
        return w.emit(f"udiv {ty} {a}, {divisor}")
    is_zero, is_minus_one = w.emit(f"icmp eq {ty} {b}, 0"), w.emit(f"icmp eq {ty} {b}, -1")
    divisor = w.emit(f"select i1 {w.emit(f'or i1 {is_zero}, {is_minus_one}')}, {ty} 1, {ty} {b}")
    return w.emit(f"select i1 {is_minus_one}, {ty} {w.emit(f'sub {ty} 0, {a}')}, {ty} "
                  f"{w.emit(f'sdiv {ty} {a}, {divisor}')}")


def _mod(w: KernelWriter, ty, dt, flags, u, a, b):
    # the sign follows the dividend (C); x % 0 is x, as the reference's a - b * (a // b) gives
    is_zero = w.emit(f"icmp eq {ty} {b}, 0")
    if not is_signed(dt):
        rest = w.emit(f"urem {ty} {a}, {w.emit(f'select i1 {is_zero}, {ty} 1, {ty} {b}')}")
    else:
        is_minus_one = w.emit(f"icmp eq {ty} {b}, -1")
        divisor = w.emit(f"select i1 {w.emit(f'or i1 {is_zero}, {is_minus_one}')}, {ty} 1, {ty} {b}")
        rest = w.emit(f"srem {ty} {a}, {divisor}")      # x % 1 == x % -1 == 0
    return w.emit(f"select i1 {is_zero}, {ty} {a}, {ty} {rest}")


def _max(w: KernelWriter, ty, dt, flags, u, a, b):
    if dt == dtypes.bool:
        return w.emit(f"or i1 {a}, {b}")
    if is_float(dt):   # NaN in either input gives NaN: a NaN b is picked by the first test, a NaN a by the second
        bigger = w.emit(f"select i1 {w.emit(f'fcmp olt {ty} {a}, {b}')}, {ty} {b}, {ty} {a}")
        return w.emit(f"select i1 {w.emit(f'fcmp uno {ty} {b}, 0.0')}, {ty} {b}, {ty} {bigger}")
    less = w.emit(f"icmp {'slt' if is_signed(dt) else 'ult'} {ty} {a}, {b}")
    return w.emit(f"select i1 {less}, {ty} {b}, {ty} {a}")


def _recip(w: KernelWriter, ty, dt, flags, u, a):
    if is_float(dt):
        return w.emit(f"fdiv {ty} {render_const(1.0, dt)}, {a}")
    if dt == dtypes.bool:
        return "true"
    # the reference computes 1 // x with floor division (and 1 for x == 0): 1 for 0 and 1, -1 for negatives
    small = w.emit(f"icmp ule {ty} {a}, 1")
    if not is_signed(dt):
        return w.emit(f"zext i1 {small} to {ty}")
    negative = w.emit(f"icmp slt {ty} {a}, 0")
    return w.emit(f"select i1 {small}, {ty} 1, {ty} {w.emit(f'sext i1 {negative} to {ty}')}")


def _fdiv(w: KernelWriter, ty, dt, flags, u, a, b):
    # IEEE division, correctly rounded (LLVM divides a half in float and rounds once more: still correctly rounded)
    if not is_float(dt):
        raise NotImplementedError(f"FDIV of {dt} is not defined; divide floats (Tensor.div casts integers first)")
    return w.emit(f"fdiv {ty} {a}, {b}")


def _neg(w: KernelWriter, ty, dt, flags, u, a):
    if dt == dtypes.bool:
        return w.emit(f"xor i1 {a}, true")
    return w.emit(f"fneg {ty} {a}" if is_float(dt) else f"sub {ty} 0, {a}")


def _shift(kind: str):
    def rule(w: KernelWriter, ty, dt, flags, u, a, b):
        amount = w.emit(f"and {ty} {b}, {8 * dt.itemsize - 1}")      # out-of-range amounts are unspecified
        op = kind if kind == "shl" else ("ashr" if is_signed(dt) else "lshr")
        return w.emit(f"{op} {ty} {a}, {amount}")
    return rule


def _compare(int_signed: str, int_unsigned: str, float_op: str):
    def rule(w: KernelWriter, ty, dt, flags, u, a, b):
        if is_float(dt):
            return w.emit(f"fcmp {float_op} {ty} {a}, {b}")
        return w.emit(f"icmp {int_signed if is_signed(dt) else int_unsigned} {ty} {a}, {b}")
    return rule


def _math(name: str):
    def rule(w: KernelWriter, ty, dt, flags, u, a):
        if not is_float(dt):
            raise NotImplementedError(f"{u.op.name} of {dt} is not defined; cast to a float first")
        return mathlib.render(w, name, ty, a)
    return rule


def _mulacc(w: KernelWriter, ty, dt, flags, u, a, b, c):
    # two roundings, as the reference (no `contract` here: see the fast-math flags)
    if is_float(dt):
        return w.emit(f"fadd {flags}{ty} {w.emit(f'fmul {flags}{ty} {a}, {b}')}, {c}")
    return w.emit(f"add {ty} {w.emit(f'mul {ty} {a}, {b}')}, {c}")


ALU_RULES = {
    Ops.ADD: _index_binary("add"), Ops.MUL: _index_binary("mul"), Ops.SUB: _binary("sub", "fsub"),
    Ops.AND: _binary("and", "and", "and"), Ops.OR: _binary("or", "or", "or"), Ops.XOR: _binary("xor", "xor", "xor"),
    Ops.IDIV: _idiv, Ops.MOD: _mod, Ops.MAX: _max, Ops.RECIP: _recip, Ops.NEG: _neg, Ops.MULACC: _mulacc,
    Ops.FDIV: _fdiv, Ops.SHL: _shift("shl"), Ops.SHR: _shift("shr"),
    Ops.CMPLT: _compare("slt", "ult", "olt"), Ops.CMPNE: _compare("ne", "ne", "une"),
    Ops.WHERE: lambda w, ty, dt, flags, u, c, a, b: w.emit(f"select i1 {c}, {ty} {a}, {ty} {b}"),
    Ops.TRUNC: lambda w, ty, dt, flags, u, a: w.intrinsic("trunc", ty, a) if is_float(dt) else a,
    Ops.EXP2: _math("exp2"), Ops.LOG2: _math("log2"), Ops.SIN: _math("sin"), Ops.SQRT: _math("sqrt"),
}
