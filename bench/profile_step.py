"""Where a training step's time goes: kernels, Python between launches, the data pipeline; PyTorch alongside.

For the main job's MLP (examples/mnist_mlp.py: batch 128, Adam 1e-3), the MNIST CNN (examples/mnist_cnn.py: batch 128,
Adam 2e-3) and the seed's CIFAR CNN (examples/cifar_cnn.py: batch 64, Adam 1e-3), each trained as the examples do
(examples/training.py's jitted step), it measures:

- the step: wall time of one TinyJit replay on batches already on the device, and `loss.item()` after it;
- the kernels: each program's launch timed (its __call__ wrapped from here, with wait=True), summed per kernel name;
- the Python between launches: step wall minus kernel time, and a cProfile of the replay grouped by function;
- the data pipeline per step: the shuffled index `X[idx]`, augmentation, normalisation, `Tensor(x)` (the copy to the
  device), then an epoch-like loop over the examples' `Batches` (pipeline + step + `loss.item()`);
- PyTorch (eager, `torch.set_num_threads` = tinygrad_cpu's thread count) on the same models, steps and loop, with its
  operators by self time (torch.profiler), in a process of its own.

    python bench/profile_step.py > bench/results/profile-<date>.md     # about two minutes on two cores
    python bench/profile_step.py --models mlp --budget 2              # options: --models, --budget, --no-torch

Timings on a machine others use are noisy (the report gives the load average); compare ratios from one run."""
from __future__ import annotations
import argparse
import collections
import cProfile
import datetime
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
# batch size, learning rate and images per model: the examples' defaults (the README's train commands)
# single: also profiled on one thread (TINYGRAD_CPU_THREADS=1), to show what splitting small kernels costs
MODELS = {"mlp": dict(title="main job: MNIST MLP (784-128-10)", batch=128, lr=1e-3, steps=200, loop=150, single=True),
          "mnist_cnn": dict(title="MNIST CNN (examples/mnist_cnn.py)", batch=128, lr=2e-3, steps=30, loop=30,
                            single=True),
          "cifar": dict(title="the seed's CIFAR CNN (examples/cifar_cnn.py)", batch=64, lr=1e-3, steps=5, loop=4,
                        single=False)}
TOP_KERNELS, TOP_FUNCTIONS, TOP_TORCH = 10, 12, 8


def say(text: str):
    print(text, file=sys.stderr, flush=True)


def timed(fn, count: int, budget_s: float) -> list[float]:
    """Seconds of each call of fn(i), at least 3 calls, stopping after count calls or budget_s seconds."""
    times, start = [], time.perf_counter()
    for i in range(count):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
        if i >= 2 and time.perf_counter() - start > budget_s:
            break
    return times


def ms(seconds: float) -> float:
    return 1e3 * seconds


# ---- the data, as the examples prepare it ----

def dataset(model: str):
    """(X uint8, Y int32, transform, what the images are): MNIST from data/, CIFAR-10 if present, else random images of
    its shape (the pipeline's cost depends on the shape only)."""
    from tinygrad_core.nn.datasets import load_mnist, load_cifar10
    if model == "cifar":
        from cifar_cnn import augment
        try:
            X, Y, _, _ = load_cifar10()
            return X, Y.astype(np.int32), augment, "CIFAR-10"
        except FileNotFoundError:
            rng = np.random.default_rng(0)
            X = rng.integers(0, 256, (4096, 3, 32, 32), dtype=np.uint8)
            return X, rng.integers(0, 10, 4096).astype(np.int32), augment, "random uint8 images (CIFAR-10 absent)"
    from mnist_mlp import normalize
    from mnist_cnn import augment
    X, Y, _, _ = load_mnist(os.path.join(ROOT, "data"))
    return X, Y.astype(np.int32), normalize if model == "mlp" else augment, "MNIST"


def batches(model: str):
    from tinygrad_core.nn.datasets import Batches
    X, Y, transform, source = dataset(model)
    return Batches(X, Y, MODELS[model]["batch"], shuffle=True, drop_last=True, transform=transform, seed=0), source


