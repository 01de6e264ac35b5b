"""The CPU backend bundle: LLVM IR renderer, llvmlite compiler, host allocator and threaded program launcher.

This is what `Device["CPU"]` is; tinygrad_cpu/__init__.py registers it with the core."""
from tinygrad_core.device import Compiled
from tinygrad_cpu.compiler import LLVMCompiler, host_simd_width
from tinygrad_cpu.renderer import LLVMRenderer
from tinygrad_cpu.runtime import CPUAllocator, CPUProgram


class CPUBackend(Compiled):
    def __init__(self, device: str):
        compiler = LLVMCompiler()      # first: it sets LLVM up for the host
        super().__init__(device, CPUAllocator(), LLVMRenderer(host_simd_width()), compiler, CPUProgram)
