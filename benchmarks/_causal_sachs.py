"""Sachs leaderboard (issue 29 item 3) and the spline-to-linear fit time ratio on Sachs (item 5).

Every method gets the same data, ``log`` of the abundances standardised per column (the log as in
the rest of certkit's Sachs analyses; the reference reads its own copy of the data), and is scored
against the same graph:

* **All nine conditions** (7,466 cells): the 18-edge consensus graph shipped by cdt 0.6.0
  (``load_sachs().adjacency``, which has the cycle PIP3 -> plcg -> PIP2 -> PIP3); groups: AMI with the
  nine conditions.
* **The reference's protocol** (srhmm/causalchange, Sachs preprocessing of mixture_mec): experiments
  1-2 (cd3cd28, cd3cd28icam2) as observational plus experiments 3-7 (5,846 cells), each of 3-7 an
  intervention on one node (Akt inhibitor -> Akt, G0076 -> PKC, Psitectorigenin -> PIP2, U0126 -> Mek,
  LY294002 -> PIP3); its 18-edge graph is the consensus graph with PIP2 -> PIP3 reversed (a DAG); for
  each intervened node, the AMI between that node's mixing labels and intervened-vs-not. A GMM has
  one labelling for all nodes (as the reference scores its Gaussian-mixture peer), with K = 6 (the
  observational regime and five interventions).

Directed F1 counts an undirected CPDAG edge (PC, GES) as both directions; skeleton F1 ignores
directions; SHD counts a missing, extra or reversed edge once per node pair.
"""

from __future__ import annotations

import numpy as np
from _causal_peers import GRAPH_PEERS, fit_certkit, gmm_labels, spline_unavailable, timed, try_run

from certkit.causal import ami, edge_f1, shd
from certkit.causal.score import ScoreSettings, fit_node
from certkit.datasets import load_sachs

#: The intervened node of each interventional condition (the reference's targets, certkit's names).
INTERVENTIONS = {
    "cd3cd28+aktinhib": "pakts473",
    "cd3cd28+g0076": "PKC",
    "cd3cd28+psitect": "PIP2",
    "cd3cd28+u0126": "pmek",
    "cd3cd28+ly": "PIP3",
}
OBSERVATIONAL = ("cd3cd28", "cd3cd28icam2")
SHORT = {"pakts473": "Akt", "pmek": "Mek"}
#: certkit's rows: the default (``mechanism="auto"``: a spline only where the BIC asks for one) and both
#: fixed mechanisms.
MECHANISMS = ("auto", "linear", "spline")


def _standardise(X: np.ndarray) -> np.ndarray:
    return (X - X.mean(axis=0)) / X.std(axis=0)


def skeleton_f1(true: np.ndarray, est: np.ndarray) -> float:
    return edge_f1(np.triu(true | true.T), np.triu(est | est.T))


def sachs_cases() -> dict[str, dict]:
    """The two data sets with their graphs and group truths."""
    ds = load_sachs()
    names = list(ds.feature_names)
    conditions = list(ds.experiment_names)
    X = _standardise(np.log(ds.X))
    keep = np.isin(ds.experiment, [conditions.index(c) for c in (*OBSERVATIONAL, *INTERVENTIONS)])
    reference = ds.adjacency.copy()
    reference[names.index("PIP2"), names.index("PIP3")] = 0
    reference[names.index("PIP3"), names.index("PIP2")] = 1
    sub = ds.experiment[keep]
    targets = {
        names.index(node): (sub == conditions.index(cond)).astype(int) for cond, node in INTERVENTIONS.items()
    }
    return {
        "nine": {"X": X, "A": ds.adjacency, "conditions": ds.experiment, "n_groups": 9, "names": names},
        "reference": {
            "X": _standardise(np.log(ds.X[keep])),
            "A": reference,
            "targets": targets,
            "n_groups": len(INTERVENTIONS) + 1,
            "names": names,
        },
    }


def run_methods(X: np.ndarray, n_groups: int, options: dict, spline_reason: str | None) -> dict[str, dict]:
    """Every method on X: ``{name: {"adjacency", "labels" (per node, n x d), "group_labels",
    "seconds", "reason"}}`` (``reason`` set when a method could not run). certkit's own errors are
    raised, not reported."""
    out = {}
    for mechanism in MECHANISMS:
        name = f"certkit {mechanism}"
        if mechanism != "linear" and spline_reason is not None:
            out[name] = {"reason": f"unavailable ({spline_reason})"}
            continue
        model, seconds = timed(lambda m=mechanism: fit_certkit(X, m, 0, **options))
        out[name] = {
            "reason": None,
            "seconds": seconds,
            "adjacency": model.adjacency_,
            "labels": model.labels_,
            "group_labels": model.group_labels_,
        }
    for name, fn in GRAPH_PEERS.items():
        est, seconds, reason = try_run(lambda fn=fn: fn(X, 0))
        out[name] = {"adjacency": est, "seconds": seconds, "reason": reason}
    labels, seconds, reason = try_run(lambda: gmm_labels(X, n_groups, 0))
    gmm = {"seconds": seconds, "reason": reason}
    if labels is not None:  # one labelling for every node
        gmm.update(labels=np.repeat(labels[:, None], X.shape[1], axis=1), group_labels=labels[:, None])
    out[f"GMM, K = {n_groups}"] = gmm
    return out


def unavailable_lines(results: dict[str, dict]) -> list[str]:
    return [f"{name}: {res['reason']}" for name, res in results.items() if res["reason"] is not None]


