"""The datasets of the training fidelity, by name, and where their files are: torch-free, so that the env's argument
specs (:mod:`otagym.fidelity`), the sweep's config check and the training engine that builds their models
(:mod:`otagym.training.federation`) import them without importing each other.

Nothing is downloaded. The embedded digits need no files; MNIST and CIFAR-10 are read from ``data_dir``;
Fashion-MNIST (Xiao, Rasul & Vollgraf, 2017: MNIST's IDX format, 60,000 + 10,000 28x28 images of clothes) is where
Debian's package ``dataset-fashion-mnist`` installs it, :data:`FASHION_MNIST_DIR`, unless ``data_dir`` names
another folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

__all__ = ["DATASET_NAMES", "MNIST_FILES", "FASHION_MNIST_DIR", "DataPackage", "DATA_PACKAGES", "data_folder"]

#: Datasets of the training fidelity (their models: :data:`otagym.training.federation.DATASETS`).
DATASET_NAMES = ("digits", "mnist", "fashion-mnist", "cifar10")
#: The IDX files of MNIST (LeCun et al.) and of Fashion-MNIST, optionally gzipped, as ``(split, kind) -> file name``.
MNIST_FILES = {("train", "images"): "train-images-idx3-ubyte", ("train", "labels"): "train-labels-idx1-ubyte",
               ("test", "images"): "t10k-images-idx3-ubyte", ("test", "labels"): "t10k-labels-idx1-ubyte"}
#: Where Debian's ``dataset-fashion-mnist`` puts Fashion-MNIST's four gzipped IDX files (``dpkg -L`` lists them).
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")


class DataPackage(NamedTuple):
    """A dataset that a system package installs: the folder it is read from when ``data_dir`` is None, the command
    that installs it there, and the files (each raw or ``.gz``) it must hold."""

    folder: Path
    install: str
    files: tuple[str, ...]


#: The datasets found without ``data_dir`` once their system package is installed.
DATA_PACKAGES = {"fashion-mnist": DataPackage(FASHION_MNIST_DIR, "apt-get install dataset-fashion-mnist",
                                              tuple(MNIST_FILES.values()))}


def data_folder(dataset: str, data_dir: str | os.PathLike | None) -> Path | None:
    """The folder ``dataset``'s files are read from: ``data_dir``, else its package's folder (:data:`DATA_PACKAGES`);
    None for the embedded digits, which need none.

    Raises ``ValueError`` when a dataset without a package gets no ``data_dir``, and ``FileNotFoundError`` (one line
    naming the install command and ``data_dir``) when a packaged dataset's files are not in its folder. A dataset
    without a package is checked when it is read (:func:`otagym.training.load_mnist` names the missing file)."""
    if dataset == DATASET_NAMES[0]:  # the embedded digits
        return None
    package = DATA_PACKAGES.get(dataset)
    if data_dir is None and package is None:
        raise ValueError(f"data_dir must name the folder of the {dataset} files with dataset={dataset!r} (nothing is "
                         "downloaded); got None")
    folder = Path(data_dir).expanduser() if data_dir is not None else package.folder
    missing = [name for name in (package.files if package else ())
               if not any((folder / (name + ext)).is_file() for ext in ("", ".gz"))]
    if missing:
        raise FileNotFoundError(
            f"dataset={dataset!r} needs {', '.join(n + '[.gz]' for n in missing)} in {folder}: install them with "
            f"`{package.install}` (into {package.folder}) or set data_dir to a folder holding them (nothing is "
            "downloaded)")
    return folder
