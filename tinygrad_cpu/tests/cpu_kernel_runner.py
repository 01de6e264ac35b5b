"""Helpers for the CPU backend's tests: build a one-op kernel by hand and run it through the core's pipeline
(codegen, this backend's renderer, compiler and launcher), so every op can be checked against the reference."""
import numpy as np
from tinygrad_core.device import Buffer
from tinygrad_core.dtype import DType, dtypes
from tinygrad_core.engine.realize import CompiledRunner
from tinygrad_core.ops import Ops, UOp


def elementwise_ast(op: Ops, out_dtype: DType, in_dtypes: list[DType], size: int) -> UOp:
    """SINK(STORE(out, op(INPUT(in1), INPUT(in2), ...))): the AST the scheduler makes for one elementwise op."""
    loads = tuple(UOp(Ops.INPUT, dt, (UOp(Ops.DEFINE_GLOBAL, dt, (), i + 1),), size) for i, dt in enumerate(in_dtypes))
    value = UOp(op, out_dtype, loads)
    return UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (UOp(Ops.DEFINE_GLOBAL, out_dtype, (), 0), value)),))


def run_ast(ast: UOp, out: Buffer, inputs: list[Buffer], device: str = "CPU") -> np.ndarray:
    CompiledRunner(device, ast)([out] + inputs)
    return out.numpy()


def run_elementwise(op: Ops, out_dtype: DType, inputs: list[tuple[np.ndarray, DType]], device: str = "CPU"):
    """Run op over host arrays (bfloat16 given as its uint16 bits) on device; returns the output's host array."""
    size = len(inputs[0][0])
    ast = elementwise_ast(op, out_dtype, [dt for _, dt in inputs], size)
    buffers = [Buffer(device, size, dt, initial=np.ascontiguousarray(x, dtype=dt.np)) for x, dt in inputs]
    return run_ast(ast, Buffer(device, size, out_dtype), buffers, device)

