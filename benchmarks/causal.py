"""Benchmark of certkit.causal: causal mixture models against PC, GES, DirectLiNGAM and GMM clustering.

Sections (each timed in this process; the machine may be shared, so wall times are upper bounds):

1. EM kernel: C++ (``certkit._core.mixreg.em``) against the two best vectorised NumPy formulations of
   the same EM (per-component BLAS Gram ``(r * Phi)' Phi``; square-root-weighted least squares), the
   same starting responsibilities and the same number of iterations, BLAS limited to one thread.
   Also the joint EM of one latent over several nodes (``certkit._core.mixreg.joint_em``) against its
   NumPy reference (``tests/causal/_reference_joint_em.py``: one BLAS product per node for the Gram
   matrices of all groups). 1b: the Gaussian-mixture starts of the joint EM
   (``certkit._core.mixreg.gaussian_mixture``) against scikit-learn's ``GaussianMixture``, whose EM it
   takes over, and its NumPy reference (``tests/causal/_reference_gmm.py``).
2. Synthetic: ``make_mixture_sem`` defaults (d = 10, n = 500, edge probability 0.4, one latent Z with
   two groups switching 3 nodes), ``--seeds`` seeds: SHD, edge F1 and group ARI (CMM's mixing-set
   labels with the largest overlap with the true set; GMM: scikit-learn GaussianMixture on all
   variables with K <= 5 chosen by BIC). Undirected CPDAG edges of PC / GES count as both directions.
2b. Hidden groups: ``shift_sem`` (written here, independent of ``make_mixture_sem``), 8 settings (K = 2
   and 3, balanced and unbalanced, strong and weak shifts), ``--seeds`` seeds each: ARI of CMM's
   best-matching mixing variable against GaussianMixture with the true K and with K by BIC, K accuracy
   on the switched nodes, edge F1; then runs without any latent that report K > 1.
2c. Nonlinear synthetic (``--only nonlinear``, in ``_causal_nonlinear.py``): additive tanh / square /
   sine mechanisms, a hidden Z switching 2-3 nodes, K = 2 and 3, strong and weak shifts, ``--seeds``
   seeds each (3 with ``--quick``): edge F1 of certkit linear / spline, GES, DirectLiNGAM; group ARI of
   certkit and a GMM with the true K; the issue-29 acceptance checks, and the default (``"auto"``)
   against GES + 0.1.
2d. Invariance (``--only invariance``, in ``_causal_invariance.py``): the default fit under rng 0-3 and a
   row permutation on a user's nonlinear data, nonlinear and linear generators: distinct answers, edge
   F1, the reached-best-BIC share (against fits with other start keys) and the time against the linear fit;
   with ``--baseline-python`` (an install of the commit before issue 37) the time against that install's
   default, the issue's target (each fit in a fresh process, alternating, best of ``--repeats``).
3. Sachs (log data, 7466 x 11): directed and skeleton edge F1 / SHD against the 18-edge consensus graph
   (cdt 0.6.0), AMI / ARI of CMM's group labels (best mixing variable, and all of them jointly) and of
   GMM clusters (K = 9, K by BIC) with the 9 experimental conditions, and the search objective of CMM's
   graph against the consensus graph's.
3a/3b. Sachs leaderboard (``--only leaderboard``, in ``_causal_sachs.py``): certkit linear and spline
   against causal-learn GES and PC, DirectLiNGAM (``lingam``), NOTEARS (``gcastle``) and a GMM, on all
   nine conditions and on the reference implementation's protocol (5846 rows, per intervened node AMI);
   the spline / linear fit time ratio. Peers that cannot run print "unavailable (reason)".
4. Scaling of CMM's end-to-end fit in d (n = 500) and n (d = 10), and d = 20, n = 2000 with 2 workers.
5. Speed against another install (``--baseline-python``, e.g. a venv with an earlier commit of main):
   the Sachs fit of ``examples/causal_sachs.py`` (``search_samples=2000``, ``executor=2``) and the same
   fit serially, each in a fresh process of this interpreter and of the baseline's, alternating, best of
   ``--repeats``; wall seconds and the ratio.
6. Executor (``--only executor``, in ``_causal_executor.py``): the default fit with ``executor=2`` against
   the serial fit in one run (small, medium and, without ``--quick``, large generated and Sachs data):
   wall seconds, their ratio, the same fit, the chunks the pool got; then the serial throughput of local
   scores and the dispatch cost of a chunk that the batch threshold rests on.

Run: ``python benchmarks/causal.py [--seeds 10] [--quick]
[--only em,synthetic,groups,nonlinear,invariance,sachs,leaderboard,scaling,speed,executor]
[--baseline-python PATH]``.
All sections but 5 and 6 took 21 min wall (18 CPU min) on the shared 2-core machine at load average 4-6, of
which NOTEARS on the two Sachs data sets 10 min and the nonlinear section 3 min; ``--only`` and
``--quick`` shorten it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _causal_executor import HEADERS as EXECUTOR_HEADERS
from _causal_executor import bench_executor
from _causal_invariance import BASELINE_HEADERS, SPLIT_HEADERS, bench_baseline, bench_invariance
from _causal_invariance import HEADERS as INVARIANCE_HEADERS
from _causal_nonlinear import GRAPH_METHODS, GROUP_METHODS, bench_nonlinear
from _causal_sachs import bench_leaderboard
from _timing import best_time, run_fresh
from scipy.special import logsumexp
from threadpoolctl import threadpool_limits

from certkit._core import mixreg
from certkit._results import format_table
from certkit.causal import CausalMixtureModel, ami, ari, edge_f1, make_mixture_sem, shd
from certkit.causal.baselines import run_direct_lingam, run_ges, run_pc
from certkit.causal.mixture_regression import RIDGE, initial_responsibilities
from certkit.causal.score import ScoreSettings, fit_node
from certkit.datasets import load_sachs

SACHS_OPTIONS = {"search_samples": 2000, "executor": 2, "max_groups": 10}


# --- 1. EM kernel ---


def _numpy_em(y, design, resp, n_iter, min_variance, solve):
    n, p = design.shape
    for _ in range(n_iter + 1):
        count = resp.sum(axis=0)
        coef = np.stack([solve(design, y, resp[:, k], p) for k in range(resp.shape[1])])
        resid = y[:, None] - design @ coef.T
        variance = np.maximum((resp * resid**2).sum(axis=0) / count, min_variance)
        logp = np.log(count / n) - 0.5 * (np.log(2 * np.pi * variance) + resid**2 / variance)
        lse = logsumexp(logp, axis=1)
        resp = np.exp(logp - lse[:, None])
    return float(lse.sum())


def _solve_gram(design, y, r, p):
    weighted = design * r[:, None]
    gram = weighted.T @ design
    return np.linalg.solve(gram + RIDGE * np.trace(gram) / p * np.eye(p), weighted.T @ y)


def _solve_lstsq(design, y, r, p):
    root = np.sqrt(r)
    return np.linalg.lstsq(design * root[:, None], y * root, rcond=None)[0]


def _em_row(n: int, q: int, K: int, repeats: int) -> list:
    gen = np.random.default_rng(0)
    X = gen.normal(size=(n, q))
    y = X @ gen.normal(size=q) + 2.0 * gen.integers(0, K, n) + 0.5 * gen.normal(size=n)
    design = np.column_stack([np.ones(n), X])
    resp0 = initial_responsibilities(y, design, K, 1, gen)[0]
    floor = 1e-3 * y.var()
    with threadpool_limits(1):
        t_cpp, out = best_time(
            lambda: mixreg.em(y, design, resp0, max_iter=50, tol=0.0, ridge=RIDGE, min_variance=floor),
            repeats,
        )
        iters = out["loglik_trace"].size - 1
        t_gram, _ = best_time(lambda: _numpy_em(y, design, resp0, iters, floor, _solve_gram), repeats)
        t_lstsq, _ = best_time(lambda: _numpy_em(y, design, resp0, iters, floor, _solve_lstsq), repeats)
    ratio = min(t_gram, t_lstsq) / t_cpp
    return [f"n={n}, p={q + 1}, K={K}", iters, t_cpp * 1e3, t_gram * 1e3, t_lstsq * 1e3, f"{ratio:.1f}x"]


def _joint_row(n: int, m: int, K: int, repeats: int) -> list:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "causal"))
    from _reference_joint_em import reference_joint_em

    gen = np.random.default_rng(1)
    z = gen.integers(0, K, n)
    X = gen.normal(size=(n, 2))
    Y = np.column_stack([X @ gen.normal(size=2) + 2.0 * z + gen.normal(size=n) for _ in range(m)])
    designs = [np.column_stack([np.ones(n), X[:, : 1 + j % 2]]) for j in range(m)]
    resp0 = gen.dirichlet(np.ones(K), size=n)
    floors = 1e-3 * Y.var(axis=0)
    with threadpool_limits(1):
        options = {"tol": 0.0, "ridge": RIDGE, "min_variance": floors}
        t_cpp, out = best_time(lambda: mixreg.joint_em(Y, designs, resp0, max_iter=50, **options), repeats)
        iters = out["loglik_trace"].size - 1
        t_np, _ = best_time(
            lambda: reference_joint_em(Y, designs, resp0, floors, max_iter=iters, tol=0.0), repeats
        )
    return [f"joint: n={n}, {m} nodes, K={K}", iters, t_cpp * 1e3, t_np * 1e3, "-", f"{t_np / t_cpp:.1f}x"]


def bench_em(repeats: int) -> list[list]:
    rows = [_em_row(n, q, K, repeats) for n, q, K in [(2000, 2, 3), (7466, 3, 5)]]
    return rows + [_joint_row(n, m, K, repeats) for n, m, K in [(1000, 4, 3), (7466, 10, 9)]]


def _gmm_row(n: int, d: int, K: int, covariance: str, repeats: int) -> list:
    """One Gaussian-mixture start of the joint EM: the kernel (with scikit-learn's k-means++ centres)
    against scikit-learn's ``GaussianMixture`` it replaces and the kernel's NumPy reference."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "causal"))
    from _reference_gmm import reference_gaussian_mixture

    from certkit.causal.starts import (
        GMM_MAX_ITER,
        GMM_REG_COVAR,
        GMM_TOL,
        _kmeans_plusplus_centres,
        gaussian_mixture_proba,
    )

    gen = np.random.default_rng(2)
    X = 2.0 * gen.integers(0, K, n)[:, None] + gen.normal(size=(n, d)) @ gen.uniform(0.3, 1.0, (d, d))
    X = (X - X.mean(axis=0)) / X.std(axis=0)

    def sklearn_fit():
        gmm = GaussianMixture(K, covariance_type=covariance, init_params="k-means++", random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return gmm.fit(X).predict_proba(X)

    def reference_fit():
        centres = _kmeans_plusplus_centres(X, K, 0)
        options = {"max_iter": GMM_MAX_ITER, "tol": GMM_TOL, "reg_covar": GMM_REG_COVAR}
        return reference_gaussian_mixture(X, centres, X, full=covariance == "full", **options)

    with threadpool_limits(1):
        t_cpp, ours = best_time(lambda: gaussian_mixture_proba(X, slice(None), K, covariance, 0), repeats)
        t_sk, theirs = best_time(sklearn_fit, repeats)
        t_np, ref = best_time(reference_fit, repeats)
    return [
        f"n={n}, d={d}, K={K}, {covariance}", ref["n_iter"], t_cpp * 1e3, t_sk * 1e3, t_np * 1e3,
        f"{t_sk / t_cpp:.1f}x", f"{np.abs(ours - theirs).max():.1e}",
    ]


def bench_gmm(repeats: int) -> list[list]:
    return [
        _gmm_row(n, d, K, covariance, repeats)
        for n, d, K in [(600, 2, 2), (1500, 6, 3), (2000, 10, 5)]
        for covariance in ("diag", "full")
    ]


# --- 2. synthetic ---


def _gmm_labels(X: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.mixture import GaussianMixture

    fits = [GaussianMixture(k, n_init=3, random_state=seed).fit(X) for k in range(1, 6)]
    return min(fits, key=lambda g: g.bic(X)).predict(X)


def _cmm_group_labels(model: CausalMixtureModel, true_set: frozenset[int]) -> np.ndarray:
    if not model.mixing_sets_:
        return np.zeros(model.labels_.shape[0], dtype=int)
    best = max(range(len(model.mixing_sets_)), key=lambda m: len(model.mixing_sets_[m] & true_set))
    return model.group_labels_[:, best]


def bench_synthetic(n_seeds: int) -> tuple[list[list], dict[str, float]]:
    methods = {
        "CMM": lambda X, s: CausalMixtureModel(rng=s).fit(X).adjacency_,
        "GES": lambda X, s: run_ges(X),
        "PC": lambda X, s: run_pc(X),
        "DirectLiNGAM": lambda X, s: run_direct_lingam(X, seed=s),
    }
    stats = {name: {"shd": [], "f1": [], "time": []} for name in methods}
    aris = {"CMM": [], "GMM": []}
    for seed in range(n_seeds):
        X, A, Z, sets = make_mixture_sem(rng=seed, return_sets=True)
        for name, fn in methods.items():
            start = time.perf_counter()
            if name == "CMM":
                model = CausalMixtureModel(rng=seed).fit(X)
                est = model.adjacency_
                aris["CMM"].append(ari(Z[:, 0], _cmm_group_labels(model, sets[0])))
            else:
                est = fn(X, seed)
            stats[name]["time"].append(time.perf_counter() - start)
            stats[name]["shd"].append(shd(A, est))
            stats[name]["f1"].append(edge_f1(A, est))
        aris["GMM"].append(ari(Z[:, 0], _gmm_labels(X, seed)))
    rows = []
    for name, s in stats.items():
        group = f"{np.mean(aris[name]):.3f}" if name in aris else "-"
        rows.append(
            [
                name,
                f"{np.mean(s['shd']):.1f} ± {np.std(s['shd']):.1f}",
                f"{np.mean(s['f1']):.3f} ± {np.std(s['f1']):.3f}",
                group,
                f"{np.mean(s['time']):.2f}",
            ]
        )
    rows.append(["GMM (clustering only)", "-", "-", f"{np.mean(aris['GMM']):.3f}", "-"])
    return rows, {name: float(np.mean(s["f1"])) for name, s in stats.items()}


# --- 2b. hidden groups ---

#: (name, K, group proportions or None for balanced, shift range in noise standard deviations)
GROUP_SETTINGS = [
    ("K2 balanced strong", 2, None, (2.0, 4.0)),
    ("K2 0.75/0.25 strong", 2, (0.75, 0.25), (2.0, 4.0)),
    ("K3 balanced strong", 3, None, (2.0, 4.0)),
    ("K3 0.7/0.15/0.15 strong", 3, (0.7, 0.15, 0.15), (2.0, 4.0)),
    ("K2 balanced weak", 2, None, (0.75, 1.5)),
    ("K2 0.75/0.25 weak", 2, (0.75, 0.25), (0.75, 1.5)),
    ("K3 balanced weak", 3, None, (0.75, 1.5)),
    ("K3 0.7/0.15/0.15 weak", 3, (0.7, 0.15, 0.15), (0.75, 1.5)),
]


def shift_sem(seed: int, n_groups: int, proportions=None, shift=(2.0, 4.0), n: int = 1000):
    """A generator independent of ``make_mixture_sem``: random DAG (d = 8-10, edge probability 0.3,
    weights +-U[0.5, 1.2], noise sd U[0.5, 1]); one latent Z with ``n_groups`` values (``proportions``)
    switches 2-4 random nodes: per group new weights on the same parents and an intercept that moves by
    a cumulative ``U(shift)`` noise standard deviations. Columns standardised as generated.
    Returns X, the DAG, Z and the set of switched nodes."""
    gen = np.random.default_rng([seed, 99])
    d = int(gen.integers(8, 11))
    order = gen.permutation(d)
    A = np.zeros((d, d), dtype=np.int64)
    for a in range(d):
        for b in range(a + 1, d):
            if gen.uniform() < 0.3:
                A[order[a], order[b]] = 1
    W = A * gen.choice([-1.0, 1.0], (d, d)) * gen.uniform(0.5, 1.2, (d, d))
    p = np.full(n_groups, 1.0 / n_groups) if proportions is None else np.asarray(proportions)
    z = gen.choice(n_groups, size=n, p=p)
    changed = gen.choice(d, size=int(gen.integers(2, 5)), replace=False) if n_groups > 1 else []
    X = np.zeros((n, d))
    for v in order:
        sd = gen.uniform(0.5, 1.0)
        x = sd * gen.standard_normal(n)
        if v in changed:
            steps = gen.uniform(*shift, n_groups - 1)
            shifts = np.concatenate([[0.0], np.cumsum(steps) * gen.choice([-1.0, 1.0])])
            for k in range(n_groups):
                w = W[:, v] if k == 0 else A[:, v] * gen.choice([-1.0, 1.0], d) * gen.uniform(0.5, 1.2, d)
                rows = z == k
                x[rows] += X[rows] @ w + shifts[k] * sd
        else:
            x += X @ W[:, v]
        X[:, v] = (x - x.mean()) / x.std()
    return X, A, z, frozenset(int(v) for v in changed)


def _gmm_ari(X: np.ndarray, z: np.ndarray, seed: int, n_groups: int) -> tuple[float, float]:
    from sklearn.mixture import GaussianMixture

    fits = [GaussianMixture(k, n_init=3, random_state=seed).fit(X) for k in range(1, 6)]
    by_bic = min(fits, key=lambda g: g.bic(X))
    return ari(z, fits[n_groups - 1].predict(X)), ari(z, by_bic.predict(X))


def bench_groups(n_seeds: int) -> tuple[list[list], dict[str, float]]:
    rows, totals = [], {"CMM": [], "GMM true K": []}
    for name, K, proportions, shift in GROUP_SETTINGS:
        res = {"cmm": [], "gmm": [], "gmm_bic": [], "f1": [], "k_acc": [], "extra": []}
        for seed in range(n_seeds):
            X, A, z, changed = shift_sem(seed, K, proportions, shift)
            model = CausalMixtureModel(rng=seed).fit(X)
            # The mixing variable whose labels match Z best (0 when none was found).
            res["cmm"].append(
                max((ari(z, model.group_labels_[:, m]) for m in range(len(model.mixing_sets_))), default=0.0)
            )
            gmm, gmm_bic = _gmm_ari(X, z, seed, K)
            res["gmm"].append(gmm)
            res["gmm_bic"].append(gmm_bic)
            res["f1"].append(edge_f1(A, model.adjacency_))
            res["k_acc"].append(np.mean([model.n_components_[v] == K for v in changed]))
            grouped = {v for s in model.mixing_sets_ for v in s}
            res["extra"].append(len(grouped - changed))
        mean = {key: float(np.mean(v)) for key, v in res.items()}
        totals["CMM"].append(mean["cmm"])
        totals["GMM true K"].append(mean["gmm"])
        rows.append(
            [
                name,
                mean["cmm"],
                mean["gmm"],
                mean["gmm_bic"],
                mean["cmm"] - mean["gmm"],
                mean["k_acc"],
                mean["extra"],
                mean["f1"],
            ]
        )
    return rows, {key: float(np.mean(v)) for key, v in totals.items()}


def bench_no_mixing(n_runs: int) -> int:
    """Runs without any latent in which CMM reports a node with K > 1."""
    false = 0
    for seed in range(n_runs):
        X, _, _, _ = shift_sem(1000 + seed, 1)
        false += int(np.any(CausalMixtureModel(rng=seed).fit(X).n_components_ > 1))
    return false


# --- 3. Sachs ---


def _skeleton_f1(true: np.ndarray, est: np.ndarray) -> float:
    return edge_f1(np.triu(true | true.T), np.triu(est | est.T))


def _search_score(X: np.ndarray, adjacency: np.ndarray) -> float:
    """Sum of the nodes' latent-aware local BICs (the search's objective) for a given DAG."""
    settings = ScoreSettings(max_components=5, seed=0)
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    fits = [fit_node(Xs, j, np.flatnonzero(adjacency[:, j]), settings) for j in range(X.shape[1])]
    return float(sum(fit.bic for fit in fits))


def bench_sachs() -> tuple[list[list], str]:
    """Directed and skeleton edge F1, SHD, and AMI / ARI of labels against the 9 conditions; and the
    search objective of CMM's graph against that of the consensus graph (its one cycle broken)."""
    from sklearn.mixture import GaussianMixture

    ds = load_sachs()
    X = np.log(ds.X)
    A = ds.adjacency
    cond = ds.experiment

    def graph_row(name, est, seconds, labels=None):
        scores = ["-", "-"] if labels is None else [f"{ami(cond, labels):.3f}", f"{ari(cond, labels):.3f}"]
        return [
            name,
            f"{edge_f1(A, est):.3f}",
            f"{_skeleton_f1(A, est):.3f}",
            shd(A, est),
            *scores,
            f"{seconds:.1f}",
        ]

    start = time.perf_counter()
    model = CausalMixtureModel(rng=0, **SACHS_OPTIONS).fit(X)
    elapsed = time.perf_counter() - start
    labels = model.group_labels_
    best = max(range(labels.shape[1]), key=lambda m: ami(cond, labels[:, m]), default=None)
    rows = [
        graph_row(
            "CMM, best mixing variable",
            model.adjacency_,
            elapsed,
            labels[:, best] if best is not None else np.zeros(len(cond), dtype=int),
        )
    ]
    joint = np.unique(labels, axis=0, return_inverse=True)[1].ravel()
    rows.append(
        [
            f"CMM, all {labels.shape[1]} latents jointly ({joint.max() + 1} groups)",
            "-",
            "-",
            "-",
            f"{ami(cond, joint):.3f}",
            f"{ari(cond, joint):.3f}",
            "-",
        ]
    )
    for name, fn in [("GES", run_ges), ("PC", run_pc), ("DirectLiNGAM", run_direct_lingam)]:
        start = time.perf_counter()
        est = fn(X)
        rows.append(graph_row(name, est, time.perf_counter() - start))
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)  # the scale CMM fits on, so BICs compare
    gmm_bic = {}
    for name, ks, data in [
        ("GMM, K = 9", [9], Xs),
        ("GMM, K by BIC (1-12)", range(1, 13), Xs),
        ("GMM, K = 9, unstandardised log data", [9], X),
    ]:
        start = time.perf_counter()
        fits = [GaussianMixture(k, n_init=3, random_state=0).fit(data) for k in ks]
        best_fit = min(fits, key=lambda g: g.bic(data))
        pred = best_fit.predict(data)
        if data is Xs:
            gmm_bic[name] = best_fit.bic(Xs)
        rows.append(
            [
                name,
                "-",
                "-",
                "-",
                f"{ami(cond, pred):.3f}",
                f"{ari(cond, pred):.3f}",
                f"{time.perf_counter() - start:.1f}",
            ]
        )
    names = list(ds.feature_names)
    dag = A.copy()
    dag[names.index("PIP2"), names.index("PIP3")] = 0  # the consensus cycle PIP3 -> plcg -> PIP2 -> PIP3
    note = (
        "search objective (sum of local BICs, lower is better): "
        f"CMM's graph {_search_score(X, model.adjacency_):.0f}, "
        f"consensus graph without PIP2 -> PIP3 {_search_score(X, dag):.0f}\n"
        f"total BIC of the standardised data: CMM {model.score_:.0f} "
        f"({', '.join(str(v.n_components) for v in model.mixing_variables_)} groups), "
        + ", ".join(f"{name} {bic:.0f}" for name, bic in gmm_bic.items())
    )
    return rows, note


# --- 4. scaling ---


def bench_scaling(quick: bool) -> list[list]:
    rows = []
    settings = [(5, 500, None), (10, 500, None), (20, 500, None), (10, 1000, None), (10, 2000, None)]
    if not quick:
        settings.append((20, 2000, 2))
    for d, n, workers in settings:
        X, A, _ = make_mixture_sem(d, n, 0.4 if d <= 10 else 4.0 / d, rng=0)
        start = time.perf_counter()
        model = CausalMixtureModel(rng=0, mechanism="linear", executor=workers).fit(X)
        elapsed = time.perf_counter() - start
        rows.append(
            [d, n, workers or 1, model.n_scores_, f"{edge_f1(A, model.adjacency_):.3f}", f"{elapsed:.1f}"]
        )
    return rows


# --- 5. speed against another install ---

#: Run by each interpreter from an empty directory (so it imports its own installed certkit): one Sachs
#: fit, its wall seconds on stdout.
_SACHS_FIT = """
import sys, time
import numpy as np

def main():
    from certkit.causal import CausalMixtureModel
    from certkit.datasets import load_sachs
    X = np.log(load_sachs().X)
    workers = int(sys.argv[1])
    start = time.perf_counter()
    CausalMixtureModel(rng=0, search_samples=2000, executor=workers if workers > 1 else None).fit(X)
    print(time.perf_counter() - start)

if __name__ == "__main__":
    main()
"""


def bench_speed(baseline: str, repeats: int) -> list[list]:
    """Sachs fit times of this install and of ``baseline`` (a Python executable), alternating."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "sachs_fit.py"
        script.write_text(_SACHS_FIT)

        def run(python: str, workers: int) -> float:
            return float(run_fresh(python, str(script), str(workers), cwd=tmp).split()[-1])

        rows = []
        for workers in (2, 1):
            ours, theirs = [], []
            for _ in range(repeats):
                ours.append(run(sys.executable, workers))
                theirs.append(run(baseline, workers))
            rows.append(
                [
                    f"Sachs fit, search_samples=2000, executor={workers if workers > 1 else None}",
                    f"{min(theirs):.1f}",
                    f"{min(ours):.1f}",
                    f"{min(theirs) / min(ours):.2f}x",
                ]
            )
    return rows


SECTIONS = (
    "em", "synthetic", "groups", "nonlinear", "invariance", "sachs", "leaderboard", "scaling", "speed",
    "executor",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="synthetic seeds (default 10)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timing repeats of sections 1, 2d, 5 and 6 (default 3)"
    )
    parser.add_argument(
        "--quick", action="store_true",
        help="3 nonlinear seeds per setting; no d = 20, n = 2000 scaling run; no large data in section 6",
    )
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated sections out of {', '.join(SECTIONS)}"
    )
    parser.add_argument(
        "--baseline-python", help="Python of another certkit install, for sections 2d (its default) and 5"
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(SECTIONS):
        parser.error(f"--only: unknown section(s) {', '.join(sorted(only - set(SECTIONS)))}")
    if "speed" in only and args.baseline_python is None:
        if args.only != parser.get_default("only"):
            parser.error("--only speed needs --baseline-python")
        only.discard("speed")

    if "em" in only:
        print(
            format_table(
                ["setting", "iterations", "C++ ms", "NumPy Gram ms", "NumPy lstsq ms", "best NumPy / C++"],
                bench_em(args.repeats),
                title="1. EM kernel (one thread)",
            )
        )
        print()
        print(
            format_table(
                ["setting", "iterations", "C++ ms", "scikit-learn ms", "NumPy reference ms",
                 "scikit-learn / C++", "largest difference"],
                bench_gmm(args.repeats),
                title="1b. Gaussian-mixture start of the joint EM (one thread; C++ and NumPy with "
                "scikit-learn's k-means++ centres)",
            )
        )
        print()
    if "synthetic" in only:
        rows, f1 = bench_synthetic(args.seeds)
        print(
            format_table(
                ["method", "SHD", "edge F1", "group ARI", "time s"],
                rows,
                title=f"2. Synthetic causal mixtures ({args.seeds} seeds, d = 10, n = 500)",
            )
        )
        verdict = "beats" if f1["CMM"] > max(f1["GES"], f1["PC"]) else "does NOT beat"
        print(f"CMM mean edge F1 {f1['CMM']:.3f} {verdict} GES ({f1['GES']:.3f}) and PC ({f1['PC']:.3f})")
        print()
    if "groups" in only:
        rows, totals = bench_groups(args.seeds)
        print(
            format_table(
                [
                    "setting",
                    "CMM ARI",
                    "GMM ARI (true K)",
                    "GMM ARI (BIC K)",
                    "CMM - GMM",
                    "K accuracy",
                    "extra nodes",
                    "CMM edge F1",
                ],
                rows,
                title=f"2b. Hidden groups ({args.seeds} seeds per setting, d = 8-10, n = 1000, 2-4 switched "
                "nodes; CMM: its mixing variable that matches Z best; K accuracy: switched nodes with "
                "K = true K; extra nodes: nodes in mixing sets that Z does not switch)",
            )
        )
        print(
            f"mean ARI over all settings: CMM {totals['CMM']:.3f}, "
            f"GMM with the true K {totals['GMM true K']:.3f}"
        )
        runs = max(20, 2 * args.seeds)
        print(f"no latent at all: {bench_no_mixing(runs)} of {runs} runs report a node with K > 1")
        print()
    if "nonlinear" in only:
        seeds = min(args.seeds, 3) if args.quick else args.seeds
        rows, times, checks = bench_nonlinear(seeds)
        print(
            format_table(
                ["setting", *(f"F1 {m}" for m in GRAPH_METHODS), *(f"ARI {m}" for m in GROUP_METHODS)],
                rows,
                title=f"2c. Nonlinear synthetic ({seeds} seeds per setting, d = 8-9, n = 1000, additive "
                "tanh / square / sine mechanisms, one Z switching 2-3 nodes; mean row: over the settings)",
            )
        )
        print("\n".join([times, *checks]))
        print()
    if "invariance" in only:
        rows, lines, split = bench_invariance(shift_sem)
        print(
            format_table(
                INVARIANCE_HEADERS,
                rows,
                title="2d. Invariance of the default fit: rng 0-3 and one row permutation per data set",
            )
        )
        print("\n".join(lines))
        print()
        print(
            format_table(
                SPLIT_HEADERS,
                split,
                title="2d. Where the default fit's time goes: CPU s of each fit of auto (graph search / "
                "mixing-set search), rng 0",
            )
        )
        print()
        if args.baseline_python is None:
            print("the time against the previous default (the issue's target) needs --baseline-python")
        else:
            rows, lines = bench_baseline(shift_sem, args.baseline_python, args.repeats)
            print(
                format_table(
                    BASELINE_HEADERS,
                    rows,
                    title=f"2d. The default against the default of {args.baseline_python} (fresh process "
                    f"each, alternating, best of {args.repeats})",
                )
            )
            print("\n".join(lines))
        print()
    if "sachs" in only:
        rows, note = bench_sachs()
        print(
            format_table(
                ["method", "edge F1", "skeleton F1", "SHD", "AMI (conditions)", "ARI (conditions)", "time s"],
                rows,
                title=f"3. Sachs (log, 7466 x 11), CMM with {SACHS_OPTIONS}",
            )
        )
        print(note)
        print()
    if "leaderboard" in only:
        tables, speed = bench_leaderboard(SACHS_OPTIONS)
        for headers, rows, title, unavailable in tables:
            print("\n".join([format_table(headers, rows, title=title), *unavailable]))
            print()
        print(speed)
        print()
    if "scaling" in only:
        print(
            format_table(
                ["d", "n", "workers", "local scores", "edge F1", "time s"],
                bench_scaling(args.quick),
                title="4. CMM scaling (end to end)",
            )
        )
        print()
    if "speed" in only:
        print(
            format_table(
                ["setting", "baseline s", "this install s", "baseline / this"],
                bench_speed(args.baseline_python, args.repeats),
                title=f"5. Speed against {args.baseline_python} (fresh process each, best of {args.repeats})",
            )
        )
        print()
    if "executor" in only:
        rows, lines = bench_executor(args.repeats, args.quick)
        print(
            format_table(
                EXECUTOR_HEADERS,
                rows,
                title="6. The default fit with executor=2 against the serial fit (wall s, the same process, "
                f"alternating; best of {args.repeats} on the small and medium data, one run on the large)",
            )
        )
        print("\n".join(lines))


if __name__ == "__main__":
    main()
