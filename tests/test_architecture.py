"""Guards for the checklists in docs/ARCHITECTURE.md: an op added to `Ops` without its reference meaning, its gradient
rule or its conformance cases, a fusion rule without a docstring, an import that breaks the house (a cycle in the
core, an arrow against the back half's one way, an arrow from the core to a backend, a backend reaching past the
plugin API; imports inside functions count as much as the others), a core grown past its caps and a comment in the
core recording a measured speed each fail here, naming what is missing. Allowances are listed by name with the
reason; a stale one fails too."""
from __future__ import annotations

import ast
import importlib.util
import inspect
import io
import os
import pathlib
import re
import subprocess
import sys
import tokenize

import pytest

from tinygrad_core import gradient, ops, schedule
from tinygrad_core.conformance import test_4_ops as conformance_ops
from tinygrad_core.ops import GroupOp, Ops

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORE = ROOT / "tinygrad_core"

# ---------------------------------------------------------------------------------------------------------------
# Adding an op
# ---------------------------------------------------------------------------------------------------------------
# Ops that never reach a backend, with what they become on the way (their meaning is that of the ops they become)
LOWERED = {
    Ops.BUFFER: "a realized buffer: a kernel input or output (DEFINE_GLOBAL)",
    Ops.DEVICE: "names a device: the source of CONSTs, never computed",
    Ops.CONST: "a kernel CONST (the tensor-level scalar, broadcast by movement ops)",
    Ops.REDUCE_AXIS: "REDUCE in the kernel graph (codegen/lower.py)",
    **{op: "index arithmetic on the loads below it (codegen/lower.py)" for op in GroupOp.MOVEMENT},
    Ops.CONTIGUOUS: "a kernel root: a STORE into a buffer of its own (schedule.py)",
    Ops.DETACH: "its source: it only stops gradients",
    Ops.COPY: "a transfer between devices (a ScheduleItem of its own, no kernel)",
    Ops.ASSIGN: "a kernel root storing into its target's buffer (schedule.py)",
    Ops.CUSTOM: "its src[0]: a user Function only brings its own gradient rule",
    Ops.GATHER: "a LOAD whose address is read from the index buffer (codegen/lower.py)",
    Ops.BIND: "a DEFINE_VAR; the value goes to the launch (ScheduleItem.var_vals)",
    Ops.SINK: "the kernel graph's root: the linearizer keeps the STOREs below it",
    Ops.INPUT: "a kernel AST's whole-buffer read: LOADs at the indices codegen/lower.py computes",
    Ops.MULTI: "one node per device: multi.py rewrites a multi-device graph into single-device ones before scheduling",
    Ops.REDUCE: "an accumulator and a loop: DEFINE_ACC, RANGE, UPDATE_ACC, ENDRANGE (codegen/linearize.py)",
}
# Tensor-graph ops whose value has no gradient
NO_GRADIENT = {
    **{op: "a comparison: its value is boolean" for op in GroupOp.COMPARISON},
    **{op: "an integer or bit op: no derivative" for op in (Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL,
                                                             Ops.SHR)},
    Ops.BITCAST: "reinterprets bits: no derivative",
    Ops.BUFFER: "a leaf: gradients stop at the tensors that require them",
    Ops.CONST: "a constant",
    Ops.DEVICE: "not a value",
    Ops.DETACH: "stops gradients by definition",
    Ops.GATHER: "built only by indexing.py's _Gather, a Function: the CUSTOM above it carries the gradient rule",
    Ops.BIND: "an integer Variable",
}
KERNEL_ONLY = {Ops.SINK, Ops.REDUCE, Ops.INPUT}   # in LOWERED, but never in a tensor graph (so never differentiated)


def reference_backend_ops() -> dict:
    """The kernel ops the reference backend executes (its op table), the executable definition of each."""
    backend = pytest.importorskip("tinygrad_python.backend", reason="the reference backend (plugins/tinygrad_python)")
    return next(c.OPS for c in vars(backend).values() if isinstance(c, type) and isinstance(vars(c).get("OPS"), dict))


