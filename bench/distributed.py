"""Data-parallel training's cost: the MNIST MLP's jitted step (examples/mnist_mlp.py's TinyMLP and Adam) on 1 and 2
ranks of one thread each, then, on paper, the step time at 8, 64 and 512 ranks on two networks.

Usage: python bench/distributed.py [--steps 200] [--batch 128] [--ranks 1 2]

--batch is the global batch, split over the ranks (as `mnist_mlp.py --distributed` splits it). Each rank reports its
step time and the part of it spent in the all-reduce host step (waiting for the slower rank included). The timings
are wall-clock on a shared machine: other work on its cores makes them noisy, so run it on a quiet one."""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import time
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
# (name, bandwidth in bytes/s, latency per message in s): assumptions for the estimate, not measurements
NETWORKS = [("10 Gb/s Ethernet (TCP)", 1.25e9, 25e-6), ("100 Gb/s InfiniBand", 12.5e9, 2e-6)]


def rank_main(steps: int, batch: int):
    """One rank: time the jitted step after 5 warm-up steps; rank 0 prints a line."""
    sys.path.insert(0, str(ROOT / "examples"))
    from tinygrad_core import Tensor, distributed
    from tinygrad_core.nn.optim import Adam
    from mnist_mlp import TinyMLP
    from training import make_train_step
    host = [0.0]
    run_host_step = distributed._HostStep.__call__

    def timed(self, bufs, var_vals=None, wait=False):
        start = time.perf_counter()
        run_host_step(self, bufs, var_vals, wait)
        host[0] += time.perf_counter() - start
    distributed._HostStep.__call__ = timed
    model = TinyMLP()
    params = [model.l1.weight, model.l1.bias, model.l2.weight, model.l2.bias]
    optimizer = distributed.DistributedOptimizer(Adam(params))
    step = make_train_step(model, optimizer, jit=True)
    local = batch // distributed.world_size
    rng = np.random.default_rng(distributed.rank)
    x, y = Tensor(rng.random((local, 784), dtype=np.float32)), Tensor(rng.integers(0, 10, local).astype(np.int32))
    for _ in range(5):
        step(x, y)[0].item()
    host[0], start = 0.0, time.perf_counter()
    for _ in range(steps):
        step(x, y)[0].item()
    seconds = (time.perf_counter() - start) / steps
    if distributed.rank == 0:
        grad_bytes = sum(p.nbytes() for p in params)
        print(f"RESULT {distributed.world_size} {seconds} {host[0] / steps} {grad_bytes}", flush=True)


def measure(ranks: int, steps: int, batch: int) -> tuple[float, float, int]:
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    env = {**os.environ, "TINYGRAD_CPU_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    out = subprocess.run([exe, "--oversubscribe", "-n", str(ranks), sys.executable, __file__, "--rank",
                          "--steps", str(steps), "--batch", str(batch)], capture_output=True, text=True, env=env)
    line = next((line for line in out.stdout.splitlines() if line.startswith("RESULT")), None)
    if line is None:
        sys.exit(f"mpiexec -n {ranks} failed:\n{out.stdout}{out.stderr}")
    _, _, seconds, host, grad_bytes = line.split()
    return float(seconds), float(host), int(grad_bytes)


def allreduce_seconds(n: int, nbytes: int, bandwidth: float, latency: float, ring: bool) -> float:
    """A ring all-reduce: 2(n-1) steps of nbytes/n each; recursive halving and doubling: 2 log2(n) steps moving the
    same 2(n-1)/n * nbytes in all."""
    moved = 2 * (n - 1) / n * nbytes / bandwidth
    return moved + (2 * (n - 1) if ring else 2 * np.log2(n)) * latency


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=128, help="global batch, split over the ranks")
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)     # (run by mpiexec)
    args = parser.parse_args()
    if args.rank:
        return rank_main(args.steps, args.batch)
    print(f"MNIST MLP, Adam, global batch {args.batch}, one thread per rank, {args.steps} timed steps")
    print(f"{'ranks':>5} {'step ms':>8} {'all-reduce ms':>13} {'samples/s':>10}")
    results = {}
    for n in args.ranks:
        seconds, host, grad_bytes = results[n] = measure(n, args.steps, args.batch)
        print(f"{n:5d} {seconds * 1e3:8.2f} {host * 1e3:13.2f} {args.batch / seconds:10.0f}")
    seconds, host, grad_bytes = results[min(results)]
    per_sample = (seconds - host) / (args.batch // min(results))       # one rank's compute per sample
    local = args.batch // max(results)
    print(f"\non paper: {grad_bytes / 1e3:.0f} kB of gradients per step, {local} samples per rank per step "
          f"({per_sample * local * 1e3:.2f} ms of compute, measured above), the all-reduce not overlapped")
    for name, bandwidth, latency in NETWORKS:
        print(f"{name}: {bandwidth / 1e9:g} GB/s, {latency * 1e6:g} us per message; a ring is latency-bound past "
              f"{grad_bytes / (bandwidth * latency):.0f} ranks")
        for n in (8, 64, 512):
            compute = per_sample * local
            for kind, ring in (("ring", True), ("halving-doubling", False)):
                step = compute + allreduce_seconds(n, grad_bytes, bandwidth, latency, ring)
                print(f"  {n:4d} ranks, {kind:16s}: step {step * 1e3:7.2f} ms, {n * local / step:9.0f} samples/s, "
                      f"efficiency {compute / step:4.0%}")


if __name__ == "__main__":
    main()
