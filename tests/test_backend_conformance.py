"""The first-party backends pass the conformance suite: CPU in full; CL (on PoCL here) in the sections that don't
compile a kernel per op and dtype (the full CL run takes ~10 minutes of PoCL compiling: `tinygrad-core conformance
CL`); CUDA in compile-only mode where there is nvcc but no GPU."""
from __future__ import annotations
import shutil
import pytest
from plugin_dists import conformance
from tinygrad_core.plugins import registry

pytestmark = pytest.mark.slow      # (a quick run deselects it: -m 'not slow')


def usable(name: str) -> bool:
    backend = registry.backends.get(name)
    return backend is not None and backend.reason is None


def check(backend: str, tmp_path, *options):
    done, report = conformance(backend, tmp_path, *options)
    failed = [t for t in report["tests"] if t["outcome"] == "failed"] if "tests" in report else []
    assert done.returncode == 0, f"{backend} doesn't conform:\n{done.stdout[-4000:]}\n{failed[:5]}"
    assert "CONFORMS" in done.stdout


def test_cpu_conforms(tmp_path):
    registry.discover()
    if not usable("CPU"):
        pytest.skip(f"CPU backend unusable: {registry.backends.get('CPU')}")
    check("CPU", tmp_path)


def test_opencl_conforms(tmp_path):
    registry.discover()
    if not usable("CL"):
        reason = registry.backends["CL"].reason if "CL" in registry.backends else "not installed"
        pytest.skip(f"no OpenCL device: {reason}")
    check("CL", tmp_path, "--sections", "1,2,3,5,7,9")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (the CUDA toolkit) is not installed")
def test_cuda_compiles_everything_it_is_given(tmp_path):
    registry.discover()
    if "CUDA" not in registry.backends:
        pytest.skip("tinygrad-cuda is not installed")
    check("CUDA", tmp_path, "--compile-only", "--sections", "1,3,5")
