"""Dataset containers, the reader for the embedded data files and the reader of users' numeric CSV files."""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass
from importlib import resources

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._typing import RNGLike
from certkit._validation import check_level, check_rng

__all__ = ["Dataset", "GraphDataset", "SplitDataset", "TreatmentDataset"]


def _signed(y: np.ndarray, target_names: tuple[str, ...]) -> np.ndarray:
    if len(target_names) != 2:
        raise ValueError(
            f"signed labels need a binary data set, this one has {len(target_names)} classes {target_names}"
        )
    return 2.0 * y.astype(np.float64) - 1.0


def _class_counts(y: np.ndarray, n_classes: int) -> str:
    return "/".join(str(c) for c in np.bincount(y, minlength=n_classes))


@dataclass(frozen=True)
class Dataset(ResultMixin):
    """A labelled data set held in memory.

    Attributes
    ----------
    name : str
        Short identifier, e.g. ``"iris"``.
    X : ndarray of shape (n_samples, n_features), float64
        Features.
    y : ndarray of shape (n_samples,), int64
        Class labels ``0, ..., n_classes - 1``; ``target_names[k]`` names class ``k``.
    feature_names : tuple of str
        One name per column of ``X``.
    target_names : tuple of str
        One name per class.
    description : str
        Source, licence and citation.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    target_names: tuple[str, ...]
    description: str

    @property
    def n_samples(self) -> int:
        """Number of rows of ``X``."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns of ``X``."""
        return int(self.X.shape[1])

    @property
    def y_signed(self) -> np.ndarray:
        """Binary labels as float64 ``-1.0`` (class 0) / ``+1.0`` (class 1); ValueError for more classes."""
        return _signed(self.y, self.target_names)

    def split(self, *, test_size: float = 0.25, rng: RNGLike = None) -> SplitDataset:
        """Stratified random split into a training and a test part.

        Parameters
        ----------
        test_size : float
            Fraction of the samples that go to the test part, strictly between 0 and 1.
        rng : None, int or numpy.random.Generator
            Randomness of the split (deterministic for an int seed).

        Returns
        -------
        SplitDataset
            Each class is split in the same proportion (rounded); both parts are in random order.
        """
        test_size = check_level(test_size, "test_size")
        gen = check_rng(rng)
        test_mask = np.zeros(self.n_samples, dtype=bool)
        for k in range(len(self.target_names)):
            members = np.flatnonzero(self.y == k)
            n_test = round(test_size * members.size)
            test_mask[gen.permutation(members)[:n_test]] = True
        if test_mask.all() or not test_mask.any():
            raise ValueError(
                f"test_size={test_size} leaves an empty training or test part for {self.n_samples} samples; "
                "choose a test_size further from 0 and 1"
            )
        train_idx = gen.permutation(np.flatnonzero(~test_mask))
        test_idx = gen.permutation(np.flatnonzero(test_mask))
        return SplitDataset(
            name=self.name,
            X_train=self.X[train_idx],
            y_train=self.y[train_idx],
            X_test=self.X[test_idx],
            y_test=self.y[test_idx],
            feature_names=self.feature_names,
            target_names=self.target_names,
            description=self.description,
        )

    def summary(self) -> str:
        """A one-row table: samples, features, classes and class counts."""
        rows = [[self.n_samples, self.n_features, len(self.target_names),
                 _class_counts(self.y, len(self.target_names))]]
        headers = ["samples", "features", "classes", "per class"]
        return format_table(headers, rows, title=f"Dataset {self.name!r}")


@dataclass(frozen=True)
class SplitDataset(ResultMixin):
    """A labelled data set with a fixed train/test split.

    Attributes
    ----------
    name : str
        Short identifier.
    X_train, X_test : ndarray of shape (n, n_features), float64
        Features of the two parts.
    y_train, y_test : ndarray of shape (n,), int64
        Class labels ``0, ..., n_classes - 1``.
    feature_names, target_names : tuple of str
        Column and class names.
    description : str
        Source, licence and citation.
    """

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple[str, ...]
    target_names: tuple[str, ...]
    description: str

    @property
    def y_train_signed(self) -> np.ndarray:
        """Binary training labels as float64 ``-1.0`` / ``+1.0``."""
        return _signed(self.y_train, self.target_names)

    @property
    def y_test_signed(self) -> np.ndarray:
        """Binary test labels as float64 ``-1.0`` / ``+1.0``."""
        return _signed(self.y_test, self.target_names)

    def summary(self) -> str:
        """A two-row table (train, test): samples and class counts."""
        k = len(self.target_names)
        rows = [
            ["train", self.X_train.shape[0], self.X_train.shape[1], _class_counts(self.y_train, k)],
            ["test", self.X_test.shape[0], self.X_test.shape[1], _class_counts(self.y_test, k)],
        ]
        headers = ["part", "samples", "features", "per class"]
        return format_table(headers, rows, title=f"Dataset {self.name!r}")


