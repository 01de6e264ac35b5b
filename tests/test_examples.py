"""The seed's code run with the import renamed (TinyMLP + SGD, TinyCNN + Adam, the custom activation, no_grad), a
tiny MLP trained on a slice of MNIST to a real accuracy, and the example scripts end to end on small slices."""
import os
import re
import subprocess
import sys
import numpy as np
import pytest
from tinygrad_core import Tensor, Function, TinyJit
from tinygrad_core.nn import Linear
import tinygrad_core.nn.optim as optim
from tinygrad_core.nn.optim import Adam
from tinygrad_core.nn.datasets import load_mnist
from helpers import assert_close

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
sys.path.insert(0, EXAMPLES)


def test_seed_autograd_snippet():
    x = Tensor([2.0], requires_grad=True)
    y = Tensor([3.0], requires_grad=True)
    L = (x * y).sum()
    L.backward()
    assert x.grad.tolist() == [3.0] and y.grad.tolist() == [2.0]


class TinyMLP:                     # the seed's section 3.3, verbatim but for the import
    def __init__(self):
        self.l1 = Linear(784, 128)
        self.l2 = Linear(128, 10)

    def __call__(self, x):
        x = x.reshape(shape=(-1, 784))
        x = self.l1(x).relu()
        x = self.l2(x)
        return x


def test_seed_tiny_mlp_with_sgd_learns_random_labels():
    model = TinyMLP()
    optimizer = optim.SGD([model.l1.weight, model.l1.bias, model.l2.weight, model.l2.bias], lr=0.01)
    loss_fn = lambda out, y: out.sparse_categorical_crossentropy(y)     # noqa: E731
    x_batch = Tensor(np.random.rand(16, 1, 28, 28).astype(np.float32))
    y_batch = Tensor(np.random.randint(0, 10, 16).astype(np.int32))
    losses = []
    for _ in range(8):
        optimizer.zero_grad()
        output = model(x_batch)
        loss = loss_fn(output, y_batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.05, losses


def test_seed_tiny_cnn_with_adam_and_no_grad_evaluation():
    from cifar_cnn import TinyCNN
    model = TinyCNN(width=4)        # the seed's widths divided by 8: fast on the reference interpreter
    optimizer = Adam([*model.conv1.parameters(), *model.bn1.parameters(), *model.conv2.parameters(),
                      *model.bn2.parameters(), *model.conv3.parameters(), *model.bn3.parameters(),
                      *model.conv4.parameters(), *model.bn4.parameters(), *model.fc1.parameters(),
                      *model.fc2.parameters()], lr=0.001)
    batch_x = Tensor(np.random.rand(2, 3, 32, 32).astype(np.float32))
    batch_y = Tensor(np.array([0, 1], dtype=np.int32))
    before = model.conv1.weight.numpy().copy()
    losses = []
    with Tensor.train():
        for _ in range(2):
            optimizer.zero_grad()
            outputs = model(batch_x)
            loss = outputs.sparse_categorical_crossentropy(batch_y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    assert losses[-1] < losses[0] and not np.allclose(before, model.conv1.weight.numpy())
    assert model.bn1.num_batches_tracked.tolist() == [2]
    with Tensor.no_grad():
        outputs = model(batch_x)
        pred = outputs.argmax(axis=1)
    assert outputs.shape == (2, 10) and pred.shape == (2,)
    assert model.bn1.num_batches_tracked.tolist() == [2]        # evaluation leaves the running statistics alone


def my_special_act(x):
    return 1 / (1 + (-x).exp())


class MySpecialAct(Function):
    def forward(self, x):
        self.y = my_special_act(x)
        return self.y

    def backward(self, grad_output):
        return grad_output * self.y * (1 - self.y)


def test_seed_custom_activation_both_ways():
    sig = 1 / (1 + np.exp(-np.array([0.0, 1.0, 2.0])))
    for act in (my_special_act, MySpecialAct.apply):
        x = Tensor([0.0, 1.0, 2.0], requires_grad=True)
        y = act(x)
        loss = y.sum()
        loss.backward()
        assert_close(y.numpy(), sig, atol=1e-6)
        assert_close(x.grad.numpy(), sig * (1 - sig), atol=1e-6)


def test_tiny_mlp_learns_a_slice_of_mnist():
    X_train, Y_train, X_test, Y_test = load_mnist(download=False)
    X = ((X_train[:2000].reshape(-1, 784) / 255.0 - 0.1307) / 0.3081).astype(np.float32)
    Y = Y_train[:2000].astype(np.int32)
    Tensor.manual_seed(1)
    l1, l2 = Linear(784, 32), Linear(32, 10)
    opt = Adam([l1.weight, l1.bias, l2.weight, l2.bias], lr=2e-3)
    rng = np.random.default_rng(0)

    @TinyJit
    def train_step(x, y):
        with Tensor.train():
            opt.zero_grad()
            loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
            loss.backward()
            Tensor.realize_all(loss, *opt.schedule_step())
        return loss
    for _ in range(120):
        index = rng.integers(0, len(X), 32)
        train_step(Tensor(X[index]), Tensor(Y[index]))
    x_test = ((X_test[:1000].reshape(-1, 784) / 255.0 - 0.1307) / 0.3081).astype(np.float32)
    with Tensor.no_grad():
        accuracy = (l2(l1(Tensor(x_test)).relu()).argmax(-1).numpy() == Y_test[:1000]).mean()
    # about 0.85 here (chance is 0.10); a broken optimizer, gradient or JIT replay stays far below 0.80
    assert accuracy >= 0.80, f"test accuracy {accuracy:.3f} after 120 steps of 32 images"


def run_example(script, *args, env=None, returncode=0):
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args], capture_output=True, text=True,
                            timeout=900, env={**os.environ, **(env or {})})
    assert result.returncode == returncode, result.stderr[-3000:]
    return result.stdout if returncode == 0 else result.stderr


