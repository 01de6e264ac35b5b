"""Seconds per training epoch of the MNIST examples, tinygrad_core next to PyTorch, same models, same data pipeline.

Each framework trains `examples/mnist_mlp.py`'s TinyMLP and `examples/mnist_cnn.py`'s MnistCNN on the shipped MNIST
for one epoch (Adam, the examples' batch sizes and learning rates, the same numpy batching and augmentation), in a
process of its own, and reports the epoch's seconds (the first epoch includes compiling) and the test accuracy.

    python bench/epochs.py [--models mlp,cnn] [--frameworks tinygrad_core,torch] [--torch-threads 2]"""
from __future__ import annotations
import argparse
import json
import os
import subprocess
import sys
import time
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {"mlp": dict(batch_size=128, lr=1e-3), "cnn": dict(batch_size=128, lr=2e-3)}


def batches(model: str, seed: int = 0):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from tinygrad_core.nn.datasets import Batches, load_mnist
    from mnist_mlp import normalize
    from mnist_cnn import augment
    X_train, Y_train, X_test, Y_test = load_mnist(os.path.join(ROOT, "data"))
    train = Batches(X_train, Y_train.astype(np.int32), MODELS[model]["batch_size"], shuffle=True, drop_last=True,
                    transform=normalize if model == "mlp" else augment, seed=seed)
    return train, normalize(X_test, None), Y_test


def run_tinygrad_core(model: str) -> dict:
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from tinygrad_core import Tensor
    from tinygrad_core.nn.optim import Adam
    from tinygrad_core.nn.state import get_parameters
    from training import make_train_step, make_predict
    from mnist_mlp import TinyMLP
    from mnist_cnn import MnistCNN
    train, X_test, Y_test = batches(model)
    net = TinyMLP() if model == "mlp" else MnistCNN()
    step = make_train_step(net, Adam(get_parameters(net), lr=MODELS[model]["lr"]), jit=True)
    start = time.perf_counter()
    for x, y in train:
        loss, _ = step(x, y)
        loss.item()
    seconds = time.perf_counter() - start
    predict = make_predict(net, jit=False)
    correct = sum(int((predict(Tensor(X_test[i:i + 1000])).numpy() == Y_test[i:i + 1000]).sum())
                  for i in range(0, len(X_test), 1000))
    return {"seconds": seconds, "accuracy": 100 * correct / len(X_test)}


def run_torch(model: str, threads: int) -> dict:
    import torch
    from torch import nn
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if model == "mlp":
        net = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        net = nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                            nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    optimizer = torch.optim.Adam(net.parameters(), lr=MODELS[model]["lr"])
    train, X_test, Y_test = batches(model)
    net.train()
    start = time.perf_counter()
    for x, y in train.arrays():
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y).long())
        loss.backward()
        optimizer.step()
        loss.item()
    seconds = time.perf_counter() - start
    net.eval()
    with torch.no_grad():
        predicted = net(torch.from_numpy(X_test)).argmax(1).numpy()
    return {"seconds": seconds, "accuracy": 100 * float((predicted == Y_test).mean())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--frameworks", default="tinygrad_core,torch")
    parser.add_argument("--torch-threads", type=int, default=2)
    parser.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        framework, model = args.worker
        result = run_torch(model, args.torch_threads) if framework == "torch" else run_tinygrad_core(model)
        print(json.dumps(result))
        return
    rows = {}
    for model in args.models.split(","):
        for framework in args.frameworks.split(","):
            done = subprocess.run([sys.executable, __file__, "--worker", framework, model, "--torch-threads",
                                   str(args.torch_threads)], capture_output=True, text=True)
            last = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
            rows[model, framework] = json.loads(last[0]) if last else {"error": done.stderr.strip()[-300:]}
    print(f"{'model':6s} {'framework':14s} {'s/epoch':>9s} {'test acc':>9s}")
    for (model, framework), r in rows.items():
        if "error" in r:
            print(f"{model:6s} {framework:14s} error: {r['error']}")
        else:
            print(f"{model:6s} {framework:14s} {r['seconds']:9.1f} {r['accuracy']:8.2f}%")
    for model in args.models.split(","):
        ours, theirs = rows.get((model, "tinygrad_core"), {}), rows.get((model, "torch"), {})
        if "seconds" in ours and "seconds" in theirs:
            print(f"{model}: tinygrad_core takes {ours['seconds'] / theirs['seconds']:.2f}x PyTorch's time per epoch")


if __name__ == "__main__":
    main()
