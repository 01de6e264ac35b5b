"""Section 9, determinism and copies: the same kernel renders to the same source and gives the same bits every
run, and every declared dtype crosses between this device and another one bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad_core.conformance.harness import REFERENCE_BACKEND, REFERENCE_INSTALL, host_dtype, kernel_ast, not_covered
from tinygrad_core.conformance.test_4_ops import random_values
from tinygrad_core.device import BackendUnavailable, Device
from tinygrad_core.dtype import ALL, dtypes
from tinygrad_core.ops import Ops
from tinygrad_core.tensor import Tensor


def test_same_kernel_same_source(dut):
    ast = kernel_ast(Ops.MULACC, dtypes.float32, [dtypes.float32] * 3, 1000)
    first, second = dut.kernel(ast), dut.kernel(ast)
    assert first.src == second.src, "rendering the same kernel twice gave different source"
    assert first.lib == second.lib, "compiling the same source twice gave different binaries"


def test_same_program_same_bits(dut):
    if dut.compile_only:
        pytest.skip("compile-only: this compares the results of launches")
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((33, 65)).astype(np.float32), rng.standard_normal((65, 17)).astype(np.float32)
    runs = []
    for _ in range(3):
        x, y = dut.tensor(a), dut.tensor(b)
        out = ((x @ y).relu().sum(0) + x.sum() * 1e-3).exp()
        runs.append(out.numpy().view(np.uint32))
    for other in runs[1:]:
        assert (other == runs[0]).all(), "the same program on the same inputs gave different bits"


def other_device(dut) -> str:
    return f"{REFERENCE_BACKEND}:1" if dut.name == REFERENCE_BACKEND else REFERENCE_BACKEND


@pytest.mark.parametrize("dt", [pytest.param(dt, id=dt.name) for dt in ALL])
def test_copies_between_devices(dut, dt):
    if dut.compile_only:
        pytest.skip("compile-only: copies move device memory")
    if not dut.supports(dt):
        pytest.skip(f"{dut.name} declares no support for dtypes.{dt.name} (Renderer.supported_dtypes)")
    other = other_device(dut)
    try:
        Device[other]
    except BackendUnavailable as e:
        not_covered(f"copies are checked with the reference backend {REFERENCE_BACKEND} as the other device, which "
                    f"can't be used here ({e}); to install it, {REFERENCE_INSTALL}")
    values = random_values(np.random.default_rng(dt.itemsize), dt, 257).astype(host_dtype(dt))
    if dt in (dtypes.float16, dtypes.float32, dtypes.float64, dtypes.bfloat16):   # one NaN pattern (see section 4)
        values = np.where(np.isnan(values), np.array(np.nan, values.dtype), values)
    there = Tensor(values, device=dut.name, dtype=dt).to(other)
    back = there.to(dut.name)
    for name, tensor in (("to " + other, there), ("back to " + dut.name, back)):
        got = tensor.numpy()
        assert got.tobytes() == values.tobytes(), f"{dt.name} values changed on the copy {name}"
