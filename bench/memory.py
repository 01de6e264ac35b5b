"""Peak resident memory of tinygrad 0.14's MNIST examples, run as written with tinygrad and with tinygrad_core:
beautiful_mnist (the jitted training step, and the jitted test accuracy on 10,000 images every 10 steps, as the
example does) and gradaccum_mnist (four micro-batches per step, no jit).

    python bench/memory.py [--steps 20] [--only beautiful_mnist,gradaccum_mnist]

Each (workload, framework) runs in a process of its own (tinygrad on DEV=CPU); the figure is the process's peak
resident set (getrusage's ru_maxrss, what `/usr/bin/time -v` reports as "Maximum resident set size"), the random
data of MNIST's shapes included (47 MB of uint8 images). The models and steps are bench/examples.py's."""
import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import examples


def beautiful_mnist_with_eval(tg, steps: int):
    """examples/beautiful_mnist.py: bench/examples.py's training step, and the example's jitted test accuracy."""
    Tensor = tg.Tensor
    model, train_step = examples.beautiful_mnist_model_and_step(tg)
    rng = np.random.default_rng(1)
    X_test = Tensor(rng.integers(0, 256, (10000, 1, 28, 28), dtype=np.uint8))
    Y_test = Tensor(rng.integers(0, 10, 10000, dtype=np.uint8))

    @tg.TinyJit
    def get_test_acc():
        return (model(X_test).argmax(axis=1) == Y_test).mean() * 100
    for i in range(steps):
        train_step().item()
        if i % 10 == 9:
            get_test_acc().item()


def gradaccum(tg, steps: int):
    step = examples.gradaccum_mnist(tg)
    for _ in range(steps):
        step()


WORKLOADS = {"beautiful_mnist": beautiful_mnist_with_eval, "gradaccum_mnist": gradaccum}


def worker(framework: str, workload: str, steps: int):
    import importlib
    tg = importlib.import_module(framework)
    for sub in ("nn", "nn.optim", "nn.state"):
        importlib.import_module(f"{framework}.{sub}")
    tg.Tensor.manual_seed(0)
    WORKLOADS[workload](tg, steps)
    print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def run(framework: str, workload: str, steps: int):
    env = {**os.environ, **({"DEV": "CPU"} if framework == "tinygrad" else {})}
    done = subprocess.run([sys.executable, __file__, "--worker", framework, workload, "--steps", str(steps)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        return f"failed: {(done.stderr.strip().splitlines() or ['?'])[-1][:100]}"
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_mb"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps per workload")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    parser.add_argument("--framework", default="tinygrad,tinygrad_core", help="comma-separated frameworks")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(*args.worker, args.steps)
    frameworks = args.framework.split(",")
    print("| workload | " + " | ".join(f"{f} peak RSS (MB)" for f in frameworks) + " |")
    print("|---|" + "---|" * len(frameworks))
    for workload in args.only.split(","):
        cells = [run(framework, workload, args.steps) for framework in frameworks]
        print(f"| {workload} | " + " | ".join(f"{c:.0f}" if isinstance(c, float) else c for c in cells) + " |",
              flush=True)


if __name__ == "__main__":
    main()
