"""Small shared helpers: environment switches (getenv, Context, DEBUG, TRAINING), counters, timers, downloads and
tiny utilities, under tinygrad's names.

Everything here is hardware-free and imported by every other module (tqdm, an optional dependency, only when asked)."""
from __future__ import annotations
import contextlib
import cProfile
import functools
import gzip
import hashlib
import os
import pathlib
import pstats
import sys
import tempfile
import time
import urllib.request
from typing import Callable, Iterable

OSX, WIN, CI = sys.platform == "darwin", sys.platform == "win32", os.environ.get("CI", "") != ""


def getenv(key: str, default=0):
    """An environment variable, converted to the default's type (a Context override wins)."""
    return ContextVar.all[key].value if key in ContextVar.all else type(default)(os.environ.get(key, default))


@functools.total_ordering       # <, <=, >, >= compare the value, as == does
class ContextVar:
    """A setting read from the environment once, changeable for a block with `with Context(NAME=value):`."""
    all: dict[str, ContextVar] = {}

    def __init__(self, key: str, default: int):
        self.key, self.value = key, int(os.environ.get(key, default))
        ContextVar.all[key] = self

    def __call__(self, value=1) -> Context:
        """`with TRAINING(0):` (or `with Tensor.train(False):`) sets this one setting for the block."""
        return Context(**{self.key: value})

    def __bool__(self):
        return bool(self.value)

    def __ge__(self, other):        # (the one written out: `DEBUG >= 2` is asked around every launch)
        return self.value >= other

    def __eq__(self, other):
        return self.value == other

    __hash__ = object.__hash__


DEBUG = ContextVar("DEBUG", 0)     # 1: kernels per realize, 2: each kernel, 3: schedule, 4: source, 5: gradient steps
NOOPT = ContextVar("NOOPT", 0)     # 1: no upcasting/unrolling/local sizes (plain loops; useful when debugging)
BEAM = ContextVar("BEAM", 0)       # 1: time a few candidate opts per new kernel and keep the fastest (engine/search.py)
TRAINING = ContextVar("TRAINING", 0)   # BatchNorm uses batch statistics, dropout drops, optimizers may step
NO_GRAD = ContextVar("NO_GRAD", 0)     # results are constants to autograd (`with Tensor.no_grad():`)
JIT = ContextVar("JIT", 1)
IMAGE = ContextVar("IMAGE", 0)          # tinygrad's image (texture) kernels: no backend here has them, so it stays 0
DISK_CACHE = ContextVar("DISK_CACHE", 1)   # 0: compile every kernel afresh instead of reusing the on-disk cache


class Context(contextlib.ContextDecorator):
    """with Context(DEBUG=2): ... sets ContextVars for the block; a name that isn't one is a KeyError."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def __enter__(self):
        if unknown := [k for k in self.kwargs if k not in ContextVar.all]:
            raise KeyError(f"Context: no setting named {unknown[0]!r}; the settings are {', '.join(ContextVar.all)}")
        self.old = {k: ContextVar.all[k].value for k in self.kwargs}
        for k, v in self.kwargs.items():
            ContextVar.all[k].value = v

    def __exit__(self, *exc):
        for k, v in self.old.items():
            ContextVar.all[k].value = v


class GlobalCounters:
    """Running totals, reset with GlobalCounters.reset(): what ran, how much work, how much memory."""
    kernel_count: int = 0
    global_ops: int = 0          # FLOPs of the kernels run
    global_mem: int = 0          # bytes read and written by the kernels run
    time_sum_s: float = 0.0      # kernel time, when measured (DEBUG >= 2)
    mem_used: int = 0            # bytes currently allocated on all devices

    @staticmethod
    def reset():
        GlobalCounters.kernel_count = GlobalCounters.global_ops = GlobalCounters.global_mem = 0
        GlobalCounters.time_sum_s = 0.0


class Timing(contextlib.ContextDecorator):
    """with Timing("step "): ... prints the block's wall time in ms, then on_exit(nanoseconds) if given."""

    def __init__(self, prefix: str = "", on_exit: Callable[[int], str] | None = None, enabled: bool = True):
        self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled

    def __enter__(self):
        self.start = time.perf_counter_ns()

    def __exit__(self, *exc):
        self.et = time.perf_counter_ns() - self.start      # tinygrad's name: programs read timing.et
        if self.enabled:
            print(f"{self.prefix}{self.et * 1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))


@contextlib.contextmanager
def Profiling(enabled: bool = True, sort: str = "cumtime", frac: float = 0.2, fn: str | None = None):
    """with Profiling(): ... (or @Profiling()) runs the block under cProfile and prints the first `frac` of the
    functions sorted by `sort`; fn also saves the raw statistics there (for snakeviz and the like)."""
    with cProfile.Profile() if enabled else contextlib.nullcontext() as profile:
        yield profile
    if enabled and fn:
        profile.dump_stats(fn)
    if enabled:
        pstats.Stats(profile).strip_dirs().sort_stats(sort).print_stats(frac)


def __getattr__(name: str):
    # tqdm is an optional dependency (pip install tqdm): imported only when a program asks for the bars
    if name in ("tqdm", "trange"):
        import tqdm
        return getattr(tqdm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def prod(xs: Iterable, start=1):
    return functools.reduce(lambda a, b: a * b, xs, start)


def argfix(*x):
    """Accept f(1, 2) and f((1, 2)) alike."""
    if x and isinstance(x[0], (tuple, list)):
        if len(x) != 1:
            raise ValueError(f"pass either one tuple or several ints, not {x}")
        return tuple(x[0])
    return tuple(x)


def make_tuple(x, n: int) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,) * n


def broadcast_shape(*shapes) -> tuple[int, ...]:
    """The shape numpy broadcasting gives shapes (right-aligned; a size-1 axis stretches to the other size)."""
    if shapes and all(s == shapes[0] for s in shapes):      # (equal shapes, most ops' operands, give themselves)
        return tuple(shapes[0])
    ndim = max(len(s) for s in shapes)
    # per axis, the sizes other than 1: at most one, the axis's size
    sizes = [{s for s in axis if s != 1} for axis in zip(*[(1,) * (ndim - len(s)) + tuple(s) for s in shapes])]
    if (clash := next((axis for axis in sizes if len(axis) > 1), None)) is not None:
        raise ValueError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} can't be broadcast together "
                         f"(sizes {sorted(clash)} clash in one dimension); reshape one of them")
    return tuple(next(iter(axis), 1) for axis in sizes)


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def round_up(num: int, amt: int) -> int:
    return ceildiv(num, amt) * amt


