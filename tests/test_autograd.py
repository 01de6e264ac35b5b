"""Autograd: backward and .grad, accumulation, requires_grad, no_grad, train, detach, Tensor.gradient, custom
Functions, and gradients checked by finite differences (tinygrad_core.gradcheck) and by hand-derived formulas."""
import math

import numpy as np
import pytest
from helpers import assert_close, rand_array

from tinygrad_core import Context, Function, GlobalCounters, Tensor, dtypes, gradcheck


def test_backward_hand_derived():
    # f = sum(x * y + x^2), df/dx = y + 2x, df/dy = x
    x_np, y_np = rand_array((2, 3), seed=1), rand_array((2, 3), seed=2)
    x, y = Tensor(x_np, requires_grad=True), Tensor(y_np, requires_grad=True)
    (x * y + x * x).sum().backward()
    assert_close(x.grad.numpy(), y_np + 2 * x_np)
    assert_close(y.grad.numpy(), x_np)


def test_backward_mlp_against_numpy():
    x_np, w1_np, w2_np = rand_array((4, 3), seed=1), rand_array((3, 5), seed=2), rand_array((5, 2), seed=3)
    x = Tensor(x_np, requires_grad=False)
    w1, w2 = Tensor(w1_np, requires_grad=True), Tensor(w2_np, requires_grad=True)
    loss = (x @ w1).relu().matmul(w2).square().mean()
    loss.backward()
    h = x_np @ w1_np
    a = np.maximum(h, 0)
    out = a @ w2_np
    d_out = 2 * out / out.size
    d_w2 = a.T @ d_out
    d_h = (d_out @ w2_np.T) * (h > 0)
    assert_close(loss.numpy(), (out ** 2).mean(), rtol=1e-5)
    assert_close(w2.grad.numpy(), d_w2, atol=1e-5)
    assert_close(w1.grad.numpy(), x_np.T @ d_h, atol=1e-5)
    assert x.grad is None