def pipeline_parts(model: str, train, count: int, budget_s: float) -> dict[str, float]:
    """Seconds per batch of each part of Batches' work, done as it does it (on the same shuffled order)."""
    from tinygrad_core import Tensor
    from tinygrad_core.nn.datasets import random_crop, random_flip
    from mnist_mlp import normalize as mnist_normalize
    from cifar_cnn import normalize as cifar_normalize
    normalize = cifar_normalize if model == "cifar" else mnist_normalize
    X, Y, bs, rng = train.X, train.Y, train.batch_size, np.random.default_rng(1)
    parts: dict[str, list[float]] = collections.defaultdict(list)
    start, order = time.perf_counter(), rng.permutation(len(X))
    parts["shuffle (rng.permutation, per epoch / batches)"].append((time.perf_counter() - start) / len(train))

    def part(name, fn, *args):
        t = time.perf_counter()
        out = fn(*args)
        parts[name].append(time.perf_counter() - t)
        return out
    for i in range(count):
        index = order[i * bs:(i + 1) * bs]
        x, y = part("index X[idx], Y[idx]", lambda i: (X[i], Y[i]), index)
        if model != "mlp":
            pad, size = (4, 32) if model == "cifar" else (2, 28)
            x = part("random crop", random_crop, x, size, pad, rng)
            if model == "cifar":
                x = part("random flip", random_flip, x, rng)
        x = part("normalise (astype, /255, -mean, /std)", normalize, x)
        x, y = part("np.ascontiguousarray", lambda *a: tuple(map(np.ascontiguousarray, a)), x, y)
        part("Tensor(x), Tensor(y): copy to the device", lambda *a: tuple(map(Tensor, a)), x, y)
        if i >= 2 and time.perf_counter() - start > budget_s:
            break
    return {name: statistics.median(t) for name, t in parts.items()}


# ---- tinygrad_core ----

class KernelTimer:
    """Times every program launch by wrapping the program classes' __call__ (the core is left as it is)."""

    def __init__(self, classes):
        self.classes, self.originals = classes, {c: c.__call__ for c in classes}
        self.seconds: dict[int, float] = collections.defaultdict(float)
        self.launches: dict[int, int] = collections.defaultdict(int)

    def __enter__(self):
        for cls, original in self.originals.items():
            def call(program, *args, _original=original, **kwargs):
                kwargs["wait"] = True           # (a device that queues work returns at once otherwise)
                t = time.perf_counter()
                out = _original(program, *args, **kwargs)
                self.seconds[id(program)] += time.perf_counter() - t
                self.launches[id(program)] += 1
                return out
            cls.__call__ = call
        return self

    def __exit__(self, *exc):
        for cls, original in self.originals.items():
            cls.__call__ = original


def short_path(filename: str) -> str:
    """A source file named from the repository or site-packages (no path of this machine in a saved report)."""
    if filename.startswith(ROOT):
        return os.path.relpath(filename, ROOT)
    return filename.split("site-packages" + os.sep)[-1] if "site-packages" in filename else os.path.basename(filename)


