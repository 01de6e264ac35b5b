"""Train the seed's TinyCNN (four conv + BatchNorm blocks, two linear layers) on CIFAR-10 with Adam.

    python examples/cifar_cnn.py [--device CPU] [--epochs 10] [--batch-size 64] [--save cifar_cnn.safetensors]

CIFAR-10 is read from <data dir>/cifar-10-batches-py (the python pickle batches); the script says how to get them
when they are missing (or pass --download). It is a heavy model for a CPU: use --train-limit for a quick run."""
from __future__ import annotations
import os
import sys
import numpy as np
from tinygrad_core import Tensor
from tinygrad_core.nn import Conv2d, Linear, BatchNorm2d
from tinygrad_core.nn.optim import Adam
from tinygrad_core.nn.datasets import Batches, load_cifar10, random_crop, random_flip

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training import parse_args, train, evaluate, finish, limit  # noqa: E402

CIFAR_MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32).reshape(1, 3, 1, 1)
CIFAR_STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32).reshape(1, 3, 1, 1)


class TinyCNN:
    def __init__(self, width: int = 32):
        # convolution + batch norm + activation blocks (the seed's widths: 32, 64, 128, 256)
        self.conv1 = Conv2d(3, width, kernel_size=3, padding=1)
        self.bn1 = BatchNorm2d(width)
        self.conv2 = Conv2d(width, 2 * width, kernel_size=3, padding=1)
        self.bn2 = BatchNorm2d(2 * width)
        self.conv3 = Conv2d(2 * width, 4 * width, kernel_size=3, padding=1)
        self.bn3 = BatchNorm2d(4 * width)
        self.conv4 = Conv2d(4 * width, 8 * width, kernel_size=3, padding=1)
        self.bn4 = BatchNorm2d(8 * width)
        # fully connected layers
        self.features = 8 * width * 8 * 8     # two 2x2 poolings: 32x32 -> 16x16 -> 8x8
        self.fc1 = Linear(self.features, 16 * width)
        self.fc2 = Linear(16 * width, 10)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.bn1(self.conv1(x)).relu()
        x = self.bn2(self.conv2(x)).relu()
        x = x.avg_pool2d(kernel_size=2)
        x = self.bn3(self.conv3(x)).relu()
        x = self.bn4(self.conv4(x)).relu()
        x = x.avg_pool2d(kernel_size=2)
        x = x.reshape(shape=(-1, self.features))
        x = self.fc1(x).relu()
        return self.fc2(x)


def normalize(x: np.ndarray, rng=None) -> np.ndarray:
    return ((x.astype(np.float32) / 255.0) - CIFAR_MEAN) / CIFAR_STD


def augment(x: np.ndarray, rng) -> np.ndarray:
    """The usual CIFAR augmentation: pad 4 and crop back to 32x32 at random, mirror half the images."""
    return normalize(random_flip(random_crop(x, 32, padding=4, rng=rng), rng))


def main(argv=None) -> float:
    args = parse_args(__doc__.splitlines()[0], epochs=10, batch_size=64, lr=1e-3, argv=argv)
    try:
        X_train, Y_train, X_test, Y_test = load_cifar10(args.data_dir, download=args.download)
    except FileNotFoundError as e:       # no data, no training: say how to get it and fail
        sys.exit(str(e))
    X_train, Y_train, X_test, Y_test = limit(args, X_train, Y_train, X_test, Y_test)
    model = TinyCNN()
    optimizer = Adam([*model.conv1.parameters(), *model.bn1.parameters(), *model.conv2.parameters(),
                      *model.bn2.parameters(), *model.conv3.parameters(), *model.bn3.parameters(),
                      *model.conv4.parameters(), *model.bn4.parameters(), *model.fc1.parameters(),
                      *model.fc2.parameters()], lr=args.lr)
    batches = Batches(X_train, Y_train.astype(np.int32), args.batch_size, shuffle=True, drop_last=True,
                      transform=augment, seed=args.seed)
    train(model, optimizer, batches, args.epochs, jit=not args.no_jit)
    accuracy = evaluate(model, X_test, Y_test.astype(np.int32), normalize, batch_size=250, jit=not args.no_jit)
    finish(model, accuracy, args.save)
    return accuracy


if __name__ == "__main__":
    main()
