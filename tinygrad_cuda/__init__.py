"""tinygrad-cuda: the CUDA backend. Kernels are rendered to CUDA C, compiled by nvcc and launched with pycuda.

This file is the whole registration (cheap: pycuda is imported only when the backend is used); renderer.py holds
the CUDA C dialect, compiler.py the nvcc driver, runtime.py the device, allocator and program."""
from tinygrad_core.plugins import BackendSpec, hookimpl

__version__ = "0.1.0"
INSTALL_HINT = ("CUDA needs an NVIDIA GPU with its driver, the CUDA toolkit (nvcc) and pycuda: "
                "pip install 'tinygrad-cuda[runtime]' on such a machine")


def probe() -> str | None:
    """None when a CUDA device can be opened, else exactly why not."""
    import ctypes.util
    has_driver = ctypes.util.find_library("cuda") is not None
    try:
        import pycuda.driver as cuda
    except ImportError as e:
        if "libcuda" in str(e):
            return f"pycuda is installed but the NVIDIA driver library libcuda can't be loaded ({e})"
        return "pycuda is not installed" + ("" if has_driver else ", and there is no NVIDIA driver (libcuda)")
    try:
        cuda.init()
        count = cuda.Device.count()
    except cuda.Error as e:
        return f"the CUDA driver failed to initialise ({e}): is there an NVIDIA GPU, and is its driver loaded?"
    if count == 0:
        return "the CUDA driver found no GPU"
    from tinygrad_cuda.compiler import find_nvcc, NvccNotFound
    try:
        find_nvcc()
    except NvccNotFound as e:
        return str(e)
    return None


def _load(device: str):
    from tinygrad_cuda.runtime import CUDADevice
    return CUDADevice(device)


@hookimpl
def tinygrad_core_register_backends(register):
    register(BackendSpec(name="CUDA", load=_load, probe=probe, priority=20, is_gpu=True, install_hint=INSTALL_HINT))
