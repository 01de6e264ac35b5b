"""Looking inside: text and Graphviz dumps of a lazy graph, and a finite-difference gradient check.

These read the UOp graph a Tensor holds; nothing here changes it."""
import numpy as np
from tinygrad_core.ops import Ops, UOp


def _label(u: UOp) -> str:
    if u.op is Ops.BUFFER:
        buf = u.arg[0]
        return f"BUFFER {buf.device} {buf.size} x {buf.dtype.name}" + (f" v{u.arg[1]}" if u.arg[1] else "")
    if u.op is Ops.DEVICE:
        return f"DEVICE {u.arg}"
    arg = "" if u.arg is None else f" {u.arg.name if isinstance(u.arg, Ops) else u.arg}"
    if u.op is Ops.REDUCE_AXIS:
        arg = f" {u.arg[0].name} axes={u.arg[1]}"
    if u.op is Ops.CUSTOM:
        arg = f" {type(u.arg).__name__}"
    return f"{u.op.name}{arg}"


def graph_text(root: UOp) -> str:
    """One line per node, sources first: `%3 = MUL float (2, 3) <- %1, %2`."""
    ids = {u: i for i, u in enumerate(node for node in root.toposort() if node.op is not Ops.DEVICE)}
    lines = []
    for u in ids:
        srcs = ", ".join(f"%{ids[s]}" for s in u.src if s in ids)
        sources = f" <- {srcs}" if srcs else ""
        lines.append(f"%{ids[u]:<3} = {_label(u):40s} {u.dtype.name:8s} {str(u.shape):16s}" + sources)
    return "\n".join(lines)


def graph_dot(root: UOp) -> str:
    """Graphviz DOT source for the graph (render with `dot -Tsvg`)."""
    ids = {u: i for i, u in enumerate(node for node in root.toposort() if node.op is not Ops.DEVICE)}
    lines = ["digraph tinygrad_core {", "  node [shape=box, fontname=monospace];"]
    for u in ids:
        color = {Ops.BUFFER: "lightblue", Ops.REDUCE_AXIS: "salmon", Ops.CONST: "lightgrey"}.get(u.op, "white")
        lines.append(f'  n{ids[u]} [label="{_label(u)}\\n{u.dtype.name} {u.shape}", style=filled, fillcolor={color}];')
        lines.extend(f"  n{ids[s]} -> n{ids[u]};" for s in u.src if s in ids)
    return "\n".join([*lines, "}"])


def gradcheck(fn, *inputs, eps: float = 1e-3, atol: float = 1e-3, rtol: float = 1e-2) -> bool:
    """Compare the analytic gradient of sum(fn(*inputs)) with central finite differences, in float64 on the host
    side. Raises AssertionError naming the input and the worst element when they disagree; returns True."""
    tensor = type(inputs[0])         # (this module sits below tensor.py: it builds Tensors through their class)
    values = [x.numpy().astype(np.float64) for x in inputs]

    def evaluate(n: int, i: tuple, delta: float) -> float:
        """sum(fn(*inputs)) with element i of input n moved by delta."""
        arrays = [v.copy() for v in values]
        arrays[n][i] += delta
        return float(fn(*[tensor(a.astype(np.float32), device=x.device) for a, x in zip(arrays, inputs)]).sum().numpy())

    leaves = [tensor(v.astype(np.float32), device=x.device, requires_grad=True) for v, x in zip(values, inputs)]
    fn(*leaves).sum().backward()
    for n, (leaf, value) in enumerate(zip(leaves, values)):
        analytic = leaf.grad.numpy() if leaf.grad is not None else np.zeros_like(value)
        numeric = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            numeric[i] = (evaluate(n, i, eps) - evaluate(n, i, -eps)) / (2 * eps)
        if not np.allclose(analytic, numeric, atol=atol, rtol=rtol):
            worst = np.unravel_index(np.argmax(np.abs(analytic - numeric)), value.shape)
            raise AssertionError(f"gradcheck: input {n} element {worst}: analytic {analytic[worst]:.6g}, "
                                 f"finite difference {numeric[worst]:.6g}")
    return True
