"""tinygrad-python: the reference backend. It interprets the core's linear kernel programs with numpy.

It is written only against the public plugin contract, exactly as a third-party backend would be: this file is the
whole registration, backend.py is the whole backend."""
from tinygrad_core.plugins import BackendSpec, hookimpl

__version__ = "0.1.0"


def _load(device: str):
    from tinygrad_python.backend import PythonBackend
    return PythonBackend(device)


@hookimpl
def tinygrad_core_register_backends(register):
    # priority 0: the slowest backend is only the default when nothing else is installed
    register(BackendSpec(name="PYTHON", load=_load, priority=0))
