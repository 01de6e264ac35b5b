"""Data-parallel training over MPI: every rank (a process, on this machine or another) holds the whole model, trains on
its own slice of each batch, and the ranks average their gradients before every update, so the copies stay identical.

    mpiexec -n 2 python examples/mnist_mlp.py --distributed        (docs/DISTRIBUTED.md: clusters, costs)

mpi4py is imported on first use (pip install -e '.[mpi]' from a checkout brings it and Open MPI's mpiexec). A
collective goes through host memory: the tensor is read into a numpy array, MPI combines the arrays, the result is
written into a new buffer. That host step is launched and recorded as a kernel is, so a TinyJit training step
replays it in its place, between the backward kernels that make the gradients and the update kernels that read the
averaged ones.

Nothing hangs for ever: mpiexec ends every rank when one dies, an uncaught exception on any rank aborts them all, and a
collective that waits more than TIMEOUT seconds (TINYGRAD_MPI_TIMEOUT, default 300) for a rank that stopped, hangs or
runs another program raises DistributedError (and so aborts the job)."""
from __future__ import annotations
import contextlib
import os
import pickle
import sys
import time
import traceback
import numpy as np
from tinygrad_core.dtype import dtypes, bf16_to_f32, f32_to_bf16
from tinygrad_core.engine import realize
from tinygrad_core.nn.datasets import Batches
from tinygrad_core.buffers import buffer_of
from tinygrad_core.tensor import Tensor

TIMEOUT = float(os.environ.get("TINYGRAD_MPI_TIMEOUT", "300"))   # first steps compile: give a slow rank time
# MPI's operation for each allreduce op, on numbers and on bools (where sum and max are `or`, prod and min `and`)
_OPS = {"sum": ("SUM", "LOR"), "prod": ("PROD", "LAND"), "max": ("MAX", "LOR"), "min": ("MIN", "LAND")}
_MPI = None


class DistributedError(RuntimeError):
    pass


