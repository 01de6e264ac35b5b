"""A pytest plugin that renders every kernel a test session builds for CUDA too, and compiles them all with nvcc.

`pytest tests -p tinygrad_cuda.compile_check` runs the tests on their usual backend; each kernel they generate is
also lowered with the CUDA renderer, and at the end of the session all of them are compiled for $CUDA_ARCH
(default sm_90). Any that fails to render or compile fails the session, with the source and nvcc's log.
Run it without pytest-xdist's -n: the kernels are collected in one process."""
from __future__ import annotations
import os
import pytest
from tinygrad_core.engine import realize
from tinygrad_cuda.compiler import CUDACompiler, DEFAULT_ARCH, compile_many
from tinygrad_cuda.renderer import CUDARenderer


def render_for_cuda(ast, renderer: CUDARenderer, name: str) -> str:
    """The CUDA source of a kernel AST, through the same codegen steps the core's CompiledRunner takes."""
    return renderer.render(name, realize.program_for(ast, renderer)[0])


class CudaCompileCheck:
    def __init__(self, arch: str):
        self.renderer, self.compiler = CUDARenderer(arch), CUDACompiler(arch)
        self.sources: dict[str, str] = {}          # source -> the kernel's label
        self.render_failures: list[str] = []
        self.compile_failures: list[str] = []

    def record(self, ast, label: str):
        try:
            src = render_for_cuda(ast, self.renderer, "kernel")
        except Exception as e:      # noqa: BLE001 - any failure to render is what this check reports
            self.render_failures.append(f"{label}: {type(e).__name__}: {e}")
            return
        self.sources.setdefault(src, label)

    def compile_all(self):
        # one nvcc run compiles many kernels as one file, where each needs a name of its own
        sources = list(self.sources)
        renamed = [src.replace(" kernel(", f" kernel_{i}(", 1) for i, src in enumerate(sources)]
        for src, error in zip(sources, compile_many(self.compiler, renamed)):
            if error is not None:
                self.compile_failures.append(f"{self.sources[src]}: {error}")


def pytest_configure(config):
    check = CudaCompileCheck(os.environ.get("CUDA_ARCH", DEFAULT_ARCH))
    config.stash[KEY] = check
    original_init = realize.CompiledRunner.__init__

    def init_and_record(self, device, ast, *args, **kwargs):
        original_init(self, device, ast, *args, **kwargs)
        check.record(ast, self.name)

    realize.CompiledRunner.__init__ = init_and_record


KEY = pytest.StashKey[CudaCompileCheck]()


def pytest_sessionfinish(session, exitstatus):
    check = session.config.stash[KEY]
    check.compile_all()
    if check.render_failures or check.compile_failures:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    check = config.stash[KEY]
    reporter = terminalreporter
    reporter.section(f"CUDA compile check ({check.compiler.arch})")
    reporter.write_line(f"{len(check.sources)} distinct kernels rendered for CUDA; "
                        f"{len(check.render_failures)} failed to render, "
                        f"{len(check.compile_failures)} failed to compile")
    for failure in check.render_failures + check.compile_failures:
        reporter.write_line(failure)
