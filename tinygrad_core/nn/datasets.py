"""Datasets for the examples: MNIST and Fashion-MNIST (IDX files), CIFAR-10 (python pickle batches), a batch iterator.

Data is read and augmented on the host with numpy; only finished batches become Tensors."""
import gzip
import os
import pathlib
import pickle
import tarfile
from typing import Callable, Iterator
import numpy as np
from tinygrad_core.helpers import cache_dir, ceildiv, fetch
from tinygrad_core.tensor import Tensor

MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
               "t10k-labels-idx1-ubyte.gz")
MNIST_MIRRORS = ("https://storage.googleapis.com/cvdf-datasets/mnist/",
                 "https://ossci-datasets.s3.amazonaws.com/mnist/")
FASHION_MNIST_MIRRORS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_DIR = "cifar-10-batches-py"


def data_dir(path: str | os.PathLike | None = None) -> pathlib.Path:
    """Where datasets live: the argument, else $TINYGRAD_DATA, else the repository's data/ folder when running from a
    source checkout, else the datasets/ folder of cache_dir() (~/.cache/tinygrad_core/datasets by default)."""
    if path is not None or (path := os.environ.get("TINYGRAD_DATA")):
        return pathlib.Path(path)
    repo = pathlib.Path(__file__).resolve().parents[2]      # a checkout's root; site-packages when installed
    if (repo / "data").is_dir() and (repo / "pyproject.toml").is_file():
        return repo / "data"
    return cache_dir() / "datasets"


def _fetch_mnist_file(folder: pathlib.Path, name: str, download: bool, mirrors=MNIST_MIRRORS) -> pathlib.Path:
    if (path := folder / name).exists():
        return path
    if not download:
        raise FileNotFoundError(f"MNIST file {path} is missing; call with download=True or put the four files "
                                f"{', '.join(MNIST_FILES)} in {folder}")
    errors = []
    for mirror in mirrors:
        try:
            return fetch(mirror + name, path)
        except OSError as e:     # URLError and HTTPError are OSErrors
            errors.append(f"{mirror}: {e}")
    raise FileNotFoundError(f"MNIST file {name} is not in {folder} and could not be downloaded ({'; '.join(errors)}). "
                            f"Copy the four files {', '.join(MNIST_FILES)} into {folder}, or point TINYGRAD_DATA at "
                            f"a folder whose {folder.name}/ subfolder holds them")


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """An IDX file (optionally gzipped) as a numpy array: magic (0, 0, type, ndim), ndim big-endian sizes, data."""
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path} is not an IDX file (its magic number is {raw[:4].hex()})")
    types = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if raw[2] not in types:
        raise ValueError(f"{path}: unknown IDX element type 0x{raw[2]:02x}")
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(raw[3]))     # raw[3]: ndim
    data = np.frombuffer(raw, dtype=types[raw[2]], offset=4 + 4 * raw[3])
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says shape {shape} but holds {data.size} elements")
    return data.reshape(shape).astype(np.dtype(types[raw[2]]).newbyteorder("="))


def load_mnist(path: str | os.PathLike | None = None, download: bool = True, fashion: bool = False):
    """(X_train uint8 (60000, 1, 28, 28), Y_train uint8 (60000,), X_test (10000, 1, 28, 28), Y_test (10000,)) as
    numpy arrays, read from <data_dir>/mnist, or <data_dir>/fashion-mnist for Fashion-MNIST (the same four file names),
    downloaded there when missing and download=True."""
    folder, mirrors = (data_dir(path) / "fashion-mnist", FASHION_MNIST_MIRRORS) if fashion else \
        (data_dir(path) / "mnist", MNIST_MIRRORS)
    X_train, Y_train, X_test, Y_test = (read_idx(_fetch_mnist_file(folder, name, download, mirrors))
                                        for name in MNIST_FILES)
    return X_train.reshape(-1, 1, 28, 28), Y_train, X_test.reshape(-1, 1, 28, 28), Y_test


def mnist(device: str | None = None, fashion: bool = False, path: str | os.PathLike | None = None,
          download: bool = True):
    """MNIST (or Fashion-MNIST) as uint8 Tensors, as tinygrad's nn.datasets.mnist returns it: X_train, Y_train,
    X_test, Y_test."""
    return tuple(Tensor(a, device=device) for a in load_mnist(path, download, fashion))


