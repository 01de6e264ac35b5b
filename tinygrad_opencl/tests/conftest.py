"""Every test here needs an OpenCL device; without one they are skipped, with probe()'s reason."""
import sys
import pathlib
import pytest
import tinygrad_opencl

sys.path.insert(0, str(pathlib.Path(__file__).parent))     # op_check.py, shared by the test modules


def pytest_collection_modifyitems(config, items):
    reason = tinygrad_opencl.probe()
    if reason is not None:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=f"no usable OpenCL device: {reason}"))
