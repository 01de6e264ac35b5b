"""What the example scripts share: their command-line flags, a training loop with a tqdm bar, and evaluation.

The loop is the seed's (zero_grad, forward, loss, backward, step), wrapped in @TinyJit unless --no-jit."""
from __future__ import annotations
import argparse
import os
import pathlib
import sys
import time
import numpy as np
from tinygrad_core import Tensor, TinyJit, Device
from tinygrad_core.nn.datasets import Batches, data_dir, load_mnist
from tinygrad_core.nn.state import get_state_dict, safe_save
try:
    from tqdm import tqdm
except ModuleNotFoundError:        # an optional dependency (the "train" extra): without it, no bars, the same training

    class tqdm:                    # noqa: N801  (what the loops below use of it: iterate, and a postfix shown nowhere)
        def __init__(self, iterable, **_): self.iterable = iterable           # noqa: E704
        def __iter__(self): return iter(self.iterable)                        # noqa: E704
        def set_postfix(self, **_): pass                                      # noqa: E704


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows each flag's default; a flag without one (None, or off) says in its help what happens then."""

    def _get_help_string(self, action):
        return action.help if action.default is None or action.default is False else super()._get_help_string(action)


def example_data_dir(given: str | None) -> str | None:
    """The dataset folder: the one given, else $TINYGRAD_DATA, else the data/ beside these examples (a checkout's,
    whether the package is installed from it editable or as a wheel), else the package's default (its cache)."""
    beside = pathlib.Path(__file__).resolve().parent.parent / "data"
    if given is None and not os.environ.get("TINYGRAD_DATA") and beside.is_dir():
        return str(beside)
    return given


def parse_args(description: str, epochs: int, batch_size: int, lr: float, argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description, formatter_class=HelpFormatter)
    parser.add_argument("--device", help="backend to run on (default: the best installed one, see "
                                         "`tinygrad-core backends`)")
    parser.add_argument("--epochs", type=int, default=epochs, help="passes over the training images")
    parser.add_argument("--batch-size", type=int, default=batch_size, help="images per training step")
    parser.add_argument("--lr", type=float, default=lr, help="the optimizer's learning rate")
    parser.add_argument("--save", metavar="PATH", help="write the trained weights to PATH (safetensors)")
    parser.add_argument("--no-jit", action="store_true", help="run the train step without TinyJit")
    parser.add_argument("--train-limit", type=int, default=0, help="train on the first N images only (quick runs; "
                                                                   "0: all)")
    parser.add_argument("--test-limit", type=int, default=0, help="test on the first N images only (0: all)")
    parser.add_argument("--data-dir", help="dataset folder (default: $TINYGRAD_DATA, the repository's data/ in a "
                                           "source checkout (beside examples/), else ~/.cache/tinygrad_core/datasets)")
    parser.add_argument("--download", action="store_true", help="download CIFAR-10 when it is missing (MNIST is "
                                                                   "downloaded when missing anyway)")
    parser.add_argument("--seed", type=int, default=0, help="for the initial weights and the shuffling")
    args = parser.parse_args(argv)
    args.data_dir = example_data_dir(args.data_dir)
    if args.device:
        Device.DEFAULT = args.device
    Tensor.manual_seed(args.seed)
    return args


def limit(args: argparse.Namespace, X_train, Y_train, X_test, Y_test):
    """The data cut to --train-limit / --test-limit images (for quick runs)."""
    if args.train_limit:
        X_train, Y_train = X_train[:args.train_limit], Y_train[:args.train_limit]
    if args.test_limit:
        X_test, Y_test = X_test[:args.test_limit], Y_test[:args.test_limit]
    return X_train, Y_train, X_test, Y_test