def init():
    """Start MPI (once; every function here calls it) and return COMM_WORLD. From then on, an uncaught exception on
    any rank of a job of several ends every rank (as `python -m mpi4py` does), where the others would wait for it."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ModuleNotFoundError:
            raise ModuleNotFoundError("tinygrad_core.distributed needs mpi4py and an MPI library: "
                                      "from a checkout: pip install -e '.[mpi]'") from None
        _MPI = MPI
        if MPI.COMM_WORLD.Get_size() > 1:
            sys.excepthook = _abort_on_exception
    return _MPI.COMM_WORLD


def __getattr__(name: str):
    """`distributed.rank` (0 .. world_size-1) and `distributed.world_size`, starting MPI if need be."""
    if name in ("rank", "world_size"):
        return init().Get_rank() if name == "rank" else init().Get_size()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _abort_on_exception(kind, value, tb):
    traceback.print_exception(kind, value, tb, file=sys.__stderr__)
    comm = init()
    print(f"rank {comm.Get_rank()} of {comm.Get_size()}: aborting every rank", file=sys.__stderr__, flush=True)
    comm.Abort(1)


def _wait(request, what: str):
    """Wait for a nonblocking MPI request, at most TIMEOUT seconds. Polling: each Test drives MPI's progress, as the
    busy loop of a blocking Wait does (a large message takes many rounds). After a second of waiting (a rank still
    compiling), the rank sleeps between polls, leaving the cores to the ranks that work."""
    start = time.monotonic()
    while not request.Test():
        waited = time.monotonic() - start
        if waited > TIMEOUT:
            raise DistributedError(f"rank {init().Get_rank()}: {what} waited {TIMEOUT:g} s for the other ranks: one "
                                   f"stopped, hangs or runs another program (TINYGRAD_MPI_TIMEOUT sets the limit)")
        if waited > 1:
            time.sleep(0.001)


class _HostStep:
    """A collective on host memory that TinyJit records and replays as a kernel: reads bufs[1], writes bufs[0]."""

    def __init__(self, name: str, fn):
        self.name, self.fn = name, fn

    def __call__(self, bufs, var_vals=None, wait=False) -> float:
        start = time.perf_counter()
        bufs[0].copyin(self.fn(bufs[1].numpy()))
        return time.perf_counter() - start


def _collective(t: Tensor, name: str, fn) -> Tensor:
    """A new tensor holding fn(t's values as a flat numpy array), computed by a recorded host step."""
    if not all(isinstance(s, int) for s in t.shape):
        raise TypeError(f"{name} needs a tensor of fixed shape, got {t.shape}")
    src = t.contiguous().realize()
    out = Tensor.empty(*t.shape, dtype=t.dtype, device=t.device)
    step, bufs = _HostStep(name, fn), [buffer_of(out.uop), buffer_of(src.uop)]
    realize.launch(step, bufs)
    realize.recorder.record(step, bufs, {})
    return out


def allreduce(t: Tensor, op: str = "sum") -> Tensor:
    """A new tensor, the same on every rank: the elementwise sum (or prod, max, min) of t over the ranks. Half and
    bfloat16 are combined in float32 (MPI has no 16-bit floats) and rounded once at the end."""
    comm = init()
    if op not in _OPS:
        raise ValueError(f"allreduce op must be one of {', '.join(_OPS)}, got {op!r}")
    mpi_op = getattr(_MPI, _OPS[op][t.dtype == dtypes.bool])

    def reduce(host: np.ndarray) -> np.ndarray:
        wide = bf16_to_f32(host) if t.dtype == dtypes.bfloat16 else host.astype(np.float32) \
            if t.dtype == dtypes.float16 else host
        _wait(comm.Iallreduce(_MPI.IN_PLACE, wide, mpi_op), f"allreduce {op} of {t.shape} {t.dtype.name}")
        return f32_to_bf16(wide) if t.dtype == dtypes.bfloat16 else wide.astype(host.dtype)
    return _collective(t, f"allreduce_{op}", reduce)


def broadcast(t: Tensor, root: int = 0) -> Tensor:
    """A new tensor holding rank root's t on every rank (t has the same shape and dtype everywhere)."""
    comm = init()
    if not 0 <= root < comm.Get_size():
        raise ValueError(f"broadcast root must be a rank in 0..{comm.Get_size() - 1}, got {root}")

    def bcast(host: np.ndarray) -> np.ndarray:
        _wait(comm.Ibcast(host.view(np.uint8), root), f"broadcast of {t.shape} {t.dtype.name} from rank {root}")
        return host
    return _collective(t, "broadcast", bcast)


def _allgather(value) -> list:
    """Every rank's value (any picklable object), in rank order."""
    comm = init()
    data = np.frombuffer(pickle.dumps(value), dtype=np.uint8)
    sizes = np.zeros(comm.Get_size(), dtype=np.int64)
    _wait(comm.Iallgather(np.array([data.size], dtype=np.int64), sizes), "allgather")
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    _wait(comm.Iallgatherv(data, (out, sizes)), "allgather")
    ends = np.cumsum(sizes)
    return [pickle.loads(out[end - n:end].tobytes()) for n, end in zip(sizes, ends)]


def agree(what: str, values: list):
    """Raise DistributedError on every rank unless all ranks pass equal lists (a mismatched world stops here, with
    the first difference named, rather than in a collective of mismatched sizes)."""
    everyone = _allgather(values)
    for r, theirs in enumerate(everyone):
        if theirs != everyone[0]:
            i = next((i for i, (a, b) in enumerate(zip(everyone[0], theirs)) if a != b), min(map(len, everyone)))
            ours, other = ((lst[i:i + 1] or ["nothing"])[0] for lst in (everyone[0], theirs))
            raise DistributedError(f"{what} differ between ranks (rank 0 has {len(everyone[0])}, rank {r} has "
                                   f"{len(theirs)}); the first difference is number {i}: {ours} on rank 0, {other} "
                                   f"on rank {r}")


def _buckets(tensors: list[Tensor], limit: int) -> list[list[int]]:
    """The tensors' indices in groups of one dtype and at most limit bytes each (a larger tensor alone)."""
    groups: list[list[int]] = []
    for dtype in dict.fromkeys(t.dtype for t in tensors):
        nbytes = limit        # (so the first tensor opens a group)
        for i in (i for i, t in enumerate(tensors) if t.dtype == dtype):
            if nbytes + tensors[i].nbytes() > limit:
                groups.append([])
                nbytes = 0
            groups[-1].append(i)
            nbytes += tensors[i].nbytes()
    return groups


def _bucketed(tensors: list[Tensor], limit: int, fn) -> list[Tensor]:
    """fn applied to each bucket of the tensors flattened into one, the results cut back into the tensors' shapes."""
    out: list = [None] * len(tensors)
    for group in _buckets(tensors, limit):
        # each tensor computed by its own kernels first: fused into the concatenation, a weight gradient's matmul
        # would run as one slow kernel over the whole bucket
        parts = [tensors[i].contiguous().flatten() for i in group]
        flat = fn(Tensor.cat(*parts) if len(parts) > 1 else parts[0])
        for i, piece in zip(group, flat.split([tensors[i].numel() for i in group])):
            out[i] = piece.reshape(tensors[i].shape)
    return out


class DistributedOptimizer:
    """An optimizer for data-parallel training (Horovod's design). Made on every rank: the ranks check that they
    hold the same tensors (shapes, dtypes) and take rank 0's values of the parameters, buffers and optimizer state.
    schedule_step (and so step) first averages the gradients over the ranks, in flattened buckets: one message per
    dtype of up to bucket_mb MiB; a parameter without a gradient on some rank counts zeros there. The rest is the
    wrapped optimizer's (its lr, zero_grad, ...)."""

    def __init__(self, optimizer, bucket_mb: float = 64):
        self.optimizer, self.bucket_bytes = optimizer, int(bucket_mb * 2 ** 20)
        members = getattr(optimizer, "optimizers", [optimizer])      # an OptimizerGroup keeps state in its members
        tensors = list({id(t): t for t in [*optimizer.params, *optimizer.buffers,
                                           *(t for o in members for t in o.state)]}.values())
        agree("the tensors to keep in step (parameters, buffers, optimizer state)",
              [(t.shape, t.dtype.name) for t in tensors])
        for t, value in zip(tensors, _bucketed(tensors, self.bucket_bytes, broadcast)):
            t.assign(value)
        Tensor.realize_all(*tensors)

    def __getattr__(self, name):
        return getattr(self.optimizer, name)

    def average_gradients(self):
        """Set each parameter's gradient to the mean of the ranks' gradients (lazy, read by the update)."""
        params, size = self.optimizer.params, init().Get_size()
        grads = [p.grad if p.grad is not None else Tensor.zeros(p.shape, dtype=p.dtype, device=p.device)
                 for p in params]
        for p, g in zip(params, _bucketed(grads, self.bucket_bytes, lambda flat: allreduce(flat, "sum") / size)):
            p.grad = g

    def schedule_step(self) -> list[Tensor]:
        self.average_gradients()
        return self.optimizer.schedule_step()

    def step(self):
        Tensor.realize_all(*self.schedule_step())


class DistributedBatches(Batches):
    """Batches for data-parallel training: every rank draws the same global batches of batch_size samples (one
    shuffle per epoch, from seed), and yields its own slice, batch_size / world_size samples, of each. So the ranks
    together see each epoch's data once, and step as often (the remainder of an epoch is dropped). transform gets a
    random generator of the rank's own (augmentation differs between ranks)."""

    def __init__(self, X: np.ndarray, Y: np.ndarray, batch_size: int, transform=None, seed: int = 0,
                 device: str | None = None):
        comm = init()
        if batch_size % comm.Get_size():
            raise ValueError(f"batch_size {batch_size} must split evenly over {comm.Get_size()} ranks")
        super().__init__(X, Y, batch_size, shuffle=True, drop_last=True, transform=transform, device=device)
        agree("the datasets' sizes", [len(X)])
        self.order, self.rng = np.random.default_rng(seed), np.random.default_rng([seed, comm.Get_rank()])
        self.local, self.offset = batch_size // comm.Get_size(), comm.Get_rank() * (batch_size // comm.Get_size())

    def arrays(self):
        order = self.order.permutation(len(self.X))
        for i in range(len(self)):
            index = order[i * self.batch_size + self.offset:][:self.local]
            x = self.X[index] if self.transform is None else self.transform(self.X[index], self.rng)
            yield np.ascontiguousarray(x), np.ascontiguousarray(self.Y[index])


@contextlib.contextmanager
def quiet_ranks():
    """Inside, only rank 0 prints (progress bars, results); the others' output is dropped, errors still show."""
    if init().Get_rank() == 0:
        yield
        return
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull), contextlib.redirect_stderr(devnull):
        yield
