"""`tinygrad-core new-backend NAME [DIR]`: a new backend distribution to start from, written out ready to install.

What it writes is the TOY backend that docs/PLUGINS.md (section 6) builds step by step, renamed to NAME: the
pyproject.toml with the entry point, the package (registration; allocator, renderer, compiler and program), a README
and a test that runs the conformance suite. As written it installs (pip install -e DIR) and conforms. The guide's
test (tests/test_plugin_guide.py) holds the guide's code and these templates to the same text."""
from __future__ import annotations
import argparse
import pathlib
import re
import sys

# The templates spell the backend's name TOY, Toy and toy (tinygrad-toy, tinygrad_toy, ToyRenderer, "TOY"), each
# starting on the line after its opening quotes.
PYPROJECT = r'''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinygrad-toy"
version = "0.1.0"
description = "A tinygrad-core backend that renders kernels to Python source"
requires-python = ">=3.11"
dependencies = ["tinygrad-core>=0.1", "numpy"]

[project.entry-points."tinygrad_core.backends"]
toy = "tinygrad_toy"

[tool.setuptools]
packages = ["tinygrad_toy"]
'''

INIT = r'''
"""tinygrad-toy: a backend that renders kernels to Python source and runs them with numpy."""
from tinygrad_core.plugins import BackendSpec, hookimpl


def _load(device: str):
    from tinygrad_toy.backend import ToyBackend      # heavy imports wait until the backend is used
    return ToyBackend(device)


@hookimpl
def tinygrad_core_register_backends(register):
    register(BackendSpec(name="TOY", load=_load, priority=-10))
'''

