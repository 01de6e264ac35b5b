"""Autograd: one derivative rule per primitive op. This file is the whole of it.

Each rule maps (output gradient, the node, its sources) to the gradients of its sources (None = no gradient).
Composite Tensor ops (softmax, conv2d, ...) are built from primitives, so they differentiate through these rules."""
from __future__ import annotations
import math
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import DEBUG
from typing import TYPE_CHECKING
from tinygrad_core.ops import Ops, UOp, cos_uop
if TYPE_CHECKING:
    from tinygrad_core.tensor import Tensor


def _reduce_grad(g: UOp, out: UOp, a: UOp) -> tuple:
    op, axes = out.arg
    if op is Ops.ADD:
        return (g.expand(a.shape),)
    if op is Ops.MAX:   # split the gradient evenly between tied maxima
        is_max = a.ne(out.expand(a.shape)).where(0.0, 1.0).cast(g.dtype)
        return (g.expand(a.shape) * is_max / is_max.reduce(Ops.ADD, axes).expand(a.shape),)
    # MUL: d(prod)/da is the product of the others. prod / a where no element is 0; where one is, the product of
    # the rest at that element, and elsewhere 0 times the others': NaN beside another inf or NaN (PyTorch's; 0 times
    # the product of all the rest made NaN at the inf of [-inf, 0] too); with two or more zeros, 0 everywhere
    is_zero = a.ne(0.0).where(0.0, 1.0).cast(a.dtype)
    zeros = is_zero.reduce(Ops.ADD, axes).expand(a.shape)
    others = a.ne(0.0).where(a, 1.0).cast(a.dtype).reduce(Ops.MUL, axes).expand(a.shape)
    bad = (a - a).ne(0.0).where(1.0, 0.0).cast(a.dtype)          # (inf or NaN: where a - a is NaN)
    beside = (bad.reduce(Ops.ADD, axes).expand(a.shape) - bad).ne(0.0).where(math.nan, 0.0).cast(a.dtype)
    rest = zeros.ne(0.0).where(zeros.ne(1.0).where(0.0, is_zero.ne(0.0).where(others, beside)), out.expand(a.shape) / a)
    return (g.expand(a.shape) * rest,)


def _assign_grad(g: UOp, out: UOp, target: UOp, value: UOp, view: UOp | None = None) -> tuple:
    """A write of the whole target passes g to the value; one into a view of it passes the view of g (the same views
    over g), and what the write left alone passes g on to the target's old value."""
    if view is None:
        return None, g
    written = compute_gradient(view, view.const_like(1.0), {target})[target]      # 1 where the view lies
    return written.ne(0.0).where(0.0, g), view.view_over(g), None


def _sum_out(g: UOp, axes) -> UOp:
    """A gradient summed over broadcast axes; 16-bit floats add up in float32 (as the forward sum does)."""
    wide = g.dtype in (dtypes.float16, dtypes.bfloat16)
    return (g.cast(dtypes.float32) if wide else g).reduce(Ops.ADD, axes).cast(g.dtype)


