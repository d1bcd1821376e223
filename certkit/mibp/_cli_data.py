"""The data of ``certkit mibp``: the built-in data sets and a user's CSV / NPZ file, split, standardised and
encoded for the chosen loss."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DATASETS = ("two_moons", "iris2", "iris3", "breast_cancer")


@dataclass(frozen=True)
class BenchmarkData:
    """Training/test split with labels in the form the hinge loss expects."""

    name: str
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_outputs: int


@dataclass(frozen=True)
class _Classes:
    """A standardised training/test split with class codes ``0..n_classes-1``."""

    name: str
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    class_names: tuple[str, ...] = ()


def _standardise(
    X: np.ndarray, X_test: np.ndarray, names: tuple[str, ...] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Both parts centred and scaled with the training part's mean and standard deviation (constant
    columns are only centred); a column whose statistics or standardised values overflow float64 is a
    ValueError naming it (``names``: the feature columns' names)."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean, std = X.mean(axis=0), X.std(axis=0)
        scale = np.where(std > 0, std, 1.0)
        train, test = (X - mean) / scale, (X_test - mean) / scale
    finite = (
        np.isfinite(mean) & np.isfinite(std) & np.isfinite(train).all(axis=0) & np.isfinite(test).all(axis=0)
    )
    if not finite.all():
        j = int(np.flatnonzero(~finite)[0])
        column = f"column {names[j]!r}" if names is not None else f"feature column {j}"
        largest = float(max(np.max(np.abs(X[:, j])), np.max(np.abs(X_test[:, j]), initial=0.0)))
        raise ValueError(
            f"data: {column} cannot be standardised in float64: its values reach {largest:.3g}, so its mean "
            "or standard deviation overflows; rescale the column (e.g. divide it by a power of ten)"
        )
    return train, test


def _builtin(name: str, *, rng: int = 0, test_size: float = 0.25, standardise: bool = True) -> _Classes:
    """A built-in set, split; the tabular ones standardised unless ``standardise=False`` (two moons never)."""
    from certkit import datasets

    if name == "two_moons":
        ds = datasets.load_two_moons(n_train=100, n_test=200, noise=0.1, rng=rng)
        return _Classes(name, ds.X_train, ds.y_train, ds.X_test, ds.y_test, 2, tuple(ds.target_names))
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; expected one of {DATASETS}")
    full = {
        "iris2": lambda: datasets.load_iris(binary=True),
        "iris3": datasets.load_iris,
        "breast_cancer": datasets.load_breast_cancer,
    }[name]()
    split = full.split(test_size=test_size, rng=rng)
    X, X_test = split.X_train, split.X_test
    if standardise:
        X, X_test = _standardise(X, X_test)
    names = tuple(full.target_names)
    return _Classes(name, X, split.y_train, X_test, split.y_test, len(names), names)


def load_data(name: str, *, rng: int = 0, test_size: float = 0.25) -> BenchmarkData:
    """Load ``two_moons`` (100 train / 200 test, noise 0.1), ``iris2`` (versicolor vs virginica),
    ``iris3`` or ``breast_cancer``; tabular features are standardised (zero mean, unit variance) with the
    training split's statistics (``test_size`` of the rows held out), two moons is left in its raw
    coordinates.

    Binary sets get labels in {-1, +1} (one output), ``iris3`` integer labels (three outputs).
    """
    data = _builtin(name, rng=rng, test_size=test_size)
    y, y_test, n_out = _encode(data, "hinge")
    return BenchmarkData(name, data.X, y, data.X_test, y_test, n_out)


def load_file(
    path: str, *, label: str | None = None, test_size: float = 0.25, rng: int = 0, standardise: bool = True
) -> _Classes:
    """A user's labelled data (`certkit._labelled_file.read_labelled`): a stratified split (``test_size`` held
    out, seed ``rng``), standardised with the training part's statistics (unless ``standardise=False``),
    labels as class codes (ValueError naming the option on bad input)."""
    from certkit._labelled_file import read_labelled

    read = read_labelled(path, label)
    full = read.data
    split = full.split(test_size=test_size, rng=rng)
    Xtr, Xte = split.X_train, split.X_test
    if standardise:
        Xtr, Xte = _standardise(Xtr, Xte, read.columns)
    return _Classes(
        f"{full.name} ({read.where})", Xtr, split.y_train, Xte, split.y_test, len(full.target_names),
        full.target_names,
    )


_WEIGHTS_FORMAT = (
    "an .npz archive (numpy.savez) of the arrays W0, b0, W1, b1, ... (layer l: W<l> of shape (outputs, "
    "inputs) as in torch.nn.Linear, b<l> of shape (outputs,)), or a PyTorch state dict of an nn.Sequential "
    "of Linear and ReLU layers saved with torch.save(net.state_dict(), FILE)"
)


def load_weights(path: str, n_features: int, n_outputs: int, outputs_for: str) -> object:
    """The initial network from a user's weights file, checked against the data (ValueError naming --weights).

    ``outputs_for`` says in words why the data and loss need ``n_outputs`` outputs.
    """
    import zipfile

    from certkit.mibp import MLP

    with open(path, "rb"):  # a missing file is an OSError naming it
        pass
    npz = zipfile.is_zipfile(path) and all(n.endswith(".npy") for n in zipfile.ZipFile(path).namelist())
    if npz or path.endswith(".npz"):
        weights, biases = _npz_layers(path)
    else:
        weights, biases = _torch_layers(path)
    try:
        model = MLP(weights, biases)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"weights: {path}: {exc}") from None
    sizes = list(model.sizes)
    if sizes[0] != n_features:
        raise ValueError(
            f"weights: {path} has layer sizes {sizes}: its first layer takes {sizes[0]} inputs but the data "
            f"have {n_features} feature columns"
        )
    if sizes[-1] != n_outputs:
        raise ValueError(
            f"weights: {path} has layer sizes {sizes}: its last layer has {sizes[-1]} outputs but "
            f"{outputs_for} needs {n_outputs}"
        )
    return model


def _npz_layers(path: str) -> tuple[list, list]:
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, OSError):
        raise ValueError(f"weights: {path} is not {_WEIGHTS_FORMAT}") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError(f"weights: {path} holds a single array; expected {_WEIGHTS_FORMAT}")
    with loaded as f:
        names = sorted(f.files)
        layers = sum(1 for k in names if k.startswith("W"))
        expected = sorted([f"W{i}" for i in range(layers)] + [f"b{i}" for i in range(layers)])
        if not layers or names != expected:
            raise ValueError(f"weights: {path} holds the arrays {names}; expected {_WEIGHTS_FORMAT}")
        try:
            return [f[f"W{i}"] for i in range(layers)], [f[f"b{i}"] for i in range(layers)]
        except ValueError:  # object arrays, which are not read without allow_pickle
            raise ValueError(
                f"weights: {path} holds arrays of Python objects; expected {_WEIGHTS_FORMAT}"
            ) from None


def _torch_layers(path: str) -> tuple[list, list]:
    from certkit._optional import require

    torch = require("torch", extra="torch", purpose="--weights with a PyTorch state dict")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds (UnpicklingError, RuntimeError, EOFError, ...)
        raise ValueError(
            f"weights: {path} could not be read as a state dict ({type(exc).__name__}); expected "
            f"{_WEIGHTS_FORMAT} (a whole pickled module is not read: save net.state_dict())"
        ) from None
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f"weights: {path} holds a {type(state).__name__}; expected {_WEIGHTS_FORMAT}")
    weights, biases, prefixes = [], [], []
    for key, value in state.items():
        prefix, _, kind = key.rpartition(".")
        if kind == "weight" and value.ndim == 2:
            prefixes.append(prefix)
            weights.append(value.detach().double().numpy())
            biases.append(np.zeros(value.shape[0]))  # nn.Linear(bias=False) until its bias is read
        elif kind == "bias" and value.ndim == 1 and prefixes and prefix == prefixes[-1]:
            biases[-1] = value.detach().double().numpy()
        else:
            raise ValueError(
                f"weights: {path} holds {key!r} (shape {tuple(value.shape)}), which is not a Linear layer's "
                "weight or bias; certkit mibp trains networks of Linear and ReLU layers"
            )
    if not weights:
        raise ValueError(f"weights: {path} holds no Linear layer; expected {_WEIGHTS_FORMAT}")
    return weights, biases


def _encode(data: _Classes, loss: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Training labels as ``loss`` expects them, test labels as `MLP.predict` returns them, the outputs.

    Binary data: one output with {-1, +1} (hinge, MSE) or {0, 1} (binary cross-entropy), two outputs with
    0/1 for cross-entropy; ``C > 2`` classes: ``C`` outputs, codes ``0..C-1`` (one-hot targets for MSE).
    """
    C, y, y_test = data.n_classes, data.y, data.y_test
    if loss == "binary_cross_entropy":
        if C != 2:
            raise ValueError(
                f"loss binary_cross_entropy needs two classes, the data have {C}: use --loss cross_entropy"
            )
        return y.astype(np.float64), 2 * y_test - 1, 1
    if C == 2 and loss != "cross_entropy":
        return 2.0 * y - 1.0, 2 * y_test - 1, 1
    if loss == "mse":
        return np.eye(C)[y], y_test, C
    return y, y_test, C
