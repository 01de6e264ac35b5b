"""The seed's custom activation, two ways: composed from existing ops (autograd derives the gradient) and as a
Function with an explicit backward. Both are checked against each other, then used to train a small MLP on MNIST.

    python examples/custom_op.py [--device CPU] [--epochs 1] [--batch-size 128] [--save custom_op.safetensors]"""
from __future__ import annotations
import os
import sys
import numpy as np
from tinygrad_core import Tensor, Function
from tinygrad_core.nn import Linear
from tinygrad_core.nn.optim import Adam

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training import parse_args, train_on_mnist  # noqa: E402
from mnist_mlp import normalize  # noqa: E402


def custom_act(x: Tensor) -> Tensor:
    """By composition: exp, neg, add and div already have derivatives, so autograd needs nothing more."""
    return 1 / (1 + (-x).exp())


class MySpecialAct(Function):
    """The same function with its derivative written by hand: dy/dx = y * (1 - y)."""

    def forward(self, x: Tensor) -> Tensor:
        self.y = 1 / (1 + (-x).exp())
        return self.y

    def backward(self, grad_output: Tensor) -> Tensor:
        return grad_output * self.y * (1 - self.y)


def compare_gradients():
    """The seed's check: the gradient at x = [0, 1, 2] both ways (and against the formula)."""
    grads = []
    for act in (custom_act, MySpecialAct.apply):
        x = Tensor([0.0, 1.0, 2.0], requires_grad=True)
        act(x).sum().backward()
        grads.append(x.grad.numpy())
    sig = 1 / (1 + np.exp(-np.array([0.0, 1.0, 2.0])))
    print(f"gradient by composition: {grads[0]}\ngradient by Function:    {grads[1]}\nformula y*(1-y):         "
          f"{sig * (1 - sig)}")
    return grads


class ActMLP:
    def __init__(self):
        self.l1, self.l2 = Linear(784, 128), Linear(128, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(MySpecialAct.apply(self.l1(x.reshape(-1, 784))))


def main(argv=None) -> float:
    args = parse_args(__doc__.splitlines()[0], epochs=1, batch_size=128, lr=2e-3, argv=argv)
    compare_gradients()
    model = ActMLP()
    optimizer = Adam([model.l1.weight, model.l1.bias, model.l2.weight, model.l2.bias], lr=args.lr)
    return train_on_mnist(args, model, optimizer, normalize, normalize)


if __name__ == "__main__":
    main()