def test_softmax_crossentropy_gradient_is_p_minus_onehot():
    logits_np = rand_array((3, 5))
    y = np.array([0, 4, 2], np.int32)
    logits = Tensor(logits_np, requires_grad=True)
    logits.sparse_categorical_crossentropy(Tensor(y)).backward()
    e = np.exp(logits_np - logits_np.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    assert_close(logits.grad.numpy(), (p - np.eye(5)[y]) / 3, atol=1e-6)


def test_gradients_accumulate():
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    assert_close(x.grad.numpy(), [3 + 2, 3 + 4])


def test_grad_reset_by_assigning_none():
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    x.grad = None
    (x * 2).sum().backward()
    assert_close(x.grad.numpy(), [2.0, 2.0])


def test_shared_subexpression_gradient():
    x = Tensor([1.5, -2.0], requires_grad=True)
    y = x * x
    (y + y * y).sum().backward()            # d/dx (x^2 + x^4) = 2x + 4x^3
    xs = np.array([1.5, -2.0])
    assert_close(x.grad.numpy(), 2 * xs + 4 * xs ** 3)


def test_backward_with_explicit_gradient():
    x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * 2
    y.backward(Tensor([[1.0, 0.0], [0.5, 2.0]]))
    assert_close(x.grad.numpy(), [[2.0, 0.0], [1.0, 4.0]])


def test_backward_on_one_element_tensor_without_gradient():
    x = Tensor([3.0], requires_grad=True)
    (x * x).backward()
    assert_close(x.grad.numpy(), [6.0])


def test_backward_after_realizing_the_output():
    # printing the loss before backward is the most common training-loop pattern
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss = (x * x).sum()
    assert loss.item() == 14.0
    loss.backward()
    assert_close(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_grad_dtype_and_shape_match():
    x = Tensor(rand_array((2, 1, 3)), requires_grad=True)
    (x.expand(2, 4, 3) * 2).sum().backward()
    assert x.grad.shape == x.shape and x.grad.dtype == x.dtype
    assert_close(x.grad.numpy(), np.full((2, 1, 3), 8.0))


def test_requires_grad_flags():
    x = Tensor([1.0])
    assert x.requires_grad is None
    assert Tensor([1.0], requires_grad=True).requires_grad is True
    assert x.requires_grad_() is x and x.requires_grad is True
    x.requires_grad_(False)
    assert x.requires_grad is False


def test_backward_fills_every_float_tensor_unless_opted_out():
    # tinygrad 0.14: requires_grad=None takes a gradient too; requires_grad=False opts out; ints never do
    x = Tensor([1.0, 2.0], requires_grad=True)
    c = Tensor([3.0, 4.0])
    frozen = Tensor([5.0, 6.0], requires_grad=False)
    k = Tensor([1, 1])
    h = x * c
    (h * frozen + k).sum().backward()
    assert frozen.grad is None and k.grad is None
    assert_close(x.grad.numpy(), [15.0, 24.0])
    assert_close(c.grad.numpy(), [5.0, 12.0])
    assert_close(h.grad.numpy(), [5.0, 6.0])
    with pytest.raises(RuntimeError, match="no floating-point tensor"):
        Tensor([1, 2], requires_grad=False).sum().backward()


def test_detach_stops_gradient():
    x = Tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert d.requires_grad is not True
    assert_close(d.numpy(), [1.0, 2.0])
    (x * d).sum().backward()        # only the non-detached factor carries gradient
    assert_close(x.grad.numpy(), [1.0, 2.0])


def test_no_grad_context():
    assert not Tensor.no_grad
    with Tensor.no_grad():
        assert Tensor.no_grad
        y = Tensor([1.0, 2.0]) * 2
        assert_close(y.numpy(), [2.0, 4.0])
    assert not Tensor.no_grad


def test_no_grad_results_are_constants_to_autograd():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with Tensor.no_grad():
        c = x * 3
    (x * c).sum().backward()          # d/dx (x * c) with c constant = c = 3x, not 6x
    assert_close(x.grad.numpy(), [3.0, 6.0])


def test_train_context():
    assert not Tensor.training
    with Tensor.train():
        assert Tensor.training
        with Tensor.train(False):
            assert not Tensor.training
        assert Tensor.training
    assert not Tensor.training


def test_gradient_method():
    x = Tensor([1.0, 2.0, 3.0])
    y = Tensor([4.0, 5.0, 6.0])
    dx, dy = (x * y + x).sum().gradient(x, y)
    assert_close(dx.numpy(), [5.0, 6.0, 7.0])
    assert_close(dy.numpy(), [1.0, 2.0, 3.0])
    assert x.grad is None


def test_gradient_through_movement_and_indexing():
    x_np = rand_array((3, 4))
    x = Tensor(x_np, requires_grad=True)
    y = x.permute(1, 0).flip(0)[1:3].pad(((0, 1), (1, 0))).reshape(-1)
    (y * Tensor(np.arange(y.shape[0], dtype=np.float32))).sum().backward()
    weights = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected = np.zeros((4, 3), np.float32)
    expected[::-1][1:3] = weights[:2, 1:]
    assert_close(x.grad.numpy(), expected.T)


def test_gradient_through_cast():
    x = Tensor([1.5, 2.5], requires_grad=True)
    (x.cast(dtypes.float64) * 3).cast(dtypes.float32).sum().backward()
    assert x.grad.dtype == dtypes.float32
    assert_close(x.grad.numpy(), [3.0, 3.0])
    y = Tensor([1.5, 2.5], requires_grad=True)
    (y.cast(dtypes.int32).cast(dtypes.float32) + y).sum().backward()   # no gradient through an int cast
    assert_close(y.grad.numpy(), [1.0, 1.0])


def test_debug_level_5_prints_backward_steps(capsys):
    x = Tensor([1.0, 2.0], requires_grad=True)
    with Context(DEBUG=5):
        (x.exp2() * 2).sum().backward()
    out = capsys.readouterr().out
    assert "backward" in out and "MUL" in out and "EXP2" in out


# ---- custom Functions ----
class Cube(Function):
    def forward(self, x):
        self.x = x
        return x * x * x

    def backward(self, grad):
        return grad * 3 * self.x * self.x


class ScaledAdd(Function):
    def forward(self, a, b, scale=1.0):
        self.scale = scale
        return a + b * scale

    def backward(self, grad):
        return grad, grad * self.scale


class WrongGrad(Function):
    """Forward is the identity; backward deliberately claims d/dx = 2 (to prove the custom rule is used)."""
    def forward(self, x):
        return x + 0

    def backward(self, grad):
        return grad * 2


def test_custom_function_forward_backward():
    x_np = rand_array((2, 3))
    x = Tensor(x_np, requires_grad=True)
    y = Cube.apply(x)
    assert y.requires_grad is (x * 1).requires_grad         # an op's result, not a leaf
    assert_close(y.numpy(), x_np ** 3, rtol=1e-5)           # (realized first: backward still reaches x)
    y.sum().backward()
    assert_close(x.grad.numpy(), 3 * x_np ** 2, rtol=1e-5)


def test_custom_function_two_inputs_and_kwargs():
    a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0], requires_grad=True)
    out = ScaledAdd.apply(a, b, scale=0.5)
    (out * Tensor([1.0, 10.0])).sum().backward()
    assert_close(out.numpy(), [2.5, 4.0])
    assert_close(a.grad.numpy(), [1.0, 10.0])
    assert_close(b.grad.numpy(), [0.5, 5.0])