def profile_functions(fn, count: int) -> tuple[list[dict], float]:
    """cProfile of count calls of fn(i): the functions by own time per call (and the profiled seconds per call)."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for i in range(count):
        fn(i)
    profiler.disable()
    wall = (time.perf_counter() - start) / count
    stats = pstats.Stats(profiler).stats
    rows = [{"function": f"{short_path(file)}:{line}({name})" if line else name, "calls": nc / count,
             "own_ms": ms(tt / count), "cum_ms": ms(ct / count)}
            for (file, line, name), (_, nc, tt, ct, _) in stats.items()]
    return sorted(rows, key=lambda r: -r["own_ms"]), wall


def build_core(model: str):
    from tinygrad_core import Tensor
    from tinygrad_core.nn.optim import Adam
    from tinygrad_core.nn.state import get_parameters
    from training import make_train_step
    Tensor.manual_seed(0)
    if model == "mlp":
        from mnist_mlp import TinyMLP
        net = TinyMLP()
        params = [net.l1.weight, net.l1.bias, net.l2.weight, net.l2.bias]     # as mnist_mlp.main builds Adam
    else:
        from mnist_cnn import MnistCNN
        from cifar_cnn import TinyCNN
        net = MnistCNN() if model == "mnist_cnn" else TinyCNN()
        params = get_parameters(net)
    return make_train_step(net, Adam(params, lr=MODELS[model]["lr"]), jit=True)


def kernel_table(capture, timer: KernelTimer, steps: int) -> tuple[list[dict], float]:
    """Per kernel name: launches, ms and GFLOP/s per step, threads it is split over; and the kernel ms per step."""
    from tinygrad_core.engine.realize import CompiledRunner
    runners = {id(r.program): r for r, _, _ in capture.kernels if isinstance(r, CompiledRunner)}
    rows: dict[str, dict] = {}
    for pid, runner in runners.items():
        row = rows.setdefault(runner.name, {"name": runner.name, "launches": 0, "seconds": 0.0, "flops": 0,
                                            "bytes": 0, "threads": set()})
        row["launches"] += timer.launches[pid] / steps
        row["seconds"] += timer.seconds[pid] / steps
        row["flops"] += runner.flops * timer.launches[pid] / steps
        row["bytes"] += runner.mem_estimate * timer.launches[pid] / steps
        if hasattr(runner.program, "slices"):      # (tinygrad_cpu: how a launch is split among threads)
            size = int(np.prod([int(g) for g in runner.global_size]))
            row["threads"].add(len(runner.program.slices(size)))
    total = sum(r["seconds"] for r in rows.values())
    return sorted(rows.values(), key=lambda r: -r["seconds"]), total


def run_core(model: str, budget_s: float) -> dict:
    from tinygrad_core import Device
    from tinygrad_core.engine.realize import CompiledRunner, CopyRunner
    conf = MODELS[model]
    train, source = batches(model)
    t = time.perf_counter()
    step = build_core(model)
    held = [(x.realize(), y.realize()) for (x, y), _ in zip(train, range(4))]
    for x, y in held[:3]:            # run (compiles), capture, first replay
        step(x, y)[0].item()
    warmup_s = time.perf_counter() - t
    capture = next(iter(step.captures.values()))
    kernels = [r for r, _, _ in capture.kernels if isinstance(r, CompiledRunner)]
    copies = sum(isinstance(r, CopyRunner) for r, _, _ in capture.kernels)

    def replay(i):
        step(*held[i % len(held)])
    walls = timed(replay, conf["steps"], budget_s)
    loss = step(*held[0])[0]
    item = timed(lambda i: loss.item(), 50, 0.2)
    classes = {type(r.program) for r in kernels}
    with KernelTimer(classes) as timer:
        timed_walls = timed(replay, max(3, conf["steps"] // 2), budget_s / 2)
    per_kernel, kernel_s = kernel_table(capture, timer, len(timed_walls))
    functions, profiled_wall = profile_functions(replay, max(2, min(conf["steps"] // 4, 50)))

    loop = epoch_loop(iter(train), lambda x, y: step(x, y)[0].item(), conf["loop"], budget_s)
    extras = main_job_extras(step, held) if model == "mlp" else {}
    return {"source": source, "device": Device.DEFAULT, "warmup_s": warmup_s, "kernels_in_recording": len(kernels),
            "copies_in_recording": copies, "step_s": statistics.median(walls), "step_min_s": min(walls),
            "steps": len(walls), "item_s": statistics.median(item), "timed_step_s": statistics.median(timed_walls),
            "timed_step_mean_s": statistics.mean(timed_walls), "kernel_s": kernel_s, "per_kernel": per_kernel,
            "functions": functions[:TOP_FUNCTIONS],
            "phases": phases(functions), "profiled_step_s": profiled_wall,
            "pipeline": pipeline_parts(model, train, conf["loop"], budget_s / 2), "loop_s": statistics.median(loop),
            "loop_n": len(loop), "extras": extras}


def epoch_loop(batches, step, count: int, budget_s: float) -> list[float]:
    """Seconds of each iteration of `for x, y in batches: step(x, y)` (the batch's preparation included)."""
    times, start = [], time.perf_counter()
    for _ in range(count):
        t = time.perf_counter()
        step(*next(batches))
        times.append(time.perf_counter() - t)
        if len(times) >= 3 and time.perf_counter() - start > budget_s:
            break
    return times


PHASES = [("TinyJit.__call__ (all of a replay)", "engine/jit.py", "__call__"),
          ("  inputs: _key, realize_all, signature", None, None),
          ("  TinyJit._replay", "engine/jit.py", "_replay"),
          ("    the launches (jit._launcher; and jit.py's other lambdas)", "engine/jit.py", "<lambda>"),
          ("      the program's __call__ (the kernel)", "runtime.py", "__call__"),
          ("    _renew (tensors on written buffers)", "engine/jit.py", "_renew"),
          ("    Buffer.deallocate (planned memory given back)", "device.py", "deallocate")]


def phases(functions: list[dict]) -> list[tuple[str, float, float]]:
    """Cumulative ms per step of the replay's phases (from the profile), the inputs' share as the difference."""
    def cum(path, name):
        found = [f for f in functions
                 if f["function"].split(":")[0].endswith(path) and f["function"].endswith(f"({name})")]
        return (sum(f["cum_ms"] for f in found), sum(f["calls"] for f in found)) if found else (0.0, 0.0)
    rows = [(label, *cum(path, name)) if path else (label, 0.0, 0.0) for label, path, name in PHASES]
    rows[1] = (rows[1][0], rows[0][1] - rows[2][1], 0.0)
    return rows


def main_job_extras(step, held) -> dict:
    """What examples/training.py's loop does per step besides the step and loss.item(): correct.item(), the tqdm bar."""
    from tqdm import tqdm
    _, correct = step(*held[0])
    bar = tqdm(range(10 ** 6), file=io.StringIO(), dynamic_ncols=True)
    out = {"correct.item()": statistics.median(timed(lambda i: int(correct.item()), 200, 0.3)),
           "tqdm bar.set_postfix(..., refresh=False)": statistics.median(timed(lambda i: bar.set_postfix(
               loss=f"{0.1 * i:.4f}", acc=f"{i / 7:.2f}%", refresh=False), 200, 0.3))}
    bar.close()
    return out


# ---- PyTorch ----

def torch_model(model: str):
    from torch import nn
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    if model == "mnist_cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                             nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                             nn.Flatten(), nn.Linear(32 * 7 * 7, 10))

    def block(c_in, c_out):
        return [nn.Conv2d(c_in, c_out, kernel_size=3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU()]
    return nn.Sequential(*block(3, 32), *block(32, 64), nn.AvgPool2d(2), *block(64, 128), *block(128, 256),
                         nn.AvgPool2d(2), nn.Flatten(), nn.Linear(256 * 8 * 8, 512), nn.ReLU(), nn.Linear(512, 10))


def run_torch(model: str, threads: int, budget_s: float) -> dict:
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    conf = MODELS[model]
    net = torch_model(model)
    optimizer = torch.optim.Adam(net.parameters(), lr=conf["lr"])
    train, _ = batches(model)
    net.train()

    def step(x, y):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y).long())
        loss.backward()
        optimizer.step()
        return loss
    held = [(x, y) for (x, y), _ in zip(train.arrays(), range(4))]
    for x, y in held[:3]:
        step(x, y).item()
    walls = timed(lambda i: step(*held[i % len(held)]).item(), conf["steps"], budget_s)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for i in range(3):
            step(*held[i % len(held)]).item()
    ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:TOP_TORCH]
    top = [{"name": e.key, "calls": e.count / 3, "self_ms": e.self_cpu_time_total / 1e3 / 3} for e in ops]
    total_self = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e3 / 3
    loop = epoch_loop(train.arrays(), lambda x, y: step(x, y).item(), conf["loop"], budget_s)
    return {"version": torch.__version__, "threads": torch.get_num_threads(), "step_s": statistics.median(walls),
            "step_min_s": min(walls), "steps": len(walls), "loop_s": statistics.median(loop),
            "ops": top, "self_total_ms": total_self}


