"""Datasets: IDX parsing of the shipped MNIST, where data is looked for, CIFAR-10 pickle batches, augmentation and
the batch iterator."""
import gzip
import pickle
import urllib.request
import numpy as np
import pytest
from tinygrad_core import Tensor
from tinygrad_core.nn import datasets
from tinygrad_core.nn.datasets import (Batches, data_dir, load_cifar10, load_mnist, mnist, random_crop, random_flip,
                                       read_idx)


def test_shipped_mnist_has_the_standard_shapes_and_labels():
    X_train, Y_train, X_test, Y_test = load_mnist(download=False)
    assert X_train.shape == (60000, 1, 28, 28) and X_train.dtype == np.uint8
    assert Y_train.shape == (60000,) and X_test.shape == (10000, 1, 28, 28) and Y_test.shape == (10000,)
    assert set(np.unique(Y_test)) == set(range(10))
    assert Y_train[:5].tolist() == [5, 0, 4, 1, 9]          # the well-known first training labels
    assert 30 < X_train[:100].mean() < 40                    # ink covers about 13% of a digit image


def test_mnist_tensors_like_tinygrad():
    X_train, Y_train, X_test, Y_test = mnist(download=False)
    assert isinstance(X_train, Tensor) and X_train.shape == (60000, 1, 28, 28)
    assert Y_test[:3].tolist() == [7, 2, 1]


def test_read_idx_checks_its_input(tmp_path):
    path = tmp_path / "x.idx.gz"
    with gzip.open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, 2]) + (2).to_bytes(4, "big") + (3).to_bytes(4, "big") + bytes(range(6)))
    assert read_idx(path).tolist() == [[0, 1, 2], [3, 4, 5]]
    bad = tmp_path / "bad.idx"
    bad.write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(bad)


def test_data_dir_order(tmp_path, monkeypatch):
    assert data_dir(tmp_path) == tmp_path
    monkeypatch.setenv("TINYGRAD_DATA", str(tmp_path / "env"))
    assert data_dir() == tmp_path / "env"
    monkeypatch.delenv("TINYGRAD_DATA")
    assert (data_dir() / "mnist").is_dir()                  # the repository's data/ in a checkout


def test_missing_mnist_without_network_says_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="download=True"):
        load_mnist(tmp_path, download=False)

    def no_network(*args, **kwargs):
        raise OSError("network is unreachable")
    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    with pytest.raises(FileNotFoundError, match="could not be downloaded.*network is unreachable.*Copy the four"):
        load_mnist(tmp_path)


def write_fake_cifar(root, per_batch=4):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 b"labels": rng.integers(0, 10, per_batch).tolist()}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f)
    return folder


def test_cifar10_reads_the_python_pickle_batches(tmp_path):
    folder = write_fake_cifar(tmp_path)
    X_train, Y_train, X_test, Y_test = load_cifar10(tmp_path)
    assert X_train.shape == (20, 3, 32, 32) and Y_train.shape == (20,) and X_test.shape == (4, 3, 32, 32)
    with open(folder / "data_batch_1", "rb") as f:
        first = pickle.load(f, encoding="bytes")
    np.testing.assert_array_equal(X_train[0], first[b"data"][0].reshape(3, 32, 32))
    assert Y_train[:4].tolist() == first[b"labels"]


def test_missing_cifar10_says_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="cifar-10-python.tar.gz"):
        load_cifar10(tmp_path)


def test_random_crop_and_flip():
    rng = np.random.default_rng(0)
    x = np.arange(2 * 1 * 4 * 4, dtype=np.float32).reshape(2, 1, 4, 4)
    assert random_crop(x, 4, padding=0, rng=rng).tolist() == x.tolist()
    cropped = random_crop(x, 3, padding=1, rng=rng)
    assert cropped.shape == (2, 1, 3, 3)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for i in range(2):       # every crop is some window of the padded image
        assert any((padded[i, :, r:r + 3, c:c + 3] == cropped[i]).all() for r in range(4) for c in range(4))
    flipped = random_flip(np.repeat(x, 50, axis=0), rng)
    mirrored = [(f == o[..., ::-1]).all() and not (f == o).all() for f, o in zip(flipped, np.repeat(x, 50, axis=0))]
    assert 20 < sum(mirrored) < 80


def test_random_crop_cuts_the_window_at_the_drawn_offsets_of_every_channel():
    x = np.random.default_rng(1).integers(0, 255, (5, 3, 6, 7), dtype=np.uint8)
    cropped = random_crop(x, (4, 3), padding=2, rng=np.random.default_rng(7))
    draws = np.random.default_rng(7)
    top, left = draws.integers(0, 10 - 4 + 1, size=5), draws.integers(0, 11 - 3 + 1, size=5)
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)))
    assert cropped.shape == (5, 3, 4, 3) and cropped.dtype == np.uint8
    for i in range(5):
        assert (cropped[i] == padded[i, :, top[i]:top[i] + 4, left[i]:left[i] + 3]).all()


