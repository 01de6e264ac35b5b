"""Symbolic sizes: shapes, view bounds and constants made of Variables (`ops.Variable`; `.bind(n)` gives a value).

Beside ops.py, below the scheduler: what the graph layer does with such sizes (their arithmetic, values and text, the
largest value a buffer must hold, taking the values out and putting others in). Simplifying their arithmetic is the
index-expression simplifier's (codegen/symbolic.py), as it is inside kernels."""
import sys
from tinygrad_core import ops
from tinygrad_core.codegen import symbolic as simplifier
from tinygrad_core.ops import Ops, UOp


def arithmetic(name: str, a, b):
    """a + b, a - b or a * b (name: "add", "sub", "mul") of symbolic ints, simplified; a result that no longer
    depends on a Variable is a plain int."""
    out = getattr(simplifier, name)(simplifier.const(a) if isinstance(a, int) else a, b)
    return int(out.arg) if out.op is Ops.CONST and not out.src else out


def max_value(x: int | UOp) -> int:
    """The largest value a size can take (what a buffer for it must hold)."""
    return x if isinstance(x, int) else simplifier.bounds(x)[1]


def evaluate(x: int | UOp, values: dict[str, int] | None = None) -> int:
    """The int value of a symbolic size: bound Variables bring their value, others are looked up by name in values."""
    if not isinstance(x, UOp):
        return x
    op, src = x.op, x.src
    if op is Ops.CONST:
        return int(x.arg)
    if op is Ops.BIND:
        return int(src[1].arg)
    if op is Ops.DEFINE_VAR:
        if values is None or x.arg[0] not in values:
            name, lo, hi = x.arg
            raise ValueError(f"Variable {name} has no value here: bind one, "
                             f"e.g. Variable({name!r}, {lo}, {hi}).bind(n)")
        return values[x.arg[0]]
    a, b = (evaluate(s, values) for s in src)
    quotient = (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1) if b else 0      # truncating, as in kernels
    return {Ops.ADD: a + b, Ops.SUB: a - b, Ops.MUL: a * b, Ops.IDIV: quotient, Ops.MOD: a - b * quotient,
            Ops.MAX: max(a, b)}[op]


def unbind(x, found: dict[str, int]):
    """x (a symbolic size, or a tuple of them, nested) with each bound Variable replaced by the bare Variable; the
    values go into found. Kernels are built from unbound sizes, so one compiled kernel serves every value."""
    if isinstance(x, tuple):
        return tuple(unbind(v, found) for v in x)
    if not isinstance(x, UOp) or not x.src:
        return x
    if x.op is Ops.BIND:
        var, value = x.unbind()
        if (first := found.setdefault(var.arg[0], value)) != value:
            raise ValueError(f"Variable {var.arg[0]} is bound to both {first} and {value} in one computation")
        return var
    return x.replace(src=tuple(unbind(s, found) for s in x.src))


def rebind(x, values: dict[str, int]):
    """x with each bound Variable named in values bound to that value instead (x: a size, a tuple, or a graph)."""
    if isinstance(x, tuple):
        return tuple(rebind(v, values) for v in x)
    if not isinstance(x, UOp):
        return x
    if x.op is Ops.BIND:
        return x.src[0].bind(values[x.src[0].arg[0]]) if x.src[0].arg[0] in values else x
    if not x.src and not isinstance(x.arg, (tuple, UOp)):
        return x
    return x.replace(src=tuple(rebind(s, values) for s in x.src), arg=rebind(x.arg, values))


def render(x: UOp, top: bool = True) -> str:
    """A symbolic size as text: `i`, `(i*3+1)`, and its value when its Variables are bound: `i=5`, `(i+1)=6`."""
    op, src = x.op, x.src
    if op is Ops.CONST:
        return str(x.arg)
    if op in (Ops.DEFINE_VAR, Ops.BIND):
        text = x.arg[0] if op is Ops.DEFINE_VAR else src[0].arg[0]
    else:
        symbol = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%"}.get(op, f" {op.name} ")
        text = "(" + symbol.join(render(s, False) for s in src) + ")"
    bound = top and all(u.op is not Ops.DEFINE_VAR or any(b.op is Ops.BIND and b.src[0] is u for b in x.toposort())
                        for u in x.toposort())
    return f"{text}={evaluate(x)}" if bound else text


ops.SIZES = sys.modules[__name__]     # UOp's operators, value and repr on symbolic ints (see ops.SIZES)
