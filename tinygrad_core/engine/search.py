"""BEAM=1: pick each new kernel's opts by timing a few candidates, instead of taking the heuristic's choice alone.

The candidates are the heuristic's opts (codegen/opts.py) and variations of them: other tile sizes on the axes it
tiled, other unroll factors, other thread-group sizes. Each is compiled and timed on scratch buffers (the kernel's
own buffers may be read and written by it, e.g. an in-place update); the fastest is kept in memory and on disk,
keyed by the kernel and the device's compiler, so a later process gets it without timing anything."""
import json
from collections.abc import Callable
import numpy as np
from tinygrad_core.cache import entry_path, read_entry, write_entry
from tinygrad_core.codegen.cache import opts_from_json, opts_to_json, program_key
from tinygrad_core.codegen.lower import program_signature
from tinygrad_core.codegen.opts import KernelOpts, choose_opts
from tinygrad_core.device import Buffer, Device
from tinygrad_core.helpers import DEBUG, prod
from tinygrad_core.ops import Ops, UOp

MAX_CANDIDATES = 12
TIMED_LAUNCHES = 3


def candidates(ast: UOp, renderer) -> list[KernelOpts]:
    """The heuristic's opts first, then its variations (each valid: tile sizes divide their axes)."""
    base = choose_opts(ast, renderer)
    shape = ast.src[0].src[1].shape
    reduce_size = next((u.src[0].shape[u.arg[1][-1]] for u in ast.toposort() if u.op is Ops.REDUCE_AXIS), 1)
    out = [base]
    if base.local_tiles:        # the local-memory tiled kernel against the plain lowering and its variations
        base = choose_opts(ast, renderer, shared=False)
        out.append(base)
    tiles = dict(base.upcast)
    # each tile a size up and down, then each pair of tiles in another aspect ratio (the same tile area)
    changes = [change for axis, amount in base.upcast for change in ({axis: amount // 2}, {axis: amount * 2})]
    changes += [change for (a, x), (b, y) in zip(base.upcast, base.upcast[1:])
                for change in ({a: x * 2, b: y // 2}, {a: x // 2, b: y * 2})]
    for change in changes:
        new = {**tiles, **change}
        fits = all(a >= 1 and shape[axis] % a == 0 for axis, a in new.items())
        if fits and prod(new.values()) <= renderer.max_upcast:
            out.append(KernelOpts(tuple(sorted((axis, a) for axis, a in new.items() if a > 1)), base.local_size,
                                  base.unroll))
    inner = max((i for i, s in enumerate(shape) if s > 1), default=None)
    if not base.upcast and inner is not None:    # nothing tiled: try lanes on the innermost axis that has a size
        out += [KernelOpts(((inner, a),), base.local_size, base.unroll)
                for a in (4, 8, 16) if shape[inner] % a == 0 and a <= renderer.max_upcast]
    out += [KernelOpts(base.upcast, base.local_size, u) for u in (1, 2, 4, 8)
            if u <= renderer.max_unroll and reduce_size % u == 0]
    if renderer.has_local:
        out += [KernelOpts(base.upcast, size, base.unroll) for size in (16, 32, 64, 128, 256)
                if size <= (renderer.local_max or (256,))[0]]
    return list(dict.fromkeys(out))[:MAX_CANDIDATES]


def scratch_buffers(ast: UOp, device: str) -> list[Buffer]:
    """Zeroed buffers of the sizes and dtypes the kernel's arguments have."""
    sizes = {0: prod(ast.src[0].src[1].shape)} | {u.src[0].arg: u.arg for u in ast.toposort() if u.op is Ops.INPUT}
    return [Buffer(device, max(1, sizes[g.arg]), g.dtype, initial=np.zeros(max(1, sizes[g.arg]), g.dtype.np))
            for g in program_signature(ast.toposort())[0]]


def fastest_runner(device: str, ast: UOp, build: Callable[[KernelOpts], Callable]):
    """The kernel compiled with the opts that ran fastest here (timed once, then remembered on disk). build(opts)
    compiles it (engine/realize.py's CompiledRunner): the search only times what it is handed."""
    # kept by the device's compiler and the kernel's program key (the kernel, the renderer and the code: opts found
    # for other code may not fit it)
    compiled = Device[device]
    path = entry_path(f"opts/{compiled.compiler.cachekey}", *program_key(device, compiled.renderer, ast))
    if (kept := read_entry(path, lambda body: opts_from_json(json.loads(body)))) is not None:
        return build(kept)
    renderer, bufs = compiled.renderer, scratch_buffers(ast, device)
    timed: list[tuple[float, Callable]] = []
    for opts in candidates(ast, renderer):
        runner = build(opts)
        seconds = runner(bufs, wait=True) or float("inf")
        if not timed or seconds < 2 * min(timed, key=lambda t: t[0])[0]:   # a clear loser isn't timed again
            seconds = min([seconds] + [runner(bufs, wait=True) or float("inf") for _ in range(TIMED_LAUNCHES - 1)])
        timed.append((seconds, runner))
        if DEBUG >= 2:
            print(f"  search {runner.name}: {opts} {seconds * 1e6:9.1f} us")
    seconds, best = min(timed, key=lambda t: t[0])
    write_entry(path, json.dumps(opts_to_json(best.opts)).encode())
    return best