# ---- the report ----

def table(header: list[str], rows: list[list]) -> str:
    align = "|".join("---" if i == 0 else "---:" for i in range(len(header)))
    lines = ["| " + " | ".join(header) + " |", f"|{align}|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def f2(x: float) -> str:
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.0f}"


def kernel_row(r: dict, kernel_s: float, alone: dict | None) -> list:
    def rate(amount):
        return f"{amount / r['seconds'] / 1e9:.1f}" if r["seconds"] else "-"
    return [f"`{r['name']}`", f"{r['launches']:g}", f2(ms(r["seconds"])), f"{100 * r['seconds'] / kernel_s:.1f}%",
            f"{1e6 * r['seconds'] / max(r['launches'], 1e-9):.0f}", rate(r["flops"]), rate(r["bytes"]),
            ",".join(map(str, sorted(r["threads"]))),
            f"{1e6 * alone['seconds'] / alone['launches']:.0f}" if alone and alone["launches"] else "-"]


def model_section(model: str, core: dict, torch: dict | None, single: dict | None) -> str:
    step, kernel = ms(core["timed_step_mean_s"]), ms(core["kernel_s"])
    host = core["step_s"] + core["item_s"] + sum(core["pipeline"].values())
    out = [f"## {MODELS[model]['title']}, batch {MODELS[model]['batch']}",
           f"Data: {core['source']}. The recording holds {core['kernels_in_recording']} kernels"
           f" and {core['copies_in_recording']} copies; building the model and the first three steps (compile, "
           f"capture, replay) took {core['warmup_s']:.1f} s.", ""]
    rows = [["step (TinyJit replay), median", f2(ms(core["step_s"])), f"min {f2(ms(core['step_min_s']))}, "
             f"{core['steps']} steps"],
            ["step while kernels are timed (mean)", f2(step), ""],
            ["sum of kernel times", f2(kernel), f"{100 * kernel / step:.0f}% of the step"],
            ["Python between launches (step - kernels)", f2(step - kernel), f"{100 * (step - kernel) / step:.0f}%"],
            ["loss.item() after the step", f2(ms(core["item_s"])), ""],
            ["data pipeline (parts below, summed)", f2(ms(sum(core["pipeline"].values()))), ""],
            ["epoch-like loop: Batches + step + loss.item(), median", f2(ms(core["loop_s"])),
             f"{core['loop_n']} steps"],
            ["loop - (step + loss.item() + pipeline)", f2(ms(core["loop_s"] - host)), "(noise, or cold caches)"]]
    if single:
        rows += [["step on 1 thread (TINYGRAD_CPU_THREADS=1)", f2(ms(single["step_s"])),
                  f"kernels {f2(ms(single['kernel_s']))} ms"]]
    if torch:
        rows += [["PyTorch step", f2(ms(torch["step_s"])), f"ratio {core['step_s'] / torch['step_s']:.2f}x"],
                 ["PyTorch epoch-like loop", f2(ms(torch["loop_s"])), f"ratio {core['loop_s'] / torch['loop_s']:.2f}x"]]
    out += [table(["per step", "ms", "note"], rows), ""]
    alone = {r["name"]: r for r in single["per_kernel"]} if single else {}

    out += ["Kernels by time (per step; µs/launch shows the fixed cost of small ones; GB/s counts each input once "
            "and the output; threads: the slices a launch is split into; the last column: the same kernel in the "
            "process on 1 thread):", "",
            table(["kernel", "launches", "ms", "share", "µs/launch", "GFLOP/s", "GB/s", "threads",
                   "µs/launch, 1 thread"], [kernel_row(r, core["kernel_s"], alone.get(r["name"]))
                                            for r in core["per_kernel"][:TOP_KERNELS]]),
            f"\n({len(core['per_kernel'])} kernel names in all; the rest take "
            f"{100 * sum(r['seconds'] for r in core['per_kernel'][TOP_KERNELS:]) / core['kernel_s']:.1f}%.)", ""]
    out += [f"The replay under cProfile ({f2(ms(core['profiled_step_s']))} ms per step with the profiler on; it "
            "slows Python, not the kernels): phases by cumulative time, then functions by own time. The kernel's "
            "work shows in the program's __call__ (its own slice) and in lock waits (the other threads' slices).", "",
            table(["phase", "cum ms/step", "calls/step"], [[label, f2(c), f"{n:g}" if n else ""]
                                                          for label, c, n in core["phases"]]), "",
            table(["function", "calls/step", "own ms/step", "cum ms/step"], [
                [f"`{r['function']}`", f"{r['calls']:g}", f2(r["own_ms"]), f2(r["cum_ms"])]
                for r in core["functions"]]),
            ""]
    rows = [[name, f"{1e6 * s:.0f}"] for name, s in core["pipeline"].items()]
    rows += [[f"(main job's loop, examples/training.py) {name}", f"{1e6 * s:.0f}"]
             for name, s in core["extras"].items()]
    out += ["Data pipeline per step (numpy work as `Batches` does it, then the tensors):", "",
            table(["part", "µs/step"], rows), ""]
    if torch:
        out += [f"PyTorch {torch['version']} ({torch['threads']} threads) operators by self CPU time (torch.profiler, "
                f"{f2(torch['self_total_ms'])} ms of self time per step with the profiler on):", "",
                table(["operator", "calls/step", "self ms/step"],
                      [[f"`{o['name']}`", f"{o['calls']:g}", f2(o["self_ms"])] for o in torch["ops"]]), ""]
    return "\n".join(out)


