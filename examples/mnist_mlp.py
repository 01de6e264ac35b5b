"""Train the seed's TinyMLP (784-128-10) on MNIST with Adam; about 97.5% test accuracy after 5 epochs.

    python examples/mnist_mlp.py [--device CPU] [--epochs 5] [--batch-size 128] [--save mnist_mlp.safetensors]
    mpiexec -n 2 python examples/mnist_mlp.py --distributed [...]   (docs/DISTRIBUTED.md)"""
from __future__ import annotations
import argparse
import os
import sys
import numpy as np
from tinygrad_core import Tensor
from tinygrad_core.nn import Linear
from tinygrad_core.nn.optim import Adam

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training import parse_args, train_on_mnist, train, evaluate, finish, limit  # noqa: E402
from tinygrad_core.nn.datasets import load_mnist  # noqa: E402


class TinyMLP:
    def __init__(self):
        self.l1 = Linear(784, 128)   # 28*28 inputs -> 128 hidden units
        self.l2 = Linear(128, 10)    # -> one logit per digit

    def __call__(self, x: Tensor) -> Tensor:
        x = x.reshape(shape=(-1, 784))
        x = self.l1(x).relu()
        return self.l2(x)


def normalize(x: np.ndarray, rng=None) -> np.ndarray:
    """uint8 images -> float32 with MNIST's mean and standard deviation removed."""
    return ((x.astype(np.float32) / 255.0) - 0.1307) / 0.3081


def train_distributed(args, model, optimizer) -> float:
    """One rank of data-parallel training: its slice of each batch, gradients averaged over the ranks; rank 0 shows."""
    from tinygrad_core import distributed
    optimizer = distributed.DistributedOptimizer(optimizer)       # every rank starts from rank 0's weights
    X_train, Y_train, X_test, Y_test = limit(args, *load_mnist(args.data_dir))
    batches = distributed.DistributedBatches(X_train, Y_train.astype(np.int32), args.batch_size, normalize, args.seed)
    with distributed.quiet_ranks():
        print(f"{distributed.world_size} ranks, {batches.local} images each per step of {args.batch_size}")
        train(model, optimizer, batches, args.epochs, jit=not args.no_jit)
        accuracy = evaluate(model, X_test, Y_test, normalize, jit=not args.no_jit)
        finish(model, accuracy, args.save if distributed.rank == 0 else None)
    return accuracy


def main(argv=None) -> float:
    distributed = argparse.ArgumentParser(add_help=False)   # (the shared flags don't have it: only this example does)
    distributed.add_argument("--distributed", action="store_true")
    flags, argv = distributed.parse_known_args(argv)
    args = parse_args(__doc__.splitlines()[0], epochs=5, batch_size=128, lr=1e-3, argv=argv)
    model = TinyMLP()
    optimizer = Adam([model.l1.weight, model.l1.bias, model.l2.weight, model.l2.bias], lr=args.lr)
    if flags.distributed:
        return train_distributed(args, model, optimizer)
    return train_on_mnist(args, model, optimizer, normalize, normalize)


if __name__ == "__main__":
    main()
