"""The standalone C export of the MNIST examples, measured: C source and binary size, peak memory, latency per image
next to the same model in the framework, and the largest difference between their outputs on 1,000 test images.

Usage: python bench/export_report.py [--epochs 1] [--train-limit 0] [--cc cc]

Each model is trained (seed 0) and saved, exported with `tinygrad-core export`, built with `cc -O2`, and run on the
first 1,000 MNIST test images one image per call; the framework runs the same jitted model one image per call in a
process of its own. Peak memory is each process's maximum resident set size as `/usr/bin/time -v` reports it. The C
latency is the binary's run on the 1,000 images less its run on none (process start), over 1,000 (reading and writing
the records included); the framework's is its loop of 1,000 calls after two warm-up calls, converting each output to
numpy. Each C figure is the best of three runs. Timings are noisy on a busy machine."""
from __future__ import annotations
import argparse
import pathlib
import subprocess
import sys
import tempfile
import time
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
IMAGES = 1000


def measure(command: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak resident memory in bytes as /usr/bin/time -v reports it, stdout) of one run of command."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    peak = next(line for line in done.stderr.splitlines() if "Maximum resident set size" in line)
    return seconds, int(peak.split()[-1]) * 1024, done.stdout


def framework_run(model: str, weights: str, inputs: str, outputs: str):
    """(In its own process.) The model in the framework, jitted, one image per call: prints seconds per image."""
    sys.path.insert(0, str(ROOT / "examples"))
    from tinygrad_core import Tensor, TinyJit
    from tinygrad_core.export import EXAMPLE_MODELS
    from tinygrad_core.nn.state import load_state_dict, safe_load
    net = __import__(model).__dict__[EXAMPLE_MODELS[model]]()
    load_state_dict(net, safe_load(weights))

    @TinyJit
    def forward(x: Tensor) -> Tensor:
        with Tensor.no_grad(), Tensor.train(False):
            return net(x).realize()
    images = np.fromfile(inputs, np.float32).reshape(-1, 1, 1, 28, 28)
    for image in images[:2]:
        forward(Tensor(image)).numpy()
    start = time.perf_counter()
    results = [forward(Tensor(image)).numpy() for image in images]
    print((time.perf_counter() - start) / len(images))
    np.concatenate(results).tofile(outputs)


def report_model(model: str, args, work: pathlib.Path) -> dict:
    python, weights, out = sys.executable, work / f"{model}.safetensors", work / f"{model}_c"
    train = [python, str(ROOT / "examples" / f"{model}.py"), "--epochs", str(args.epochs), "--train-limit",
             str(args.train_limit), "--test-limit", str(IMAGES), "--save", str(weights)]
    subprocess.run(train, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([python, "-m", "tinygrad_core.cli", "export", model, str(weights), "--out", str(out), "--samples",
                    str(IMAGES)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([args.cc, "-O2", "model.c", "main.c", "-o", "model", "-lm"], cwd=out, check=True)
    (out / "none.bin").write_bytes(b"")
    c_seconds, c_memory, _ = min(measure([str(out / "model"), str(out / "inputs.bin"), str(out / "outputs.bin")])
                                 for _ in range(3))
    c_start = min(measure([str(out / "model"), str(out / "none.bin"), str(out / "none.out")])[0] for _ in range(3))
    _, py_memory, stdout = measure([python, __file__, "--framework-run", model, str(weights), str(out / "inputs.bin"),
                                    str(out / "framework.bin")])
    c_outputs, py_outputs = (np.fromfile(out / f, np.float32).reshape(IMAGES, 10) for f in ("outputs.bin",
                                                                                           "framework.bin"))
    from tinygrad_core.nn.datasets import load_mnist
    labels = load_mnist()[3][:IMAGES]
    return {"model": model, "source": (out / "model.c").stat().st_size, "binary": (out / "model").stat().st_size,
            "c_memory": c_memory, "py_memory": py_memory, "c_latency": (c_seconds - c_start) / IMAGES,
            "py_latency": float(stdout.split()[-1]), "difference": float(np.abs(c_outputs - py_outputs).max()),
            "accuracy": float((c_outputs.argmax(1) == labels).mean())}


def table(rows: list[dict]) -> str:
    lines = [("| model | C source | binary | peak memory: C / framework | latency per image: C / framework | "
              "max abs difference | C accuracy (1,000 images) |"), "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['source'] / 1e3:.0f} kB | {r['binary'] / 1e3:.0f} kB | "
                     f"{r['c_memory'] / 1e6:.1f} MB / {r['py_memory'] / 1e6:.0f} MB | "
                     f"{r['c_latency'] * 1e6:.0f} us / {r['py_latency'] * 1e6:.0f} us | {r['difference']:.1e} | "
                     f"{100 * r['accuracy']:.1f}% |")
    return "\n".join(lines)


def main():
    if sys.argv[1:2] == ["--framework-run"]:
        return framework_run(*sys.argv[2:6])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1, help="training epochs per model")
    parser.add_argument("--train-limit", type=int, default=0, help="train on the first N images only (0: all)")
    parser.add_argument("--cc", default="cc", help="the C compiler")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        rows = [report_model(model, args, pathlib.Path(work)) for model in ("mnist_mlp", "mnist_cnn")]
    print(table(rows))


if __name__ == "__main__":
    main()
