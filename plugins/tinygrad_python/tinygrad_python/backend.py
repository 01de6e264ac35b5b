"""The reference backend: renderer (linear program -> JSON), compiler (JSON -> bytes), allocator (numpy host
memory) and program (a numpy interpreter of the linear program, vectorised over every thread of the launch: all
threads run each op together, in lockstep, so a BARRIER has nothing left to wait for).

Every op is executed with `tinygrad_core.ops.exec_alu`, the reference semantics, which makes this backend the
oracle the conformance suite compares other backends against."""
from __future__ import annotations
import json
import time
import numpy as np
from tinygrad_core.device import Allocator, Compiled, Compiler, CompileError, Program
from tinygrad_core.dtype import BY_NAME, dtypes, bf16_to_f32, f32_to_bf16
from tinygrad_core.ops import Ops, GroupOp, bitcast_array, exec_alu, cast_array
from tinygrad_core.renderer import Renderer


class PythonRenderer(Renderer):
    device = "PYTHON"
    code_for_op = {op: op.name for op in GroupOp.ALU | {Ops.CAST, Ops.BITCAST}}

    def render(self, name, uops) -> str:
        position = {u: i for i, u in enumerate(uops)}
        rows = [[u.op.name, u.dtype.name, [position[s] for s in u.src], self.arg(u)] for u in uops]
        return json.dumps({"name": name, "uops": rows})

    @staticmethod
    def arg(u):
        if u.op in (Ops.WMMA_ACC, Ops.WMMA, Ops.WMMA_STORE):     # a TensorCore: its tile dims and input type
            tc, *rest = u.arg
            return [list(tc.dims), tc.dtype_in.name, *rest]
        return u.arg


class PythonCompiler(Compiler):
    cachekey = None     # "compiling" is checking the JSON parses: cheaper than a disk lookup

    def compile(self, src: str) -> bytes:
        try:
            program = json.loads(src)
            for op, dtype, _, _ in program["uops"]:
                Ops[op], BY_NAME[dtype]
        except (ValueError, KeyError, TypeError) as e:
            raise CompileError(f"not a valid PYTHON program: {type(e).__name__}: {e}", src) from e
        return src.encode()


class PythonAllocator(Allocator):
    def _alloc(self, size, options):
        return np.zeros(size, dtype=np.uint8)

    def _copyin(self, dest, src):
        dest[:] = np.frombuffer(src, dtype=np.uint8)

    def _copyout(self, dest, src):
        np.frombuffer(dest, dtype=np.uint8)[:] = src

    def offset(self, opaque, size, offset):
        return opaque[offset:offset + size]


def _host(dtype):
    """bfloat16 is stored as bits but computed on as float32."""
    return np.float32 if dtype == dtypes.bfloat16 else dtype.np


class PythonProgram(Program):
    def __init__(self, name, lib):
        super().__init__(name, lib)
        rows = json.loads(lib)["uops"]
        self.uops = [(Ops[op], BY_NAME[dtype], tuple(src), arg) for op, dtype, src, arg in rows]
        self.loop_end = {}
        for i, (op, _, src, _) in enumerate(self.uops):
            if op is Ops.ENDRANGE:
                self.loop_end[src[0]] = i

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
        start = time.perf_counter()
        with np.errstate(all="ignore"):
            Launch(self, bufs, vals, tuple(global_size), tuple(local_size)).run()
        return time.perf_counter() - start if wait else None


