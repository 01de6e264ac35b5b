"""Autograd: every derivative rule there is. This file is the whole of it.

GRADIENTS has one rule per primitive op: (output gradient, the node, its sources) to the gradients of its sources
(None = no gradient). Composite Tensor ops (softmax, conv2d, ...) are built from primitives, so they differentiate
through these rules, except those in COMPOSITES, below: ops whose derivative through their primitives would be wrong
or inexact (a branch not taken meeting a zero gradient as 0 * inf = NaN, a rounding that doesn't cancel), which
carry a rule of their own, the same (output gradient, output, inputs) form written with Tensor ops."""
from __future__ import annotations
import math
from tinygrad_core.dtype import dtypes
from tinygrad_core.helpers import DEBUG, prod
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


class Composite(Function):
    """A composite op computed as value(*inputs), differentiated by its rule in COMPOSITES. The inputs and the output
    are kept as uops, not Tensors: a live lazy tensor reading a weight is computed with the optimizer's step, a kernel
    more. `args` reach the rule as keywords (no gradient flows to them), and so do the tensors value may return
    beside the output, as (output, {name: tensor}), when the rule needs them."""
    def forward(self, *xs, rule: str, value, **args):
        out = value(*xs)
        out, saved = out if isinstance(out, tuple) else (out, {})
        self.rule, self.args, self.xs, self.out = rule, {**args, **saved}, [x.uop for x in xs], out.uop
        return out

    def backward(self, grad_output):
        tensor = self.tensor_type
        return COMPOSITES[self.rule](grad_output, tensor(self.out), *map(tensor, self.xs), **self.args)


def composite(rule: str, *inputs: Tensor, value, **args) -> Tensor:
    """value(*inputs), whose gradient is COMPOSITES[rule](g, out, *inputs, **args)."""
    return Composite.apply(*inputs, rule=rule, value=value, **args)


def _chain(derivative):
    """The rule of an elementwise op from its derivative in each input (a tuple for several): g times it, and for
    None zeros (no gradient, also where g is inf or NaN)."""
    def rule(g, out, *xs, **args):
        d = derivative(*xs, **args)
        return tuple(g.zeros_like() if di is None else g * di for di in d) if isinstance(d, tuple) else g * d
    return rule


def _pow_rule(g, out, b, e, scalar=None):
    """b ** e: PyTorch's e b^(e-1), 0 where e is 0 (also under an inf from above), and b^e log(b), 0 where b is 0 and
    e >= 0 (through 2^(e log2|b|), b = 0 or inf gave 0 * inf = NaN); a number's power differentiates through its own
    pow (b ** 1.5 gives 1.5 sqrt(b))."""
    below = b.pow(e - 1) if scalar is None else b.pow(scalar - 1)
    return (e == 0).where(0.0, g * (e * below)), g * ((b == 0) & (e >= 0)).where(0.0, out * b.log())


def _cumprod_rule(g, y, x, axis):
    """PyTorch's: before a row's first zero, the sum of g y over the products that follow, over x; at that zero, the
    products that skip it, up to the next zero; after it, 0 (through the composition, the zero met a later inf or NaN
    as 0 * inf = NaN in the gradients before it and after it)."""
    if x.shape[axis] <= 1:          # (a single element is its own gradient, at -inf too)
        return g
    zeros = (x == 0).cumsum(axis)              # the zeros up to each position
    first, before = (x == 0) & (zeros == 1), zeros == 0
    # at the first zero: the product before it times the sum of g times the products after it
    after = (before | first).where(1, x).cumprod(axis)
    bounds = [(0, n - int(i == axis)) for i, n in enumerate(x.shape)]
    y_before = y.shrink(bounds).pad([(int(i == axis), 0) for i in range(x.ndim)], value=1)    # (1 before the row)
    # (up to the next zero: a product past it is 0, not 0 times an inf or NaN of g; summed in order, as PyTorch)
    at_first = first.where(y_before * (zeros == 1).where(g * after, 0).sum(axis, keepdim=True), 0)
    following = before.where(g * y, 0).flip(axis).cumsum(axis).flip(axis)      # (the sums over j >= i)
    return before.where(following / x, at_first)