def test_mnist_mlp_example_trains_saves_and_reports(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    out = run_example("mnist_mlp.py", "--epochs", "1", "--batch-size", "100", "--train-limit", "3000",
                      "--test-limit", "1000", "--save", str(tmp_path / "mlp.safetensors"))
    accuracy = float(out.strip().splitlines()[-1].removeprefix("test accuracy: ").rstrip("%"))
    assert accuracy > 80, out
    weights = safetensors_numpy.load_file(str(tmp_path / "mlp.safetensors"))
    assert weights["l1.weight"].shape == (128, 784) and weights["l2.bias"].shape == (10,)


def test_custom_op_example_runs():
    out = run_example("custom_op.py", "--epochs", "1", "--batch-size", "100", "--train-limit", "1000",
                      "--test-limit", "500", "--no-jit")
    assert "gradient by Function" in out and out.strip().splitlines()[-1].startswith("test accuracy: ")


def test_the_examples_train_without_tqdm(tmp_path):
    """tqdm draws the bars, and is optional: without it (its import fails, as where it isn't installed) the same
    training runs and reports."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['tqdm'] = None\n")     # (import tqdm fails)
    out = run_example("mnist_mlp.py", "--epochs", "1", "--batch-size", "100", "--train-limit", "1000",
                      "--test-limit", "500", env={"PYTHONPATH": str(tmp_path)})
    assert "epoch 1:" in out and out.strip().splitlines()[-1].startswith("test accuracy: "), out


def test_cifar_example_without_data_says_how_to_get_it_and_fails(tmp_path):
    err = run_example("cifar_cnn.py", "--data-dir", str(tmp_path), returncode=1)
    assert "cifar-10-python.tar.gz" in err and "--download" in err and str(tmp_path) in err
    assert "Traceback" not in err


def test_mnist_example_without_data_fails_saying_where_it_looked(tmp_path):
    """No MNIST files and no way to download them: the downloads go through a proxy that refuses every connection
    (the discard port of this machine), so nothing leaves it."""
    proxy = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "no_proxy": ""}
    err = run_example("mnist_mlp.py", "--data-dir", str(tmp_path), returncode=1, env=proxy)
    assert f"not in {tmp_path / 'mnist'} and could not be downloaded" in err and "Traceback" not in err, err


@pytest.mark.parametrize("script", sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py") and f != "training.py"))
def test_example_help_shows_the_defaults_its_docstring_promises(script):
    """Each example's usage line in its docstring ([--epochs 5] ...) is what its --help reports as the default."""
    with open(os.path.join(EXAMPLES, script)) as f:
        promised = dict(re.findall(r"\[--(epochs|batch-size) (\d+)\]", f.read()))
    assert set(promised) == {"epochs", "batch-size"}, promised
    help_text = " ".join(run_example(script, "--help").split())
    for flag, value in promised.items():
        assert re.search(rf"--{flag} {flag.upper().replace('-', '_')} [^-]*\(default: {value}\)", help_text), \
            (flag, help_text)
    assert re.search(r"--seed SEED [^-]*\(default: 0\)", help_text), help_text


def test_the_examples_read_the_data_beside_them_when_the_package_is_installed_elsewhere(tmp_path, monkeypatch):
    """A non-editable install (the package in site-packages, the examples run from a checkout): the checkout's data/
    is used, not the cache, so the README's command works offline."""
    import training
    from tinygrad_core.nn import datasets
    monkeypatch.delenv("TINYGRAD_DATA", raising=False)
    monkeypatch.setattr(datasets, "__file__", str(tmp_path / "site-packages" / "tinygrad_core" / "nn" / "datasets.py"))
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path / "cache"))
    assert datasets.data_dir() == tmp_path / "cache" / "datasets"         # (the package's own default: the cache)
    args = training.parse_args("x", epochs=1, batch_size=10, lr=0.1, argv=[])
    checkout_data = os.path.join(os.path.dirname(EXAMPLES), "data")
    assert os.path.samefile(datasets.data_dir(args.data_dir), checkout_data)
    assert training.parse_args("x", 1, 10, 0.1, argv=["--data-dir", str(tmp_path)]).data_dir == str(tmp_path)
