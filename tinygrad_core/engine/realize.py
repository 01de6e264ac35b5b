"""Run a schedule: turn each kernel AST into a compiled program (once per device and AST) and launch it.

This is where codegen, renderer, compiler and program meet; DEBUG output about kernels comes from here."""
import functools
import time
from tinygrad_core.buffers import realized
from tinygrad_core.cache import entry_path, read_entry, write_entry
from tinygrad_core.codegen.cache import program_from_json, program_key, program_to_json
from tinygrad_core.codegen.opts import has_symbolic_sizes
from tinygrad_core.codegen.pipeline import program_for
from tinygrad_core.device import Buffer, Device
from tinygrad_core.dtype import dtypes
from tinygrad_core.engine import search
from tinygrad_core.helpers import BEAM, DEBUG, NOOPT, GlobalCounters, colored, prod
from tinygrad_core.ops import Ops, UOp, GroupOp, reachable
from tinygrad_core.schedule import ScheduleItem, graph_roots_in_order
from tinygrad_core.sizes import evaluate, max_value


class Recorder:
    """While entered (a TinyJit capturing), keeps each kernel run_schedule launches: (runner, buffers, var_vals)."""
    kernels: list | None = None

    def __enter__(self) -> list:
        # one recording at a time: an inner capture would take the outer one's kernels, leaving its replay short
        if self.kernels is not None:
            raise RuntimeError("a TinyJit can't capture inside another TinyJit's capture: jit the outer function only")
        self.kernels = []
        return self.kernels

    def __exit__(self, *exc):
        self.kernels = None

    def record(self, runner, bufs: list[Buffer], var_vals: dict):
        if self.kernels is not None:
            self.kernels.append((runner, bufs, var_vals))


recorder = Recorder()       # TinyJit enters it around a capture


def has_variables(ast: UOp) -> bool:
    """Whether the kernel reads a Variable: in a size, a view's bounds (SHRINK/PAD) or as a number (CONST)."""
    def mentions(arg) -> bool:
        return isinstance(arg, UOp) or (isinstance(arg, tuple) and any(map(mentions, arg)))
    return has_symbolic_sizes(ast) or any(u.op is Ops.DEFINE_VAR or mentions(u.arg) for u in ast.toposort())


def _program_path(device: str, renderer, ast: UOp):
    return entry_path("programs", *program_key(device, renderer, ast))


class CompiledRunner:
    """A kernel ready to launch on one device: its linear program, source, binary and launch geometry.

    With the heuristic's opts, on renderers that allow it (`cache_programs`), the rendered program is remembered on
    disk too (a fresh process then skips lowering, most of a warm first step's time)."""

    def __init__(self, device: str, ast: UOp, opts=None, compile_now: bool = True):
        renderer = Device[device].renderer
        renderer.check_dtypes(ast.toposort())      # before anything is built or read from the disk
        self.device, self.ast = device, ast
        remembered = opts is None and renderer.cache_programs and not NOOPT and not has_variables(ast)
        path = _program_path(device, renderer, ast) if remembered else None
        if path is not None and (saved := read_entry(path, lambda body: program_from_json(body, ast))):
            self.opts, self.name, self.src, self.flops, self.global_size, self.local_size = saved
            self.vars = []
        else:
            self.uops, self.global_size, self.local_size, self.opts = program_for(ast, renderer, opts)
            self.name = kernel_name(ast, self.opts)
            self.vars = [u for u in self.uops if u.op is Ops.DEFINE_VAR]
            self.flops = count_work(self.uops, self.global_size, self.local_size)
            self.src = renderer.render(self.name, self.uops)
            if path is not None:
                write_entry(path, program_to_json(self))
        self.mem_estimate = _bytes_moved(ast)
        if DEBUG >= 4:
            print(self.src)
        if compile_now:     # else the caller sets lib (compile_new_kernels compiles many kernels at once)
            self.lib = Device[device].compiler.compile_cached(self.src)

    @functools.cached_property
    def uops(self) -> list[UOp]:
        """The linear program (rebuilt on demand when the source came from the disk)."""
        return program_for(self.ast, Device[self.device].renderer, self.opts)[0]

    @functools.cached_property
    def program(self):
        # loaded on first launch, so a kernel can be rendered and compiled where its device is absent (compile-only).
        # A binary that won't load (a damaged disk cache entry) is compiled again: a bad entry is a miss, not a crash
        try:
            return Device[self.device].runtime(self.name, self.lib)
        except Exception:       # noqa: BLE001 (if it was no cache entry, compiled again it fails again, and raises)
            self.lib = Device[self.device].compiler.compile_cached_many([self.src], again=True)[0]
            return Device[self.device].runtime(self.name, self.lib)

    def __call__(self, bufs: list[Buffer], var_vals: dict | None = None, wait: bool = False) -> float | None:
        vals = tuple(evaluate(v, var_vals) for v in self.vars)
        global_size = tuple(evaluate(g, var_vals) for g in self.global_size)
        return self.program(*[b.opaque for b in bufs], global_size=global_size, local_size=self.local_size,
                            vals=vals, wait=wait)