def test_custom_function_backward_is_the_users():
    x = Tensor([1.0, 2.0], requires_grad=True)
    (WrongGrad.apply(x) * 3).sum().backward()
    assert_close(x.grad.numpy(), [6.0, 6.0])


def test_custom_function_inside_a_graph():
    x_np = rand_array((3,), 0.5, 1.5)
    x = Tensor(x_np, requires_grad=True)
    Cube.apply(x.exp()).log().sum().backward()      # log(exp(x)^3) = 3x
    assert_close(x.grad.numpy(), np.full(3, 3.0), rtol=1e-4)


def test_custom_function_gradcheck():
    assert gradcheck(lambda x: Cube.apply(x), Tensor(rand_array((4,), 0.5, 1.5)))


# ---- gradcheck ----
GRADCHECK = [
    ("mul_add", lambda a, b: a * b + a, [(2, 3), (2, 3)]),
    ("broadcast", lambda a, b: (a + b).sigmoid(), [(2, 3), (3,)]),
    ("matmul", lambda a, b: (a @ b).tanh(), [(2, 3), (3, 2)]),
    ("softmax", lambda a: a.softmax(-1) * Tensor([1.0, 2.0, 3.0]), [(2, 3)]),
    ("log_softmax", lambda a: a.log_softmax(0), [(3, 2)]),
    ("conv2d", lambda x, w: x.conv2d(w, padding=1), [(1, 1, 3, 3), (2, 1, 2, 2)]),
    ("max_pool", lambda x: x.max_pool2d(2) * 2, [(1, 1, 4, 4)]),
    ("layernorm", lambda x: x.layernorm() * Tensor([1.0, -2.0, 3.0]), [(2, 3)]),
    ("std", lambda x: x.std(1), [(2, 4)]),
    ("gelu_mish", lambda x: x.gelu() + x.mish(), [(5,)]),
    ("pow", lambda a, b: (a.abs() + 0.5) ** b, [(3,), (3,)]),
    ("index", lambda a: a[Tensor([2, 0])][:, ::-1], [(3, 3)]),
    ("cumsum", lambda a: a.cumsum(1) * a, [(2, 3)]),
]


@pytest.mark.parametrize("name,fn,shapes", GRADCHECK, ids=[g[0] for g in GRADCHECK])
def test_gradcheck(name, fn, shapes):
    inputs = [Tensor(rand_array(s, seed=i)) for i, s in enumerate(shapes)]
    assert gradcheck(fn, *inputs)


def test_gradcheck_catches_a_wrong_gradient():
    with pytest.raises(AssertionError, match="analytic .*finite difference"):
        gradcheck(lambda x: WrongGrad.apply(x), Tensor([1.0, 2.0]))