def dedup(xs: Iterable) -> list:
    """The items in their first order, each once."""
    return list(dict.fromkeys(xs))


def all_same(items) -> bool:
    return all(x == items[0] for x in items)


def all_int(items) -> bool:
    return all(isinstance(x, int) for x in items)


def partition(items: Iterable, predicate: Callable) -> tuple[list, list]:
    """(the items for which predicate is true, the others), each in order."""
    decided = [(predicate(x), x) for x in items]
    return [x for keep, x in decided if keep], [x for keep, x in decided if not keep]


def unwrap(x):
    """x, known not to be None (an AssertionError if it is, as in tinygrad)."""
    assert x is not None, "unwrap got None"
    return x


def flatten(list_of_lists) -> list:
    return [x for sub in list_of_lists for x in sub]


def fully_flatten(x) -> list:
    """The scalars of arbitrarily nested lists, tuples and arrays, in order (a 0-d array gives its scalar)."""
    if getattr(x, "shape", None) == ():
        return [x[()]]
    nested = hasattr(x, "__len__") and hasattr(x, "__getitem__") and not isinstance(x, (str, bytes))
    return [leaf for item in x for leaf in fully_flatten(item)] if nested else [x]


def cache_dir() -> pathlib.Path:
    """Where compiled kernels and downloads are kept between runs (TINYGRAD_CACHE_DIR, else the platform's cache
    folder)."""
    if custom := os.environ.get("TINYGRAD_CACHE_DIR"):
        return pathlib.Path(custom)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "tinygrad_core"


def fetch(url: str, name: str | os.PathLike | None = None, subdir: str | None = None, gunzip: bool = False,
          allow_caching: bool = not os.environ.get("DISABLE_HTTP_CACHE")) -> pathlib.Path:
    """A local file holding url's content. A local path is itself (as in tinygrad, even with gunzip); a URL (file://
    works offline) is
    downloaded once into cache_dir()/downloads[/subdir]/name (name defaults to a hash of the URL; a path with a
    folder is used as is), gunzipped on the way if asked. DISABLE_HTTP_CACHE=1 downloads again every time."""
    if "://" not in url:
        return pathlib.Path(url)
    own_path = name is not None and (isinstance(name, os.PathLike) or os.sep in name)
    path = pathlib.Path(name) if own_path else cache_dir() / "downloads" / (subdir or "") / (
        (name or hashlib.md5(url.encode()).hexdigest()) + (".gunzip" if gunzip else ""))
    if path.is_file() and allow_caching:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "tinygrad_core"}), timeout=60) \
            as response:
        source = gzip.GzipFile(fileobj=response) if gunzip else response
        write_whole(path, iter(lambda: source.read(1 << 16), b""))      # (read in pieces until the end)
    return path


def write_whole(path: pathlib.Path, chunks: Iterable[bytes]):
    """Write chunks into a file beside path, renamed to path at the end: a reader never finds a partial file there
    (an interrupted write, a download cut off, leaves none), and of writers at the same time each replaces it whole."""
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as f:
        f.writelines(chunks)
    os.replace(f.name, path)


def colored(text: str, color: str | None) -> str:
    codes = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
    return f"\u001b[{codes[color]}m{text}\u001b[0m" if color and os.isatty(1) else text


__all__ = ["getenv", "Context", "ContextVar", "DEBUG", "NOOPT", "BEAM", "TRAINING", "JIT", "DISK_CACHE",
           "GlobalCounters", "Timing", "Profiling", "prod", "argfix", "make_tuple", "broadcast_shape", "ceildiv",
           "round_up", "dedup", "all_same", "all_int", "partition", "unwrap", "flatten", "fully_flatten", "cache_dir",
           "fetch", "colored", "OSX", "WIN", "CI"]