class CopyRunner:
    """Moves a buffer between devices through host memory (backends may offer a faster transfer)."""
    name = "copy"

    def __call__(self, bufs: list[Buffer], var_vals=None, wait=False):
        dest, src = bufs
        start = time.perf_counter()
        dest.copyin(src.numpy())
        return time.perf_counter() - start


def get_runner(device: str, ast: UOp) -> CompiledRunner:
    """The device's runner of the kernel: built once (with BEAM=1, by timing candidates), then kept in memory."""
    if (runner := Device[device].kernel_cache.get(ast)) is None:
        build = functools.partial(CompiledRunner, device, ast)
        beam = BEAM and not has_variables(ast)     # (timing a candidate needs the Variables' values)
        Device[device].kernel_cache[ast] = runner = search.fastest_runner(device, ast, build) if beam else build()
    return runner


def compile_new_kernels(schedule: list[ScheduleItem]):
    """Render the schedule's kernels that have no runner yet, then compile them per device as one batch: a backend
    may compile a batch on all its cores (a fresh process's first training step compiles dozens of kernels)."""
    if BEAM:            # the search compiles its candidates itself
        return
    new = dict.fromkeys((item.bufs[0].device, item.ast) for item in schedule
                        if item.ast.op is not Ops.COPY and item.ast not in Device[item.bufs[0].device].kernel_cache)
    for device in dict.fromkeys(device for device, _ in new):
        runners = [CompiledRunner(device, ast, compile_now=False) for d, ast in new if d == device]
        for runner, lib in zip(runners, Device[device].compiler.compile_cached_many([r.src for r in runners])):
            runner.lib = lib
            Device[device].kernel_cache[runner.ast] = runner


def runner_for(item: ScheduleItem):
    return CopyRunner() if item.ast.op is Ops.COPY else get_runner(item.bufs[0].device, item.ast)


def launch(runner, bufs: list[Buffer], var_vals: dict | None = None, wait: bool = False) -> float | None:
    """Run one kernel (or copy) on its buffers and count it: the one place work is launched, replayed or not. (A
    buffer without memory gets it when the runner takes its opaque.)"""
    bufs[0].prepare_write()          # (the one buffer a kernel or copy writes)
    seconds = runner(bufs, var_vals, wait=wait)
    if isinstance(runner, CompiledRunner):
        GlobalCounters.kernel_count += 1
        GlobalCounters.global_ops += runner.flops
        GlobalCounters.global_mem += runner.mem_estimate
    return seconds


def kept_nodes(schedule: list[ScheduleItem], outs: list[UOp], graphs: list[UOp], live) -> set[UOp]:
    """The nodes whose values may be read after the schedule: outs; all of graphs (outputs keeping theirs for a later
    backward); and what the other live tensors' graphs read (live() lists them), down to what is computed by now. The
    tensors a custom op in outs' graphs keeps for its backward (detached values: they take no gradient) go with that
    graph. Only the schedule's nodes are ever looked up (_frees_after): when all are outs, outs is the answer."""
    kept = set(outs)
    if all(item.node in kept for item in schedule):
        return kept
    computed = {item.node for item in schedule} | set(realized.keys())
    fns = [vars(u.arg).values() for u in reachable(outs) if u.op is Ops.CUSTOM]
    owned = {id(t) for values in fns for v in values
             for t in (v.values() if isinstance(v, dict) else v if isinstance(v, (tuple, list)) else (v,))}
    return reachable(graphs) | reachable((t.uop for t in live() if id(t) not in owned), computed.__contains__) | kept


