"""Compile-only checks that run on any machine with nvcc (no GPU): every primitive op, cast and bitcast in every
dtype, and the kernels of representative programs (forward and backward), rendered for CUDA and compiled for
$CUDA_ARCH (default sm_90). Kernels are built on the reference backend's graph and never launched."""
import os
import numpy as np
import pytest
from tinygrad_core import Tensor
from tinygrad_core.conformance.harness import product_kernel
from tinygrad_core.device import CompileError
from tinygrad_core.dtype import ALL, dtypes, INTS
from tinygrad_core.ops import Ops, UOp
from tinygrad_cuda.compile_check import render_for_cuda
from tinygrad_cuda.compiler import CUDACompiler, DEFAULT_ARCH, NvccNotFound, compile_many, find_nvcc
from tinygrad_cuda.renderer import CUDARenderer

pytestmark = pytest.mark.slow      # (a quick run deselects it: -m 'not slow')

try:
    find_nvcc()
except NvccNotFound as e:
    pytest.skip(f"compile-only tests need nvcc: {e}", allow_module_level=True)

ARCH = os.environ.get("CUDA_ARCH", DEFAULT_ARCH)
UNARY = [Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.NEG, Ops.TRUNC]
BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.AND, Ops.OR,
          Ops.XOR, Ops.SHL, Ops.SHR]


@pytest.fixture(scope="module")
def renderer():
    return CUDARenderer(ARCH)


@pytest.fixture(scope="module")
def compiler():
    return CUDACompiler(ARCH)


def one_op_ast(op: Ops, out_dtype, in_dtypes, size: int = 37) -> UOp:
    """SINK(STORE(out, op(INPUT(in1), ...))): the AST the scheduler makes for one elementwise op."""
    loads = tuple(UOp(Ops.INPUT, dt, (UOp(Ops.DEFINE_GLOBAL, dt, (), i + 1),), size) for i, dt in enumerate(in_dtypes))
    value = UOp(op, out_dtype, loads)
    return UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (UOp(Ops.DEFINE_GLOBAL, out_dtype, (), 0), value)),))


def compile_all(renderer, compiler, asts: dict[str, UOp]):
    labels = list(asts)
    sources = [render_for_cuda(asts[label], renderer, f"kernel_{i}") for i, label in enumerate(labels)]
    failures = [f"{label}: {error}" for label, error in zip(labels, compile_many(compiler, sources)) if error]
    assert not failures, "\n\n".join(failures)
    return sources


def test_every_op_in_every_dtype_compiles(renderer, compiler):
    asts = {}
    for dtype in ALL:
        for op in UNARY + BINARY + [Ops.WHERE, Ops.MULACC]:
            bitwise = op in (Ops.AND, Ops.OR, Ops.XOR)
            if (bitwise or op in (Ops.SHL, Ops.SHR, Ops.IDIV, Ops.MOD)) and dtype not in INTS and \
                    not (bitwise and dtype == dtypes.bool):
                continue
            if op is Ops.FDIV and not dtypes.is_float(dtype):     # (Tensor.div casts ints to float)
                continue
            out = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dtype
            ins = [dtype] if op in UNARY else [dtypes.bool, dtype, dtype] if op is Ops.WHERE else \
                [dtype] * (3 if op is Ops.MULACC else 2)
            asts[f"{op.name}({dtype.name})"] = one_op_ast(op, out, ins)
    compile_all(renderer, compiler, asts)


def test_every_cast_and_bitcast_compiles(renderer, compiler):
    asts = {}
    for source in ALL:
        for target in ALL:
            if source != target:
                asts[f"CAST {source.name}->{target.name}"] = one_op_ast(Ops.CAST, target, [source])
            if source != target and source.itemsize == target.itemsize:     # (bool <-> 8-bit ints: a cast)
                asts[f"BITCAST {source.name}->{target.name}"] = one_op_ast(Ops.BITCAST, target, [source])
    compile_all(renderer, compiler, asts)


