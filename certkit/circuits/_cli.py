"""``certkit circuits``: certify a top-k / threshold circuit from a per-example score matrix."""

from __future__ import annotations

import argparse
import time

import numpy as np

from certkit.cli import file_name

NAME = "circuits"
HELP = "certified circuits: certify neuron inclusion against edits of the concept dataset"


def synthetic_scores(
    rng: np.random.Generator, n: int = 200, n_neurons: int = 512, n_strong: int = 24
) -> np.ndarray:
    """Per-example scores: ``n_strong`` clearly important neurons, then a band of borderline ones."""
    base = rng.normal(0.0, 1.0, (n, n_neurons))
    effect = np.zeros(n_neurons)
    effect[:n_strong] = 3.0
    effect[n_strong : 2 * n_strong] = np.linspace(0.0, 1.5, n_strong)  # borderline neurons
    return base + effect


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the subcommand."""
    parser.add_argument(
        "--data",
        "--scores",
        dest="scores",
        type=file_name,
        metavar="FILE.npy",
        help="(n, N) per-example score matrix saved with numpy.save (default: synthetic scores)",
    )
    rule = parser.add_mutually_exclusive_group()
    rule.add_argument(
        "--top-k", type=int, default=None,
        help="include the k highest mean scores (default 30, at most half of the N columns)",
    )
    rule.add_argument("--threshold", type=float, default=None, help="include mean scores >= this value")
    scheme = parser.add_mutually_exclusive_group()
    scheme.add_argument("--subsample-size", type=int, default=None, help="m (default n // 10)")
    scheme.add_argument(
        "--deletion-prob", type=float, default=None, help="Poisson deletion instead of m-subsets"
    )
    parser.add_argument("--replacement", action="store_true", help="draw the m examples with replacement")
    parser.add_argument("--n-subsamples", type=int, default=1000, help="estimation runs (default 1000)")
    parser.add_argument("--radius", type=int, default=1, help="edit distance to certify (default 1)")
    parser.add_argument(
        "--threat", default="edit", choices=("edit", "substitution", "insertion", "deletion"),
        help="which changes of the concept data --radius counts (default edit: any mix of the three)",
    )
    parser.add_argument(
        "--confidence-level", type=float, default=0.999, help="family-wise level (default 0.999)"
    )
    parser.add_argument("--threads", type=int, default=1, help="kernel threads (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def default_top_k(n_columns: int) -> int:
    """``--top-k`` when not given: 30, or half of the columns of a smaller score matrix (at least 1)."""
    return max(1, min(30, n_columns // 2))


def _load_scores(path: str) -> np.ndarray:
    """The ``--scores`` matrix, with errors that name the file and what was expected."""
    try:
        scores = np.load(path)
    except ValueError as exc:  # not an .npy file (numpy then refuses to unpickle it)
        raise ValueError(f"--data {path} is not an array saved with numpy.save") from exc
    if not isinstance(scores, np.ndarray):  # an .npz archive
        scores.close()
        raise ValueError(
            f"--data {path} is an .npz archive; expected one (examples, neurons) matrix saved with numpy.save"
        )
    if scores.ndim != 2:
        raise ValueError(
            f"--data must hold a 2-D (examples, neurons) matrix, {path} has shape {scores.shape}"
        )
    return scores


def _certify(scores: np.ndarray, args: argparse.Namespace):
    from certkit.circuits import ScoreRule, certify_circuit

    if args.threshold is not None:
        rule = ScoreRule(scores, threshold=args.threshold)
    else:
        rule = ScoreRule(scores, top_k=default_top_k(scores.shape[1]) if args.top_k is None else args.top_k)
    kw = (
        {"deletion_prob": args.deletion_prob}
        if args.deletion_prob is not None
        else {
            "subsample_size": args.subsample_size
            if args.subsample_size is not None
            else max(1, scores.shape[0] // 10),
            "replacement": args.replacement,
        }
    )
    return certify_circuit(
        rule,
        n_subsamples=args.n_subsamples,
        radius=args.radius,
        threat=args.threat,
        confidence_level=args.confidence_level,
        rng=args.seed,
        progress=True,
        n_threads=args.threads,
        **kw,
    )


def run(args: argparse.Namespace) -> int:
    """Certify the circuit and print the summary with a radius histogram."""
    from certkit._results import format_table

    if args.scores is not None:
        scores = _load_scores(args.scores)
    else:
        scores = synthetic_scores(np.random.default_rng(args.seed))
    start = time.perf_counter()
    res = _certify(scores, args)
    elapsed = time.perf_counter() - start
    print(res.summary())
    radii = sorted({0, 1, 2, 5, 10, args.radius})
    rows = []
    for r in radii:
        at = res.at_radius(r)
        rows.append([r, int(at.included.sum()), int(at.excluded.sum()), int(at.abstained.sum())])
    print()
    print(format_table(["radius", "included", "excluded", "abstained"], rows, title="Decisions by radius"))
    print(f"\n{res.n_runs} subsamples x {scores.shape[1]} components certified in {elapsed:.2f} s")
    return 0


def demo(rng: np.random.Generator) -> str:
    """512 synthetic neurons, top-30 rule, 2,000 subsamples of size 20 from 200 examples."""
    from certkit.circuits import ScoreRule, certify_circuit

    scores = synthetic_scores(rng)
    start = time.perf_counter()
    res = certify_circuit(
        ScoreRule(scores, top_k=30), subsample_size=20, n_subsamples=2000, radius=1, rng=rng, progress=False
    )
    elapsed = time.perf_counter() - start
    lines = [
        f"512 neurons, top-30 rule, 2000 subsamples (m = 20 of n = 200) in {elapsed:.2f} s",
        f"smoothed circuit: {int(res.smoothed.sum())} neurons; certified at edit distance 1: "
        f"{int(res.included.sum())} included, {int(res.excluded.sum())} excluded, {int(res.abstained.sum())} "
        "abstained",
    ]
    for r in (2, 5):
        at = res.at_radius(r)
        lines.append(
            f"at edit distance {r}: {int(at.included.sum())} included, {int(at.abstained.sum())} abstained"
        )
    return "\n".join(lines)