GRADIENTS = {
    Ops.ADD: lambda g, out, a, b: (g, g),
    Ops.SUB: lambda g, out, a, b: (g, -g),
    Ops.MUL: lambda g, out, a, b: (g * b, g * a),
    # PyTorch's order, -g (out / b): -g a / b^2 would overflow first (g = 1e10, a = b = 1e30: NaN, PyTorch -1e-20)
    Ops.FDIV: lambda g, out, a, b: (g / b, -g * (out / b)),
    Ops.NEG: lambda g, out, a: (-g,),
    Ops.RECIP: lambda g, out, a: (-g * out * out,),
    Ops.SQRT: lambda g, out, a: (g / (out * 2),),
    Ops.EXP2: lambda g, out, a: (g * out * math.log(2),),
    Ops.TRUNC: lambda g, out, a: (g.const_like(0),),    # zero, as PyTorch: below it, 0 * inf is still NaN
    Ops.LOG2: lambda g, out, a: (g / a * (1 / math.log(2)),),     # (a * ln 2 would round a subnormal a)
    Ops.SIN: lambda g, out, a: (g * cos_uop(a),),
    # MAX as PyTorch: ties share the gradient, a NaN passes it whole to both sides, and the smaller side gets 0 (not
    # 0 * g: a NaN or inf arriving from above stays on the side that was chosen)
    Ops.MAX: lambda g, out, a, b: (a.lt(b).where(0.0, shared := g * a.ne(b).where(1.0, 0.5).cast(g.dtype)),
                                   b.lt(a).where(0.0, shared)),
    Ops.WHERE: lambda g, out, c, a, b: (None, c.where(g, 0.0), c.where(0.0, g)),
    Ops.MULACC: lambda g, out, a, b, c: (g * b, g * a, g),
    Ops.CAST: lambda g, out, a: (g.cast(a.dtype) if dtypes.is_float(a.dtype) else None,),
    Ops.REDUCE_AXIS: _reduce_grad,
    Ops.RESHAPE: lambda g, out, a: (g.reshape(a.shape),),
    Ops.PERMUTE: lambda g, out, a: (g.permute(tuple(sorted(range(len(out.arg)), key=out.arg.__getitem__))),),
    Ops.EXPAND: lambda g, out, a: (_sum_out(g, [i for i, (s, n) in enumerate(zip(a.shape, out.shape)) if s != n]),),
    Ops.PAD: lambda g, out, a: (g.shrink(tuple((before, before + s) for (before, _), s in zip(out.arg, a.shape))),),
    Ops.SHRINK: lambda g, out, a: (g.pad(tuple((start, s - end) for (start, end), s in zip(out.arg, a.shape))),),
    Ops.FLIP: lambda g, out, a: (g.flip(out.arg),),
    Ops.CONTIGUOUS: lambda g, out, a: (g,),
    Ops.COPY: lambda g, out, a: (UOp(Ops.COPY, g.dtype, (g,), a.device),),
    Ops.CUSTOM: lambda g, out, *srcs: out.arg._backward_uops(g, srcs[1:]),
    Ops.ASSIGN: _assign_grad,
}
# ops with no gradient: comparisons, integer ops, bit ops, DETACH, ...


def compute_gradient(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
    """Gradients of root (seeded with root_grad) with respect to each node in targets reachable from it."""
    # only nodes on a path from root to some target need a gradient
    on_path: dict[UOp, bool] = {}
    for u in root.toposort():
        on_path[u] = u in targets or u.op is not Ops.DETACH and any(on_path[s] for s in u.src[:2 if u.op is Ops.ASSIGN
                                                                                           else None])
    grads: dict[UOp, UOp] = {root: root_grad}
    for node in reversed(root.toposort()):
        if node not in grads or node.op not in GRADIENTS or not on_path[node]:
            continue
        pairs = list(zip(node.src, GRADIENTS[node.op](grads[node], node, *node.src)))
        if DEBUG >= 5:
            print(f"backward {node.op.name:12s} {node.shape} -> {['-' if g is None else g.shape for _, g in pairs]}")
        for src, g in pairs:
            if g is not None and on_path.get(src):
                grads[src] = grads[src] + g if src in grads else g
    return {t: grads[t] for t in targets if t in grads}


class Function:
    """A custom op with its own backward, written with Tensor ops (the seed's MySpecialAct):

        class Square(Function):
            def forward(self, x): self.x = x; return x * x
            def backward(self, grad): return grad * 2 * self.x

        y = Square.apply(x)
    """

    def forward(self, *args: Tensor, **kwargs) -> Tensor: raise NotImplementedError    # noqa: E704
    def backward(self, grad_output: Tensor): raise NotImplementedError                 # noqa: E704

    @classmethod
    def apply(cls, *tensors: Tensor, **kwargs) -> Tensor:
        fn = cls()
        fn.tensor_type = type(tensors[0])     # (not the inputs: a graph holding Tensors would keep them and their .grad)
        out = fn.forward(*[t.detach() for t in tensors], **kwargs)
        # (not a leaf: realizing it keeps the graph back to its inputs)
        return type(tensors[0])(UOp(Ops.CUSTOM, out.dtype, (out.uop,) + tuple(t.uop for t in tensors), fn))

    def _backward_uops(self, g: UOp, inputs: tuple) -> tuple:
        grads = self.backward(self.tensor_type(g))     # a Tensor, built through the inputs' class
        grads = grads if isinstance(grads, (tuple, list)) else (grads,)
        # each in its input's dtype: a Python float in backward promotes a half gradient to float32, and the rules
        # below it would mix the two in one op (a half minimum's gradient failed to compile)
        return (None,) + tuple(None if gr is None else gr.uop.cast(x.dtype) for gr, x in zip(grads, inputs))
