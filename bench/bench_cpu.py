"""CPU backend benchmark: the issue's workloads on tinygrad_core CPU and numpy, in one process, as ratios.

Usage: python bench/bench_cpu.py [--quick]    (medians of several timed runs after a warm-up run that compiles)
Threads: TINYGRAD_CPU_THREADS for tinygrad_core (default: all CPUs), OPENBLAS_NUM_THREADS for numpy's matmul."""
from __future__ import annotations
import argparse
import gc
import statistics
import time
import numpy as np
from tinygrad_core import Tensor, GlobalCounters


def median_seconds(runs: list, repeats: int) -> list[float]:
    """Median wall time of each function. The functions take turns, so load from other processes on a shared
    machine falls on all of them alike and the ratios stay meaningful even when absolute times are noise."""
    for fn in runs:
        gc.collect()
        fn()                                # warm-up: compiles kernels, fills the allocator's cache
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for fn, spent in zip(runs, times):
            gc.collect()                    # a result still alive in a reference cycle would be reused, not rebuilt
            started = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - started)
    return [statistics.median(spent) for spent in times]


def tinygrad_run(build):
    """Time building and realizing a fresh graph (the result is dropped each time, so nothing is reused)."""
    def run():
        before = GlobalCounters.kernel_count
        build().realize()
        assert GlobalCounters.kernel_count > before, "the result was reused instead of computed"
    return run


def workloads(quick: bool):
    """(name, unit, work in units, tinygrad_core run, numpy run, correctness check) for each workload."""
    rng = np.random.default_rng(0)
    for n in (512, 1024) if quick else (512, 1024, 2048):
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        ta, tb = Tensor(a, device="CPU").realize(), Tensor(b, device="CPU").realize()

        def check_matmul(ta=ta, tb=tb, a=a, b=b):
            np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-3, atol=1e-3)
        yield (f"matmul {n}", "GFLOP/s", 2 * n ** 3 / 1e9, tinygrad_run(lambda ta=ta, tb=tb: ta @ tb),
               lambda a=a, b=b: a @ b, check_matmul)
    size = 4 * 1024 * 1024 if quick else 16 * 1024 * 1024
    x, y, z = (rng.standard_normal(size, dtype=np.float32) for _ in range(3))
    tx, ty, tz = (Tensor(v, device="CPU").realize() for v in (x, y, z))

    def numpy_chain():             # five passes over memory
        return np.exp(np.maximum(x * y + z, 0) * 0.5)

    def chain():                   # one fused kernel
        return ((tx * ty + tz).relu() * 0.5).exp()

    def check_chain():
        np.testing.assert_allclose(chain().numpy(), numpy_chain(), rtol=1e-5)
    # bytes moved: three inputs read, one output written
    yield f"fused chain {size >> 20}M", "GB/s", 4 * 4 * size / 1e9, tinygrad_run(chain), numpy_chain, check_chain
    m = rng.standard_normal((4096, 4096), dtype=np.float32)
    tm = Tensor(m, device="CPU").realize()

    def check_sum():
        np.testing.assert_allclose(tm.sum(axis=1).numpy(), m.sum(axis=1), rtol=1e-4, atol=1e-3)
    yield "sum(axis=1) 4096x4096", "GB/s", m.nbytes / 1e9, tinygrad_run(lambda: tm.sum(axis=1)), \
        lambda: m.sum(axis=1), check_sum


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--repeats", type=int, default=0)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 9)
    print(f"{'workload':24s} {'unit':8s} {'tinygrad_core CPU':>18s} {'numpy':>10s} {'ratio':>7s}")
    for name, unit, work, ours, numpy_fn, check in workloads(args.quick):
        check()
        GlobalCounters.reset()
        ours_s, numpy_s = median_seconds([ours, numpy_fn], repeats)
        print(f"{name:24s} {unit:8s} {work / ours_s:18.1f} {work / numpy_s:10.1f} {numpy_s / ours_s:7.2f}x")


if __name__ == "__main__":
    main()
