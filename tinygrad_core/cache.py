"""The kernel caches: what each one keeps, under which key, and the one entry format and key scheme they share.

In memory, each device keeps its runners by kernel AST (`Compiled.kernel_cache`, filled by engine/realize.py). On
disk, under cache_dir(), every entry has one format (`read_entry`, `write_entry`) and one key scheme (`entry_path`):
  programs/            a kernel's rendered program (engine/realize.py)    key: codegen/cache.py's `program_key`
  kernels/<compiler>/  a compiled binary (`Compiler.compile_cached_many`) key: the compiler's code, the source
  opts/<compiler>/     BEAM's choice of opts (engine/search.py)           key: codegen/cache.py's `program_key`
Keys cover the code and release that made an entry (`package_digest`): after an edit or an upgrade it is missed.
DISK_CACHE=0 turns every disk cache off. This module is the device layer's (device.py keeps the binaries with it,
needing nothing of the codegen); what the kernel-level entries hold is the codegen's (codegen/cache.py)."""
import contextlib
import functools
import hashlib
import importlib.metadata
import pathlib
from tinygrad_core.helpers import DEBUG, DISK_CACHE, cache_dir, write_whole


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
