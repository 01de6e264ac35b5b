"""One framework's side of the side-by-side benchmark: runs every workload of bench/compare.py in this process.

compare.py starts this script once per framework (and once more per "first step" measurement), so no framework's
threads, allocator or import side effects touch another's figures. Results go to a JSON file, rewritten after each
workload, so a crash or a timeout keeps what was measured before it."""
from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import math
import os
import statistics
import sys
import time
import traceback

import numpy as np

MATMUL_SIZES = (512, 1024, 2048)
MOST_CALLS = 500            # timed calls of one workload at most (time_calls)
CHAIN_ELEMENTS = 16 * 1024 * 1024
SUM_SIDE = 4096
MLP_BATCH, CNN_BATCH = 128, 64
BATCH_POOL = 4                  # steps cycle through a few pre-made batches, as a data loader would hand them over
LEARNING_RATE = 1e-3


# ---------------------------------------------------------------------------------------------------------------------
# the frameworks: each builds the same computations from the same numpy inputs; run() must finish the work
# ---------------------------------------------------------------------------------------------------------------------

class NumpyFramework:
    """The baseline. Training: the MLP written out by hand (forward, backward, Adam); numpy has no conv layers."""
    name = "numpy"

    def __init__(self, options):
        self.version, self.device = np.__version__, "CPU"

    def matmul(self, a, b):
        return lambda: a @ b

    def chain(self, x, y, z):
        return lambda: np.exp(np.maximum(x * y + z, 0) * 0.5)

    def sum_rows(self, m):
        return lambda: m.sum(axis=1)

    def to_numpy(self, result):
        return result

    def mlp_step(self, batches):
        mlp = NumpyMLP(np.random.default_rng(0))
        return lambda i: mlp.step(*batches[i % len(batches)])

    def cnn_step(self, batches):
        raise NotImplementedError("n/a: numpy has no convolution layers or autograd")


class NumpyMLP:
    """784-128-10 with ReLU, softmax cross-entropy and Adam, float32 throughout."""

    def __init__(self, rng):
        def uniform(shape, fan_in):
            bound = 1 / math.sqrt(fan_in)
            return rng.uniform(-bound, bound, shape).astype(np.float32)
        self.params = [uniform((784, 128), 784), uniform(128, 784), uniform((128, 10), 128), uniform(10, 128)]
        self.moments = [(np.zeros_like(p), np.zeros_like(p)) for p in self.params]
        self.steps = 0

    def step(self, x, labels) -> float:
        w1, b1, w2, b2 = self.params
        hidden = x @ w1 + b1
        active = np.maximum(hidden, 0)
        logits = active @ w2 + b2
        logits -= logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        rows = np.arange(len(labels))
        loss = -np.log(probabilities[rows, labels]).mean()
        d_logits = probabilities
        d_logits[rows, labels] -= 1
        d_logits /= len(labels)
        d_active = d_logits @ w2.T
        d_active[hidden <= 0] = 0
        grads = [x.T @ d_active, d_active.sum(axis=0), active.T @ d_logits, d_logits.sum(axis=0)]
        self.steps += 1
        beta1, beta2, eps = 0.9, 0.999, 1e-8
        step_size = LEARNING_RATE * math.sqrt(1 - beta2 ** self.steps) / (1 - beta1 ** self.steps)
        for param, grad, (m, v) in zip(self.params, grads, self.moments):
            m *= beta1
            m += (1 - beta1) * grad
            v *= beta2
            v += (1 - beta2) * grad * grad
            param -= step_size * m / (np.sqrt(v) + eps)
        return float(loss)


