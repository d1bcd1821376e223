"""Tests of the IDX reader and the Fashion-MNIST loader.

Synthetic IDX files written here always run; the tests on the real data run only where the Debian
package ``dataset-fashion-mnist`` is installed (``apt-get install dataset-fashion-mnist``).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from certkit import datasets
from certkit.datasets import FASHION_MNIST_PATH, SplitDataset, read_idx

HAVE_FASHION = (Path(FASHION_MNIST_PATH) / "train-images-idx3-ubyte.gz").is_file()
needs_package = pytest.mark.skipif(
    not HAVE_FASHION,
    reason=f"Fashion-MNIST is not installed at {FASHION_MNIST_PATH} "
    "(Debian package dataset-fashion-mnist; certkit never downloads data)",
)


def idx_bytes(arr: np.ndarray, code: int = 0x08) -> bytes:
    """An IDX file by hand: zero bytes, type code, ndim, big-endian uint32 sizes, big-endian data."""
    dtype = {0x08: ">u1", 0x0B: ">i2", 0x0D: ">f4"}[code]
    header = bytes([0, 0, code, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    return header + arr.astype(dtype).tobytes()


def write_fake(folder: Path, n_train: int = 30, n_test: int = 20, *, compress: bool = True, side: int = 4):
    """Tiny Fashion-MNIST look-alike: image i has all pixels equal to i mod 256, label i mod 10."""
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = (np.arange(n)[:, None, None] % 256 * np.ones((1, side, side))).astype(np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        for stem, arr in ((f"{prefix}-images-idx3-ubyte", images), (f"{prefix}-labels-idx1-ubyte", labels)):
            data = idx_bytes(arr)
            if compress:
                (folder / f"{stem}.gz").write_bytes(gzip.compress(data))
            else:
                (folder / stem).write_bytes(data)
    return folder


def test_read_idx_hand_made_files(tmp_path):
    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / "a").write_bytes(idx_bytes(arr))
    np.testing.assert_array_equal(read_idx(tmp_path / "a"), arr)
    (tmp_path / "b.gz").write_bytes(gzip.compress(idx_bytes(arr)))
    np.testing.assert_array_equal(read_idx(tmp_path / "b.gz"), arr)
    # big-endian int16 and float32 come back in native order with the same values
    signed = np.array([[-300, 5], [7, 32000]], dtype=np.int16)
    (tmp_path / "c").write_bytes(idx_bytes(signed, 0x0B))
    out = read_idx(tmp_path / "c")
    np.testing.assert_array_equal(out, signed)
    assert out.dtype.isnative
    floats = np.array([1.5, -2.25, 3.0], dtype=np.float32)
    (tmp_path / "d").write_bytes(idx_bytes(floats, 0x0D))
    np.testing.assert_array_equal(read_idx(tmp_path / "d"), floats)


def test_read_idx_rejects_corrupt_files(tmp_path):
    arr = np.arange(6, dtype=np.uint8).reshape(2, 3)
    (tmp_path / "magic").write_bytes(b"\x01" + idx_bytes(arr)[1:])
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(tmp_path / "magic")
    (tmp_path / "type").write_bytes(b"\x00\x00\x07\x02" + idx_bytes(arr)[4:])
    with pytest.raises(ValueError, match="unknown IDX element type 0x07"):
        read_idx(tmp_path / "type")
    (tmp_path / "short").write_bytes(idx_bytes(arr)[:-1])
    with pytest.raises(ValueError, match="holds 5 data bytes but its header announces shape"):
        read_idx(tmp_path / "short")


def test_loader_on_synthetic_files(tmp_path):
    folder = write_fake(tmp_path / "fm")
    ds = datasets.load_fashion_mnist(path=folder)
    assert isinstance(ds, SplitDataset)
    assert ds.X_train.shape == (30, 16) and ds.X_test.shape == (20, 16)
    assert ds.X_train.dtype == np.float64 and ds.y_train.dtype == np.int64
    # file order kept; pixel value i / 255 for image i
    np.testing.assert_array_equal(ds.y_train, np.arange(30) % 10)
    np.testing.assert_allclose(ds.X_test[:, 0], np.arange(20) / 255.0)
    assert ds.target_names[0] == "T-shirt/top" and len(ds.target_names) == 10
    assert ds.feature_names[:2] == ("pixel_0_0", "pixel_0_1") and len(ds.feature_names) == 16
    assert "dataset-fashion-mnist" in ds.description
    # uncompressed files work too
    plain = datasets.load_fashion_mnist(path=write_fake(tmp_path / "plain", compress=False))
    np.testing.assert_array_equal(plain.X_train, ds.X_train)


def test_loader_class_balanced_subsets_are_deterministic(tmp_path):
    folder = write_fake(tmp_path / "fm", n_train=50, n_test=30)
    a = datasets.load_fashion_mnist(path=folder, n_train_per_class=3, n_test_per_class=2, rng=4)
    b = datasets.load_fashion_mnist(path=folder, n_train_per_class=3, n_test_per_class=2, rng=4)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert np.bincount(a.y_train).tolist() == [3] * 10 and np.bincount(a.y_test).tolist() == [2] * 10
    # every kept image is the file's image of that index: its pixel value identifies it, its label matches
    idx = np.rint(a.X_train[:, 0] * 255).astype(int)
    np.testing.assert_array_equal(idx % 10, a.y_train)
    assert len(set(idx)) == 30  # drawn without replacement
    with pytest.raises(ValueError, match="only 5 images of class 0, fewer than 6"):
        datasets.load_fashion_mnist(path=folder, n_train_per_class=6)


def test_loader_missing_files_name_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        datasets.load_fashion_mnist(path=tmp_path)
    with pytest.raises(ValueError, match="n_train_per_class"):
        datasets.load_fashion_mnist(path=tmp_path, n_train_per_class=0)
    folder = write_fake(tmp_path / "bad")
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(np.zeros(3, np.uint8))))
    with pytest.raises(ValueError, match="do not match"):
        datasets.load_fashion_mnist(path=folder)


@needs_package
def test_real_fashion_mnist_shapes_and_counts():
    ds = datasets.load_fashion_mnist()
    assert ds.X_train.shape == (60000, 784) and ds.X_test.shape == (10000, 784)
    assert np.bincount(ds.y_train).tolist() == [6000] * 10
    assert np.bincount(ds.y_test).tolist() == [1000] * 10
    assert ds.X_train.min() == 0.0 and ds.X_train.max() == 1.0
    # the first training image is an ankle boot (class 9), the first test image too
    assert ds.y_train[0] == 9 and ds.y_test[0] == 9


@needs_package
def test_real_fashion_mnist_subset():
    ds = datasets.load_fashion_mnist(n_train_per_class=20, n_test_per_class=5, rng=0)
    assert ds.X_train.shape == (200, 784) and np.bincount(ds.y_test).tolist() == [5] * 10