def thread_indices(global_size, local_size) -> dict[str, np.ndarray]:
    """Each SPECIAL's value in every thread: thread t is thread t % prod(local_size) of group t // prod(...), and
    both flat indices unfold with dimension 0 fastest."""
    group_count, group_threads = int(np.prod(global_size)), int(np.prod(local_size))
    # int32 as the kernels' index arithmetic is, unless the core lowered it as int64 (2**31 threads or more)
    index = np.int32 if group_count * group_threads < 2 ** 31 else np.int64
    thread = np.arange(group_count * group_threads, dtype=index)
    out = {}
    for prefix, flat, sizes in (("gidx", thread // group_threads, global_size),
                                ("lidx", thread % group_threads, local_size)):
        for dim, size in enumerate(sizes):
            out[f"{prefix}{dim}"] = (flat // int(np.prod(sizes[:dim], dtype=np.int64)) % size).astype(index)
    return out


class Launch:
    """One run of a program: the value of every op in every thread at once. `OPS` says which method executes each
    op; each gets the op's dtype, its sources' positions, its arg and its sources' values, and returns the op's value
    (None if it has none). Loops jump by setting `pc`, the position of the op being executed."""

    def __init__(self, program: PythonProgram, bufs, vals, global_size, local_size):
        self.uops, self.loop_end, self.bufs, self.vals = program.uops, program.loop_end, bufs, iter(vals)
        self.values = [None] * len(self.uops)
        self.specials = thread_indices(global_size, local_size)
        self.threads = self.specials["gidx0"].size
        self.groups = int(np.prod(global_size))
        self.group = np.arange(self.threads) // int(np.prod(local_size))     # each thread's row of the local arrays
        self.pc = 0

    def run(self):
        while self.pc < len(self.uops):
            here = self.pc
            op, dtype, src, arg = self.uops[here]
            execute = getattr(self, self.OPS.get(op, "alu"))
            self.values[here] = execute(dtype, src, arg, [self.values[s] for s in src])
            self.pc += 1

    def is_local(self, position) -> bool:
        return self.uops[position][0] is Ops.DEFINE_LOCAL

    # ---- arguments, indices, loops, accumulators ----
    def define_global(self, dtype, src, arg, args):
        raw = self.bufs[arg]      # an empty tensor's buffer is 1 byte (allocations are never 0): view none of it
        return raw[:raw.size - raw.size % dtype.np.itemsize].view(dtype.np)

    def define_var(self, dtype, src, arg, args):
        return np.int32(next(self.vals))

    def special(self, dtype, src, arg, args):
        return self.specials[arg[0]]

    def const(self, dtype, src, arg, args):
        return np.array(arg, dtype=_host(dtype))

    def open_loop(self, dtype, src, arg, args):
        if args[0] <= 0:
            self.pc = self.loop_end[self.pc]          # on past the ENDRANGE
        return dtype.np.type(0)

    def close_loop(self, dtype, src, arg, args):
        loop = src[0]
        self.values[loop] += 1
        if self.values[loop] < self.values[self.uops[loop][2][0]]:
            self.pc = loop                            # back to the op after the RANGE

    def define_acc(self, dtype, src, arg, args):
        return args[0]

    def update_acc(self, dtype, src, arg, args):
        self.values[src[0]] = args[1]

    # ---- memory: the kernel's buffers, and local arrays (a row per thread group) ----
    def define_local(self, dtype, src, arg, args):
        return np.zeros((self.groups, arg[1]), dtype=_host(dtype))

    def barrier(self, dtype, src, arg, args):
        pass                      # every thread has run every op before this one already

    def load(self, dtype, src, arg, args):
        if self.is_local(src[0]):                     # src[2] is the BARRIER, not a gate
            return args[0][self.group, args[1]]
        return read_buffer(dtype, *args)

    def store(self, dtype, src, arg, args):
        if self.is_local(src[0]):
            rows, idx, value = np.broadcast_arrays(self.group, args[1], args[2])
            keep = np.broadcast_to(args[3], rows.shape) if len(args) == 4 else slice(None)
            args[0][rows[keep], idx[keep]] = value[keep]
        else:
            write_buffer(dtype, *args)

    # ---- values ----
    def bitcast(self, dtype, src, arg, args):
        return bitcast_array(args[0], self.uops[src[0]][1], dtype)

    def cast(self, dtype, src, arg, args):
        return cast_array(args[0], dtype)

    def alu(self, dtype, src, arg, args):
        out = exec_alu(self.uops[self.pc][0], dtype, *args)
        return cast_array(out, dtype) if dtype == dtypes.bfloat16 else out

    # ---- tensor cores: a tile per warp; here a "thread" is a whole warp ----
    def wmma_acc(self, dtype, src, arg, args):
        (tm, tn, _), _ = arg
        return np.zeros((self.threads, tm, tn), dtype=_host(dtype))

    def wmma(self, dtype, src, arg, args):
        ((tm, tn, tk), dtype_in, a_ld, a_rows, b_ld, b_rows), acc = arg, args[0]
        a = read_tile(args[1], args[2], tm, tk, a_ld, a_rows, BY_NAME[dtype_in]).astype(acc.dtype)
        b = read_tile(args[3], args[4], tk, tn, b_ld, b_rows, BY_NAME[dtype_in]).astype(acc.dtype)
        self.values[src[0]] = acc + a @ b
        return self.values[src[0]]

    def wmma_store(self, dtype, src, arg, args):
        ((tm, tn, _), _, ld), (buf, idx, acc) = arg, args
        index = np.asarray(idx).reshape(-1, 1, 1) + np.arange(tm).reshape(1, -1, 1) * ld + np.arange(tn)
        write_buffer(dtype, buf, index, cast_array(acc, self.uops[src[0]][1]))

    OPS = {Ops.DEFINE_GLOBAL: "define_global", Ops.DEFINE_VAR: "define_var", Ops.SPECIAL: "special",
           Ops.CONST: "const", Ops.RANGE: "open_loop", Ops.ENDRANGE: "close_loop", Ops.DEFINE_ACC: "define_acc",
           Ops.UPDATE_ACC: "update_acc", Ops.DEFINE_LOCAL: "define_local", Ops.BARRIER: "barrier", Ops.LOAD: "load",
           Ops.STORE: "store", Ops.BITCAST: "bitcast", Ops.CAST: "cast", Ops.WMMA_ACC: "wmma_acc", Ops.WMMA: "wmma",
           Ops.WMMA_STORE: "wmma_store"}


def read_buffer(dtype, buf, idx, valid=None):
    if valid is not None:
        out = np.where(valid, buf[np.where(valid, idx, 0)] if buf.size else 0, 0)
    else:
        out = buf[idx]
    return bf16_to_f32(out) if dtype == dtypes.bfloat16 else out.astype(dtype.np, copy=False)


def read_tile(buf, idx, rows, cols, ld, row_major, dtype):
    """Each thread's rows x cols tile starting at idx: element (i, j) at idx + i*ld + j (row-major)."""
    i, j = np.arange(rows).reshape(1, -1, 1), np.arange(cols).reshape(1, 1, -1)
    index = np.asarray(idx).reshape(-1, 1, 1) + (i * ld + j if row_major else i + j * ld)
    out = buf[index]
    return bf16_to_f32(out) if dtype == dtypes.bfloat16 else out.astype(np.float32)


def write_buffer(dtype, buf, idx, value, valid=None):
    if buf.dtype == np.uint16 and np.asarray(value).dtype == np.float32:   # a bfloat16 buffer
        value = f32_to_bf16(np.asarray(value))
    idx, value = np.broadcast_arrays(idx, value)
    if valid is not None:
        valid = np.broadcast_to(valid, idx.shape)
        idx, value = idx[valid], value[valid]
    buf[idx] = value


class PythonBackend(Compiled):
    def __init__(self, device: str):
        super().__init__(device, PythonAllocator(), PythonRenderer(), PythonCompiler(), PythonProgram)
