"""Benchmark of certkit.causal: causal mixture models against PC, GES, DirectLiNGAM and GMM clustering.

Sections (each timed in this process; the machine may be shared, so wall times are upper bounds):

1. EM kernel: C++ (``certkit._core.mixreg.em``) against the two best vectorised NumPy formulations of
   the same EM (per-component BLAS Gram ``(r * Phi)' Phi``; square-root-weighted least squares), the
   same starting responsibilities and the same number of iterations, BLAS limited to one thread.
2. Synthetic: ``make_mixture_sem`` defaults (d = 10, n = 500, edge probability 0.4, one latent Z with
   two groups switching 3 nodes), ``--seeds`` seeds: SHD, edge F1 and group ARI (CMM's mixing-set
   labels with the largest overlap with the true set; GMM: scikit-learn GaussianMixture on all
   variables with K <= 5 chosen by BIC). Undirected CPDAG edges of PC / GES count as both directions.
3. Sachs (log data, 7466 x 11): edge F1 / SHD against the 18-edge consensus graph (cdt 0.6.0) and AMI
   of CMM's group labels (best mixing set) and of GMM clusters with the 9 experimental conditions.
4. Scaling of CMM's end-to-end fit in d (n = 500) and n (d = 10), and d = 20, n = 2000 with 2 workers.

Run: ``python benchmarks/causal.py [--seeds 10] [--quick]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import best_time
from scipy.special import logsumexp
from threadpoolctl import threadpool_limits

from certkit._core import mixreg
from certkit._results import format_table
from certkit.causal import CausalMixtureModel, ami, ari, edge_f1, make_mixture_sem, shd
from certkit.causal.baselines import run_direct_lingam, run_ges, run_pc
from certkit.causal.mixture_regression import RIDGE, initial_responsibilities
from certkit.datasets import load_sachs

SACHS_OPTIONS = {"search_samples": 2000, "executor": 2}


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


def bench_em(repeats: int) -> list[list]:
    return [_em_row(n, q, K, repeats) for n, q, K in [(2000, 2, 3), (7466, 3, 5)]]


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


# --- 3. Sachs ---


def bench_sachs() -> list[list]:
    ds = load_sachs()
    X = np.log(ds.X)
    A = ds.adjacency
    rows = []
    start = time.perf_counter()
    model = CausalMixtureModel(rng=0, **SACHS_OPTIONS).fit(X)
    elapsed = time.perf_counter() - start
    best_ami = max(
        (ami(ds.experiment, model.group_labels_[:, m]) for m in range(len(model.mixing_sets_))), default=0.0
    )
    rows.append(
        ["CMM", edge_f1(A, model.adjacency_), shd(A, model.adjacency_), f"{best_ami:.3f}", f"{elapsed:.1f}"]
    )
    for name, fn in [("GES", run_ges), ("PC", run_pc), ("DirectLiNGAM", run_direct_lingam)]:
        start = time.perf_counter()
        est = fn(X)
        rows.append([name, edge_f1(A, est), shd(A, est), "-", f"{time.perf_counter() - start:.1f}"])
    start = time.perf_counter()
    gmm = ami(ds.experiment, _gmm_labels(X, 0))
    rows.append(["GMM (clustering only)", "-", "-", f"{gmm:.3f}", f"{time.perf_counter() - start:.1f}"])
    return rows


# --- 4. scaling ---


def bench_scaling(quick: bool) -> list[list]:
    rows = []
    settings = [(5, 500, None), (10, 500, None), (20, 500, None), (10, 1000, None), (10, 2000, None)]
    if not quick:
        settings.append((20, 2000, 2))
    for d, n, workers in settings:
        X, A, _ = make_mixture_sem(d, n, 0.4 if d <= 10 else 4.0 / d, rng=0)
        start = time.perf_counter()
        model = CausalMixtureModel(rng=0, executor=workers).fit(X)
        elapsed = time.perf_counter() - start
        rows.append(
            [d, n, workers or 1, model.n_scores_, f"{edge_f1(A, model.adjacency_):.3f}", f"{elapsed:.1f}"]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="synthetic seeds (default 10)")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats of the EM kernels (default 3)")
    parser.add_argument("--quick", action="store_true", help="skip the d = 20, n = 2000 scaling run")
    args = parser.parse_args()

    print(
        format_table(
            ["setting", "iterations", "C++ ms", "NumPy Gram ms", "NumPy lstsq ms", "best NumPy / C++"],
            bench_em(args.repeats),
            title="1. EM kernel (one thread)",
        )
    )
    rows, f1 = bench_synthetic(args.seeds)
    print()
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
    print(
        format_table(
            ["method", "edge F1", "SHD", "AMI (conditions)", "time s"],
            bench_sachs(),
            title=f"3. Sachs (log, 7466 x 11), CMM with {SACHS_OPTIONS}",
        )
    )
    print()
    print(
        format_table(
            ["d", "n", "workers", "local scores", "edge F1", "time s"],
            bench_scaling(args.quick),
            title="4. CMM scaling (end to end)",
        )
    )


if __name__ == "__main__":
    main()
