"""Seconds per training epoch of the MNIST examples, tinygrad_core next to PyTorch, same models, same data pipeline.

Each framework trains `examples/mnist_mlp.py`'s TinyMLP and `examples/mnist_cnn.py`'s MnistCNN on the shipped MNIST
for --epochs epochs (2; Adam, the examples' batch sizes and learning rates, the same numpy batching and augmentation),
in a process of its own, --runs times (3), the frameworks in turn, and reports each epoch's fastest seconds over the
runs and the test accuracy after them (the machine's other work changes a process's speed by half). The first epoch
includes compiling (with the disk cache filled by an earlier run of the same code, only loading the kernels; any edit
of the code misses it); the second is what each later epoch of a training run takes (the main job trains five).
--breakdown splits tinygrad_core's epoch instead: the first steps (compile, capture), then per steady step the batch
(numpy work, Tensor), the program launches, the rest of the replay and loss.item(), in wall and CPU seconds and in
Python function calls (a count that other work on the machine doesn't change): with an empty disk cache (cold), then
with the one that run filled (warm).

    python bench/epochs.py [--models mlp,cnn] [--frameworks tinygrad_core,torch] [--torch-threads 2] [--epochs 2]
                           [--runs 3]
    python bench/epochs.py --breakdown [--models mlp,cnn]"""
from __future__ import annotations
import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
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


def tinygrad_core_model(model: str):
    """(the network, its jitted train step) as examples/training.py makes them."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from tinygrad_core.nn.optim import Adam
    from tinygrad_core.nn.state import get_parameters
    from training import make_train_step
    from mnist_mlp import TinyMLP
    from mnist_cnn import MnistCNN
    net = TinyMLP() if model == "mlp" else MnistCNN()
    return net, make_train_step(net, Adam(get_parameters(net), lr=MODELS[model]["lr"]), jit=True)


def run_tinygrad_core(model: str, epochs: int = 1) -> dict:
    from tinygrad_core import Tensor
    train, X_test, Y_test = batches(model)
    net, step = tinygrad_core_model(model)
    from training import make_predict
    seconds = []
    for _ in range(epochs):
        start = time.perf_counter()
        for x, y in train:
            loss, _ = step(x, y)
            loss.item()
        seconds.append(time.perf_counter() - start)
    predict = make_predict(net, jit=False)
    correct = sum(int((predict(Tensor(X_test[i:i + 1000])).numpy() == Y_test[i:i + 1000]).sum())
                  for i in range(0, len(X_test), 1000))
    return {"seconds": seconds, "accuracy": 100 * correct / len(X_test)}


PHASES = ("batch: numpy", "batch: Tensor", "step 1 (compiles)", "step 2 (captures)", "steps: program calls",
          "steps: the replay's Python", "loss.item()")


def breakdown(model: str, counted_steps: int = 50) -> dict:
    """tinygrad_core's epoch by phase, as run_tinygrad_core runs it: wall and CPU seconds (of the process) summed over
    the epoch; then Python function calls per steady step over counted_steps more steps (cProfile slows what it
    watches, so it runs apart). Program calls: the kernels and the backend's launch code (their __call__, wrapped)."""
    from tinygrad_core.device import Device, Program
    from tinygrad_core.helpers import GlobalCounters
    train, _, _ = batches(model)
    _, step = tinygrad_core_model(model)
    Device[Device.DEFAULT]                  # (loaded: its program class is one of those timed)
    seconds = {name: [0.0, 0.0] for name in PHASES}
    profiles = {name: cProfile.Profile() for name in PHASES}
    now, counting = [None], [False]           # the phase being timed; whether calls are counted instead
    originals = {cls: cls.__call__ for cls in Program.__subclasses__()}

    def timed(name, fn, *args, **kwargs):
        if counting[0] and now[0] is None:       # (one profiler at a time: a phase inside another counts in it)
            now[0] = name
            with profiles[name]:
                out = fn(*args, **kwargs)
            now[0] = None
            return out
        if counting[0]:
            return fn(*args, **kwargs)
        outer, now[0] = now[0], name
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn(*args, **kwargs)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        for phase in {name, outer} - {None}:     # (a program call counts in its own phase, not in the replay's)
            seconds[phase][0] += wall if phase == name else -wall
            seconds[phase][1] += cpu if phase == name else -cpu
        now[0] = outer
        return out
    for cls, original in originals.items():
        cls.__call__ = lambda program, *a, _original=original, **k: \
            timed("steps: program calls", _original, program, *a, **k) if now[0] == PHASES[5] else \
            _original(program, *a, **k)

    def epoch(count: int) -> int:
        batches = iter(train)
        for _ in range(count):
            x, y = timed("batch: Tensor", next, batches)
            kernels = GlobalCounters.kernel_count
            loss, _ = timed(PHASES[2 + step.calls] if step.calls < 2 else PHASES[5], step, x, y)
            timed("loss.item()", loss.item)
        return GlobalCounters.kernel_count - kernels

    def numpy_batches(arrays=train.arrays):      # (what Batches iterates over: timed apart from making Tensors)
        batches = arrays()
        while (batch := timed("batch: numpy", next, batches, None)) is not None:
            yield batch
    train.arrays = numpy_batches
    wall, cpu = time.perf_counter(), time.process_time()
    kernels = epoch(len(train))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    counting[0] = True
    epoch(counted_steps)
    arrays = type(train).arrays(train)
    with profiles[PHASES[0]]:
        for _ in range(counted_steps):
            next(arrays)
    calls = {name: pstats.Stats(profiles[name]).total_calls / counted_steps for name in (PHASES[0], PHASES[1],
                                                                                        PHASES[5], PHASES[6])}
    calls[PHASES[1]] -= calls[PHASES[0]]
    return {"steps": len(train), "kernels per step": kernels, "epoch": [wall, cpu], "seconds": seconds,
            "calls per step": calls}


