"""LLVM IR -> machine code for the host CPU with llvmlite: parse, verify, optimise (O3, new pass manager), emit an
object file. The core caches the result on disk under `cachekey` (CPU, its features, llvmlite and LLVM versions), and
hands over the new kernels of a schedule together: they compile in forked processes, one per CPU.

The binary is a one-line JSON header (what runtime.py needs to call the kernel) followed by the object file."""
from __future__ import annotations
import hashlib
import json
import multiprocessing
import re
import sys
from concurrent.futures import ProcessPoolExecutor
import llvmlite
import llvmlite.binding as llvm
from tinygrad_core.device import Compiler, CompileError

_HEADER = re.compile(r"^; tinygrad_cpu work_per_index=(\d+) buffers=(\d+) vars=(\d+)")


def host_target_machine(opt: int = 3):
    """A TargetMachine for this very CPU (its name and every feature it has, e.g. AVX-512)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    # position independent code: the JIT may place the kernel anywhere relative to libm
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                        opt=opt, reloc="pic", codemodel="default")


def host_simd_width() -> int:
    """Bytes per vector register on this CPU. Kernels ask LLVM for vectors this wide (its default stops at 256 bits
    even where AVX-512 exists)."""
    features = llvm.get_host_cpu_features()
    return 64 if features.get("avx512f") else 32 if features.get("avx") else 16


class LLVMCompiler(Compiler):
    def __init__(self):
        self.target_machine = host_target_machine()
        features = hashlib.sha256(llvm.get_host_cpu_features().flatten().encode()).hexdigest()[:16]
        llvm_version = ".".join(map(str, llvm.llvm_version_info))
        self.cachekey = f"cpu-llvm{llvm_version}-llvmlite{llvmlite.__version__}-{llvm.get_host_cpu_name()}-{features}"

    def compile(self, src: str) -> bytes:
        header = _HEADER.match(src)
        if header is None:
            raise CompileError("not a tinygrad_cpu kernel: the first line must be the '; tinygrad_cpu ...' header "
                               "the CPU renderer writes", src)
        try:
            module = llvm.parse_assembly(src)
            module.verify()
        except RuntimeError as e:
            raise CompileError(f"LLVM rejected the kernel's IR: {str(e).strip()}", src) from e
        self._optimise(module)
        work, buffers, variables = map(int, header.groups())
        name = next(f.name for f in module.functions if not f.is_declaration and f.linkage == llvm.Linkage.external)
        meta = json.dumps({"symbol": name, "work_per_index": work, "buffers": buffers, "vars": variables})
        return meta.encode() + b"\n" + self.target_machine.emit_object(module)

    def compile_many(self, sources: list[str]) -> list[bytes]:
        """Compiles on every core, in forked copies of this process. (llvmlite holds one lock around every call into
        LLVM, so threads would take turns; a fork starts in a millisecond, with LLVM already set up. Only on Linux:
        elsewhere forking a process that has threads is unsafe.)"""
        from tinygrad_cpu.runtime import thread_count      # (runtime.py imports this module)
        workers = min(len(sources), thread_count())
        if workers < 2 or not sys.platform.startswith("linux"):
            return [self.compile(src) for src in sources]
        global _forked_compiler
        _forked_compiler = self      # what the children compile with: they inherit it, nothing is sent
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            results = list(pool.map(_compile_in_child, sources))
        for result in results:
            if isinstance(result, tuple):       # (message, source) of a CompileError, raised here as it was there
                raise CompileError(*result)
        return results

    def _optimise(self, module):
        tuning = llvm.create_pipeline_tuning_options(speed_level=3)
        tuning.loop_vectorization = tuning.slp_vectorization = tuning.loop_unrolling = tuning.loop_interleaving = True
        pass_builder = llvm.create_pass_builder(self.target_machine, tuning)
        pass_builder.getModulePassManager().run(module, pass_builder)

    def disassemble(self, src: str) -> str:
        """The optimised kernel as assembly (for DEBUG output and for reading what LLVM made of it)."""
        module = llvm.parse_assembly(src)
        self._optimise(module)
        return self.target_machine.emit_assembly(module)


_forked_compiler: LLVMCompiler | None = None


def _compile_in_child(src: str) -> bytes | tuple[str, str]:
    try:
        return _forked_compiler.compile(src)
    except CompileError as e:       # the exception's text holds the source twice over: send its parts instead
        return e.message, e.source


def split_binary(lib: bytes) -> tuple[dict, bytes]:
    meta, _, obj = lib.partition(b"\n")
    return json.loads(meta), obj