def _edge_cells(A: np.ndarray, res: dict) -> list:
    est = res.get("adjacency")
    if est is None:
        return ["-"] * 4
    return [f"{edge_f1(A, est):.3f}", f"{skeleton_f1(A, est):.3f}", shd(A, est), int(est.sum())]


def nine_condition_rows(case: dict, results: dict[str, dict]) -> list[list]:
    A, cond = case["A"], case["conditions"]
    rows = []
    for name, res in results.items():
        if res["reason"] is not None:
            rows.append([name, "unavailable", *["-"] * 5])
            continue
        groups = res.get("group_labels")
        if groups is None:
            group = "-"
        elif groups.shape[1] == 0:
            group = "0.000 (no mixing variable)"
        else:
            scores = [ami(cond, groups[:, m]) for m in range(groups.shape[1])]
            group = f"{max(scores):.3f}"
            if groups.shape[1] > 1:
                joint = np.unique(groups, axis=0, return_inverse=True)[1].ravel()
                group += f" (best of {groups.shape[1]}; jointly {ami(cond, joint):.3f})"
        rows.append([name, *_edge_cells(A, res), group, f"{res['seconds']:.1f}"])
    return rows


def reference_rows(case: dict, results: dict[str, dict]) -> list[list]:
    A, targets = case["A"], case["targets"]
    rows = []
    for name, res in results.items():
        if res["reason"] is not None:
            rows.append([name, "unavailable", *["-"] * (5 + len(targets))])
            continue
        labels = res.get("labels")
        if labels is None:
            amis = ["-"] * (len(targets) + 1)
        else:
            scores = [ami(truth, labels[:, j]) for j, truth in targets.items()]
            amis = [f"{s:.3f}" for s in scores] + [f"{np.mean(scores):.3f}"]
        rows.append([name, *_edge_cells(A, res), *amis, f"{res['seconds']:.1f}"])
    return rows


def search_objective(X: np.ndarray, adjacency: np.ndarray, mechanism: str) -> float:
    """Sum of the nodes' latent-aware local BICs (the search's objective, here on all rows) of a DAG."""
    settings = ScoreSettings(max_components=5, seed=0, mechanism=mechanism)
    fits = [fit_node(X, j, np.flatnonzero(adjacency[:, j]), settings) for j in range(X.shape[1])]
    return float(sum(fit.bic for fit in fits))


def objective_line(case: dict, results: dict[str, dict], truth: np.ndarray) -> str:
    """Whether the score or the search limits certkit's edges: its graph's objective against the truth's."""
    parts = []
    for mechanism in ("linear", "spline"):  # the default's graph is one of these two
        res = results[f"certkit {mechanism}"]
        if res["reason"] is None:
            own = search_objective(case["X"], res["adjacency"], mechanism)
            true = search_objective(case["X"], truth, mechanism)
            parts.append(f"{mechanism}: its graph {own:.0f}, the true graph {true:.0f} ({true - own:+.0f})")
    return "search objective (sum of local BICs on all rows, lower is better): " + "; ".join(parts)


def _ratio(results: dict[str, dict]) -> str:
    lin, spl = results["certkit linear"], results["certkit spline"]
    if spl["reason"] is not None:
        return "not measured (no spline fit)"
    return f"{spl['seconds']:.1f} s / {lin['seconds']:.1f} s = {spl['seconds'] / lin['seconds']:.2f}x"


def bench_leaderboard(options: dict) -> tuple[list[tuple[list[str], list[list], str, list[str]]], str]:
    """The two leaderboards as (headers, rows, title, notes: unavailable methods' reasons and certkit's
    search objective of its graph against the true graph's), and the spline / linear fit time line."""
    spline_reason = spline_unavailable()
    cases = sachs_cases()
    nine = cases["nine"]
    results = run_methods(nine["X"], nine["n_groups"], options, spline_reason)
    headers = ["method", "directed F1", "skeleton F1", "SHD", "edges", "AMI (9 conditions)", "time s"]
    names = nine["names"]
    dag = nine["A"].copy()
    dag[names.index("PIP2"), names.index("PIP3")] = 0  # the consensus cycle PIP3 -> plcg -> PIP2 -> PIP3
    objective = objective_line(nine, results, dag)
    notes = [*unavailable_lines(results), f"{objective} (true graph without PIP2 -> PIP3)"]
    tables = [
        (
            headers,
            nine_condition_rows(nine, results),
            f"3a. Sachs leaderboard: all 9 conditions (log, standardised, 7466 x 11), 18-edge cdt "
            f"consensus graph; certkit with {options}; certkit AMI: its mixing variable closest to the "
            "conditions",
            notes,
        )
    ]
    ref = cases["reference"]
    ref_results = run_methods(ref["X"], ref["n_groups"], options, spline_reason)
    target_heads = [f"AMI {SHORT.get(names[j], names[j])}" for j in ref["targets"]]
    headers = ["method", "directed F1", "skeleton F1", "SHD", "edges", *target_heads, "mean AMI", "time s"]
    tables.append(
        (
            headers,
            reference_rows(ref, ref_results),
            "3b. Sachs, the reference's protocol: experiments 1-2 observational + 3-7 (5846 x 11), "
            "its 18-edge DAG; AMI of each intervened node's labels with intervened-vs-not",
            [*unavailable_lines(ref_results), objective_line(ref, ref_results, ref["A"])],
        )
    )
    speed = (
        f"speed, certkit spline / linear fit (target <= 3x): all 9 conditions {_ratio(results)}; "
        f"reference protocol {_ratio(ref_results)}"
    )
    return tables, speed
