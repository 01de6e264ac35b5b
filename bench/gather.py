"""Gathering a batch of rows by a tensor of indices, the MNIST batch idiom `X_train[Tensor.randint(128, high=60000)]`,
on the (60000, 1, 28, 28) uint8 images: tinygrad_core next to numpy's X[idx], PyTorch's and tinygrad 0.14's.

    python bench/gather.py [--batch 128] [--repeats 50]

Each framework is timed in a process of its own (tinygrad 0.14 on its CPU device, which needs clang); the figure is
the median milliseconds per batch, indices drawn anew each time and the batch realized."""
import argparse
import json
import subprocess
import sys

WORKER = """
import json, statistics, sys, time
import numpy as np
name, batch, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
images = np.random.default_rng(0).integers(0, 256, (60000, 1, 28, 28), dtype=np.uint8)
if name == "numpy":
    rng = np.random.default_rng(1)
    def step(): return images[rng.integers(0, 60000, batch)]
elif name == "torch":
    import torch
    X = torch.from_numpy(images)
    def step(): return X[torch.randint(0, 60000, (batch,))]
else:
    mod = __import__(name)
    X = mod.Tensor(images).realize()
    def step(): return X[mod.Tensor.randint(batch, high=60000)].realize()
times = []
for i in range(repeats + 3):
    start = time.perf_counter(); out = step(); np.asarray(out.numpy() if hasattr(out, "realize") else out)
    if i >= 3: times.append(time.perf_counter() - start)
print(json.dumps(1e3 * statistics.median(times)))
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    results = {}
    for name in ("tinygrad_core", "numpy", "torch", "tinygrad"):
        command = [sys.executable, "-c", WORKER, name, str(args.batch), str(args.repeats)]
        run = subprocess.run(command, capture_output=True, text=True,
                             env={**__import__("os").environ, **({"DEV": "CPU"} if name == "tinygrad" else {})})
        results[name] = json.loads(run.stdout.strip().splitlines()[-1]) if run.returncode == 0 else None
        print(f"{name:14s} " + (f"{results[name]:8.3f} ms per batch" if results[name] is not None else
                                f"failed: {run.stderr.strip().splitlines()[-1:]}"))
    ours = results["tinygrad_core"]
    for name in ("numpy", "torch", "tinygrad"):
        if results[name] and ours:
            print(f"tinygrad_core / {name}: {ours / results[name]:.2f}x the time")


if __name__ == "__main__":
    main()