def test_second_use_of_graph_after_backward():
    x = Tensor([2.0], requires_grad=True)
    y = x * x
    y.sum().backward()
    y2 = y * 3
    x.grad = None
    y2.sum().backward()
    assert_close(x.grad.numpy(), [12.0])
    assert math.isclose(y2.item(), 12.0)


def test_check_helper_catches_a_wrong_gradient():
    # the shared helper must fail loudly when a backward rule is wrong, or every gradient test above is vacuous
    from helpers import check
    with pytest.raises(AssertionError, match="gradient of input 0"):
        check(lambda x: WrongGrad.apply(x), lambda x: x, shapes=[(3,)])
    with pytest.raises(AssertionError, match="forward"):
        check(lambda x: x * 2, lambda x: x * 3, shapes=[(3,)], grad=False)


def test_contiguous_backward_materialises_the_gradient_in_its_layout():
    x_np = np.arange(12, dtype=np.float32).reshape(3, 4)
    w_np = np.arange(12, dtype=np.float32).reshape(4, 3) / 10

    def grad_of_x(mark: bool):
        x = Tensor(x_np, requires_grad=True)
        y = x * 2
        y = y.contiguous_backward() if mark else y
        loss = (y.permute(1, 0).exp() * Tensor(w_np)).sum().realize()
        GlobalCounters.reset()
        loss.backward()
        x.grad.realize()
        assert_close(y.numpy(), x_np * 2)
        return x.grad, GlobalCounters.kernel_count
    (plain, plain_kernels), (marked, marked_kernels) = grad_of_x(False), grad_of_x(True)
    assert_close(marked.numpy(), plain.numpy())
    assert_close(marked.numpy(), 2 * np.exp(2 * x_np) * w_np.T)
    # the marked gradient is a kernel of its own (written in y's layout), then doubled
    assert marked_kernels == plain_kernels + 1


def test_gradient_of_a_target_outside_the_graph_raises():
    t = Tensor([1.0, 2.0])
    y = t * 3
    y.numpy()                         # realizing drops y's graph: t has no requires_grad=True to keep it
    with pytest.raises(RuntimeError, match="not in this tensor's graph"):
        y.sum().gradient(t)
    kept = Tensor([1.0, 2.0], requires_grad=True)
    z = kept * 3
    z.numpy()
    assert z.sum().gradient(kept)[0].tolist() == [3.0, 3.0]


def test_equal_lazy_constants_keep_their_gradients_apart():
    # Tensor(3.0) and the 3.0 of `b * 3.0` were one node, as were two Tensor.zeros(2): each took the other's gradient
    a, b = Tensor(3.0, requires_grad=True), Tensor([1., 2.])
    ((a * b).sum() + (b * 3.0).sum()).backward()
    assert a.grad.item() == 3.0
    b1, b2, x = Tensor.zeros(2, requires_grad=True), Tensor.zeros(2, requires_grad=True), Tensor([1., 2.])
    ((x + b1).sum() + (x * 5 + b2).square().sum()).backward()
    assert b1.grad.tolist() == [1., 1.] and b2.grad.tolist() == [10., 20.]
    c = Tensor(2.0)                       # didn't ask for a gradient: not given the 2.0's below
    (Tensor([5.]) * 2.0).sum().backward()
    assert c.grad is None


def test_maximum_and_floor_gradients_at_nan_and_inf_are_pytorchs():
    # a NaN in maximum passes the gradient whole to both sides (half went nowhere); floor's zero gradient meets
    # 0 * inf = NaN below it, as in PyTorch (the path was dropped: 0)
    a, b = Tensor([1., 2., math.nan], requires_grad=True), Tensor([1., 3., 1.], requires_grad=True)
    a.maximum(b).sum().backward()
    assert a.grad.tolist() == [0.5, 0., 1.] and b.grad.tolist() == [0.5, 1., 1.]
    x = Tensor([math.inf, 2.5], requires_grad=True)
    x.square().floor().sum().backward()
    assert math.isnan(x.grad.tolist()[0]) and x.grad.tolist()[1] == 0


