"""CUDA C -> cubin (or PTX) with nvcc, for an explicit GPU architecture: it needs no GPU, so kernels are checked on
every machine. Binaries are cached on disk by the core (keyed by architecture and nvcc version)."""
from __future__ import annotations
import functools
import os
import pathlib
import shutil
import subprocess
import tempfile
from tinygrad_core.device import Compiler, CompileError

DEFAULT_ARCH = "sm_90"      # H100 / H200: what the compiler targets when no GPU says otherwise


class NvccNotFound(RuntimeError):
    pass


def find_nvcc() -> str:
    """nvcc from $CUDA_HOME (or $CUDA_PATH), else PATH, else the toolkit's usual install location."""
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and (candidate := pathlib.Path(home) / "bin" / "nvcc").exists():
            return str(candidate)
    if found := shutil.which("nvcc"):
        return found
    if pathlib.Path("/usr/local/cuda/bin/nvcc").exists():
        return "/usr/local/cuda/bin/nvcc"
    raise NvccNotFound("nvcc was not found: install the CUDA toolkit and put its bin/ on PATH (or set CUDA_HOME)")


@functools.cache
def nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1].split()[-1] if out.strip() else "unknown"   # e.g. "V13.0.88"


class CUDACompiler(Compiler):
    """`output` is "cubin" (machine code for exactly `arch`) or "ptx" (the driver compiles it for its GPU)."""

    # REFERENCE rounds a*b+c twice: nvcc must not fuse a multiply and an add into one fma
    options = ("-fmad=false", "-O3")

    def __init__(self, arch: str = DEFAULT_ARCH, output: str = "cubin"):
        if output not in ("cubin", "ptx"):
            raise ValueError(f"output must be 'cubin' or 'ptx', not {output!r}")
        self.arch, self.output = arch, output
        self.nvcc = find_nvcc()
        self.cachekey = f"CUDA-{arch}-{output}-nvcc{nvcc_version(self.nvcc)}"

    def command(self, source_path: str, output_path: str) -> list[str]:
        arch_flag = f"-arch={self.arch}" if self.output == "cubin" else f"-arch=compute_{self.arch.removeprefix('sm_')}"
        return [self.nvcc, f"-{self.output}", arch_flag, *self.options, "-o", output_path, source_path]

    def compile(self, src: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="tinygrad_cuda_") as folder:
            source_path, output_path = os.path.join(folder, "kernel.cu"), os.path.join(folder, f"kernel.{self.output}")
            pathlib.Path(source_path).write_text(src)
            result = subprocess.run(self.command(source_path, output_path), capture_output=True, text=True, check=False)
            if result.returncode != 0:
                log = (result.stderr + result.stdout).replace(source_path, "kernel.cu").strip()
                raise CompileError(f"nvcc failed for {self.arch} (exit {result.returncode}):\n{log}", src)
            return pathlib.Path(output_path).read_bytes()


def compile_many(compiler: CUDACompiler, sources: list[str], batch: int = 40) -> list[CompileError | None]:
    """Compile many kernels (each a whole source with a unique kernel name), returning each one's error or None.

    nvcc's start-up dominates a small kernel's compile time, so kernels are compiled `batch` at a time as one
    file, each in a namespace of its own (so their helper functions don't clash); a batch that fails is retried
    kernel by kernel to say exactly which failed and why. Batches run in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    def one_batch(chunk: list[str]) -> list[CompileError | None]:
        includes = sorted({line for src in chunk for line in src.splitlines() if line.startswith("#include")})
        bodies = ["\n".join(line for line in src.splitlines() if not line.startswith("#include")) for src in chunk]
        joined = "\n".join(includes + [f"namespace kernel{i} {{\n{body}\n}}" for i, body in enumerate(bodies)])
        try:
            compiler.compile(joined)
            return [None] * len(chunk)
        except CompileError:
            if len(chunk) == 1:
                return [_error_of(compiler, chunk[0])]
            return [_error_of(compiler, src) for src in chunk]

    chunks = [sources[i:i + batch] for i in range(0, len(sources), batch)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return [error for chunk_errors in pool.map(one_batch, chunks) for error in chunk_errors]


def _error_of(compiler: CUDACompiler, src: str) -> CompileError | None:
    try:
        compiler.compile(src)
        return None
    except CompileError as e:
        return e