def run_torch(model: str, threads: int, epochs: int = 1) -> dict:
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
    seconds = []
    for _ in range(epochs):
        start = time.perf_counter()
        for x, y in train.arrays():
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y).long())
            loss.backward()
            optimizer.step()
            loss.item()
        seconds.append(time.perf_counter() - start)
    net.eval()
    with torch.no_grad():
        predicted = net(torch.from_numpy(X_test)).argmax(1).numpy()
    return {"seconds": seconds, "accuracy": 100 * float((predicted == Y_test).mean())}


def worker(framework: str, model: str, threads: int, env=None, epochs: int = 1) -> dict:
    """The result of a worker process (its last line of output: seconds per epoch, the test accuracy after the
    last), or {"error": the end of what it wrote}."""
    done = subprocess.run([sys.executable, __file__, "--worker", framework, model, "--torch-threads", str(threads),
                           "--epochs", str(epochs)],
                          capture_output=True, text=True, env=env, check=False)
    last = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    return json.loads(last[0]) if last else {"error": done.stderr.strip()[-300:]}


def fastest(runs: list[dict]) -> dict:
    """One framework's runs of one model as one result: each epoch's fastest seconds over the runs (other work on the
    machine only slows an epoch down, and it slows a whole process: one run's epochs all took 1.4x another's here),
    every run's seconds under "runs"; the first run's error if none finished."""
    done = [run for run in runs if "seconds" in run]
    if not done:
        return runs[0]
    return {"seconds": [min(epoch) for epoch in zip(*(run["seconds"] for run in done))],
            "accuracy": done[0]["accuracy"], "runs": [run["seconds"] for run in done]}


