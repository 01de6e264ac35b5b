"""Data-parallel training over MPI (tinygrad_core.distributed): each test starts `mpiexec -n 2` on this file, whose
__main__ is the ranks' program, and bounds it with a timeout. Skipped (saying why) only where mpi4py is missing."""
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
import numpy as np
import pytest
from tinygrad_core import Tensor, TinyJit
from tinygrad_core.dtype import dtypes
from tinygrad_core.nn import Linear
from tinygrad_core.nn.datasets import Batches
from tinygrad_core.nn.optim import Adam

pytestmark = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None,
                                reason="mpi4py is not installed (pip install -e '.[mpi]')")]
STEPS, BATCH, SEED = 5, 128, 3
DTYPES = [dtypes.bool, dtypes.uint8, dtypes.int8, dtypes.uint16, dtypes.int16, dtypes.uint32, dtypes.int32,
          dtypes.uint64, dtypes.int64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]
OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def data():
    rng = np.random.default_rng(0)
    n = BATCH * STEPS
    return rng.standard_normal((n, 12)).astype(np.float32), rng.integers(0, 4, n).astype(np.int32)


def model_and_optimizer(hidden: int = 16):
    Tensor.manual_seed(SEED)
    l1, l2 = Linear(12, hidden), Linear(hidden, 4)
    return (lambda x: l2(l1(x).relu())), Adam([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.01)


def train(model, optimizer, batches, steps: int, each_step=lambda i: None):
    """The examples' jitted step: forward, backward and update realized together (steps 3.. replay the recording)."""
    @TinyJit
    def step(x, y):
        with Tensor.train():
            optimizer.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y)
            loss.backward()
            Tensor.realize_all(loss, *optimizer.schedule_step())
        return loss
    for i, (x, y) in zip(range(steps), batches):
        each_step(i)
        step(x, y)
    return [p.numpy() for p in optimizer.params]


def rank_values(dtype, rank: int) -> np.ndarray:
    """Small values exact in every dtype, different per rank (bools: a pattern per rank)."""
    if dtype == dtypes.bool:
        return np.array([True, False, rank == 1, rank == 0])
    return np.array([1, 2, 3, 1 + rank], dtype=np.float32 if dtype == dtypes.bfloat16 else dtype.np) * (rank + 1)


def worker(scenario: str, out: str):
    """One rank's program."""
    from tinygrad_core import distributed
    rank = distributed.rank
    if scenario == "mismatch":        # rank 1 builds a wider model
        distributed.DistributedOptimizer(model_and_optimizer(16 + rank)[1])
        return
    if scenario == "collectives":
        results = {}
        for dtype in DTYPES:
            t = Tensor(rank_values(dtype, rank), dtype=dtype)
            for op in OPS:
                results[f"{dtype.name}_{op}"] = distributed.allreduce(t, op).numpy()
            results[f"{dtype.name}_broadcast"] = distributed.broadcast(t, root=1).numpy()
        np.savez(f"{out}/rank{rank}.npz", **results)
        return
    model, optimizer = model_and_optimizer()
    if rank == 1:                     # different starting weights: the broadcast from rank 0 must replace them
        for p in optimizer.params:
            p.assign(p + 1).realize()
    optimizer = distributed.DistributedOptimizer(optimizer)
    batches = distributed.DistributedBatches(*data(), BATCH, seed=SEED)

    def each_step(i):
        if scenario == "kill" and rank == 1 and i == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        if scenario == "hang" and rank == 1 and i == 3:
            time.sleep(600)
    params = train(model, optimizer, batches, STEPS if scenario == "train" else 100 * STEPS, each_step)
    np.savez(f"{out}/rank{rank}.npz", *params)
    print(f"rank {rank} finished", flush=True)


def mpiexec(scenario: str, out, timeout: float = 60, **env) -> tuple[subprocess.CompletedProcess, float]:
    """Run this file's worker on 2 ranks (as root where CI runs as root; more ranks than cores where it has one)."""
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    assert exe, "mpi4py is installed but there is no mpiexec: pip install -e '.[mpi]' brings Open MPI's"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "TINYGRAD_CPU_THREADS": "1", **env}
    start = time.monotonic()
    result = subprocess.run([exe, "--oversubscribe", "-n", "2", sys.executable, __file__, scenario, str(out)],
                            capture_output=True, text=True, timeout=timeout, env=env)
    return result, time.monotonic() - start


def test_two_ranks_train_as_one_process_with_both_halves_of_each_batch(tmp_path):
    result, _ = mpiexec("train", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    ranks = [list(np.load(tmp_path / f"rank{r}.npz").values()) for r in range(2)]
    model, optimizer = model_and_optimizer()
    alone = train(model, optimizer, Batches(*data(), BATCH, shuffle=True, drop_last=True, seed=SEED), STEPS)
    for p0, p1, p in zip(*ranks, alone):
        np.testing.assert_array_equal(p0, p1)          # the replicas are bit-identical
        np.testing.assert_allclose(p0, p, rtol=1e-5, atol=1e-6)
    first = model_and_optimizer()[1].params[0].numpy()
    assert np.abs(alone[0] - first).max() > 1e-3       # (and training moved the weights)


def test_allreduce_and_broadcast_on_every_dtype(tmp_path):
    result, _ = mpiexec("collectives", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    for dtype in DTYPES:
        inputs = [rank_values(dtype, r) for r in range(2)]
        for op, fn in OPS.items():
            expected = fn(*inputs)
            for got in ranks:
                np.testing.assert_array_equal(got[f"{dtype.name}_{op}"], expected, err_msg=f"{dtype.name} {op}")
        for got in ranks:
            np.testing.assert_array_equal(got[f"{dtype.name}_broadcast"], inputs[1], err_msg=dtype.name)


def test_a_killed_rank_ends_the_others_with_an_error(tmp_path):
    result, seconds = mpiexec("kill", tmp_path)
    assert result.returncode != 0 and seconds < 60
    assert "finished" not in result.stdout
    assert "rank 1" in result.stderr and "signal 9" in result.stderr, result.stderr


def test_a_hung_rank_ends_every_rank_after_the_timeout(tmp_path):
    result, seconds = mpiexec("hang", tmp_path, TINYGRAD_MPI_TIMEOUT="3")
    assert result.returncode != 0 and seconds < 60
    assert "finished" not in result.stdout
    assert "rank 0: allreduce sum" in result.stderr and "waited 3 s for the other ranks" in result.stderr, result.stderr


def test_ranks_with_different_models_stop_with_the_difference_named(tmp_path):
    result, seconds = mpiexec("mismatch", tmp_path)
    assert result.returncode != 0 and seconds < 60
    assert "DistributedError: the tensors to keep in step (parameters, buffers, optimizer state) differ between " \
           "ranks (rank 0 has 16, rank 1 has 16); the first difference is number 0: ((16, 12), 'float') on rank 0, " \
           "((17, 12), 'float') on rank 1" in result.stderr, result.stderr

if __name__ == "__main__":
    worker(*sys.argv[1:])