def summary(results: dict) -> str:
    rows = []
    for model, (core, torch, _) in results.items():
        kernel, step = ms(core["kernel_s"]), ms(core["timed_step_mean_s"])
        rows.append([MODELS[model]["title"], f2(ms(core["step_s"])), f2(kernel), f2(step - kernel),
                     f2(ms(sum(core["pipeline"].values()))), f2(ms(core["loop_s"])),
                     f2(ms(torch["step_s"])) if torch else "-", f2(ms(torch["loop_s"])) if torch else "-",
                     f"{core['step_s'] / torch['step_s']:.2f}x" if torch else "-",
                     f"{core['step_min_s'] / torch['step_min_s']:.2f}x" if torch else "-",
                     f"{core['loop_s'] / torch['loop_s']:.2f}x" if torch else "-"])
    return table(["model", "step ms", "kernels ms", "Python ms", "pipeline ms", "loop ms/step", "torch step ms",
                  "torch loop ms/step", "step ratio",
                  "fastest steps' ratio", "loop ratio"], rows)


def worker(args) -> dict:
    framework, model = args.worker
    if framework == "torch":
        return run_torch(model, args.threads, args.budget)
    return run_core(model, args.budget)


def spawn(framework: str, model: str, args, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", framework, model, "--threads",
                           str(args.threads), "--budget", str(args.budget)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"{framework} {model} failed:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"any of {', '.join(MODELS)}")
    parser.add_argument("--budget", type=float, default=4.0, help="seconds of timed steps per measurement (about)")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="PyTorch's threads (default: tinygrad_cpu's count)")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.threads:
        from tinygrad_cpu.runtime import thread_count
        args.threads = thread_count()
    if args.worker:
        print(json.dumps(worker(args), default=sorted))
        return
    started, load_before = time.perf_counter(), os.getloadavg()
    results = {}
    for model in args.models.split(","):
        say(f"{model}: tinygrad_core...")
        core = spawn("tinygrad_core", model, args)
        say(f"{model}: torch...")
        torch = None if args.no_torch else spawn("torch", model, args)
        single = None
        if MODELS[model]["single"] and args.threads > 1:
            say(f"{model}: tinygrad_core on 1 thread...")
            single = spawn("tinygrad_core", model, args, {"TINYGRAD_CPU_THREADS": "1"})
        results[model] = core, torch, single
    load_after = os.getloadavg()
    print(f"# Where a training step's time goes, {datetime.date.today()}\n")
    print(f"- Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; tinygrad_core device {next(iter(results.values()))[0]['device']}, "
          f"{args.threads} threads (TINYGRAD_CPU_THREADS), PyTorch set to the same.")
    print(f"- Load average {' / '.join(f'{x:.1f}' for x in load_before)} before, "
          f"{' / '.join(f'{x:.1f}' for x in load_after)} after: other work on the machine makes every figure noisy; "
          f"compare ratios within one run.")
    print(f"- Command: `python bench/profile_step.py --budget {args.budget:g}` "
          f"({time.perf_counter() - started:.0f} s). Each framework and model in a process of its own; medians "
          "over the timed steps.\n")
    print(summary(results) + "\n")
    print("Step: one jitted training step on batches already on the device (PyTorch: eager, `torch.from_numpy`); "
          "ratios: tinygrad_core's time / PyTorch's (other work on the machine only slows a step down, so the "
          "fastest steps' ratio is the least noisy figure); loop: the examples' `Batches` (shuffle, index, augment, "
          "normalise, to tensors) + step + `loss.item()`, as bench/epochs.py times an epoch. Kernels: each program "
          "launch timed; Python: the step's wall time (kernels timed) minus the kernels'.\n")
    for model, (core, torch, single) in results.items():
        print(model_section(model, core, torch, single))


if __name__ == "__main__":
    main()
