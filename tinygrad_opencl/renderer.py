"""The OpenCL C dialect of the C-style renderer: linear kernel program -> OpenCL C source.

Almost all declarations; what a device can compute (double needs cl_khr_fp64; half is native with cl_khr_fp16 and
computed through float without it) is decided per device when the backend opens it."""
from __future__ import annotations
from tinygrad_core.dtype import ALL, DType, dtypes
from tinygrad_core.ops import UOp
from tinygrad_core.renderer.cstyle import CKernel, CStyleRenderer


NAN_MISFOLDED = ("trunc", "exp2")     # math calls PoCL's constant folding gets wrong for a NaN operand


class OpenCLKernel(CKernel):
    """OpenCL C reinterprets bits with its as_type functions."""

    def bitcast_expression(self, x: str, source: DType, target: DType) -> str:
        return f"as_{self.type_names[target]}({x})"

    def math_call(self, name: str, dtype: DType, x: str) -> str:
        call = super().math_call(name, dtype, x)
        # PoCL folds these of a NaN known when it compiles to an arbitrary finite number (floor(nan) came back as
        # -2.5e27, sigmoid of an empty mean as 0.9999995): a NaN operand passes through untouched, which every
        # device does for a NaN that arrives at run time
        return f"(({x}!={x})?{x}:{call})" if name in NAN_MISFOLDED and dtypes.is_float(dtype) else call


class OpenCLRenderer(CStyleRenderer):
    device = "CL"
    # the work-group size is part of the kernel's index math, so it is declared: the driver may specialise on it
    kernel_prefix = "__kernel __attribute__((reqd_work_group_size({local_dims}))) void"
    buffer_prefix = "__global "
    thread_index = {"gidx": "get_group_id({})", "lidx": "get_local_id({})"}
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    local_prefix = "__local "
    type_names = {dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short",
                  dtypes.uint16: "ushort", dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long",
                  dtypes.uint64: "ulong", dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double"}
    # the size of bool is the implementation's choice in OpenCL C; buffers hold one byte per bool, as numpy does
    storage_type_names = {dtypes.bool: "uchar"}
    literal_suffix = {dtypes.uint32: "u", dtypes.int64: "L", dtypes.uint64: "UL"}
    has_local = True
    # neighbouring loads and stores become vloadN/vstoreN (they need only the element's alignment) when the device
    # wants explicit vectors: see OpenCLDevice
    vector_load = "vload{n}(0, {buffer}+{index})"
    vector_store = "vstore{n}({value}, 0, {buffer}+{index})"
    default_local_size = 64
    max_upcast = 16                   # a 4 x 4 register tile of outputs per thread (matmul: ~30x fewer loads)
    kernel_writer = OpenCLKernel

    def __init__(self, has_fp16: bool = True, has_fp64: bool = True, max_work_group_size: int = 256,
                 max_work_item_sizes: tuple[int, ...] = (256, 256, 256), vector_loads: bool = True,
                 local_mem_size: int = 32768, local_tiles: bool = True):
        self.has_fp16, self.has_fp64 = has_fp16, has_fp64
        # matmul/conv kernels tiled through __local memory (codegen/local_tiles.py) in groups of 16 x 16 work-items,
        # or 8 x 8 where a group can't be that large
        self.shared_tile = 16 if max_work_group_size >= 256 else 8
        self.has_shared = local_tiles and max_work_group_size >= 64 and local_mem_size > 0
        self.shared_max = local_mem_size
        self.supports_float4 = vector_loads
        # without cl_khr_fp16, half lives in buffers as its 16 bits and is computed on as float, like bfloat16:
        # rounding to half after every op gives exactly what native half arithmetic gives
        self.float_computed = frozenset({dtypes.bfloat16} | (set() if has_fp16 else {dtypes.float16}))
        self.supported_dtypes = frozenset(d for d in ALL if d != dtypes.float64 or has_fp64)
        self.local_max = tuple(max_work_item_sizes)
        self.default_local_size = min(self.default_local_size, max_work_group_size, self.local_max[0])

    def unsupported_reason(self, dtype: DType) -> str:
        if dtype == dtypes.float64:
            return "the OpenCL device lacks the cl_khr_fp64 extension"
        return "not supported by this device"

    def kernel_preamble(self, uops: list[UOp]) -> list[str]:
        # REFERENCE rounds a*b+c twice; an fma would round once
        lines = ["#pragma OPENCL FP_CONTRACT OFF"]
        if self.has_fp16:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
        if self.has_fp64:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        return lines