def test_every_alu_op_has_a_reference_entry():
    missing = sorted(op.name for op in GroupOp.ALU if op not in ops.REFERENCE)
    assert not missing, f"ALU ops without an entry in ops.REFERENCE (what exactly they compute): {missing}"
    extra = sorted(op.name for op in set(ops.REFERENCE) - GroupOp.ALU)
    assert not extra, f"ops.REFERENCE entries for ops that aren't ALU ops: {extra}"


def test_every_op_has_a_meaning():
    executed = reference_backend_ops()
    defined = set(ops.REFERENCE) | {Ops.CAST, Ops.BITCAST}     # ops.cast_array, ops.bitcast_array
    missing = sorted(op.name for op in Ops if op not in defined and op not in executed and op not in LOWERED)
    assert not missing, (f"ops with no written meaning: {missing}. An ALU op needs an ops.REFERENCE entry; a kernel op "
                         f"a method in the reference backend's Launch.OPS (and a row in docs/PLUGINS.md's op "
                         f"table); a graph op that never reaches a backend an entry in LOWERED here, saying what it "
                         f"becomes")
    unlowered = sorted(op.name for op in GroupOp.ELEMENTWISE if op in LOWERED)
    assert not unlowered, f"elementwise ops listed as LOWERED, but they reach every backend: {unlowered}"


def test_every_kernel_op_is_in_the_plugin_guide():
    guide = (ROOT / "docs" / "PLUGINS.md").read_text()
    missing = sorted(op.name for op in reference_backend_ops() if f"`{op.name}" not in guide and f" {op.name} " not in
                     guide)
    assert not missing, f"kernel ops a renderer receives but docs/PLUGINS.md's op table doesn't describe: {missing}"


def test_every_differentiable_op_has_a_gradient_rule():
    tensor_ops = (GroupOp.ELEMENTWISE | set(LOWERED)) - KERNEL_ONLY
    missing = sorted(op.name for op in tensor_ops if op not in gradient.GRADIENTS and op not in NO_GRADIENT)
    assert not missing, (f"tensor-graph ops with neither a rule in gradient.GRADIENTS nor an entry in NO_GRADIENT here "
                         f"(with the reason): {missing}")
    both = sorted(op.name for op in NO_GRADIENT if op in gradient.GRADIENTS)
    assert not both, f"NO_GRADIENT lists ops that gradient.GRADIENTS has a rule for now: {both}"
    stray = sorted(op.name for op in gradient.GRADIENTS if op not in tensor_ops)
    assert not stray, f"gradient rules for ops that never appear in a tensor graph: {stray}"


def test_every_elementwise_op_has_conformance_cases():
    alu_cases = {p.values[0] for p in conformance_ops.ALU_CASES}
    missing = sorted(op.name for op in GroupOp.ALU if op not in alu_cases)
    assert not missing, f"ALU ops with no case in conformance/test_4_ops.py (a row in OP_DTYPES): {missing}"
    conversions = {Ops.CAST: conformance_ops.CAST_CASES, Ops.BITCAST: conformance_ops.BITCAST_CASES}
    assert set(conversions) == GroupOp.ELEMENTWISE - GroupOp.ALU, "a new conversion op needs conformance cases"
    assert all(conversions.values()), "CAST and BITCAST each need conformance cases"


# ---------------------------------------------------------------------------------------------------------------
# Adding a fusion rule (tests/test_schedule.py's test_every_cut_rule_is_tested_here checks each has a test there)
# ---------------------------------------------------------------------------------------------------------------
CUT_RULE_PARAMETERS = {"NODE_CUTS": ["u"], "WALK_CUTS": ["plan", "root", "u", "repeated", "in_reduce"],
                       "KERNEL_CUTS": ["plan", "root"], "LAYOUTS": ["u"]}


