"""How the CPU backend rounds a*b + c: an elementwise multiply-add rounds twice, as PyTorch and numpy compute it (one
FMA would give x*y - x*y the rounding error of x*y instead of 0), while the inner loops of a matmul and a convolution,
a reduce's multiply-accumulate, keep their FMAs (renderer.py, the fast-math flags)."""
import llvmlite.binding as llvm
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from tinygrad_core import Device, Tensor
from tinygrad_core.engine.realize import CompiledRunner

rng = np.random.default_rng(11)


def kernels(out: Tensor) -> dict[str, str]:
    """Each kernel computing out: its name -> its machine code."""
    runners = [CompiledRunner("CPU", item.ast) for item in out.schedule() if item.ast.op.name == "SINK"]
    return {r.name: Device["CPU"].compiler.disassemble(r.src) for r in runners}


def host_has_fma() -> bool:
    return bool(llvm.get_host_cpu_features().get("fma"))


def cancelling_operands(n: int, dtype) -> tuple[np.ndarray, ...]:
    """a, b, c with c = -(a*b) rounded in every other element (a*b + c is then 0, an FMA's is a*b's rounding error)."""
    a, b, c = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    c[::2] = -(a * b)[::2]
    return a, b, c


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1000, 40000])         # a small kernel (loops left scalar) and a vectorised one
def test_an_elementwise_multiply_add_rounds_twice_as_numpy(dtype, n):
    a, b, c = cancelling_operands(n, dtype)
    out = Tensor(a, device="CPU") * Tensor(b, device="CPU") + Tensor(c, device="CPU")
    if host_has_fma():
        assert not any("vfmadd" in asm for asm in kernels(out).values())
    np.testing.assert_array_equal(out.numpy(), a * b + c)       # bit for bit (-0.0 == 0.0 aside)


def test_a_multiply_add_summed_in_a_reduce_rounds_twice():
    # only the accumulator's own update acc + p may fuse: p = a*b + c, an elementwise part of the sum, rounds twice
    a, b = (rng.standard_normal((50, 20), dtype=np.float32) for _ in range(2))
    c = -(a * b)
    out = (Tensor(a, device="CPU") * Tensor(b, device="CPU") + Tensor(c, device="CPU")).sum(axis=1)
    np.testing.assert_array_equal(out.numpy(), np.zeros(50, np.float32))


def test_the_gradient_of_x_over_x_rounds_as_pytorch():
    # w/x - (w*x)/(x*x), each product rounded before it is added: bit for bit PyTorch's and the reference's (an FMA
    # made it a rounding error where theirs cancel to 0)
    torch = pytest.importorskip("torch")
    xs, ws = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    x = torch.tensor(xs, requires_grad=True)
    ((x / x) * torch.tensor(ws)).sum().backward()
    for device in ("CPU", "PYTHON"):
        mine = Tensor(xs, device=device, requires_grad=True)
        ((mine / mine) * Tensor(ws, device=device)).sum().backward()
        np.testing.assert_array_equal(mine.grad.numpy(), x.grad.numpy())


def test_matmul_and_convolution_inner_loops_keep_their_fmas():
    a, b = (rng.standard_normal((128, 128), dtype=np.float32) for _ in range(2))
    x, w = rng.standard_normal((4, 8, 12, 12), dtype=np.float32), rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    matmul = Tensor(a, device="CPU") @ Tensor(b, device="CPU")
    conv = Tensor(x, device="CPU").conv2d(Tensor(w, device="CPU"), padding=1)
    if host_has_fma():
        for out in (matmul, conv):
            reduces = [asm for name, asm in kernels(out).items() if name.startswith("r_")]
            assert reduces and all("vfmadd" in asm for asm in reduces)
    np.testing.assert_allclose(matmul.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.einsum("nchwij,ocij->nohw", sliding_window_view(padded, (3, 3), axis=(2, 3)), w)
    np.testing.assert_allclose(conv.numpy(), want, rtol=1e-4, atol=1e-4)