def test_maximum_gives_the_smaller_side_zero_even_below_a_nan():
    # the smaller side got 0 * g: a NaN gradient from above (0 / 0) reached it as NaN, PyTorch gives 0
    v0, v1 = Tensor([[0.0]], requires_grad=True), Tensor(-2.976, requires_grad=True)
    v2 = v0.maximum(v1)
    (v2 / v2).sum().backward()
    assert math.isnan(v0.grad.item()) and v1.grad.item() == 0.0


def test_every_derivative_is_in_gradient_py():
    """gradient.py's first line says it holds every derivative: no Function subclass, backward method or derivative
    lambda anywhere else in the core, and each composite rule that an op names exists there (and each one is used)."""
    import ast
    import pathlib
    import re
    from tinygrad_core import gradient
    root = pathlib.Path(gradient.__file__).parent
    named, elsewhere = set(), []
    for path in sorted(root.rglob("*.py")):
        if path.name == "gradient.py" or "conformance" in path.parts:
            continue
        source = path.read_text()
        named |= set(re.findall(r"""(?:composite\(|_smooth\([^"\n]*?,)\s*["'](\w+)["']""", source))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", getattr(b, "attr", "")) in ("Function", "Composite")
                                                      for b in node.bases):
                elsewhere.append(f"{path.name}: class {node.name}")
            if isinstance(node, ast.ClassDef) and node.name != "Tensor" and any(
                    isinstance(f, ast.FunctionDef) and f.name == "backward" for f in node.body):
                elsewhere.append(f"{path.name}: {node.name}.backward")
            if isinstance(node, ast.keyword) and node.arg == "derivative":
                elsewhere.append(f"{path.name}: derivative= (line {node.value.lineno})")
    assert not elsewhere, f"derivatives outside gradient.py: {elsewhere}"
    assert named - set(gradient.COMPOSITES) == set(), f"rules named but missing: {named - set(gradient.COMPOSITES)}"
    assert set(gradient.COMPOSITES) - named == set(), f"rules no op uses: {set(gradient.COMPOSITES) - named}"


def test_relu_is_two_ops_and_its_gradient_is_zero_at_zero_and_under_inf():
    x = Tensor([-1.0, -0.0, 0.0, 2.0, math.nan], requires_grad=True)
    out = x.relu()
    ops = {u.op.name for u in out.uop.src[0].toposort()}
    assert ops <= {"BUFFER", "DEVICE", "DETACH", "CONST", "EXPAND", "RESHAPE", "CMPLT", "WHERE", "CAST"}, ops
    out.backward(Tensor([1.0, 1.0, math.inf, 1.0, 1.0]))
    assert x.grad.tolist()[:4] == [0.0, 0.0, 0.0, 1.0] and x.grad.tolist()[4] == 1.0   # (PyTorch's: g at NaN)
    assert str(out.tolist()[:2]) == "[0.0, -0.0]" and math.isnan(out.tolist()[4])


# ---- found by fuzzing: differential fuzzers' reduced cases against PyTorch CPU (docs/FUZZING.md); each comment
# says the wrong answer it gave ----
def test_a_tensor_reached_only_through_sign_or_a_comparison_gets_a_zero_gradient():
    # as PyTorch (and tinygrad): .grad was None, where a float tensor in the graph gets zeros
    x = Tensor([2.0, -1.0, 0.0])
    (x.sign() * 3 + (x > 0).where(1.0, 2.0)).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [0.0, 0.0, 0.0]


def test_a_second_backward_over_the_same_graph_accumulates_as_tinygrads():
    """tinygrad 0.14 decides (PyTorch raises without retain_graph): the graph is kept, and a second backward() adds
    the same gradients again, as a second loss would."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    tinygrad = pytest.importorskip("tinygrad")
    with tinygrad.Context(DEV="PYTHON"):
        t = tinygrad.Tensor([1.0, 2.0], device="PYTHON")
        t.requires_grad = True
        u = (t * t).sum()
        u.backward()
        u.backward()
        assert t.grad.tolist() == [4.0, 8.0]