@pytest.mark.parametrize("kind", sorted(CUT_RULE_PARAMETERS))
def test_every_cut_rule_has_a_docstring_and_the_list_signature(kind):
    rules = getattr(schedule, kind)
    undocumented = [rule.__name__ for rule in rules if not (rule.__doc__ or "").strip()]
    assert not undocumented, f"cut rules in schedule.{kind} without a docstring saying what they cut and why: " \
                             f"{undocumented}"
    wrong = {rule.__name__: list(inspect.signature(rule).parameters) for rule in rules
             if list(inspect.signature(rule).parameters) != CUT_RULE_PARAMETERS[kind]}
    assert not wrong, f"rules in schedule.{kind} are called with {CUT_RULE_PARAMETERS[kind]}; these take {wrong}"


def test_every_cut_rule_is_in_the_tour():
    tour = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    rules = schedule.NODE_CUTS + schedule.WALK_CUTS + schedule.KERNEL_CUTS + schedule.LAYOUTS
    missing = [rule.__name__ for rule in rules if f"`{rule.__name__}`" not in tour]
    assert not missing, f"cut rules docs/ARCHITECTURE.md's schedule.py section doesn't name: {missing}"


# ---------------------------------------------------------------------------------------------------------------
# The house drawn from the imports
# ---------------------------------------------------------------------------------------------------------------
BACKENDS = {"tinygrad_cpu": ROOT / "tinygrad_cpu", "tinygrad_opencl": ROOT / "tinygrad_opencl",
            "tinygrad_cuda": ROOT / "tinygrad_cuda", "tinygrad_python": ROOT / "plugins" / "tinygrad_python" /
            "tinygrad_python"}
# what docs/PLUGINS.md documents as the API a backend builds on (a module and the modules under it)
PLUGIN_API = ("tinygrad_core.plugins", "tinygrad_core.device", "tinygrad_core.dtype", "tinygrad_core.ops",
              "tinygrad_core.renderer", "tinygrad_core.helpers")
# Named gaps: a backend module's imports of the core past the plugin API
BEYOND_API = {
    ("tinygrad_cuda.compile_check", "tinygrad_core.engine.realize"):
        "a pytest plugin that lowers every kernel of a test session for CUDA (a tool, not the backend): it wraps the "
        "runner build",
}


def module_name(path: pathlib.Path, root: pathlib.Path, package: str) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: pathlib.Path, package: str, tests: bool = True) -> dict[str, pathlib.Path]:
    return {module_name(p, root, package): p for p in sorted(root.rglob("*.py")) if tests or "tests" not in p.parts}


def _type_checking_only(node: ast.If) -> bool:
    return isinstance(node.test, (ast.Name, ast.Attribute)) and ast.unparse(node.test).endswith("TYPE_CHECKING")


def imports(path: pathlib.Path, known: set[str]) -> tuple[set[str], set[str]]:
    """(the modules imported when path is imported, the modules imported later, inside functions). `from a import b`
    is an import of a.b when that is a module in known; `if TYPE_CHECKING:` imports are neither."""
    top, deferred = set(), set()

    def visit(node, inside_function):
        if isinstance(node, ast.If) and _type_checking_only(node):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module for a in node.names]
            (deferred if inside_function else top).update(names)
        for child in ast.iter_child_nodes(node):
            visit(child, inside_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))
    visit(ast.parse(path.read_text()), False)
    return top, deferred