def _gather_rule(g, out, x, index, axis: int):
    """Each output slice added back to the position it came from: a one-hot sum over the index."""
    k, n, count = index.ndim, x.shape[axis], prod(index.shape)
    hits = index.reshape(count, 1) == type(index).arange(n, device=index.device).reshape(1, n)
    g = g.reshape(g.shape[:axis] + (count, 1) + g.shape[axis + k:])
    return hits.reshape((1,) * axis + (count, n) + (1,) * (g.ndim - axis - 2)).where(g, 0).sum(axis), None


def _running_pick_rule(g, out, x, index):
    """torch's: each position's gradient goes to the index it was read from. An index holds a run of positions (it
    only grows), so each sums its run: by doubling steps, a position adds the partial sum 2^t ahead while that is in
    its run (log n passes, summed pairwise)."""
    total, step = g, 1
    while step < index.shape[-1]:
        ahead = lambda t, fill: t.pad(((0, 0),) * (t.ndim - 1) + ((0, step),), value=fill)[..., step:]  # noqa: E731
        total = (ahead(index, -1) == index).where(ahead(total, 0) + total, total).contiguous()
        step *= 2
    positions = type(index).arange(index.shape[-1], device=index.device, dtype=dtypes.int32)
    return (index == positions).where(total, 0)


def _max_pool_rule(g, out, windows, positions, axes, n):
    """torch's: all of it to the one element max_pool2d's indices name (max's own gradient would split it between
    tied maxima, and give NaN where the window has a NaN)."""
    score, best = windows._pool_choice(positions, axes, n)
    return (score == best).where(g.reshape(best.shape), 0.0)


def _gelu_pdf(x, approximate: str):
    """The derivative of gelu's normal CDF (or of its tanh approximation: 1 - tanh^2 as 1 / cosh^2, which didn't
    cancel)."""
    c = math.sqrt(2 / math.pi)
    if approximate == "tanh":
        return 0.5 * c * (1 + 0.134145 * x * x) / (c * (x + 0.044715 * x * x * x)).cosh() ** 2
    return (x * x * -0.5).exp() * (c / 2)