class TorchFramework:
    """PyTorch CPU, eager, with a fixed number of intra-op threads."""
    name = "torch"

    def __init__(self, options):
        import torch
        torch.set_num_threads(options.torch_threads)
        self.torch = torch
        self.version, self.device = torch.__version__, f"CPU, {torch.get_num_threads()} threads"

    def _tensor(self, array):
        return self.torch.from_numpy(array)

    def matmul(self, a, b):
        ta, tb = self._tensor(a), self._tensor(b)
        return lambda: ta @ tb

    def chain(self, x, y, z):
        tx, ty, tz = map(self._tensor, (x, y, z))
        return lambda: self.torch.exp(self.torch.relu(tx * ty + tz) * 0.5)

    def sum_rows(self, m):
        tm = self._tensor(m)
        return lambda: tm.sum(dim=1)

    def to_numpy(self, result):
        return result.numpy()

    def _train_step(self, model, batches):
        torch = self.torch
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
        batches = [(self._tensor(x), self._tensor(y.astype(np.int64))) for x, y in batches]
        model.train()

        def step(i):
            x, y = batches[i % len(batches)]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()
        return step

    def mlp_step(self, batches):
        nn = self.torch.nn
        torch_seed(self.torch)
        return self._train_step(nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)), batches)

    def cnn_step(self, batches):
        nn = self.torch.nn
        torch_seed(self.torch)

        def conv_block(c_in, c_out):
            return [nn.Conv2d(c_in, c_out, kernel_size=3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU()]
        model = nn.Sequential(*conv_block(3, 32), *conv_block(32, 64), nn.AvgPool2d(2),
                              *conv_block(64, 128), *conv_block(128, 256), nn.AvgPool2d(2),
                              nn.Flatten(), nn.Linear(256 * 8 * 8, 512), nn.ReLU(), nn.Linear(512, 10))
        return self._train_step(model, batches)


def torch_seed(torch):
    torch.manual_seed(0)


class TinygradFramework:
    """tinygrad 0.14 or tinygrad_core (the same API): lazy, so run() realizes and synchronises, and checks that a
    kernel ran (a graph already computed could otherwise hand back its buffer without doing the work)."""

    def __init__(self, options, module_name: str):
        import importlib
        self.name = module_name
        tg = self.tg = importlib.import_module(module_name)
        helpers = importlib.import_module(f"{module_name}.helpers")
        self.counters = helpers.GlobalCounters
        self.Tensor, self.TinyJit, self.nn = tg.Tensor, tg.TinyJit, importlib.import_module(f"{module_name}.nn")
        self.optim, self.state = (importlib.import_module(f"{module_name}.nn.{m}") for m in ("optim", "state"))
        if hasattr(self.Tensor, "train"):
            self.training = self.Tensor.train          # tinygrad_core: `with Tensor.train():`, as the seed writes it
        elif hasattr(helpers, "TRAINING"):             # tinygrad 0.14: a context variable (its optimizer checks it)
            self.training = lambda: helpers.Context(TRAINING=1)
        else:
            self.Tensor.training = True
            self.training = contextlib.nullcontext
        self.version = getattr(tg, "__version__", None) or package_version(module_name)
        self.device = str(tg.Device.DEFAULT)
        renderer = getattr(tg.Device[tg.Device.DEFAULT], "renderer", None)
        if renderer is not None:                       # what the device compiles with (clang, LLVM...)
            self.device += f" ({type(renderer).__name__})"

    def _tensor(self, array):
        return self.Tensor(array).realize()

    def _synchronize(self):
        self.tg.Device[self.tg.Device.DEFAULT].synchronize()

    def _computed(self, build):
        def run():
            before = self.counters.kernel_count
            result = build().realize()
            self._synchronize()
            if self.counters.kernel_count == before:
                raise RuntimeError("no kernel ran: the result was reused instead of computed, the timing is void")
            return result
        return run

    def matmul(self, a, b):
        ta, tb = self._tensor(a), self._tensor(b)
        return self._computed(lambda: ta @ tb)

    def chain(self, x, y, z):
        tx, ty, tz = map(self._tensor, (x, y, z))
        return self._computed(lambda: ((tx * ty + tz).relu() * 0.5).exp())

    def sum_rows(self, m):
        tm = self._tensor(m)
        return self._computed(lambda: tm.sum(axis=1))

    def to_numpy(self, result):
        return result.numpy()

    def _train_step(self, model, batches):
        """The seed's loop under @TinyJit: forward, backward and Adam's update realized as one schedule."""
        optimizer = self.optim.Adam(self.state.get_parameters(model), lr=LEARNING_RATE)
        batches = [(self._tensor(x), self._tensor(y.astype(np.int32))) for x, y in batches]

        @self.TinyJit
        def jitted_step(x, y):
            with self.training():
                optimizer.zero_grad()
                loss = model(x).sparse_categorical_crossentropy(y).backward()
                return loss.realize(*optimizer.schedule_step())
        return lambda i: jitted_step(*batches[i % len(batches)]).item()

    def mlp_step(self, batches):
        self.Tensor.manual_seed(0)
        return self._train_step(TinyMLP(self.nn), batches)

    def cnn_step(self, batches):
        self.Tensor.manual_seed(0)
        return self._train_step(TinyCNN(self.nn), batches)


class TinyMLP:
    """The seed's MLP (section 3.3)."""

    def __init__(self, nn):
        self.l1, self.l2 = nn.Linear(784, 128), nn.Linear(128, 10)

    def __call__(self, x):
        return self.l2(self.l1(x.reshape(shape=(-1, 784))).relu())


class TinyCNN:
    """The seed's CNN (section 4.2): conv-conv-pool-conv-conv-pool with BatchNorm, then fc 256*8*8 -> 512 -> 10."""

    def __init__(self, nn):
        self.conv1, self.bn1 = nn.Conv2d(3, 32, kernel_size=3, padding=1), nn.BatchNorm2d(32)
        self.conv2, self.bn2 = nn.Conv2d(32, 64, kernel_size=3, padding=1), nn.BatchNorm2d(64)
        self.conv3, self.bn3 = nn.Conv2d(64, 128, kernel_size=3, padding=1), nn.BatchNorm2d(128)
        self.conv4, self.bn4 = nn.Conv2d(128, 256, kernel_size=3, padding=1), nn.BatchNorm2d(256)
        self.fc1, self.fc2 = nn.Linear(256 * 8 * 8, 512), nn.Linear(512, 10)

    def __call__(self, x):
        x = self.bn1(self.conv1(x)).relu()
        x = self.bn2(self.conv2(x)).relu()
        x = x.avg_pool2d(kernel_size=2)
        x = self.bn3(self.conv3(x)).relu()
        x = self.bn4(self.conv4(x)).relu()
        x = x.avg_pool2d(kernel_size=2)
        x = x.reshape(shape=(-1, 256 * 8 * 8))
        return self.fc2(self.fc1(x).relu())


def package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    for dist in (name, name.replace("_", "-")):
        try:
            return version(dist)
        except PackageNotFoundError:
            pass
    return "unknown"


def load_framework(name: str, options):
    if name == "numpy":
        return NumpyFramework(options)
    if name == "torch":
        return TorchFramework(options)
    return TinygradFramework(options, name)


# ---------------------------------------------------------------------------------------------------------------------
# timing and the workloads
# ---------------------------------------------------------------------------------------------------------------------

def time_calls(run, repeats: int, warmup: int, budget_s: float, least_s: float = 0.0) -> list[float]:
    """Seconds of each timed call after `warmup` untimed ones; stops early once budget_s is spent. Calls short enough
    are repeated beyond `repeats` until least_s of them is timed (up to MOST_CALLS): the median of 7 calls of a few
    milliseconds moves by a tenth from one run to the next."""
    for i in range(warmup):
        gc.collect()                    # a result still alive in a reference cycle would be reused, not recomputed
        run(i)
    # what lives now (the framework, the model, the inputs) is left out of the collections below, which then walk only
    # what the timed calls made: a full collection walks every object and evicts the caches the next call reads (about
    # 42,000 objects in tinygrad_core's process, 20,000 in numpy's; it made a 512 matmul 1.6 -> 2.3 ms here, numpy's
    # 1.8 -> 1.9 ms). A loop of calls without collections, as a user's, never pays it.
    gc.collect()
    gc.freeze()
    try:
        return timed_calls(run, repeats, warmup, budget_s, least_s)
    finally:
        gc.unfreeze()


def timed_calls(run, repeats: int, warmup: int, budget_s: float, least_s: float) -> list[float]:
    times, deadline = [], time.perf_counter() + budget_s
    for i in itertools.takewhile(lambda i: i < warmup + repeats or (sum(times) < least_s and len(times) < MOST_CALLS),
                                 itertools.count(warmup)):
        gc.collect()                    # outside the timed region: a collection would land in a random repetition
        started = time.perf_counter()
        run(i)
        times.append(time.perf_counter() - started)
        # a call slower than half the budget stops at once: one 100-second training step is figure enough
        if time.perf_counter() > deadline and (len(times) >= 3 or times[-1] > budget_s / 2):
            break
    return times


def matmul_sizes(quick: bool) -> tuple[int, ...]:
    return MATMUL_SIZES[:2] if quick else MATMUL_SIZES


def chain_elements(quick: bool) -> int:
    return CHAIN_ELEMENTS // 4 if quick else CHAIN_ELEMENTS


def workload_names(quick: bool, no_cnn: bool) -> list[tuple[str, str]]:
    """(name, unit) of every workload a worker measures with these options, in order."""
    return ([(f"matmul {n}", "GFLOP/s") for n in matmul_sizes(quick)]
            + [(f"fused chain {chain_elements(quick) >> 20}M", "GB/s"), (f"sum(axis=1) {SUM_SIDE}x{SUM_SIDE}", "GB/s"),
               ("MLP train step", "ms/step")] + [("CNN train step", "ms/step")] * (not no_cnn))


def array_workloads(quick: bool):
    """(name, unit, units of work per call, builder(framework) -> run, numpy reference, tolerance)."""
    rng = np.random.default_rng(0)
    for n in matmul_sizes(quick):
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        yield (f"matmul {n}", "GFLOP/s", 2 * n ** 3 / 1e9, lambda fw, a=a, b=b: fw.matmul(a, b),
               lambda a=a, b=b: a @ b, 1e-3)
    elements = chain_elements(quick)
    x, y, z = (rng.standard_normal(elements, dtype=np.float32) for _ in range(3))
    # 3 inputs read and 1 output written once: what a fused kernel must move; numpy's 5 passes move more
    yield (f"fused chain {elements >> 20}M", "GB/s", 4 * 4 * elements / 1e9, lambda fw: fw.chain(x, y, z),
           lambda: np.exp(np.maximum(x * y + z, 0) * 0.5), 1e-5)
    m = rng.standard_normal((SUM_SIDE, SUM_SIDE), dtype=np.float32)
    yield (f"sum(axis=1) {SUM_SIDE}x{SUM_SIDE}", "GB/s", 4 * SUM_SIDE * SUM_SIDE / 1e9, lambda fw: fw.sum_rows(m),
           lambda: m.sum(axis=1), 1e-4)


def random_batches(shape, batch: int):
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((batch, *shape), dtype=np.float32), rng.integers(0, 10, batch).astype(np.int32))
            for _ in range(BATCH_POOL)]