CORE_MODULES = modules(CORE, "tinygrad_core")
CORE_IMPORTS = {name: imports(path, set(CORE_MODULES)) for name, path in CORE_MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or around a loop (Tarjan's algorithm)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = [stack.pop()]
            while group[-1] != v:
                group.append(stack.pop())
            on_stack.difference_update(group)
            if len(group) > 1:
                groups.append(sorted(group))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return groups


# every import of each core module, at module level or inside a function: one made late still ties the two modules
CORE_GRAPH = {m: {i for i in top | late if i in CORE_MODULES and i != m} for m, (top, late) in CORE_IMPORTS.items()}


def test_no_import_cycle_in_the_core():
    cycles = _cycles(CORE_GRAPH)
    assert not cycles, (f"import cycles in tinygrad_core, imports inside functions included (each group imports itself "
                        f"back; a lower module that needs a higher one declares the few primitives it needs, or the "
                        f"higher one registers itself, as sizes.py does in ops.SIZES): {cycles}")


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# The back half goes one way, codegen -> renderer -> device: a renderer reads the program the codegen makes (with what
# the codegen exports for it, such as program_signature and KernelOpts, which the renderer package re-exports to
# backends), and the device layer runs the result. (importer, what it must never reach, directly or through the
# modules it imports) -> why
ONE_WAY = {
    ("tinygrad_core.codegen", "tinygrad_core.renderer"):
        "codegen reads what a renderer declares off the renderer it is handed, and hands it a program: it needs "
        "nothing of the renderer package",
    ("tinygrad_core.device", "tinygrad_core.codegen"):
        "the device layer (device.py, with cache.py and plugins.py) allocates, compiles and launches whatever the "
        "codegen made, without knowing how it was made",
}


def _path_to(start: str, package: str) -> list[str] | None:
    """The shortest chain of imports from start to a module within package, or None where there is none."""
    came_from, frontier = {start: None}, [start]
    while frontier:
        module = frontier.pop(0)
        if module != start and _within(module, package):
            chain = [module]
            while came_from[chain[-1]] is not None:
                chain.append(came_from[chain[-1]])
            return chain[::-1]
        for imported in sorted(CORE_GRAPH[module] - came_from.keys()):
            came_from[imported] = module
            frontier.append(imported)
    return None


@pytest.mark.parametrize("importer, forbidden", sorted(ONE_WAY))
def test_the_back_half_is_one_way(importer, forbidden):
    chains = [chain for m in sorted(CORE_MODULES) if _within(m, importer) and (chain := _path_to(m, forbidden))]
    assert not chains, (f"{importer} reaches {forbidden} ({ONE_WAY[importer, forbidden]}); move what it needs to its "
                        f"own side: {[' -> '.join(chain) for chain in chains]}")


def test_the_core_never_imports_a_backend():
    arrows = sorted((m, i) for m, (top, late) in CORE_IMPORTS.items() for i in top | late
                    if i.split(".")[0] in BACKENDS)
    assert not arrows, f"the core imports backends by name (it must find them through entry points only): {arrows}"


def _api(name: str) -> bool:
    return any(name == api or name.startswith(api + ".") for api in PLUGIN_API)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_backends_import_only_the_plugin_api(backend):
    if not BACKENDS[backend].is_dir():
        pytest.skip(f"{backend} is not in this checkout")
    found = {(m, i) for m, path in modules(BACKENDS[backend], backend, tests=False).items()
             for i in set.union(*imports(path, set(CORE_MODULES))) if i.split(".")[0] == "tinygrad_core"}
    beyond = sorted(arrow for arrow in found if not _api(arrow[1]) and arrow not in BEYOND_API)
    assert not beyond, f"{backend} imports parts of the core that docs/PLUGINS.md doesn't document as API: {beyond}"
    stale = sorted(a for a in BEYOND_API if a[0].split(".")[0] == backend and a not in found)
    assert not stale, f"BEYOND_API allows imports {backend} no longer makes: {stale}"


def test_the_plugin_api_is_the_documented_one():
    guide = (ROOT / "docs" / "PLUGINS.md").read_text()
    undocumented = [m for m in PLUGIN_API if m not in guide and m.replace(".", "/") not in guide]
    assert not undocumented, f"PLUGIN_API names modules docs/PLUGINS.md doesn't document: {undocumented}"


# ---------------------------------------------------------------------------------------------------------------
# The caps: the core stays readable in an afternoon. Lines are counted as bench/loc.py counts them (code, not comments
# or docstrings), over the files it counts as the core
# ---------------------------------------------------------------------------------------------------------------
MOST_LINES_IN_A_FILE = 800
MOST_LINES_IN_THE_CORE = 6000


def core_line_counts() -> dict[pathlib.Path, int]:
    spec = importlib.util.spec_from_file_location("bench_loc", ROOT / "bench" / "loc.py")
    loc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loc)
    return loc.core_counts(CORE)


def test_no_core_file_is_over_the_cap():
    over = {str(path): n for path, n in core_line_counts().items() if n > MOST_LINES_IN_A_FILE}
    assert not over, f"core files over {MOST_LINES_IN_A_FILE} lines of code (bench/loc.py): {over}; split each by " \
                     f"concern, one idea to a module"


def test_the_core_is_within_its_cap():
    counts = core_line_counts()
    total, biggest = sum(counts.values()), sorted(counts.items(), key=lambda item: -item[1])[:5]
    assert total <= MOST_LINES_IN_THE_CORE, (f"the core is {total} lines of code (bench/loc.py), over its cap of "
                                             f"{MOST_LINES_IN_THE_CORE}: delete before you add (the biggest files: "
                                             f"{[(str(path), n) for path, n in biggest]})")


# ---------------------------------------------------------------------------------------------------------------
# Comments say why the code is as it is; a measured figure goes to the commit message or bench/results, where the
# command that reproduces it stands beside it (a figure in a comment is stale after the next change)
# ---------------------------------------------------------------------------------------------------------------
TIMING = re.compile(r"\d(?:\.\d+)?\s*(?:x|times|%)\s+(?:faster|slower)|\d(?:\.\d+)?\s*(?:ms|us|µs|GFLOP/s|GB/s)\b",
                    re.IGNORECASE)


def comments_and_docstrings(source: str):
    """(line, text) of every comment and docstring (a string standing alone as a statement) in source."""
    previous = tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT or tok.type == tokenize.STRING and previous in (tokenize.NEWLINE,
                                                                                        tokenize.INDENT,
                                                                                        tokenize.DEDENT):
            yield tok.start[0], tok.string
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            previous = tok.type


def test_no_comment_in_the_core_records_a_timing():
    found = [f"{path.relative_to(ROOT)}:{line}: {match.group(0)}" for path in CORE_MODULES.values()
             for line, text in comments_and_docstrings(path.read_text()) for match in TIMING.finditer(text)]
    assert not found, f"comments or docstrings recording a measured speed (move the figure to the commit message " \
                      f"or bench/results, keep the reason): {found}"


TRACE = """
import os, sys, tinygrad_core, tinygrad_cpu
from tinygrad_core import Tensor
roots = [os.path.dirname(m.__file__) for m in (tinygrad_core, tinygrad_cpu)]
x, w = Tensor.rand(4, 8, requires_grad=True), Tensor.rand(8, 3, requires_grad=True)
Tensor.realize_all(x, w)
order = []
def tracer(frame, event, arg):
    name = frame.f_code.co_filename
    for root in roots:
        if event == "call" and name.startswith(root + os.sep):
            if (rel := os.path.relpath(name, os.path.dirname(root)).replace(os.sep, "/")) not in order:
                order.append(rel)
sys.settrace(tracer)
loss = (x @ w).relu().sum()
loss.backward()
Tensor.realize_all(loss, x.grad, w.grad)
sys.settrace(None)
print(chr(10).join(order))
"""


def test_the_tour_lists_the_student_trace(tmp_path):
    """docs/ARCHITECTURE.md's student trace is the files (x @ w).relu().sum().backward() and a realize on CPU visit,
    in the order each is first entered (an empty kernel cache: every kernel goes through the codegen)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    listed = text.split("## The student trace")[1].split("```")[1].split()
    env = {**os.environ, "TINYGRAD_CACHE_DIR": str(tmp_path), "TINYGRAD_DEVICE": "CPU"}
    done = subprocess.run([sys.executable, "-c", TRACE], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == listed
