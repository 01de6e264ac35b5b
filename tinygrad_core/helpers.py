"""Small shared helpers: environment switches (getenv, Context, DEBUG), counters, and tiny utilities.

Everything here is hardware-free and imported by every other module."""
from __future__ import annotations
import contextlib
import functools
import os
import pathlib
from typing import Iterable


def getenv(key: str, default=0):
    """An environment variable, converted to the default's type (a Context override wins)."""
    if key in ContextVar.all:
        return ContextVar.all[key].value
    return type(default)(os.environ.get(key, default))


class ContextVar:
    """A setting read from the environment once, changeable for a block with `with Context(NAME=value):`."""
    all: dict[str, ContextVar] = {}

    def __init__(self, key: str, default: int):
        self.key, self.value = key, int(os.environ.get(key, default))
        ContextVar.all[key] = self

    def __bool__(self):
        return bool(self.value)

    def __ge__(self, other):
        return self.value >= other

    def __gt__(self, other):
        return self.value > other

    def __lt__(self, other):
        return self.value < other

    def __le__(self, other):
        return self.value <= other

    def __eq__(self, other):
        return self.value == other

    __hash__ = object.__hash__


DEBUG = ContextVar("DEBUG", 0)     # 1: kernels per realize, 2: each kernel, 3: schedule, 4: source, 5: gradient steps
NOOPT = ContextVar("NOOPT", 0)     # 1: no upcasting/unrolling/local sizes (plain loops; useful when debugging)
BEAM = ContextVar("BEAM", 0)       # 1: time a few candidate opts per new kernel and keep the fastest (engine/search.py)


class Context(contextlib.ContextDecorator):
    """with Context(DEBUG=2): ... sets ContextVars for the block."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def __enter__(self):
        self.old = {k: ContextVar.all[k].value for k in self.kwargs if k in ContextVar.all}
        for k, v in self.kwargs.items():
            if k not in ContextVar.all:
                ContextVar(k, v)
            ContextVar.all[k].value = v

    def __exit__(self, *exc):
        for k in self.kwargs:
            if k in self.old:
                ContextVar.all[k].value = self.old[k]
            else:
                del ContextVar.all[k]


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


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def cache_dir() -> pathlib.Path:
    """Where compiled kernels are kept between runs (TINYGRAD_CACHE_DIR, else the platform's cache folder)."""
    if custom := os.environ.get("TINYGRAD_CACHE_DIR"):
        return pathlib.Path(custom)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "tinygrad_core"


def flatten(list_of_lists) -> list:
    return [x for sub in list_of_lists for x in sub]


def colored(text: str, color: str | None) -> str:
    codes = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
    return f"\u001b[{codes[color]}m{text}\u001b[0m" if color and os.isatty(1) else text


__all__ = ["getenv", "Context", "ContextVar", "DEBUG", "NOOPT", "GlobalCounters", "prod", "argfix", "make_tuple",
           "ceildiv", "cache_dir", "flatten", "colored"]