BACKEND = r'''
"""The TOY backend: renders the core's linear program to Python source, compiles that to bytecode, and runs it
with numpy over every gidx0 at once."""
import marshal
import time
import numpy as np
from tinygrad_core.device import Allocator, Compiled, Compiler, CompileError, Program
from tinygrad_core.dtype import dtypes
from tinygrad_core.ops import Ops
from tinygrad_core.renderer import Renderer


class ToyAllocator(Allocator):
    def _alloc(self, size, options):
        return np.empty(size, dtype=np.uint8)         # numpy raises MemoryError when it can't

    def _copyin(self, dest, src):
        dest[:] = np.frombuffer(src, dtype=np.uint8)

    def _copyout(self, dest, src):
        np.frombuffer(dest, dtype=np.uint8)[:] = src

    def offset(self, opaque, size, offset):
        return opaque[offset:offset + size]


class ToyRenderer(Renderer):
    device = "TOY"
    supported_dtypes = frozenset({dtypes.bool, dtypes.int32, dtypes.float32})
    # only these ops: the core rewrites NEG, SUB, MAX, MULACC and FDIV into them
    code_for_op = {
        Ops.EXP2: "np.exp2({0})", Ops.LOG2: "np.log2({0})", Ops.SIN: "np.sin({0})", Ops.SQRT: "np.sqrt({0})",
        Ops.RECIP: "np.reciprocal({0})", Ops.TRUNC: "np.trunc({0})",
        Ops.ADD: "({0} + {1})", Ops.MUL: "({0} * {1})", Ops.IDIV: "idiv({0}, {1})",
        Ops.MOD: "({0} - {1} * idiv({0}, {1}))", Ops.CMPLT: "({0} < {1})", Ops.CMPNE: "({0} != {1})",
        Ops.AND: "({0} & {1})", Ops.OR: "({0} | {1})", Ops.XOR: "({0} ^ {1})",
        Ops.SHL: "({0} << {1})", Ops.SHR: "({0} >> {1})", Ops.WHERE: "np.where({0}, {1}, {2})",
        Ops.CAST: "cast({0}, np.{dtype})", Ops.BITCAST: "np.asarray({0}).view(np.{dtype})",
    }

    def render(self, name, uops):
        names = {u: f"v{i}" for i, u in enumerate(uops)}
        lines, depth = ["def kernel(bufs, vals, threads):"], 1
        for i, u in enumerate(uops):
            args = [names[s] for s in u.src]
            dtype = u.dtype.np.name if u.dtype != dtypes.void else None
            if u.op is Ops.DEFINE_GLOBAL:
                code = f"bufs[{u.arg}].view(np.{dtype})"
            elif u.op is Ops.DEFINE_VAR:
                code = f"np.int32(vals[{sum(v.op is Ops.DEFINE_VAR for v in uops[:i])}])"
            elif u.op is Ops.SPECIAL:                      # every parallel index at once
                code = "np.arange(threads, dtype=np.int32)"
            elif u.op is Ops.CONST:
                value = f"'{float(u.arg)!r}'" if dtypes.is_float(u.dtype) else repr(u.arg)   # 'inf' and 'nan' too
                code = f"np.{dtype}({value})"
            elif u.op is Ops.RANGE:
                lines.append("    " * depth + f"for {names[u]} in map(np.int32, range({args[0]})):")
                depth += 1
                continue
            elif u.op is Ops.ENDRANGE:
                depth -= 1
                continue
            elif u.op is Ops.DEFINE_ACC:
                code = args[0]
            elif u.op is Ops.UPDATE_ACC:                       # the accumulator takes the new value
                names[u] = args[0]
                lines.append("    " * depth + f"{args[0]} = {args[1]}")
                continue
            elif u.op is Ops.LOAD:
                code = f"load({', '.join(args)})"
            elif u.op is Ops.STORE:
                lines.append("    " * depth + f"store({', '.join(args)})")
                continue
            else:
                code = self.code_for_op[u.op].format(*args, dtype=dtype)
            lines.append("    " * depth + f"{names[u]} = {code}")
        return "\n".join(lines) + "\n"


def idiv(a, b):
    """Integer division truncating toward zero (numpy's // rounds down)."""
    q = a // b
    return np.where((a % b != 0) & ((a < 0) != (b < 0)), q + 1, q).astype(q.dtype)


def cast(x, dtype):
    """A float to an int truncates toward zero and saturates, NaN to 0 (the contract; numpy's astype wraps)."""
    x = np.asarray(x)
    if x.dtype.kind == "f" and np.dtype(dtype).kind in "iu":
        limits = np.iinfo(dtype)
        x = np.clip(np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0), limits.min, limits.max)
    return x.astype(dtype)


def load(buf, idx, valid=None):
    if valid is None:
        return buf[idx]
    return np.where(valid, buf[np.where(valid, idx, 0)], buf.dtype.type(0))


def store(buf, idx, value, valid=None):
    idx, value = np.broadcast_arrays(idx, value)
    if valid is not None:
        valid = np.broadcast_to(valid, idx.shape)
        idx, value = idx[valid], value[valid]
    buf[idx] = value


class ToyCompiler(Compiler):
    cachekey = "toy-python-bytecode"

    def compile(self, src):
        try:
            return marshal.dumps(compile(src, "<toy kernel>", "exec"))
        except SyntaxError as e:
            raise CompileError(f"not valid Python: {e}", src) from e


class ToyProgram(Program):
    def __init__(self, name, lib):
        super().__init__(name, lib)
        namespace = {"np": np, "idiv": idiv, "cast": cast, "load": load, "store": store}
        exec(marshal.loads(lib), namespace)
        self.kernel = namespace["kernel"]

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
        start = time.perf_counter()
        with np.errstate(all="ignore"):                 # integer wrap-around and NaNs are expected results
            self.kernel(bufs, vals, global_size[0])
        return time.perf_counter() - start if wait else None


class ToyBackend(Compiled):
    def __init__(self, device):
        super().__init__(device, ToyAllocator(), ToyRenderer(), ToyCompiler(), ToyProgram)
'''

README = r'''
# tinygrad-toy

A backend for tinygrad-core, device `TOY`, written by `tinygrad-core new-backend toy`. As written it is the
backend that the plugin guide builds step by step (`docs/PLUGINS.md` in the tinygrad-core repository, section 6),
under this name: it renders each kernel to Python source, compiles that to bytecode and runs it with numpy over
every thread at once. It installs and passes the conformance suite as it is. Make it yours by changing what
`ToyRenderer.render` emits, what `ToyCompiler.compile` calls and what `ToyProgram` launches, and by declaring
what your hardware has (the guide's section 4).

## Install and check

```
pip install -e .    # in this folder
tinygrad-core backends    # TOY is listed, status ok
TINYGRAD_DEVICE=TOY python -c "from tinygrad_core import Tensor; print((Tensor([1., 2.]) * 3).tolist())"
tinygrad-core conformance TOY    # the conformance suite: CONFORMS at the end
```

The suite compares results with the reference backend (`PYTHON`, the distribution `tinygrad-python`): without it,
the sections that need it are not run and the verdict is INCOMPLETE (exit status 3). It is not on the package
index; install it from a checkout of the tinygrad-core repository with `pip install ./plugins/tinygrad_python`.

```
pytest tests    # the same suite, as this distribution's test
```

## Files

* `pyproject.toml`: the distribution, and the entry point (group `tinygrad_core.backends`) by which the core finds it.
* `tinygrad_toy/__init__.py`: registers the backend (`BackendSpec`); imports nothing heavy.
* `tinygrad_toy/backend.py`: the allocator, renderer, compiler and program, bundled as `ToyBackend`.
* `tests/test_conformance.py`: runs `tinygrad-core conformance TOY` and expects it to conform.
'''

