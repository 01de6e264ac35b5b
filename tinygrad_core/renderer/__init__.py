"""Renderer: turns a linear kernel program (a list of UOps) into source for one backend.

A renderer is mostly a declaration of what its hardware has (capability fields) plus `render`. Ops missing from
`code_for_op` are rewritten by the core (codegen/decompose.py); dtypes missing from `supported_dtypes` are refused
before any kernel is built. With ops.py and dtype.py, this module is all a backend's renderer needs from the core:
`program_signature` lists a kernel's arguments, `affine` splits an index into {term: coefficient} + constant (how
far an access moves per loop trip, whether it is aligned). A renderer that plans its kernels itself overrides
`kernel_opts`, with what renderer/kernel_opts.py provides. These and `TensorCore` are the codegen's, re-exported: the
renderer reads what the codegen makes, and the codegen imports nothing of the renderer."""
from tinygrad_core.dtype import ALL, DType, dtypes
from tinygrad_core.ops import UOp
# the codegen's, re-exported: part of the backend API
from tinygrad_core.codegen.lower import program_signature as program_signature
from tinygrad_core.codegen.opts import KernelOpts
from tinygrad_core.codegen.symbolic import affine as affine
from tinygrad_core.codegen.tensor_cores import TensorCore as TensorCore


class Renderer:
    device: str = ""
    has_local: bool = False            # thread groups (SPECIAL lidx*) exist
    has_shared: bool = False           # group-shared memory exists
    global_max: tuple[int, ...] | None = None
    local_max: tuple[int, ...] | None = None
    shared_max: int = 0                # bytes of group-shared memory a kernel may use
    shared_tile: int = 16              # local-memory tiling (codegen/local_tiles.py): work-groups of this squared
    supports_float4: bool = False
    supported_dtypes: frozenset[DType] = frozenset(ALL)
    code_for_op: dict = {}             # op -> how to render it (its keys are what the renderer supports)
    max_upcast: int = 1                # how many outputs one thread may compute (register tile size)
    max_unroll: int = 1                # how far reduce loops may be unrolled
    default_local_size: int = 1        # threads per group (has_local renderers)
    simd_width: int = 0                # bytes per SIMD register (CPUs): matmul and conv layouts, schedule.py
    tensor_cores: tuple[TensorCore, ...] = ()   # matmul-shaped kernels become WMMA ops (codegen/tensor_cores.py)
    # layout thresholds, for schedule.py's LAYOUTS and codegen/lower.py's rows; the defaults suit any hardware
    panel_columns: int = 0             # a matmul operand read down its columns is packed into panels this wide (0: no)
    far_rows_bytes: int = 4096         #   when its rows are this far apart or further (they compete for cache sets)
    split_sum_elements: int = 1 << 17  # a sum to a few outputs over this many elements is summed in parts first
    split_sum_parts: int = 16
    im2col_bytes: int = 1 << 28        # a conv copies its windows out as rows (im2col) up to this size, else reads them
    row_elements: int = 64             # without thread groups, each parallel index loops over a row this long
    # True when what render() makes depends only on the kernel, the core's code, this renderer's module and its
    # attributes: the core may then remember rendered programs on disk (a fresh process skips lowering them)
    cache_programs: bool = False

    def render(self, name: str, uops: list[UOp]) -> str:
        raise NotImplementedError

    def kernel_opts(self, value: UOp) -> KernelOpts | None:
        """How to map a kernel onto this hardware, given its stored value (the AST below its STORE, in the output's
        shape with reduced axes kept as 1), or None to take the core's neutral heuristic (codegen/opts.py). Asked once
        tensor cores and local tiles are ruled out, never with NOOPT=1 or symbolic sizes; BEAM=1 searches around the
        answer."""
        return None

    def check_dtypes(self, uops: list[UOp]):
        """Refuses a kernel (its AST, before it is lowered or read from the disk; or its linear program) that uses a
        dtype outside supported_dtypes."""
        if bad := next((u.dtype for u in uops if u.dtype not in (*self.supported_dtypes, dtypes.void)), None):
            raise NotImplementedError(f"{self.device or type(self).__name__} can't run a kernel using {bad}: "
                                      f"{self.unsupported_reason(bad)}. Cast to a supported type first (supported: "
                                      f"{', '.join(sorted(d.name for d in self.supported_dtypes))})")

    def unsupported_reason(self, dtype: DType) -> str:
        return "this device doesn't support it"
