"""The CUDA C dialect of the C-style renderer: linear kernel program -> CUDA C source for nvcc.

Almost all declarations: extern "C" __global__ kernels with __launch_bounds__, blockIdx/threadIdx, half from
cuda_fp16.h. bfloat16 is computed as float and stored as its 16 bits (the shared helpers round exactly as the
reference does, NaN bits included)."""
from __future__ import annotations
from tinygrad_core.dtype import ALL, DType, dtypes
from tinygrad_core.ops import Ops, UOp
from tinygrad_core.renderer import TensorCore
from tinygrad_core.renderer.cstyle import CKernel, CStyleRenderer

WMMA = "nvcuda::wmma"
WMMA_TYPES = {dtypes.float16: "half", dtypes.bfloat16: "__nv_bfloat16", dtypes.float32: "float"}


class CUDAKernel(CKernel):
    """What CUDA C spells its own way: tensor-core fragments, half through the cuda_fp16.h intrinsics, bitcasts."""

    def wmma(self, u: UOp, src: list[str]) -> str | None:
        """A warp's tensor-core ops: its accumulator fragment, one tile product, the tile's store."""
        tc = u.arg[0]
        shape = ", ".join(map(str, tc.dims))
        if u.op is Ops.WMMA_ACC:
            name = self.new_name("wmma_acc")
            self.emit(f"{WMMA}::fragment<{WMMA}::accumulator, {shape}, {WMMA_TYPES[tc.dtype_acc]}> {name};")
            self.emit(f"{WMMA}::fill_fragment({name}, 0.0f);")
            return name
        if u.op is Ops.WMMA:        # the fragments are loaded by all the warp's threads together
            _, a_ld, a_rows, b_ld, b_rows = u.arg
            kind = WMMA_TYPES[tc.dtype_in]
            self.emit("{")
            operands = (("a", src[1], src[2], a_ld, a_rows), ("b", src[3], src[4], b_ld, b_rows))
            for frag, buf, index, ld, rows in operands:
                layout = f"{WMMA}::{'row' if rows else 'col'}_major"
                self.emit(f"  {WMMA}::fragment<{WMMA}::matrix_{frag}, {shape}, {kind}, {layout}> {frag};")
                self.emit(f"  {WMMA}::load_matrix_sync({frag}, (const {kind}*)({buf} + {index}), {ld});")
            self.emit(f"  {WMMA}::mma_sync({src[0]}, a, b, {src[0]});")
            self.emit("}")
            return src[0]
        # WMMA_STORE: straight to memory when the buffer holds the accumulator's type, else through a shared tile
        out, (tm, tn, _), ld = u.src[0].dtype, tc.dims, u.arg[1]
        if out == tc.dtype_acc:
            self.emit(f"{WMMA}::store_matrix_sync({src[0]} + {src[1]}, {src[2]}, {ld}, {WMMA}::mem_row_major);")
            return None
        value = self.to_storage(out, "tile[i]") if out in self.float_computed else \
            self.render_cast("tile[i]", tc.dtype_acc, out)
        self.emit("{")
        self.emit(f"  __shared__ {WMMA_TYPES[tc.dtype_acc]} tile[{tm * tn}];")
        self.emit(f"  {WMMA}::store_matrix_sync(tile, {src[2]}, {tn}, {WMMA}::mem_row_major);")
        self.emit("  __syncwarp();")
        self.emit(f"  for (int i = threadIdx.x; i < {tm * tn}; i += {tc.threads}) "
                  f"{src[0]}[{src[1]} + i / {tn} * {ld} + i % {tn}] = {value};")
        self.emit("}")
        return None

    OPS = {**CKernel.OPS, Ops.WMMA_ACC: wmma, Ops.WMMA: wmma, Ops.WMMA_STORE: wmma}

    def render_cast(self, x: str, source: DType, target: DType) -> str:
        # half converts through the cuda_fp16.h intrinsics (its C++ constructors and operators vary by version)
        if source == target or (target != dtypes.float16 and source != dtypes.float16):
            return super().render_cast(x, source, target)
        if target == dtypes.float16:
            if source == dtypes.float64:
                return f"__double2half({x})"      # one rounding, as numpy's float64 -> float16
            return f"__float2half({super().render_cast(x, source, dtypes.float32)})"
        return super().render_cast(f"__half2float({x})", dtypes.float32, target)

    def bitcast_expression(self, x: str, source: DType, target: DType) -> str:
        self.helpers_used.add("bitcast")
        return f"tg_bitcast<{self.type_names[target]}>({x})"

    def helper_source(self, name: str) -> str:
        if name == "bitcast":
            return ("template <class To, class From> " + self.helper_prefix + " To tg_bitcast(From x) {\n"
                    "  static_assert(sizeof(To) == sizeof(From), \"bitcast needs types of one size\");\n"
                    "  To out;\n  memcpy(&out, &x, sizeof(To));\n  return out;\n}")
        return super().helper_source(name)


class CUDARenderer(CStyleRenderer):
    device = "CUDA"
    # the block size is part of the kernel's index math; declaring it lets nvcc budget registers for it
    kernel_prefix = 'extern "C" __global__ void __launch_bounds__({local_size})'
    thread_index = {"gidx": "blockIdx.{xyz}", "lidx": "threadIdx.{xyz}"}
    barrier = "__syncthreads();"
    local_prefix = "__shared__ "
    helper_prefix = "static __device__ __forceinline__"
    type_names = {dtypes.bool: "bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char",
                  dtypes.int16: "short", dtypes.uint16: "unsigned short", dtypes.int32: "int",
                  dtypes.uint32: "unsigned int", dtypes.int64: "long long", dtypes.uint64: "unsigned long long",
                  dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double"}
    literal_suffix = {dtypes.uint32: "u", dtypes.int64: "ll", dtypes.uint64: "ull"}
    half_literal = "__float2half({})"
    supported_dtypes = frozenset(ALL)
    has_local = True
    has_shared = True                 # matmul/conv kernels tiled through __shared__ memory (codegen/local_tiles.py)
    shared_max = 48 * 1024            # what a block may use without opting in to more
    default_local_size = 128
    max_upcast = 16                   # a 4 x 4 register tile of outputs per thread (matmul: ~30x fewer loads)
    local_max = (1024, 1024, 64)
    global_max = (2 ** 31 - 1, 65535, 65535)
    kernel_writer = CUDAKernel

    def __init__(self, arch: str = "sm_90"):
        self.arch = arch
        # wmma 16x16x16 tiles: half inputs from sm_70 (Volta), bfloat16 from sm_80 (Ampere); float accumulators
        version = int("".join(c for c in arch if c.isdigit()) or 0)
        self.tensor_cores = tuple(TensorCore((16, 16, 16), dtype, dtypes.float32) for dtype, since in
                                  ((dtypes.float16, 70), (dtypes.bfloat16, 80)) if version >= since)

    def kernel_preamble(self, uops: list[UOp]) -> list[str]:
        wmma = [u for u in uops if u.op is Ops.WMMA]
        return ["#include <cuda_fp16.h>"] * any(u.dtype == dtypes.float16 for u in uops) + \
            ["#include <cuda_bf16.h>"] * any(u.arg[0].dtype_in == dtypes.bfloat16 for u in wmma) + \
            ["#include <mma.h>"] * bool(wmma)