def _frees_after(schedule: list[ScheduleItem], keep: set[UOp]) -> dict[int, list[list[ScheduleItem]]]:
    """item index -> the items writing each buffer read for the last time there: made by this schedule (first written
    by an item that isn't an ASSIGN) for nodes none of which are in keep, the nodes whose values may be read later."""
    last, writers = {}, {}
    for i, item in enumerate(schedule):
        last.update((buf, i) for buf in item.bufs)
        writers.setdefault(item.bufs[0], []).append(item)
    frees: dict[int, list] = {}
    for buf, items in writers.items():
        if items[0].node.op is not Ops.ASSIGN and not any(item.node in keep for item in items):
            frees.setdefault(last[buf], []).append(items)
    return frees


def run_schedule(schedule: list[ScheduleItem], keep: set[UOp] | None = None):
    """Run the items in order. With keep (the nodes whose values may be read after this schedule: kept_nodes), a
    buffer made for any other node is freed right after its last reader: a big graph peaks at the buffers live at
    once, not at all of them. TinyJit gives such buffers shared memory in its recording (jit.plan_memory)."""
    if DEBUG >= 3 and schedule:
        print(f"schedule: {len(schedule)} items\n" + graph_roots_in_order(schedule))
    started = time.perf_counter()
    compile_new_kernels(schedule)
    frees = _frees_after(schedule, keep) if keep is not None else {}
    for i, item in enumerate(schedule):
        runner = runner_for(item)
        seconds = launch(runner, item.bufs, item.var_vals, wait=DEBUG >= 2)
        realized[item.node] = item.becomes
        recorder.record(runner, item.bufs, item.var_vals)
        for done in frees.get(i, ()):
            done[0].bufs[0].deallocate()
            for writer in done:                 # (built again, the node is computed again)
                realized.pop(writer.node, None)
        if DEBUG >= 2:
            GlobalCounters.time_sum_s += seconds or 0
            shape = "x".join(map(repr, item.node.shape)) or "scalar"
            gflops = f"{runner.flops / seconds / 1e9:8.2f} GFLOP/s" if seconds and hasattr(runner, "flops") else ""
            print(f"  {colored(f'{runner.name:32s}', 'cyan')} {item.bufs[0].device:6s} {shape:>18s} "
                  f"{(seconds or 0) * 1e3:9.3f} ms {gflops}")
    if DEBUG >= 1 and schedule:
        print(f"realized {len(schedule)} items in {(time.perf_counter() - started) * 1e3:.2f} ms")


def kernel_name(ast: UOp, opts) -> str:
    has_reduce = any(u.op is Ops.REDUCE_AXIS for u in ast.toposort())
    shape = ast.src[0].src[1].shape
    # a symbolic size shows as the names of its Variables
    return ("r_" if has_reduce else "E_") + ("_".join(str(s) if isinstance(s, int) else "_".join(
        sorted(u.arg[0] for u in s.toposort() if u.op is Ops.DEFINE_VAR)) for s in shape) or "1")


def count_work(uops: list[UOp], global_size, local_size) -> int:
    """FLOPs: ALU ops times how often each runs (threads x enclosing loop trips; symbolic sizes at their largest)."""
    threads = prod(map(max_value, global_size)) * prod(local_size)
    trips, flops = [threads], 0
    for u in uops:
        if u.op is Ops.RANGE:     # (a loop of symbolic length counts once)
            trips.append(trips[-1] * (u.src[0].arg if u.src[0].op is Ops.CONST else 1))
        elif u.op is Ops.ENDRANGE:
            trips.pop()
        elif u.op in GroupOp.ALU and dtypes.is_float(u.dtype):   # index arithmetic isn't the kernel's work
            flops += trips[-1] * (2 if u.op is Ops.MULACC else 1)
        elif u.op is Ops.WMMA:                                    # once per warp, not per thread
            flops += trips[-1] // prod(local_size) * 2 * prod(u.arg[0].dims)
    return flops


def _bytes_moved(ast: UOp) -> int:
    out = ast.src[0]
    loads = {u.src[0]: u for u in out.src[1].toposort() if u.op is Ops.INPUT}
    return sum(max_value(u.arg) * u.dtype.itemsize for u in loads.values()) + \
        max_value(prod(out.src[1].shape)) * out.src[0].dtype.itemsize