def make_train_step(model, optimizer, jit: bool):
    """One step on a batch: returns (loss, number of correct predictions), both realized with the update."""
    def train_step(x: Tensor, y: Tensor):
        with Tensor.train():
            optimizer.zero_grad()
            out = model(x)
            loss = out.sparse_categorical_crossentropy(y)
            loss.backward()
            correct = (out.argmax(-1) == y).sum()
            # one schedule: forward, backward and the in-place update of every parameter
            Tensor.realize_all(loss, correct, *optimizer.schedule_step())
        return loss, correct
    return TinyJit(train_step) if jit else train_step


def make_predict(model, jit: bool):
    def predict(x: Tensor) -> Tensor:
        with Tensor.no_grad(), Tensor.train(False):
            return model(x).argmax(-1).realize()
    return TinyJit(predict) if jit else predict


def train(model, optimizer, train_batches: Batches, epochs: int, jit: bool, scheduler=None) -> list[float]:
    """Runs the epochs with a progress bar; returns the seconds each epoch took."""
    step = make_train_step(model, optimizer, jit)
    seconds = []
    for epoch in range(1, epochs + 1):
        start, seen, correct_total, loss_avg = time.perf_counter(), 0, 0, None
        bar = tqdm(train_batches, desc=f"epoch {epoch}/{epochs}", unit="batch", dynamic_ncols=True)
        for x, y in bar:
            loss, correct = step(x, y)
            loss_value = loss.item()
            loss_avg = loss_value if loss_avg is None else 0.95 * loss_avg + 0.05 * loss_value
            seen += y.shape[0]
            correct_total += int(correct.item())
            # (shown at the bar's next redraw, which tqdm spaces out: not a redraw per step)
            bar.set_postfix(loss=f"{loss_avg:.4f}", acc=f"{100 * correct_total / seen:.2f}%", refresh=False)
        seconds.append(time.perf_counter() - start)
        if scheduler is not None:
            scheduler.step()
        print(f"epoch {epoch}: {seconds[-1]:.1f}s, train loss {loss_avg:.4f}, train accuracy "
              f"{100 * correct_total / max(seen, 1):.2f}%")
    return seconds


def evaluate(model, X: np.ndarray, Y: np.ndarray, transform, batch_size: int = 500, jit: bool = True) -> float:
    """Test accuracy in percent (batches of one size, so a jitted predict replays; the remainder runs unjitted)."""
    predict, plain = make_predict(model, jit), make_predict(model, False)
    correct = 0
    for start in tqdm(range(0, len(X), batch_size), desc="test", unit="batch", dynamic_ncols=True, leave=False):
        x = Tensor(transform(X[start:start + batch_size], None))
        run = predict if x.shape[0] == batch_size else plain
        correct += int((run(x).numpy() == Y[start:start + batch_size]).sum())
    return 100 * correct / len(X)


def finish(model, accuracy: float, save_path: str | None):
    if save_path:
        safe_save(get_state_dict(model), save_path)
        print(f"saved weights to {save_path}")
    print(f"test accuracy: {accuracy:.2f}%")


def train_on_mnist(args: argparse.Namespace, model, optimizer, transform, test_transform, scheduler=None) -> float:
    """The MNIST run the examples share: shuffled batches of the (limited) training images through `transform`,
    training with a progress bar, test accuracy (test images through `test_transform`), the weights saved if asked."""
    print(f"reading MNIST from {data_dir(args.data_dir) / 'mnist'} (files missing there are downloaded)")
    try:
        X_train, Y_train, X_test, Y_test = limit(args, *load_mnist(args.data_dir))
    except FileNotFoundError as e:       # missing and not downloadable: what to do, without a traceback
        sys.exit(str(e))
    batches = Batches(X_train, Y_train.astype(np.int32), args.batch_size, shuffle=True, drop_last=True,
                      transform=transform, seed=args.seed)
    train(model, optimizer, batches, args.epochs, jit=not args.no_jit, scheduler=scheduler)
    accuracy = evaluate(model, X_test, Y_test, test_transform, jit=not args.no_jit)
    finish(model, accuracy, args.save)
    return accuracy