def error_text(e: BaseException) -> str:
    """The first line of the error plus where it was raised, without this machine's paths."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    message = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return f"{type(e).__name__}: {message}{where}"


def measure_arrays(framework, workloads, options, results: dict, save):
    """Each (name, unit, work, build, reference, tolerance) workload: checked against numpy once, then timed."""
    repeats = 3 if options.quick else options.repeats
    for name, unit, work, build, reference, tolerance in workloads:
        try:
            run = build(framework)
            got = framework.to_numpy(run())                     # the first call compiles, and is checked
            # (7 untimed calls: tinygrad_cpu times a kernel's first 6 launches on one thread and split before it
            # settles on one plan, and the figures are of the steady state)
            times = time_calls(lambda i, run=run: run(), repeats, warmup=7, budget_s=options.budget,
                               least_s=0.0 if options.quick else 1.0)
            # numpy's reference is computed after the timing: its BLAS threads spin on after a matmul and hold the
            # other CPUs for a while, which would be timed as part of the next framework's calls
            expected = reference()
            if not np.allclose(got, expected, rtol=tolerance, atol=tolerance * 10):
                worst = float(np.max(np.abs(got - expected)))
                raise AssertionError(f"wrong result: max abs difference {worst:.3g} from numpy's")
            results[name] = figure(unit, work / statistics.median(times), times)
        except Exception as e:  # noqa: BLE001 - any failure becomes this cell's error, the run goes on
            results[name] = {"unit": unit, "error": error_text(e)}
        progress(framework.name, name, results[name])
        save()


def measure_all(framework, options, results: dict, save):
    measure_arrays(framework, array_workloads(options.quick), options, results, save)
    training = [("MLP train step", (784,), MLP_BATCH, "mlp_step", options.repeats * 3),
                ("CNN train step", (3, 32, 32), CNN_BATCH, "cnn_step", options.repeats)]
    for name, shape, batch, method, step_repeats in training[:1] if options.no_cnn else training:
        try:
            step = getattr(framework, method)(random_batches(shape, batch))
            # two untimed steps: a TinyJit runs the first, records the second and replays from the third on
            first_losses = [step(i) for i in range(2)]
            if not all(math.isfinite(loss) for loss in first_losses):
                raise AssertionError(f"the loss is not finite: {first_losses}")
            times = time_calls(lambda i, step=step: step(i + 2), 3 if options.quick else step_repeats, warmup=0,
                               budget_s=options.budget)
            results[name] = figure("ms/step", 1000 * statistics.median(times), times, first_loss=first_losses[0])
        except NotImplementedError as e:
            results[name] = {"unit": "ms/step", "not_applicable": str(e)}
        except Exception as e:  # noqa: BLE001 - any failure becomes this cell's error, the run goes on
            results[name] = {"unit": "ms/step", "error": error_text(e)}
        progress(framework.name, name, results[name])
        save()


def figure(unit: str, value: float, times: list[float], **extra) -> dict:
    return {"unit": unit, "value": value, "repeats": len(times), "median_s": statistics.median(times),
            "min_s": min(times), "max_s": max(times), **extra}


def progress(framework: str, workload: str, result: dict):
    shown = f"{result['value']:.2f} {result['unit']}" if "value" in result else \
        result.get("error") or result.get("not_applicable")
    print(f"  {framework:14s} {workload:26s} {shown}", file=sys.stderr, flush=True)


def first_step(name: str, options) -> dict:
    """A fresh process's first MLP training step: import, build the model and optimizer, run one step to its loss.
    Everything compiles here (or loads from the disk cache, when compare.py points the cache at a warm folder)."""
    started = time.perf_counter()
    framework = load_framework(name, options)
    imported = time.perf_counter()
    loss = framework.mlp_step(random_batches((784,), MLP_BATCH))(0)
    done = time.perf_counter()
    return {"import_s": imported - started, "first_step_s": done - imported, "loss": loss,
            "version": framework.version, "device": framework.device}


def main():
    parser = argparse.ArgumentParser(description="one framework's part of bench/compare.py")
    parser.add_argument("framework", choices=["numpy", "torch", "tinygrad_core", "tinygrad"])
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--first-step", action="store_true", help="only time the first MLP step of this process")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget", type=float, default=20.0, help="seconds of timed calls per workload, at most "
                                                                    "(at least 3 calls are timed)")
    parser.add_argument("--torch-threads", type=int, default=2)
    parser.add_argument("--no-cnn", action="store_true", help="leave out the CNN training step")
    options = parser.parse_args()

    def save(payload):
        with open(options.json, "w") as f:
            json.dump(payload, f, indent=1)

    if options.first_step:
        try:
            save(first_step(options.framework, options))
        except Exception as e:  # noqa: BLE001 - any failure becomes this cell's error, the run goes on
            save({"error": error_text(e)})
        return
    framework = load_framework(options.framework, options)
    payload = {"version": framework.version, "device": framework.device, "results": {}}
    save(payload)
    measure_all(framework, options, payload["results"], lambda: save(payload))


if __name__ == "__main__":
    main()
