"""tinygrad-opencl: the CL backend. Kernels are rendered to OpenCL C, built and launched with pyopencl.

This file is the whole registration (cheap: nothing is imported until the backend is used); renderer.py holds the
OpenCL C dialect and runtime.py the device, compiler, allocator and program."""
from tinygrad_core.plugins import BackendSpec, hookimpl

__version__ = "0.1.0"
INSTALL_HINT = ("pip install 'tinygrad-opencl[pocl]' for an OpenCL device that runs on the CPU, or install your GPU "
                "vendor's OpenCL driver")


def probe() -> str | None:
    """None when an OpenCL device can be opened, else why not."""
    try:
        import pyopencl  # noqa: F401
    except ImportError as e:
        return f"pyopencl can't be imported ({e})"
    from tinygrad_opencl.runtime import list_devices, NoDevice
    try:
        list_devices()
    except NoDevice as e:
        return str(e)
    return None


def describe() -> str:
    """The OpenCL devices this machine has, in `CL:N` order (for `tinygrad-core backends`)."""
    from tinygrad_opencl.runtime import list_devices
    return "; ".join(f"CL:{i} = {platform.name.strip()} / {device.name.strip()}"
                     for i, (platform, device) in enumerate(list_devices()))


def _load(device: str):
    from tinygrad_opencl.runtime import OpenCLDevice
    return OpenCLDevice(device)


@hookimpl
def tinygrad_core_register_backends(register):
    # below CPU (10): PoCL runs on the same cores as the CPU backend but through a longer path
    register(BackendSpec(name="CL", load=_load, probe=probe, priority=5, is_gpu=True, install_hint=INSTALL_HINT,
                         describe=describe))
