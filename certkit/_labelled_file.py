"""A user's labelled data file, as the subcommands that take one read it (``--data FILE``,
``--label COLUMN``): ``certkit mibp``, ``certkit performative`` and ``certkit conformal``."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

#: A label column with more distinct values than this is taken for a feature, not classes.
MAX_CLASSES = 50

FILE_FORMAT = (
    "a CSV file (a header row of names, then rows of numbers; the label column is --label, default the "
    "last, and may hold class names) or a NumPy .npz archive (numpy.savez) of the arrays X (n, d) and y (n,) "
    "of class labels"
)


@dataclass(frozen=True)
class LabelledFile:
    """A user's file, read.

    Attributes
    ----------
    data : certkit.datasets.Dataset
        The rows: features ``X``, class codes ``y`` (``0..C-1``, the sorted distinct labels), the classes'
        names ``target_names`` (the labels as text; whole numbers without a decimal point), the file's base
        name as ``name`` and its path as ``description``.
    where : str
        Where the labels came from: ``label column 'y'`` or ``arrays X and y``.
    columns : tuple of str or None
        The CSV file's feature columns (None for an .npz archive).
    numeric : bool
        Whether the labels are numbers (else class names).
    """

    data: object
    where: str
    columns: tuple[str, ...] | None
    numeric: bool


def _rows(path: str) -> list[list[str]]:
    """The CSV file's rows (UTF-8, with or without a byte-order mark), blank lines at its end dropped."""
    import csv
    import io

    from certkit.datasets._base import _file_kind

    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        rows = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"), newline="")))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(
            f"{path} is not a UTF-8 text CSV file ({_file_kind(raw)}); --data reads {FILE_FORMAT}"
        ) from exc
    while rows and not "".join(rows[-1]).strip():
        rows.pop()
    return rows


def _read_csv(path: str, label: str | None) -> tuple[np.ndarray, np.ndarray, str, tuple[str, ...], str]:
    """A CSV file's numeric feature columns, its label column (numbers when every label is one, else the
    labels as text, surrounding spaces dropped), where the labels came from, the feature columns' names and
    what to say when the labels are not classes (``--label`` when it was not given)."""
    rows = _rows(path)
    if len(rows) < 2:
        raise ValueError(f"{path} needs a header row and at least one data row")
    names = rows[0]
    if label is not None and label not in names:
        raise ValueError(f"label {label!r} is not a column of the CSV file; its columns are {names}")
    if len(names) < 2:
        raise ValueError(f"data: {path} has one column; it needs feature columns and a label column")
    column = len(names) - 1 if label is None else names.index(label)
    hint = (
        f"; the label column is the last, {names[column]!r}, unless --label names another of {names}"
        if label is None
        else ""
    )
    features = [c for c in range(len(names)) if c != column]
    X = np.empty((len(rows) - 1, len(features)))
    labels = []
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(names):
            raise ValueError(f"{path} line {r} has {len(row)} fields, the header has {len(names)}")
        for j, c in enumerate(features):
            try:
                X[r - 2, j] = float(row[c])
            except ValueError:
                raise ValueError(
                    f"{path} line {r}, column {names[c]!r}: {row[c]!r} is not a number{hint}"
                ) from None
        labels.append(row[column].strip())
        if not labels[-1]:
            raise ValueError(f"{path} line {r}: the label column {names[column]!r} is empty")
    try:
        y = np.array([float(v) for v in labels])
    except ValueError:  # class names: the labels are text
        y = np.array(labels)
    return X, y, f"label column {names[column]!r}", tuple(names[c] for c in features), hint


def _read_npz(path: str) -> tuple[np.ndarray, np.ndarray]:
    """The arrays X and y of an .npz archive (ValueError naming --data otherwise)."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"data: {path} is not {FILE_FORMAT}") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError(f"data: {path} holds a single array; expected {FILE_FORMAT}")
    with loaded as f:
        missing = [k for k in ("X", "y") if k not in f.files]
        if missing:
            raise ValueError(
                f"data: {path} lacks the arrays {missing} (it has {f.files}); expected {FILE_FORMAT}"
            )
        try:
            return f["X"], f["y"]
        except ValueError:  # object arrays, which are not read without allow_pickle
            raise ValueError(
                f"data: {path} holds arrays of Python objects; expected {FILE_FORMAT}"
            ) from None


def _class_codes(y: np.ndarray, where: str, hint: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Labels as codes ``0..C-1`` (the sorted distinct values) and the values as class names."""
    if y.ndim != 1:
        raise ValueError(f"data: the labels ({where}) must be one value per row, got shape {y.shape}")
    if y.dtype.kind in "iub":
        y = y.astype(np.int64)
    elif y.dtype.kind == "f":
        bad = ~np.isfinite(y) | (y != np.round(y))
        if bad.any():
            raise ValueError(
                f"data: the labels ({where}) must be class codes (whole numbers), got {y[bad][:3].tolist()}"
                f"{hint}"
            )
    elif y.dtype.kind not in "US":
        raise ValueError(f"data: the labels ({where}) must be class codes, got dtype {y.dtype}")
    values, codes = np.unique(y, return_inverse=True)
    if values.size < 2:
        raise ValueError(
            f"data: the labels ({where}) hold one class only ({values.tolist()}); need two or more{hint}"
        )
    if values.size > MAX_CLASSES:
        raise ValueError(
            f"data: the labels ({where}) have {values.size} distinct values, more than the {MAX_CLASSES} "
            f"classes a label column may have{hint or ': are they classes?'}"
        )
    names = tuple(str(int(v)) if y.dtype.kind == "f" else str(v) for v in values)
    return codes.astype(np.int64), names


def read_labelled(path: str, label: str | None) -> LabelledFile:
    """A user's CSV file (label column ``label``, default the last) or .npz archive (arrays X and y), checked
    (ValueError naming the option: ``data: ...``, ``label ...``; OSError for a file that cannot be opened)."""
    from certkit._validation import check_array
    from certkit.datasets import Dataset

    with open(path, "rb") as handle:
        npz = path.endswith(".npz") or handle.read(4) == b"PK\x03\x04"
    if npz:
        if label is not None:
            raise ValueError("label names a CSV column; an .npz archive holds the arrays X and y")
        X, y = _read_npz(path)
        where, columns, hint = "arrays X and y", None, ""
    else:
        X, y, where, columns, hint = _read_csv(path, label)
    X = check_array(X, "data X", ndim=2)
    if X.shape[1] < 1 or X.shape[0] < 2:
        raise ValueError(f"data: {path} needs at least 2 rows and 1 feature column, got {X.shape}")
    y = np.asarray(y)
    if y.shape[:1] != X.shape[:1]:
        raise ValueError(
            f"data: {path} has {X.shape[0]} rows of features but {y.shape[0] if y.ndim else 0} labels"
        )
    codes, names = _class_codes(y, where, hint)
    features = columns or tuple(f"x{j}" for j in range(X.shape[1]))
    data = Dataset(os.path.basename(path), X, codes, features, names, path)
    return LabelledFile(data, where, columns, y.dtype.kind in "iubf")