def print_breakdown(model: str):
    """The breakdown with an empty disk cache (cold: every kernel compiled) and then with the one that run filled."""
    with tempfile.TemporaryDirectory() as cache:
        runs = [worker("breakdown", model, 0, dict(os.environ, TINYGRAD_CACHE_DIR=cache)) for _ in ("cold", "warm")]
    if errors := [r["error"] for r in runs if "error" in r]:
        print(f"{model}: error: {errors[0]}")
        return
    cold, warm = runs
    print(f"\n{model}: {warm['steps']} steps of {warm['kernels per step']} kernels; epoch {warm['epoch'][0]:.3f} s "
          f"wall, {warm['epoch'][1]:.3f} s CPU (cold disk cache: {cold['epoch'][0]:.3f} s, {cold['epoch'][1]:.3f} s)\n")
    print("| phase | wall s | CPU s | share (wall) | ms per step (wall) | Python calls per step | cold: wall s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in PHASES:
        (wall, cpu), steps = warm["seconds"][name], 1 if name.startswith("step ") else \
            warm["steps"] - 2 if name.startswith("steps") else warm["steps"]
        calls = warm["calls per step"].get(name)
        print(f"| {name} | {wall:.3f} | {cpu:.3f} | {100 * wall / warm['epoch'][0]:.1f}% | {1e3 * wall / steps:.3f} | "
              f"{'' if calls is None else f'{calls:.0f}'} | {cold['seconds'][name][0]:.3f} |")
    rest = warm["epoch"][0] - sum(w for w, _ in warm["seconds"].values())
    print(f"| the loop itself, unaccounted | {rest:.3f} | | {100 * rest / warm['epoch'][0]:.1f}% | | | |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--frameworks", default="tinygrad_core,torch")
    parser.add_argument("--torch-threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2, help="epochs each framework trains (each is timed: the "
                                                                  "first compiles what the disk cache lacks)")
    parser.add_argument("--runs", type=int, default=3, help="processes per framework and model, taken in turn with "
                                                               "the other framework's: each epoch's fastest counts")
    parser.add_argument("--breakdown", action="store_true", help="split tinygrad_core's epoch by phase instead")
    parser.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        framework, model = args.worker
        result = run_torch(model, args.torch_threads, args.epochs) if framework == "torch" else \
            breakdown(model) if framework == "breakdown" else run_tinygrad_core(model, args.epochs)
        print(json.dumps(result))
        return
    if args.breakdown:
        for model in args.models.split(","):
            print_breakdown(model)
        return
    runs = {}
    for _ in range(args.runs):
        for model in args.models.split(","):
            for framework in args.frameworks.split(","):
                runs.setdefault((model, framework), []).append(worker(framework, model, args.torch_threads,
                                                                      epochs=args.epochs))
    rows = {key: fastest(results) for key, results in runs.items()}
    print(f"each epoch: the fastest of {args.runs} runs (processes) per framework, taken in turn")
    print(f"{'model':6s} {'framework':14s} {'s/epoch, each':>22s} {'test acc':>9s}")
    for (model, framework), r in rows.items():
        if "error" in r:
            print(f"{model:6s} {framework:14s} error: {r['error']}")
        else:
            each = "; ".join(" ".join(f"{s:.2f}" for s in run) for run in r["runs"])
            print(f"{model:6s} {framework:14s} {' '.join(f'{s:6.2f}' for s in r['seconds']):>22s} "
                  f"{r['accuracy']:8.2f}%   (each run: {each})")
    for model in args.models.split(","):
        ours, theirs = rows.get((model, "tinygrad_core"), {}), rows.get((model, "torch"), {})
        if "seconds" in ours and "seconds" in theirs:
            ratios = [f"{a / b:.2f}x" for a, b in zip(ours["seconds"], theirs["seconds"])]
            print(f"{model}: tinygrad_core takes {', '.join(ratios)} PyTorch's time per epoch (epoch 1"
                  f"{', 2, ...' if len(ratios) > 1 else ''}; the first compiles the kernels the disk cache lacks)")


if __name__ == "__main__":
    main()
