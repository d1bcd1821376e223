"""Image data sets read from files that an installed system package ships (never downloaded).

Fashion-MNIST is packaged by Debian (and Ubuntu) as ``dataset-fashion-mnist``, which installs the four
original IDX files under ``/usr/share/datasets/fashion-mnist``.  `read_idx` parses the IDX format
(LeCun's MNIST container: a magic number giving the element type and the number of dimensions, the
dimension sizes as big-endian uint32, then the data).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import numpy as np

from certkit._validation import check_integer, check_rng
from certkit.datasets._base import SplitDataset

__all__ = ["FASHION_MNIST_PATH", "load_fashion_mnist", "read_idx"]

#: Where the Debian package ``dataset-fashion-mnist`` installs the data.
FASHION_MNIST_PATH = "/usr/share/datasets/fashion-mnist"

FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

# IDX element-type codes (third byte of the magic number).
_IDX_TYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file (plain or gzip-compressed, as shipped for MNIST-like data sets).

    Parameters
    ----------
    path : str or path-like
        The file; a name ending in ``.gz`` is decompressed.

    Returns
    -------
    numpy.ndarray
        The array with the file's shape, in native byte order (``uint8`` for image and label files).

    Raises
    ------
    ValueError
        A bad magic number, an unknown element type, or a size that does not match the header.
    """
    path = Path(path)
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path} is not an IDX file (its magic number must start with two zero bytes)")
    if raw[2] not in _IDX_TYPES:
        raise ValueError(f"{path} has unknown IDX element type 0x{raw[2]:02x}")
    dtype, ndim = _IDX_TYPES[raw[2]], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path} is truncated: its header announces {ndim} dimensions")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(
            f"{path} holds {len(raw) - header} data bytes but its header announces shape {shape} "
            f"({expected} bytes)"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def _find(folder: Path, stem: str) -> Path:
    for name in (f"{stem}.gz", stem):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(
        f"Fashion-MNIST file {stem}(.gz) not found in {folder}. Install the Debian/Ubuntu package that ships "
        "it (`apt-get install dataset-fashion-mnist`, files in /usr/share/datasets/fashion-mnist) or pass "
        "path= to a folder holding the four IDX files; certkit never downloads data."
    )


def _per_class(y: np.ndarray, n: int | None, gen: np.random.Generator, k: int, part: str) -> np.ndarray:
    """Indices of ``n`` random examples of every class (all, in file order, if ``n`` is None)."""
    if n is None:
        return np.arange(y.size)
    idx = []
    for c in range(k):
        members = np.flatnonzero(y == c)
        if members.size < n:
            raise ValueError(
                f"{part} part has only {members.size} images of class {c}, fewer than {n} requested"
            )
        idx.append(gen.choice(members, size=n, replace=False))
    return gen.permutation(np.concatenate(idx))


def load_fashion_mnist(
    *,
    n_train_per_class: int | None = None,
    n_test_per_class: int | None = None,
    path: str | os.PathLike[str] | None = None,
    rng: int | np.random.Generator | None = 0,
) -> SplitDataset:
    """Fashion-MNIST (Xiao, Rasul & Vollgraf, 2017) from the files of an installed package.

    70,000 grey-scale 28x28 images of 10 clothing classes (60,000 train, 10,000 test).  The data
    are read from ``path``, by default ``/usr/share/datasets/fashion-mnist``, where the Debian / Ubuntu
    package ``dataset-fashion-mnist`` installs them (``apt-get install dataset-fashion-mnist``);
    nothing is downloaded.

    Parameters
    ----------
    n_train_per_class, n_test_per_class : int, optional
        Keep this many random images of every class (class-balanced subsets; the full 6,000 / 1,000 per
        class by default).
    path : str or path-like, optional
        Folder holding ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
        ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte`` (each optionally ``.gz``).
    rng : None, int or numpy.random.Generator, default 0
        Draws the subsets (unused when both sizes are None, which keep the file order).

    Returns
    -------
    SplitDataset
        ``X_train`` / ``X_test`` float64 of shape (n, 784) with pixels in [0, 1] (``X.reshape(-1, 1, 28,
        28)`` gives the images), ``y`` the class 0-9 (``target_names``).

    Raises
    ------
    FileNotFoundError
        The files are not there; the message names the package to install.
    ValueError
        Corrupt files, or more images per class than the data hold.
    """
    folder = Path(FASHION_MNIST_PATH if path is None else path)
    n_train = (
        None
        if n_train_per_class is None
        else check_integer(n_train_per_class, "n_train_per_class", minimum=1)
    )
    n_test = (
        None if n_test_per_class is None else check_integer(n_test_per_class, "n_test_per_class", minimum=1)
    )
    gen = check_rng(rng)
    parts = {}
    for part, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        images = read_idx(_find(folder, f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(_find(folder, f"{prefix}-labels-idx1-ubyte"))
        if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
            raise ValueError(
                f"Fashion-MNIST {part} files in {folder} do not match: "
                f"images {images.shape}, labels {labels.shape}"
            )
        y = labels.astype(np.int64)
        if y.size == 0 or y.min() < 0 or y.max() >= len(FASHION_MNIST_CLASSES):
            raise ValueError(f"Fashion-MNIST {part} labels in {folder} must lie in 0-9")
        keep = _per_class(y, n, gen, len(FASHION_MNIST_CLASSES), part)
        X = images[keep].reshape(keep.size, -1).astype(np.float64) / 255.0
        parts[part] = (np.ascontiguousarray(X), y[keep])
    side = images.shape[1]
    return SplitDataset(
        name="fashion_mnist",
        X_train=parts["train"][0],
        y_train=parts["train"][1],
        X_test=parts["test"][0],
        y_test=parts["test"][1],
        feature_names=tuple(f"pixel_{r}_{c}" for r in range(side) for c in range(images.shape[2])),
        target_names=FASHION_MNIST_CLASSES,
        description=(
            "Fashion-MNIST: Zalando article images (H. Xiao, K. Rasul, R. Vollgraf, 'Fashion-MNIST: a Novel "
            "Image Dataset for Benchmarking Machine Learning Algorithms', arXiv:1708.07747, 2017). "
            "Licence: MIT. "
            f"Read from {folder} (Debian/Ubuntu package dataset-fashion-mnist); pixels divided by 255."
        ),
    )
