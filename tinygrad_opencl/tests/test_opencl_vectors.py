"""vloadN/vstoreN: neighbouring loads and stores of a thread become one vector access, and results don't change.

On a CPU OpenCL device vectors are off by default (TINYGRAD_CL_VECTORIZE); the `vectors_on` fixture turns them on for
the open device, with an empty kernel cache, so the vector path runs for real here."""
import numpy as np
import pytest

from tinygrad_core import Device, Tensor
from tinygrad_core.dtype import dtypes
from tinygrad_core.engine.realize import CompiledRunner


@pytest.fixture
def vectors_on(monkeypatch):
    compiled = Device["CL"]
    monkeypatch.setattr(compiled.renderer, "supports_float4", True)
    monkeypatch.setattr(compiled.renderer, "has_shared", False)     # (a GPU would tile the matmuls in local memory)
    monkeypatch.setattr(compiled, "kernel_cache", {})
    yield


def source_of(t: Tensor) -> str:
    return CompiledRunner("CL", t.schedule()[-1].ast).src


def both(build, *arrays, dtype=None):
    """build(*tensors) on CL (vectors on) and on the reference backend."""
    return [build(*[Tensor(a, device=dev, dtype=dtype) for a in arrays]).numpy() for dev in ("CL", "PYTHON")]


def test_elementwise_kernel_loads_and_stores_four_at_a_time(vectors_on):
    x, y, z = (Tensor(np.ones(1024, np.float32), device="CL") for _ in range(3))
    src = source_of(((x * y + z).relu() * 0.5).exp())
    assert src.count("vload4(") == 3 and src.count("vstore4(") == 1, src
    assert "data1[" not in src, src                  # no scalar load is left


def test_matmul_loads_rows_of_b_and_stores_rows_of_the_tile_as_vectors(vectors_on):
    a, b = (Tensor(np.ones((64, 64), np.float32), device="CL") for _ in range(2))
    src = source_of(a @ b)
    assert "vload4(0, data2+" in src and "vstore4(" in src, src
    assert "vload4(0, data1+" not in src, src        # a's column of the tile is strided: scalar loads


def test_vectors_are_off_when_the_renderer_says_so(monkeypatch):
    monkeypatch.setattr(Device["CL"].renderer, "supports_float4", False)
    x = Tensor(np.ones(1024, np.float32), device="CL")
    assert "vload" not in source_of(x * 2 + 1)


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32, dtypes.uint8, dtypes.half])
def test_elementwise_matches_reference(vectors_on, dtype):
    rng = np.random.default_rng(0)
    # 4 * 67 elements: the last work-group is partly idle, so the vector accesses are gated
    a, b = (rng.integers(-50, 50, 4 * 67) for _ in range(2))
    got, want = both(lambda x, y: x * y + x, a, b, dtype=dtype)
    np.testing.assert_array_equal(got, want)


def test_matmul_and_conv_match_reference(vectors_on):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(36, 28)).astype(np.float32), rng.normal(size=(28, 40)).astype(np.float32)
    got, want = both(lambda x, y: x @ y, a, b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    x, w = rng.normal(size=(2, 3, 8, 8)).astype(np.float32), rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    got, want = both(lambda x, w: x.conv2d(w, padding=1), x, w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_update_in_place_reads_each_element_before_writing_it(vectors_on):
    x = Tensor(np.arange(64, dtype=np.float32), device="CL").realize()
    x.assign(x * 2 + x[::-1]).realize()
    values = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(x.numpy(), values * 2 + values[::-1])
