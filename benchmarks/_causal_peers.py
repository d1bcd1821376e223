"""The methods the causal benchmarks compare, each behind one call that returns a DAG / CPDAG adjacency
(``A[i, j] = 1`` for ``i -> j``; an undirected CPDAG edge counts as both directions) or group labels.

Peers are optional: a peer whose package is missing, or that raises, is reported as
``unavailable (reason)`` and the benchmark goes on without it. Install them with
``pip install lingam gcastle`` (benchmark only, not an extra of certkit: lingam 1.13 pins
``scipy<=1.13.1``, so pip downgrades scipy and numpy; reinstall the versions you had afterwards,
DirectLiNGAM runs with scipy 1.17 and numpy 2.4 here).

* certkit linear / spline: ``CausalMixtureModel(mechanism=...)``; the spline column runs once the
  installed certkit accepts ``mechanism="spline"`` (checked by fitting a tiny data set).
* GES and PC: causal-learn (linear-Gaussian BIC; Fisher-z tests at 0.05), via ``certkit.causal.baselines``.
* DirectLiNGAM: the ``lingam`` package (its default pruning, adaptive lasso).
* NOTEARS: the ``gcastle`` package's linear NOTEARS (its defaults: l2 loss, lambda1 = 0.1, weights
  thresholded at 0.3).
* GMM: scikit-learn ``GaussianMixture`` (full covariance, ``n_init=3``) on all columns.
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
import warnings
from collections.abc import Callable, Iterator

import numpy as np

from certkit.causal import CausalMixtureModel
from certkit.causal.baselines import run_ges, run_pc


class Unavailable(Exception):
    """A method that cannot run here; the message is the reason."""


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No warnings, prints or log records below WARNING (gcastle logs every NOTEARS iteration)."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.INFO)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


def run_direct_lingam(X: np.ndarray, seed: int) -> np.ndarray:
    try:
        import lingam
    except ImportError as exc:
        raise Unavailable(f"pip install lingam ({exc})") from exc
    with _quiet():
        model = lingam.DirectLiNGAM(random_state=seed).fit(X)
    return (model.adjacency_matrix_.T != 0).astype(np.int64)  # lingam: B[i, j] != 0 for j -> i


def run_notears(X: np.ndarray, seed: int) -> np.ndarray:
    del seed  # gcastle's linear NOTEARS is deterministic (L-BFGS-B from zero weights)
    try:
        with _quiet():
            from castle.algorithms import Notears
    except ImportError as exc:
        raise Unavailable(f"pip install gcastle ({exc})") from exc
    model = Notears()
    with _quiet():
        model.learn(X)
    return (np.asarray(model.causal_matrix) != 0).astype(np.int64)  # W[i, j] != 0 for i -> j


def _causal_learn(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray, int], np.ndarray]:
    def run(X: np.ndarray, seed: int) -> np.ndarray:
        del seed
        try:
            return fn(X)
        except ImportError as exc:
            raise Unavailable(str(exc)) from exc

    return run


#: Graph peers by name, each ``fn(X, seed) -> adjacency``.
GRAPH_PEERS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "GES (causal-learn)": _causal_learn(run_ges),
    "PC (causal-learn)": _causal_learn(run_pc),
    "DirectLiNGAM (lingam)": run_direct_lingam,
    "NOTEARS (gcastle)": run_notears,
}


def spline_unavailable() -> str | None:
    """None when this certkit fits ``mechanism="spline"``, else why not."""
    gen = np.random.default_rng(0)
    x = gen.normal(size=300)
    X = np.column_stack([x, np.tanh(2 * x) + 0.3 * gen.normal(size=300)])
    try:
        CausalMixtureModel(max_components=2, mechanism="spline", rng=0).fit(X)
    except (TypeError, ValueError, NotImplementedError) as exc:
        return f"this certkit does not fit mechanism='spline': {type(exc).__name__}: {exc}"
    return None


def fit_certkit(X: np.ndarray, mechanism: str, seed: int, **options) -> CausalMixtureModel:
    """``CausalMixtureModel`` with ``mechanism`` (``"default"``: the estimator's default, no keyword)."""
    extra = {} if mechanism == "default" else {"mechanism": mechanism}
    return CausalMixtureModel(rng=seed, **extra, **options).fit(X)


def gmm_labels(X: np.ndarray, n_groups: int, seed: int) -> np.ndarray:
    from sklearn.mixture import GaussianMixture

    return GaussianMixture(n_groups, n_init=3, random_state=seed).fit(X).predict(X)


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    """``fn()`` and its wall seconds; ``Unavailable`` and any other exception propagate."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def try_run(fn: Callable[[], object]) -> tuple[object | None, float, str | None]:
    """``(result, seconds, None)``, or ``(None, nan, "unavailable (reason)")`` when ``fn`` cannot run
    (a missing package) or fails (the exception named)."""
    try:
        out, seconds = timed(fn)
    except Unavailable as exc:
        return None, float("nan"), f"unavailable ({exc})"
    except Exception as exc:  # a peer's own failure must not end the benchmark; it is printed
        return None, float("nan"), f"unavailable ({type(exc).__name__}: {exc})"
    return out, seconds, None