COMPOSITES = {
    # elementwise: PyTorch's derivatives, written out
    "log": lambda g, out, x: g / x,       # (through log2(x) ln 2, g ln 2 / x (1 / ln 2) didn't cancel; 1 / x overflows)
    # (exp's own, not ln 2 (exp2's) times 1 / ln 2, which isn't 1 in floats; and expm1's, e^x - 1 differing by 1)
    "exp": _chain(lambda x: x.exp()),
    "tan": lambda g, out, x: g * (1 + out.square()),     # (through sin / cos, an inf met tan = 0 as inf * 0)
    "asin": _chain(lambda x: (1 - x * x).rsqrt()),
    "acos": _chain(lambda x: -(1 - x * x).rsqrt()),
    "atan": _chain(lambda x: 1 / (1 + x * x)),
    "sinh": _chain(lambda x: x.cosh()),
    "cosh": _chain(lambda x: x.sinh()),
    "asinh": _chain(lambda x: (x * x + 1).rsqrt()),
    "acosh": _chain(lambda x: (x * x - 1).rsqrt()),
    "atanh": _chain(lambda x: 1 / (1 - x * x)),
    "square": _chain(lambda x: 2 * x),    # (whose 2 x overflows at |x| > 1.7e38, as PyTorch's)
    "abs": _chain(lambda x: x.sign()),    # (0 at 0)
    "sigmoid": _chain(lambda x: x.sigmoid() * (1 - x.sigmoid())),
    "tanh": _chain(lambda x: 1 - x.tanh().square()),
    "gelu": _chain(lambda x, cdf, approximate: cdf(x) + x * _gelu_pdf(x, approximate)),
    "silu": _chain(lambda x: x.sigmoid() * (1 + x * (1 - x.sigmoid()))),     # (s + x s' met an inf as inf - inf)
    # 1 at NaN, 0 at -3 and below (a NaN from above gives 0 there: where's, not 0 * NaN)
    "hardswish": _chain(lambda x: (x <= -3).where(0, (x < 3).where(x / 3 + 0.5, 1))),
    "softplus": _chain(lambda x, beta, threshold: (x * beta > threshold).where(1.0, (x * beta).sigmoid())),
    "mish": _chain(lambda x: x.softplus().tanh() + x * x.sigmoid() * (1 - x.softplus().tanh().square())),
    "erf": _chain(lambda x: (-(x * x)).exp() * (2 / math.sqrt(math.pi))),
    "relu": lambda g, out, x: (x <= 0).where(0.0, g),    # (0 at 0, also where an inf arrives; g at NaN)
    "copysign": lambda g, out, a, b: (g * (a == 0).where(0.0, out / a), g.zeros_like()),    # (none for b)
    "fmod": _chain(lambda a, b: (1.0, -(a / b).trunc())),
    "mod": _chain(lambda a, b: (1.0, -a.floordiv(b))),         # (NaN where a is inf)
    "logaddexp": _chain(lambda a, b: (1 / (1 + (b - a).exp()), 1 / (1 + (a - b).exp()))),
    "lerp": _chain(lambda a, b, w: (1 - w, w, b - a)),   # (the sum's would meet an inf from above as inf - inf * 0)
    "pow": _pow_rule,
    # b ** -0.5, -1, -2: x b^x / b (at -0.0 too), x (-inf)^(x-1) at -inf
    "negative_pow": lambda g, out, b, e: g * (b == -math.inf).where(0.0 if e == -2 else -0.0, e * out / b),
    "minimum": lambda g, out, a, b: ((b < a).where(0.0, shared := g * (a != b).where(1.0, 0.5)),
                                     (a < b).where(0.0, shared)),     # (MAX's; through -max(-a, -b): -0.0)
    # reductions: logsumexp's e^(x - out) (the e^x of a large x beside a +inf maximum overflowed to 0 * inf), and
    # var's 2 (x - mean) / (n - correction) (through the mean, an inf met the deviations' sum as inf - inf), inf
    # (NaN at x == mean) over the whole tensor with no degree of freedom left
    "logsumexp": lambda g, out, x, axis: g * (x - out).exp(),
    "var": _chain(lambda x, axis, whole, divisor: (x == x.mean(axis, True)).where(math.nan, math.inf) if whole else
                  2 * (x - x.mean(axis, True)) / divisor),
    "cumprod": _cumprod_rule,
    # what moves elements: each its own
    "gather": _gather_rule,
    "running_pick": _running_pick_rule,
    # masked_select: a flagged position's gradient is the slot its running count names
    "compact": lambda g, out, values, counts, flags, take: (flags & (counts - 1 < g.shape[0])).where(
        take(g, (counts - 1).clip(0, g.shape[0] - 1)), 0),
    # scatter_reduce's amax/amin: shared evenly by every value equal to the result (the fill where no value lands
    # never shares it, even when it equals an inf that does)
    "scatter_extreme": lambda g, out, values, t, ties, self_tie: (
        ties.where((share := g / (ties.sum(-1) + self_tie).maximum(1)).unsqueeze(-1), 0), self_tie.where(share, 0)),
    "overlapping_windows": lambda g, out, x, kernel, strides, dilations: g._unpool(x.shape[-len(kernel):], kernel,
                                                                                    strides, dilations),
    "max_pool": _max_pool_rule,
    # binary cross-entropy: PyTorch's (p - y) / max(p (1 - p), 1e-12) and log(1 - p) - log(p) (p = 0 made 0 / 0)
    "binary_crossentropy": lambda g, out, p, y: (g * (p - y) / (p * (1 - p)).maximum(1e-12),
                                                 g * ((1 - p).log() - p.log())),
    "contiguous_backward": lambda g, out, x: g.contiguous(),
}
