"""What the kernel-level disk caches keep: a kernel's rendered program (programs/) and BEAM's choice of its opts
(opts/<compiler>/), under `program_key`, as JSON.

The codegen's side of the caches: cache.py, below it, holds the entry format and key scheme these share with the
compiled binaries' cache. engine/realize.py and engine/search.py read and write the entries."""
import dataclasses
import json
from tinygrad_core.cache import package_digest
from tinygrad_core.codegen.lower import program_signature
from tinygrad_core.codegen.opts import KernelOpts
from tinygrad_core.ops import UOp


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
