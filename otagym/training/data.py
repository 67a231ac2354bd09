"""Data of the training fidelity: scikit-learn's 8x8 digits (embedded), MNIST and Fashion-MNIST (one IDX reader) and
CIFAR-10 from local files in their standard formats (nothing is downloaded; torchvision is not needed), and their split
over devices."""

from __future__ import annotations

import gzip
import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import torch

from otagym.datasets import MNIST_FILES
from otagym.validation import Integer, OneOf, Real

__all__ = ["digits_dataset", "partition", "read_idx", "load_mnist", "load_cifar10", "MNIST_FILES"]


def digits_dataset(rng: np.random.Generator, test_fraction: float = 0.2
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)`` from scikit-learn's 1,797 handwritten 8x8 digits: images as float32
    (N, 1, 8, 8) scaled to [0, 1], labels int64; a held-out test split of ``test_fraction`` drawn with ``rng``."""
    from sklearn.datasets import load_digits

    test_fraction = Real(0.0, 1.0, low_open=True, high_open=True)("test_fraction", test_fraction)
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.from_numpy(rng.permutation(len(y)))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def partition(labels: np.ndarray | torch.Tensor, num_devices: int, rng: np.random.Generator, *,
              split: str = "iid", classes_per_device: int = 2) -> list[np.ndarray]:
    """Indices of each device's local data.

    ``split="iid"``: a random permutation cut into ``num_devices`` near-equal parts. ``split="classes"``: the paper's
    non-IID split (§VII, CIFAR-10): samples sorted by label and cut into ``num_devices * classes_per_device`` shards,
    each device drawing ``classes_per_device`` of them (McMahan et al.'s pathological split), so a device holds about
    that many classes.
    """
    labels = np.asarray(labels)
    num_devices = Integer(1, len(labels))("num_devices", num_devices)
    split = OneOf(("iid", "classes"))("split", split)
    if split == "iid":
        return [np.sort(part) for part in np.array_split(rng.permutation(len(labels)), num_devices)]
    classes_per_device = Integer(1, len(labels) // num_devices)("classes_per_device", classes_per_device)
    shards = np.array_split(np.argsort(labels, kind="stable"), num_devices * classes_per_device)
    owner = rng.permutation(len(shards)).reshape(num_devices, classes_per_device)
    return [np.sort(np.concatenate([shards[s] for s in row])) for row in owner]


#: The python-pickle batches of CIFAR-10 (Krizhevsky), inside ``cifar-10-batches-py/`` or the folder itself.
CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST = ("test_batch",)


def _find(directory: Path, name: str, expected: str) -> Path:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{directory / name}[.gz] not found: expected {expected} (nothing is downloaded; put the "
                            "files there yourself)")


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (the MNIST format: magic 0x0000 08 NDIM, big-endian int32 sizes, then unsigned bytes), gzipped
    or not, as a uint8 array; a corrupt file raises ``ValueError`` naming the path."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as err:  # truncated (EOFError) or corrupt (BadGzipFile, zlib.error)
            raise ValueError(f"{path}: a truncated or corrupt gzip file ({type(err).__name__}: {err})") from None
    if len(raw) < 4 or raw[:2] != b"\x00\x00" or raw[2] != 0x08 or not 1 <= raw[3] <= 4:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes (magic 0x000008NN expected; got {raw[:4]!r})")
    ndim = raw[3]
    shape = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim]) if len(raw) >= 4 + 4 * ndim else ()
    body = raw[4 + 4 * ndim:]
    if len(shape) != ndim or len(body) != int(np.prod(shape)):
        raise ValueError(f"{path}: IDX header says shape {shape} but the file holds {len(body)} bytes of data")
    return np.frombuffer(body, dtype=np.uint8).reshape(shape)


def load_mnist(directory: str | Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)`` from the four IDX files of MNIST, or of Fashion-MNIST (the same names and
    format), in ``directory`` (raw or ``.gz``, :data:`MNIST_FILES`): images float32 (N, 1, 28, 28) in [0, 1], labels
    int64."""
    directory = Path(directory)
    out = []
    for split in ("train", "test"):
        images = read_idx(_find(directory, MNIST_FILES[split, "images"], "IDX images"))
        labels = read_idx(_find(directory, MNIST_FILES[split, "labels"], "IDX labels"))
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"{directory}: IDX {split} images {images.shape} and labels {labels.shape} do not match")
        if images.shape[1:] != (28, 28):
            raise ValueError(f"{directory}: IDX {split} images are {images.shape[1]}x{images.shape[2]}; the MNIST "
                             "format's (and the paper's CNN's) are 28x28")
        if labels.size and labels.max() > 9:
            raise ValueError(f"{directory}: IDX {split} labels must lie in 0..9 (ten classes); got {labels.max()}")
        out += [torch.tensor(images / 255.0, dtype=torch.float32).unsqueeze(1), torch.tensor(labels, dtype=torch.int64)]
    return tuple(out)


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        labels = np.asarray(batch[b"labels"], dtype=np.int64)
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: not a CIFAR-10 python batch (a pickled dict with b'data' N x 3072 uint8 and "
                         f"b'labels'): {err}") from None
    if len(data) != len(labels):
        raise ValueError(f"{path}: {len(data)} images but {len(labels)} labels")
    return data, labels


def load_cifar10(directory: str | Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)`` from CIFAR-10's python batches (``data_batch_1..5``, ``test_batch``) in
    ``directory`` or its ``cifar-10-batches-py/``: images float32 (N, 3, 32, 32) in [0, 1], labels int64. Only
    pickles of the user's own files are read (pickle can run code: point it at files you trust)."""
    directory = Path(directory)
    if (directory / "cifar-10-batches-py").is_dir():
        directory = directory / "cifar-10-batches-py"
    out = []
    for names in (CIFAR10_TRAIN, CIFAR10_TEST):
        parts = [_read_cifar_batch(_find(directory, n, "a CIFAR-10 python batch")) for n in names]
        x = np.concatenate([p[0] for p in parts])
        out += [torch.tensor(x / 255.0, dtype=torch.float32), torch.tensor(np.concatenate([p[1] for p in parts]))]
    return tuple(out)