def load_cifar10(path: str | os.PathLike | None = None, download: bool = False):
    """(X_train uint8 (50000, 3, 32, 32), Y_train int64, X_test (10000, 3, 32, 32), Y_test) as numpy arrays, from
    the python pickle batches in <data_dir>/cifar-10-batches-py (read as the seed reads them)."""
    folder = data_dir(path) / CIFAR10_DIR
    if not (folder / "test_batch").exists():
        if not download:
            raise FileNotFoundError(
                f"CIFAR-10 is not in {folder}. Get it with: download {CIFAR10_URL} (170 MB) and unpack it in "
                f"{folder.parent} (tar xzf cifar-10-python.tar.gz), or call with download=True (--download in the "
                f"examples), or set TINYGRAD_DATA to a folder that holds {CIFAR10_DIR}/")
        try:
            archive = fetch(CIFAR10_URL, folder.parent / "cifar-10-python.tar.gz")
        except OSError as e:
            raise FileNotFoundError(f"could not download CIFAR-10 from {CIFAR10_URL} ({e}); download it by hand and "
                                    f"unpack it in {folder.parent}") from e
        with tarfile.open(archive) as tar:
            tar.extractall(folder.parent, filter="data")

    def read_batch(name: str):
        batch = pickle.loads((folder / name).read_bytes(), encoding="bytes")
        return batch[b"data"].reshape(-1, 3, 32, 32), np.array(batch[b"labels"], dtype=np.int64)

    train = [read_batch(f"data_batch_{i}") for i in range(1, 6)]
    X_test, Y_test = read_batch("test_batch")
    return np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train]), X_test, Y_test


def cifar(device: str | None = None, path: str | os.PathLike | None = None, download: bool = True):
    """CIFAR-10 as tinygrad's nn.datasets.cifar returns it: X_train uint8 (50000, 3, 32, 32), Y_train uint8,
    X_test, Y_test (downloaded when missing, unless download=False)."""
    return tuple(Tensor(a.astype(np.uint8), device=device) for a in load_cifar10(path, download))


# ---- augmentation on numpy batches of shape (N, C, H, W) ----
def random_crop(x: np.ndarray, size: int | tuple[int, int], padding: int = 0,
                rng: np.random.Generator | None = None) -> np.ndarray:
    """Pad each image by `padding` zeros on every side, then cut a random size x size window from it."""
    rng = rng or np.random.default_rng()
    height, width = (size, size) if isinstance(size, int) else size
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, _, h, w = x.shape
    if height > h or width > w:
        raise ValueError(f"crop size {(height, width)} is larger than the padded image {(h, w)}")
    top, left = rng.integers(0, h - height + 1, size=n), rng.integers(0, w - width + 1, size=n)
    # every window of every image as a view (n, C, h - height + 1, w - width + 1, height, width), no copy: picking one
    # per image copies whole rows, where indexing each pixel gathers them one by one
    windows = np.lib.stride_tricks.sliding_window_view(x, (height, width), axis=(2, 3))
    return windows[np.arange(n), :, top, left]


def random_flip(x: np.ndarray, rng: np.random.Generator | None = None, p: float = 0.5) -> np.ndarray:
    """Mirror each image left-right with probability p."""
    flip = (rng or np.random.default_rng()).random(x.shape[0]) < p
    return np.where(flip[:, None, None, None], x[..., ::-1], x)


class Batches:
    """Iterates (x, y) Tensor batches over numpy arrays X, Y, reshuffling at every pass.

    transform(x_batch, rng) -> x_batch runs on each numpy batch first (augmentation, scaling to float).
    drop_last=True keeps every batch the same shape, which a TinyJit-ed step needs."""

    def __init__(self, X: np.ndarray, Y: np.ndarray, batch_size: int, shuffle: bool = True, drop_last: bool = False,
                 transform: Callable | None = None, seed: int | None = None, device: str | None = None):
        if len(X) != len(Y):
            raise ValueError(f"X has {len(X)} samples but Y has {len(Y)}")
        if batch_size <= 0 or (drop_last and batch_size > len(X)):
            raise ValueError(f"batch_size {batch_size} doesn't fit a dataset of {len(X)} samples")
        self.X, self.Y, self.batch_size, self.shuffle, self.drop_last = X, Y, batch_size, shuffle, drop_last
        self.transform, self.device, self.rng = transform, device, np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.X) // self.batch_size if self.drop_last else ceildiv(len(self.X), self.batch_size)

    def arrays(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """One pass as (x, y) numpy batches (what iterating gives, before it becomes Tensors)."""
        order = self.rng.permutation(len(self.X)) if self.shuffle else np.arange(len(self.X))
        for i in range(len(self)):
            index = order[i * self.batch_size:(i + 1) * self.batch_size]
            x, y = self.X[index], self.Y[index]
            if self.transform is not None:
                x = self.transform(x, self.rng)
            yield np.ascontiguousarray(x), np.ascontiguousarray(y)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        """The batches as Tensors. An image batch made for this pass (owning its memory, as indexing and the numpy
        transforms make them) is handed over read-only, so a backend whose memory is host memory uses it as it is (a
        batch of images can be megabytes; a view of other memory, and the labels, are copied)."""
        for x, y in self.arrays():
            x.flags.writeable = x.flags.writeable and not x.flags.owndata
            yield Tensor(x, device=self.device), Tensor(y, device=self.device)


__all__ = ["data_dir", "read_idx", "load_mnist", "mnist", "load_cifar10", "cifar", "random_crop",
           "random_flip", "Batches"]