def test_batches_shuffle_cover_everything_and_drop_last():
    X, Y = np.arange(10, dtype=np.float32).reshape(10, 1), np.arange(10, dtype=np.int32)
    batches = Batches(X, Y, batch_size=4, shuffle=True, seed=1)
    assert len(batches) == 3
    seen = [(x.numpy()[:, 0], y.numpy()) for x, y in batches]
    assert [len(y) for _, y in seen] == [4, 4, 2]
    assert sorted(np.concatenate([y for _, y in seen]).tolist()) == list(range(10))
    assert all((x == y).all() for x, y in seen)              # images stay with their labels
    first_pass = np.concatenate([y for _, y in seen])
    assert first_pass.tolist() != list(range(10))
    dropped = Batches(X, Y, batch_size=4, drop_last=True, shuffle=False, transform=lambda x, rng: x * 2)
    assert len(dropped) == 2
    x, y = next(iter(dropped))
    assert x.numpy()[:, 0].tolist() == [0, 2, 4, 6] and y.numpy().tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="10 samples"):
        Batches(X, Y[:5], 4)


def test_a_batch_made_for_the_pass_becomes_a_tensor_without_a_copy_and_a_view_of_the_callers_array_is_copied():
    from tinygrad_core.buffers import buffer_of
    X, Y = np.arange(24, dtype=np.float32).reshape(6, 4), np.arange(6, dtype=np.int32)
    x, y = next(iter(Batches(X, Y, batch_size=3, shuffle=False, transform=lambda x, rng: x / 2)))
    assert buffer_of(x.uop)._shared                     # the transform's new array is the tensor's memory
    assert x.numpy().tolist() == (X[:3] / 2).tolist() and y.numpy().tolist() == [0, 1, 2]
    held = np.zeros((6, 4), dtype=np.float32)           # a transform handing out a view of an array it keeps
    x, _ = next(iter(Batches(X, Y, batch_size=3, shuffle=False, transform=lambda x, rng: held[:3])))
    held[:] = 7                                         # ... stays writable, and the tensor has its own copy
    assert not buffer_of(x.uop)._shared and x.numpy().tolist() == [[0.0] * 4] * 3


def write_fake_idx(folder, seed: int, n_train=3, n_test=2):
    """The four MNIST files, gzipped IDX as the mirrors serve them, holding small random images and labels."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, n in zip(datasets.MNIST_FILES, (n_train, n_train, n_test, n_test)):
        shape = (n, 28, 28) if "images" in name else (n,)
        arrays[name] = rng.integers(0, 256 if "images" in name else 10, shape, dtype=np.uint8)
        header = bytes([0, 0, 0x08, len(shape)]) + b"".join(s.to_bytes(4, "big") for s in shape)
        with gzip.open(folder / name, "wb") as f:
            f.write(header + arrays[name].tobytes())
    return arrays


@pytest.mark.parametrize("fashion", [False, True])
def test_mnist_like_tinygrad_reads_mnist_or_fashion_mnist_from_its_folder(tmp_path, fashion):
    digits, clothes = write_fake_idx(tmp_path / "mnist", 0), write_fake_idx(tmp_path / "fashion-mnist", 1)
    expected = clothes if fashion else digits
    X_train, Y_train, X_test, Y_test = mnist(None, fashion, path=tmp_path, download=False)
    assert X_train.shape == (3, 1, 28, 28) and X_test.shape == (2, 1, 28, 28) and X_train.dtype == Y_test.dtype
    np.testing.assert_array_equal(X_train.numpy()[:, 0], expected["train-images-idx3-ubyte.gz"])
    assert Y_train.tolist() == expected["train-labels-idx1-ubyte.gz"].tolist()
    assert Y_test.tolist() == expected["t10k-labels-idx1-ubyte.gz"].tolist()


def test_missing_fashion_mnist_names_its_own_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="fashion-mnist"):
        mnist(fashion=True, path=tmp_path, download=False)


def test_mnist_downloads_from_the_fashion_mirror_into_its_folder(tmp_path, monkeypatch):
    source = tmp_path / "server"
    write_fake_idx(source, 2)
    monkeypatch.setattr(datasets, "FASHION_MNIST_MIRRORS", (source.as_uri() + "/",))
    X_train, *_ = datasets.load_mnist(tmp_path / "data", fashion=True)
    assert X_train.shape == (3, 1, 28, 28)
    assert (tmp_path / "data" / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz").is_file()


def test_cifar_like_tinygrad_gives_uint8_tensors(tmp_path):
    folder = write_fake_cifar(tmp_path)
    X_train, Y_train, _, Y_test = datasets.cifar(path=tmp_path, download=False)
    assert X_train.shape == (20, 3, 32, 32) and Y_test.shape == (4,)
    assert X_train.dtype == Y_train.dtype == Y_test.dtype == Tensor([1], dtype="uint8").dtype
    with open(folder / "test_batch", "rb") as f:
        assert Y_test.tolist() == pickle.load(f, encoding="bytes")[b"labels"]