TEST = r'''
"""The conformance suite as this distribution's test: `tinygrad-core conformance TOY` in a subprocess
(a kernel that crashes ends that process, not pytest's), which must end in CONFORMS."""
import json
import subprocess
import sys


def test_toy_conforms(tmp_path):
    report = tmp_path / "conformance.json"
    done = subprocess.run([sys.executable, "-m", "tinygrad_core.cli", "conformance", "TOY", "--json", str(report)],
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0 and "CONFORMS" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]
    assert json.loads(report.read_text())["passed"]
'''

TEMPLATES = {path: text.removeprefix("\n") for path, text in (
    ("pyproject.toml", PYPROJECT), ("tinygrad_toy/__init__.py", INIT), ("tinygrad_toy/backend.py", BACKEND),
    ("README.md", README), ("tests/test_conformance.py", TEST))}
# "toy" as a word of its own or a name's part (tinygrad_toy, ToyRenderer, <toy kernel>), never inside another word
TEMPLATE_NAME = re.compile(r"(?<![A-Za-z])(toy|Toy|TOY)(?![a-z])")
RESERVED = {"GPU"}      # Device["GPU"] picks the best GPU backend: no backend may be called that


def files(name: str) -> dict[str, str]:
    """The distribution's files, path -> text, for a backend called NAME (the guide's code itself for "toy")."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
        raise ValueError(f"backend name {name!r}: use letters and digits, starting with a letter (the name becomes "
                         f"a device name, a package name and part of class names)")
    if name.upper() in RESERVED:
        raise ValueError(f"{name.upper()} is reserved: Device[{name.upper()!r}] picks the best usable GPU backend")
    spelling = {"toy": name.lower(), "Toy": name.lower().capitalize(), "TOY": name.upper()}

    def rename(text: str) -> str:
        return TEMPLATE_NAME.sub(lambda m: spelling[m[1]], text)
    return {rename(path): rename(text) for path, text in TEMPLATES.items()}


def write(name: str, directory: str | pathlib.Path | None = None) -> pathlib.Path:
    """Write the distribution for backend NAME into DIRECTORY (default ./tinygrad-NAME), which must not exist or be
    empty: nothing is overwritten."""
    from tinygrad_core.plugins import registry
    taken = {b.name.upper(): b.distribution for b in registry.all()}
    if name.upper() in taken:
        raise ValueError(f"{name.upper()} is already the name of a backend here (from {taken[name.upper()]}): "
                         f"choose another, or two distributions would claim one name")
    root = pathlib.Path(directory if directory is not None else f"tinygrad-{name.lower()}")
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise FileExistsError(f"{root} already exists and is not an empty folder: nothing written")
    for path, text in files(name).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def main(args: argparse.Namespace) -> int:
    try:
        root = write(args.name, args.directory)
    except (ValueError, FileExistsError) as e:
        print(f"new-backend: {e}", file=sys.stderr)
        return 2
    print(f"wrote backend {args.name.upper()} (distribution tinygrad-{args.name.lower()}) to {root}; install and "
          f"check it with\n  pip install -e {root}\n  tinygrad-core conformance {args.name.upper()}\n"
          f"then make it yours: {root / 'README.md'} says where to start")
    return 0


def add_arguments(parser: argparse.ArgumentParser):
    parser.add_argument("name", help="the backend's name: letters and digits (TOY, MYCHIP, ...)")
    parser.add_argument("directory", nargs="?", help="where to write it (default: ./tinygrad-NAME)")
    parser.set_defaults(func=main)
