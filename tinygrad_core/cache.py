"""The kernel caches: what each one keeps, under which key, in which entry format (one module for all of them).

In memory, each device keeps its runners by kernel AST (`Compiled.kernel_cache`, filled by engine/realize.py). On
disk, under cache_dir(), every entry has one format (`read_entry`, `write_entry`) and one key scheme (`entry_path`):
  programs/            a kernel's rendered program (engine/realize.py)    key: `program_key`
  kernels/<compiler>/  a compiled binary (`Compiler.compile_cached_many`) key: the compiler's code, the source
  opts/<compiler>/     BEAM's choice of opts (engine/search.py)           key: `program_key`
Keys cover the code and release that made an entry (`package_digest`): after an edit or an upgrade it is missed.
DISK_CACHE=0 turns every disk cache off."""
import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import pathlib
from tinygrad_core.codegen.opts import KernelOpts
from tinygrad_core.helpers import DEBUG, DISK_CACHE, cache_dir, write_whole
from tinygrad_core.ops import UOp
from tinygrad_core.renderer import program_signature


def entry_path(folder: str, *key: str) -> pathlib.Path:
    """The file of the entry kept for key (its parts joined by '|') in folder: named by the key's sha256."""
    return cache_dir() / folder / hashlib.sha256("|".join(key).encode()).hexdigest()


@functools.cache
def package_digest(module: str) -> str:
    """A digest of every .py file of the top-level package `module` is in, and of its distribution's version: what a
    backend made is kept on disk only for the code and release that made it (any edit or upgrade misses)."""
    name = module.partition(".")[0]
    package, meta = importlib.import_module(name), importlib.metadata
    files = [f for root in getattr(package, "__path__", ()) for f in sorted(pathlib.Path(root).rglob("*.py"))] or \
        [pathlib.Path(f) for f in [getattr(package, "__file__", None)] if f]       # (a module of its own)
    # (the slow search of every distribution's files only for one named otherwise than its package, or none)
    dists = list(meta.distributions(name=name)) or map(meta.distribution, meta.packages_distributions().get(name, []))
    versions = repr([d.version for d in dists]).encode()
    return hashlib.sha256(versions + b"".join(f.read_bytes() for f in files)).hexdigest()


def program_key(device: str, renderer, ast: UOp) -> tuple[str, ...]:
    """What a kernel's program depends on: the code and version of the core and of the renderer's distribution (all
    its modules), the device, the renderer's attributes and the kernel."""
    config = repr(sorted((k, repr(v)) for k, v in vars(renderer).items()))
    return (package_digest(__name__), package_digest(type(renderer).__module__), device, type(renderer).__qualname__,
            config, kernel_text(ast))


def kernel_text(ast: UOp) -> str:
    """A stable text form of a kernel AST: the same in every process."""
    position = {u: i for i, u in enumerate(ast.toposort())}
    return "\n".join(f"{u.op.name} {u.dtype.name} {[position[s] for s in u.src]} {u.arg!r}" for u in position)


def _entry_head(path: pathlib.Path) -> bytes:
    """An entry is sha256(rest) + rest, rest = this head and the body. The head names the format (a new layout gets
    a new number: older entries are then rebuilt) and the entry's own place: its folder and file name, the hash of
    the key it was made for (a copied or swapped file is refused)."""
    return b"tinygrad_core cache 2 %s/%s\n" % (path.parent.name.encode(), path.name.encode())


def read_entry(path: pathlib.Path, parse=bytes):
    """parse(body) of the entry at path, or None where it's missing or bad (damaged, of another format, made for
    another key, or refused by parse: a ValueError, KeyError or TypeError) or DISK_CACHE=0: the caller builds it."""
    if not DISK_CACHE:
        return None
    try:
        data = path.read_bytes()
        if hashlib.sha256(data[32:]).digest() != data[:32] or not data[32:].startswith(_entry_head(path)):
            raise ValueError("damaged, of another format or made for another key")
        return parse(data[32 + len(_entry_head(path)):])
    except (OSError, ValueError, KeyError, TypeError) as e:    # (json's errors and UnicodeDecodeError are ValueErrors)
        if DEBUG >= 1 and not isinstance(e, FileNotFoundError):     # (a missing entry is no news)
            print(f"cache: discarding {path} ({type(e).__name__}: {e}): building it again")
        return None


def write_entry(path: pathlib.Path, body: bytes):
    if not DISK_CACHE:
        return
    with contextlib.suppress(OSError):      # a read-only or full disk only costs a rebuild next time
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, [hashlib.sha256(_entry_head(path) + body).digest() + _entry_head(path) + body])


def opts_to_json(opts: KernelOpts) -> dict:
    return dataclasses.asdict(opts)          # by field name, every field


def opts_from_json(saved) -> KernelOpts | None:
    """KernelOpts back from opts_to_json's fields read from JSON, or None where the entry has other fields than
    KernelOpts has now (written by another version: a missing field must not silently take its default)."""
    def tuples(value):
        return tuple(map(tuples, value)) if isinstance(value, list) else value
    if not isinstance(saved, dict) or set(saved) != {f.name for f in dataclasses.fields(KernelOpts)}:
        return None
    return KernelOpts(**{name: tuples(value) for name, value in saved.items()})


def program_to_json(runner) -> bytes:
    """The entry body of a runner's rendered program (engine/realize.CompiledRunner)."""
    kept = {k: getattr(runner, k) for k in ("name", "src", "flops", "global_size", "local_size")}
    return json.dumps(kept | {"opts": opts_to_json(runner.opts), "signature": argument_signature(runner.ast)}).encode()


def program_from_json(body: bytes, ast: UOp) -> tuple:
    """(opts, name, source, flops, global size, local size) of a remembered program, which must be for this kernel's
    argument signature (else a ValueError; a missing field is a KeyError)."""
    saved = json.loads(body)
    if saved["signature"] != argument_signature(ast) or (opts := opts_from_json(saved["opts"])) is None:
        raise ValueError("not a program of this kernel")
    return opts, saved["name"], saved["src"], saved["flops"], tuple(saved["global_size"]), tuple(saved["local_size"])


def argument_signature(ast: UOp) -> list[list]:
    """The kernel's buffer arguments as [position, dtype name]: what a launch hands it."""
    return [[g.arg, g.dtype.name] for g in program_signature(ast.toposort())[0]]