@dataclass(frozen=True)
class GraphDataset(ResultMixin):
    """Observations of the nodes of a known causal graph.

    Attributes
    ----------
    name : str
        Short identifier.
    X : ndarray of shape (n_samples, n_nodes), float64
        One column per node.
    feature_names : tuple of str
        Node names, in column order.
    adjacency : ndarray of shape (n_nodes, n_nodes), int64
        Ground truth: ``adjacency[i, j] == 1`` iff the edge ``feature_names[i] -> feature_names[j]``
        is present.
    edges : tuple of (str, str)
        The same edges as (cause, effect) name pairs, in the order of the source file.
    experiment : ndarray of shape (n_samples,), int64
        Index into ``experiment_names`` of the experimental condition of each row.
    experiment_names : tuple of str
        Names of the experimental conditions.
    description : str
        Source, licence and citation.
    graph_description : str
        Which ground truth this is and its caveats.
    """

    name: str
    X: np.ndarray
    feature_names: tuple[str, ...]
    adjacency: np.ndarray
    edges: tuple[tuple[str, str], ...]
    experiment: np.ndarray
    experiment_names: tuple[str, ...]
    description: str
    graph_description: str

    def summary(self) -> str:
        """A one-row table: samples, nodes, edges and conditions."""
        rows = [[self.X.shape[0], self.X.shape[1], int(self.adjacency.sum()), len(self.experiment_names)]]
        return format_table(["samples", "nodes", "edges", "conditions"], rows, title=f"Dataset {self.name!r}")


@dataclass(frozen=True)
class TreatmentDataset(ResultMixin):
    """Observational or experimental data with a binary treatment and a real outcome.

    Attributes
    ----------
    name : str
        Short identifier.
    X : ndarray of shape (n_samples, n_covariates), float64
        Pre-treatment covariates.
    treatment : ndarray of shape (n_samples,), int64
        1 for treated units, 0 for controls.
    outcome : ndarray of shape (n_samples,), float64
        The outcome.
    feature_names : tuple of str
        Covariate names, in column order.
    outcome_name : str
        Name of the outcome.
    description : str
        Source, licence, citation and column meanings.
    """

    name: str
    X: np.ndarray
    treatment: np.ndarray
    outcome: np.ndarray
    feature_names: tuple[str, ...]
    outcome_name: str
    description: str

    def difference_in_means(self) -> float:
        """Mean outcome of the treated minus mean outcome of the controls."""
        treated = self.treatment == 1
        return float(self.outcome[treated].mean() - self.outcome[~treated].mean())

    def summary(self) -> str:
        """A one-row table: samples, covariates, treated/controls and the difference in means."""
        n_treated = int(self.treatment.sum())
        rows = [[self.X.shape[0], self.X.shape[1], n_treated, self.X.shape[0] - n_treated,
                 self.difference_in_means()]]
        headers = ["samples", "covariates", "treated", "controls", f"diff. in mean {self.outcome_name}"]
        return format_table(headers, rows, title=f"Dataset {self.name!r}")


def read_table(filename: str) -> tuple[tuple[str, ...], list[list[str]]]:
    """Read a CSV file from ``certkit/datasets/data`` (gunzipping ``*.gz``): header and rows as strings."""
    raw = (resources.files("certkit.datasets") / "data" / filename).read_bytes()
    if filename.endswith(".gz"):
        raw = gzip.decompress(raw)
    lines = raw.decode("utf-8").splitlines()
    header = tuple(name.strip('"') for name in lines[0].split(","))
    rows = [[cell.strip('"') for cell in line.split(",")] for line in lines[1:] if line]
    return header, rows


def read_numeric_csv(path: str, *, how: str) -> tuple[np.ndarray, list[str]]:
    """A user's CSV file: a header row of names, then numeric rows, as ``(X, names)``.

    UTF-8 with or without a byte-order mark is read; any other file raises a ``ValueError`` that says what
    the file is (a NumPy file, UTF-16 or other non-UTF-8 text, binary) and ends with ``how`` (the format the
    caller reads). Blank lines at the end of the file are ignored; one before a data row is an error.
    """
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark (Excel's "CSV UTF-8") is not part of the header
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path} is not a UTF-8 text CSV file ({_file_kind(raw)}); {how}") from exc
    while rows and len(rows[-1]) <= 1 and not "".join(rows[-1]).strip():  # only the last lines may be blank
        rows.pop()
    if len(rows) < 2:
        raise ValueError(f"{path} needs a header row and at least one data row")
    header, body = rows[0], rows[1:]
    data = np.empty((len(body), len(header)))
    for r, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ValueError(f"{path} line {r} has {len(row)} fields, the header has {len(header)}")
        for c, value in enumerate(row):
            try:
                data[r - 2, c] = float(value)
            except ValueError:
                raise ValueError(
                    f"{path} line {r}, column {header[c]!r}: {value!r} is not a number"
                ) from None
    return data, header


def _file_kind(raw: bytes) -> str:
    """What a file that is not UTF-8 text is, and what to do about it."""
    if raw.startswith(b"\x93NUMPY"):
        return "a NumPy .npy file"
    if raw.startswith(b"PK\x03\x04"):
        return "a zip or NumPy .npz file"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text: re-save it as UTF-8"
    if b"\x00" in raw[:4096]:
        return "binary"
    return "text in another encoding than UTF-8, such as latin-1 or cp1252: re-save it as UTF-8"
