"""tinygrad-cpu: the CPU backend. Kernels are rendered to LLVM IR, compiled for the host CPU with llvmlite and run
on a pool of threads.

This file is the whole registration (cheap: llvmlite is imported only when the backend is loaded); backend.py
bundles the parts."""
import importlib.util
from tinygrad_core.plugins import BackendSpec, hookimpl

__version__ = "0.1.0"


def _probe() -> str | None:
    if importlib.util.find_spec("llvmlite") is None:
        return "llvmlite is not installed"
    return None


def _load(device: str):
    from tinygrad_cpu.backend import CPUBackend
    return CPUBackend(device)


@hookimpl
def tinygrad_core_register_backends(register):
    # priority 10: compiled native code beats the reference interpreter (PYTHON, 0) as the default
    register(BackendSpec(name="CPU", load=_load, probe=_probe, priority=10, install_hint="pip install llvmlite"))