def _programs() -> dict[str, list[Tensor]]:
    """Representative programs, built lazily on the reference backend (nothing runs)."""
    rng = np.random.default_rng(0)

    def t(*shape, dtype=dtypes.float32, grad=False):
        return Tensor(rng.normal(size=shape).astype(np.float32), device="PYTHON", dtype=dtype, requires_grad=grad)

    x, w1, w2 = t(16, 20), t(20, 32, grad=True), t(32, 10, grad=True)
    labels = Tensor(rng.integers(0, 10, 16).astype(np.int32), device="PYTHON")
    loss = (x @ w1).relu().matmul(w2).sparse_categorical_crossentropy(labels)
    loss.backward()
    image, kernel = t(2, 3, 12, 12, grad=True), t(8, 3, 3, 3, grad=True)
    conv_loss = image.conv2d(kernel, padding=1).relu().max_pool2d().sum()
    conv_loss.backward()
    a = t(7, 9, 11)
    return {
        "mlp training step": [loss, w1.grad, w2.grad],
        "conv + pool backward": [conv_loss, image.grad, kernel.grad],
        "matmul half": [t(33, 17, dtype=dtypes.half) @ t(17, 29, dtype=dtypes.half)],
        "matmul bfloat16": [t(16, 16, dtype=dtypes.bfloat16) @ t(16, 16, dtype=dtypes.bfloat16)],
        "reductions": [a.sum(axis=1), a.max(axis=(0, 2)), a.mean(), a.softmax(axis=-1), a.argmax(axis=1)],
        "movement": [a.permute(2, 0, 1).flip(0).pad(((1, 2), (0, 0), (3, 0))).shrink(((0, 5), (1, 6), (0, 4))) + 1,
                     a.reshape(9, 77)[::2].contiguous()],
        "elementwise zoo": [a.sigmoid() * a.tanh() + a.gelu() - a.abs().sqrt() / (a.exp() + 1), (a > 0).where(a, -a),
                            a.cast(dtypes.int32) // 3 % 5, a.cast(dtypes.int64) << 2],
    }


def test_representative_programs_compile(renderer, compiler):
    asts = {}
    for name, tensors in _programs().items():
        for i, item in enumerate(_schedule(tensors)):
            asts[f"{name} kernel {i}"] = item.ast
    assert len(asts) > 20
    sources = compile_all(renderer, compiler, asts)
    assert any("__launch_bounds__" in s and "blockIdx.x" in s and "threadIdx.x" in s for s in sources)


def _schedule(tensors):
    from tinygrad_core.schedule import create_schedule
    return [item for item in create_schedule([t.uop for t in tensors]) if item.ast.op is Ops.SINK]


def test_half_and_bfloat16_spellings(renderer):
    half_src = render_for_cuda(one_op_ast(Ops.ADD, dtypes.half, [dtypes.half] * 2), renderer, "k")
    assert "#include <cuda_fp16.h>" in half_src and "half* data0" in half_src
    bf16_src = render_for_cuda(one_op_ast(Ops.MUL, dtypes.bfloat16, [dtypes.bfloat16] * 2), renderer, "k")
    assert "unsigned short* data0" in bf16_src and "tg_float_to_bfloat16" in bf16_src


@pytest.mark.parametrize("arch, tiled", [("sm_75", {dtypes.half}), ("sm_80", {dtypes.half, dtypes.bfloat16}),
                                         ("sm_90", {dtypes.half, dtypes.bfloat16})])
def test_tensor_core_matmuls_compile_for_each_architecture(arch, tiled):
    """half (sm_70+; sm_75 here, nvcc 13 dropped Volta) and bfloat16 (sm_80+) matmuls of whole tiles become wmma
    calls, with A or B transposed too."""
    renderer, compiler = CUDARenderer(arch), CUDACompiler(arch)
    asts, rng = {}, np.random.default_rng(1)
    for dtype in (dtypes.half, dtypes.bfloat16):
        a, b = (Tensor(rng.normal(size=s).astype(np.float32), device="PYTHON", dtype=dtype)
                for s in ((32, 48), (48, 64)))
        for name, out in (("a@b", a @ b), ("a.T@b", a.T.contiguous().T @ b), ("a@b.T", a @ b.T.contiguous().T),
                          ("widened to float", a.float() @ b.float())):
            asts[f"{arch} {dtype.name} {name}"] = _schedule([out])[-1].ast
    sources = compile_all(renderer, compiler, asts)
    for label, src in zip(asts, sources):
        assert ("mma_sync" in src) == any(dt.name in label for dt in tiled), label


def test_local_memory_tiled_kernels_compile(renderer, compiler):
    """Matmul- and conv-shaped kernels that no tensor core takes are tiled through __shared__ memory: 16 x 16 thread
    blocks, __syncthreads between the tile stores and their use, in each dtype the tiles may hold."""
    asts, rng = {}, np.random.default_rng(2)
    for dtype in (dtypes.float32, dtypes.half, dtypes.bfloat16, dtypes.int32, dtypes.float64):
        a, b = (Tensor(rng.normal(size=s).astype(np.float32), device="PYTHON", dtype=dtype)
                for s in ((40, 33), (33, 70)))
        asts[f"{dtype.name} matmul"] = _schedule([a @ b])[-1].ast
    x, w = Tensor.empty(2, 3, 9, 9, device="PYTHON"), Tensor.empty(16, 3, 3, 3, device="PYTHON")
    asts["conv2d + relu"] = product_kernel(x.conv2d(w, stride=2, padding=1).relu())
    for label, src in zip(asts, compile_all(renderer, compiler, asts)):
        assert "__shared__" in src and "__syncthreads();" in src and "__launch_bounds__(256)" in src, label


def test_nvcc_failure_is_a_compile_error_with_log_and_source(compiler):
    src = 'extern "C" __global__ void broken(float* x) { x[0] = undefined_name; }'
    with pytest.raises(CompileError) as info:
        compiler.compile(src)
    assert "undefined_name" in info.value.message and info.value.source == src


def test_compile_many_names_the_one_kernel_that_fails(compiler):
    good = 'extern "C" __global__ void good_{}(float* x) {{ x[0] = 1.0f; }}'
    sources = [good.format(i) for i in range(3)] + ['extern "C" __global__ void bad(float* x) { x[0] = nope; }']
    errors = compile_many(compiler, sources)
    assert errors[:3] == [None] * 3 and isinstance(errors[3], CompileError)


def test_ptx_output_and_cache_key(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path))
    ptx = CUDACompiler(ARCH, output="ptx")
    assert ARCH in ptx.cachekey and "nvcc" in ptx.cachekey and ptx.cachekey != CUDACompiler(ARCH).cachekey
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }'
    binary = ptx.compile_cached(src)
    assert b".entry k" in binary and ptx.compile_cached(src) == binary
    assert any(p.is_file() for p in tmp_path.rglob("*"))
