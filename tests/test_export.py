"""The standalone C export: exported MNIST models build with `cc -O2 -Wall -Werror`, run without Python and give the
framework's outputs on 1,000 test images; other dtypes and several inputs/outputs round-trip; what can't be exported
is refused with the reason."""
from __future__ import annotations
import itertools
import pathlib
import re
import runpy
import shutil
import subprocess
import numpy as np
import pytest
from tinygrad_core import Tensor, cli, dtypes
from tinygrad_core.export import export_c
from tinygrad_core.nn.datasets import load_mnist
from tinygrad_core.nn.state import get_state_dict

ROOT = pathlib.Path(__file__).resolve().parents[1]
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler (cc, gcc or clang) on this machine")
WARNINGS = ["-O2", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror"]


def example(name: str) -> dict:
    return runpy.run_path(str(ROOT / "examples" / f"{name}.py"))


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    """The first 1,000 MNIST test images, normalized as the examples feed them to their models."""
    return example("mnist_mlp")["normalize"](load_mnist()[2][:1000]).astype(np.float32)


def build(directory: pathlib.Path) -> pathlib.Path:
    """Compiles the exported program (and nothing else: it must need no header or library past libc and libm)."""
    source = (directory / "model.c").read_text()
    loads = (directory / "model.bin").exists()     # (weights read from a file need stdio)
    assert set(re.findall(r"#include (.*)", source)) == {"<math.h>", '"model.h"'} | ({"<stdio.h>"} if loads else set())
    built = subprocess.run([CC, *WARNINGS, "model.c", "main.c", "-o", "model", "-lm"], cwd=directory,
                           capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    return directory / "model"


def run(binary: pathlib.Path, inputs: list[np.ndarray], outputs: list[tuple[tuple, np.dtype]]) -> list[np.ndarray]:
    """Runs the binary on records (record i: inputs[k][i] for each k, raw) -> each output, stacked over records."""
    records = len(inputs[0])
    flat = np.concatenate([np.ascontiguousarray(a).reshape(records, -1).view(np.uint8) for a in inputs], axis=1)
    flat.tofile(binary.parent / "inputs.bin")
    subprocess.run([binary, "inputs.bin", "outputs.bin"], cwd=binary.parent, check=True)
    raw = np.fromfile(binary.parent / "outputs.bin", np.uint8).reshape(records, -1)
    sizes = np.cumsum([0] + [np.dtype(dt).itemsize * int(np.prod(shape)) for shape, dt in outputs])
    return [raw[:, start:end].copy().view(dt).reshape(records, *shape)
            for (start, end), (shape, dt) in zip(itertools.pairwise(sizes), outputs)]


def inference(model):
    def forward(x: Tensor) -> Tensor:
        with Tensor.no_grad(), Tensor.train(False):
            return model(x)
    return forward


def check_model(model, images: np.ndarray, directory: pathlib.Path, batch: int):
    forward = inference(model)
    export_c(forward, Tensor.zeros(batch, 1, 28, 28).contiguous(), path=directory)
    (got,) = run(build(directory), [images.reshape(-1, batch, 1, 28, 28)], [((batch, 10), np.float32)])
    want = forward(Tensor(images)).numpy()
    np.testing.assert_allclose(got.reshape(-1, 10), want, rtol=1e-5, atol=1e-5)


def test_mlp_gives_the_frameworks_outputs(images, tmp_path):
    Tensor.manual_seed(1)
    check_model(example("mnist_mlp")["TinyMLP"](), images, tmp_path, batch=1)


def test_cnn_gives_the_frameworks_outputs(images, tmp_path):
    Tensor.manual_seed(2)
    model = example("mnist_cnn")["MnistCNN"]()
    # every tensor random, BatchNorm's running statistics included (fresh ones are 0 and 1: they'd test nothing)
    for name, t in get_state_dict(model).items():
        t.assign(Tensor.rand(*t.shape) + 0.5 if "running_var" in name else Tensor.randn(*t.shape) * 0.3).realize()
    check_model(model, images, tmp_path, batch=4)


def test_trained_mlp_through_the_cli(images, tmp_path, capsys):
    weights = tmp_path / "mlp.safetensors"
    example("mnist_mlp")["main"](["--epochs", "1", "--train-limit", "1280", "--test-limit", "100", "--save",
                                  str(weights)])
    out = tmp_path / "mlp_c"
    assert cli.main(["export", "mnist_mlp", str(weights), "--out", str(out), "--samples", "1000"]) == 0
    assert "cc -O2" in capsys.readouterr().out
    (got,) = run(build(out), [np.fromfile(out / "inputs.bin", np.float32).reshape(1000, 784)],
                 [((10,), np.float32)])
    np.testing.assert_allclose(got, np.fromfile(out / "expected.bin", np.float32).reshape(1000, 10), rtol=1e-5,
                               atol=1e-5)
    # the weights are the trained ones: far better than the 10% of chance
    assert (got.argmax(1) == load_mnist()[3][:1000]).mean() > 0.5


def test_the_cli_names_weights_of_another_model(tmp_path, capsys):
    from tinygrad_core.nn.state import safe_save
    weights = tmp_path / "cnn.safetensors"
    safe_save(get_state_dict(example("mnist_cnn")["MnistCNN"]()), str(weights))
    assert cli.main(["export", "mnist_mlp", str(weights), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "doesn't hold mnist_mlp's weights" in err and "strict=False" not in err and "train mnist_mlp" in err, err


def test_other_dtypes_and_several_inputs_and_outputs(tmp_path):
    def fn(x: Tensor, n: Tensor):
        mixed = (x.half() * n.half()).float() + x.bfloat16().float() * 2
        return mixed, (n * 3) // 2 + n.max(), (x.exp() + x.abs().sqrt()).sin(), x > 0, x.bitcast(dtypes.int32), \
            x.cast(dtypes.float64) / 3, (x * 1000).cast(dtypes.int64) * n.cast(dtypes.int64), \
            (n + 9).cast(dtypes.uint8)
    rng = np.random.default_rng(0)
    xs, ns = rng.standard_normal((6, 3, 5)).astype(np.float32), rng.integers(-9, 9, (6, 3, 5)).astype(np.int32)
    export_c(fn, Tensor(xs[0]), Tensor(ns[0]), path=tmp_path)
    wants = [[t.numpy() for t in fn(Tensor(x), Tensor(n))] for x, n in zip(xs, ns)]
    gots = run(build(tmp_path), [xs, ns], [(w.shape, w.dtype) for w in wants[0]])
    for k, got in enumerate(gots):
        want = np.stack([w[k] for w in wants])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"output {k}")


def test_causal_attention_builds_with_werror_and_gives_the_frameworks_outputs(tmp_path):
    # the JIT's memory plan gives one buffer to a float kernel and, later, to a double one (a softmax's long sum): in
    # C a union of both, not a float array passed as a double pointer (-Werror: incompatible-pointer-types)
    wq = Tensor(np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32))

    def fn(x: Tensor) -> Tensor:
        q = (x @ wq).reshape(1, 2, 4, 8)
        return q.scaled_dot_product_attention(q, q, is_causal=True).reshape(4, 16)
    xs = np.random.default_rng(2).standard_normal((5, 4, 16)).astype(np.float32)
    files = export_c(fn, Tensor(xs[0]), path=tmp_path)
    assert "static union {" in files["model.c"]
    (got,) = run(build(tmp_path), [xs], [((4, 16), np.float32)])
    want = np.stack([fn(Tensor(x)).numpy() for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_weights_in_a_file_keep_the_source_small_and_give_the_same_outputs(images, tmp_path):
    # the CNN's weights as raw bytes in model.bin, read by model_load at start, instead of decimal text in model.c
    model = example("mnist_cnn")["MnistCNN"]()
    files = export_c(inference(model), Tensor.zeros(25, 1, 28, 28).contiguous(), path=tmp_path / "file",
                     weights="file")
    inline = export_c(inference(model), Tensor.zeros(25, 1, 28, 28).contiguous(), weights="inline")
    weight_bytes = sum(t.nbytes() for t in get_state_dict(model).values())
    # (the state dict also holds what inference doesn't read: BatchNorm's step count)
    assert len(files["model.bin"]) > 0.99 * weight_bytes and len(files["model.c"]) < len(inline["model.c"]) // 4
    (got,) = run(build(tmp_path / "file"), [images[:100].reshape(-1, 25, 1, 28, 28)], [((25, 10), np.float32)])
    want = inference(model)(Tensor(images[:100])).numpy()
    np.testing.assert_allclose(got.reshape(-1, 10), want, rtol=1e-5, atol=1e-5)
    gone = subprocess.run([tmp_path / "file" / "model", "inputs.bin", "out.bin", "missing.bin"], cwd=tmp_path / "file",
                          capture_output=True, text=True, check=False)
    assert gone.returncode == 1 and "the weights" in gone.stderr
    with pytest.raises(ValueError, match="'inline'"):
        export_c(inference(model), Tensor.zeros(1, 1, 28, 28).contiguous(), weights="blob")


def test_weights_keep_their_exact_values(tmp_path):
    rng = np.random.default_rng(3)
    values = [np.float32(1e-45), np.float32(-0.0), np.float32(3.4028235e38), np.float32(0.1)]
    for special in ([], [np.inf, -np.inf, np.nan]):       # (the non-finite ones are written another way)
        weights = np.concatenate([rng.standard_normal(50) * 10.0 ** rng.integers(-30, 30, 50), values, special])
        w = Tensor(weights.astype(np.float32))
        export_c(lambda x, w=w: x + w, Tensor.full(w.shape, -0.0), path=tmp_path)   # -0.0 + w is w, bit for bit
        (got,) = run(build(tmp_path), [np.full((1, *w.shape), -0.0, np.float32)], [(w.shape, np.float32)])
        np.testing.assert_array_equal(got[0].view(np.uint32), w.numpy().view(np.uint32))


def test_refuses_what_a_c_function_cant_do(tmp_path):
    total = Tensor.zeros(3).contiguous().realize()

    def accumulate(x: Tensor) -> Tensor:      # state a C function would have to carry from call to call
        total.assign(total + x).realize()
        return total * 2
    with pytest.raises(NotImplementedError, match="updates a tensor it read"):
        export_c(accumulate, Tensor.ones(3).contiguous(), path=tmp_path)

    def dropout(x: Tensor) -> Tensor:
        with Tensor.train():
            return x.dropout(0.5)
    with pytest.raises(NotImplementedError, match="random numbers"):
        export_c(dropout, Tensor.ones(8).contiguous(), path=tmp_path)

    def increment(x: Tensor) -> Tensor:
        x.assign(x + 1).realize()
        return x * 2
    with pytest.raises(NotImplementedError, match="writes input 0"):
        export_c(increment, Tensor.ones(3).contiguous(), path=tmp_path)
