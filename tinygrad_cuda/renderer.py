"""The CUDA C dialect of the C-style renderer: linear kernel program -> CUDA C source for nvcc.

Almost all declarations: extern "C" __global__ kernels with __launch_bounds__, blockIdx/threadIdx, half from
cuda_fp16.h. bfloat16 is computed as float and stored as its 16 bits (the shared helpers round exactly as the
reference does, NaN bits included)."""
from __future__ import annotations
from tinygrad_core.dtype import ALL, DType, dtypes
from tinygrad_core.ops import UOp
from tinygrad_core.renderer.cstyle import CStyleRenderer


class CUDARenderer(CStyleRenderer):
    device = "CUDA"
    # the block size is part of the kernel's index math; declaring it lets nvcc budget registers for it
    kernel_prefix = 'extern "C" __global__ void __launch_bounds__({local_size})'
    thread_index = {"gidx": "blockIdx.{xyz}", "lidx": "threadIdx.{xyz}"}
    barrier = "__syncthreads();"
    helper_prefix = "static __device__ __forceinline__"
    type_names = {dtypes.bool: "bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char",
                  dtypes.int16: "short", dtypes.uint16: "unsigned short", dtypes.int32: "int",
                  dtypes.uint32: "unsigned int", dtypes.int64: "long long", dtypes.uint64: "unsigned long long",
                  dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double"}
    literal_suffix = {dtypes.uint32: "u", dtypes.int64: "ll", dtypes.uint64: "ull"}
    half_literal = "__float2half({})"
    supported_dtypes = frozenset(ALL)
    has_local = True
    default_local_size = 128
    max_upcast = 16                   # a 4 x 4 register tile of outputs per thread (matmul: ~30x fewer loads)
    local_max = (1024, 1024, 64)
    global_max = (2 ** 31 - 1, 65535, 65535)

    def __init__(self, arch: str = "sm_90"):
        self.arch = arch

    def kernel_preamble(self, uops: list[UOp]) -> list[str]:
        return ["#include <cuda_fp16.h>"] if any(u.dtype == dtypes.float16 for u in uops) else []

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
        self.use_helper("bitcast")
        return f"tg_bitcast<{self.type_names[target]}>({x})"

    def helper_source(self, name: str) -> str:
        if name == "bitcast":
            return ("template <class To, class From> " + self.helper_prefix + " To tg_bitcast(From x) {\n"
                    "  static_assert(sizeof(To) == sizeof(From), \"bitcast needs types of one size\");\n"
                    "  To out;\n  memcpy(&out, &x, sizeof(To));\n  return out;\n}")
        return super().helper_source(name)
