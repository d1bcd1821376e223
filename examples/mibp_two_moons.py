"""MIBP certified training on two moons: certified accuracy against the training-data perturbation ε.

Setting of the paper's two-moons experiment (100 training points, noise 0.1, 200 test points, raw
coordinates, every training point perturbed in both features by at most ε): trains a 2-16-1 ReLU MLP
from a random initialisation with full-batch GD (hinge loss, learning rate 0.1) while bounding every
parameter over all those training sets, for several ε, with interval arithmetic and with exact per-sample
programs (Gurobi, or SCIP without gurobipy); ``--formulation hybrid`` intersects them with the joint LP.
Prints the summaries and saves ``mibp_two_moons.png``.

Run: python examples/mibp_two_moons.py [--epochs 6] [--exact-backend scip] [--formulation hybrid]
     [--time-limit 10]  (seconds per solve; a solve stopped early contributes its dual bound)
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from certkit.datasets import load_two_moons
from certkit.mibp import MLP, FeatureBox, certified_training, certify_predictions
from certkit.mibp._cli import DEFAULT_TIME_LIMIT
from certkit.plot import plot_certified_accuracy


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--exact-backend", default=None, help="gurobi or scip (default: gurobi if installed)")
    parser.add_argument("--formulation", choices=["decomposed", "hybrid"], default="decomposed")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument(
        "--time-limit", type=float, default=DEFAULT_TIME_LIMIT, help="seconds per solve (dual bound after it)"
    )
    parser.add_argument("--output", default="mibp_two_moons.png")
    args = parser.parse_args()
    backend = args.exact_backend
    if backend is None:
        try:
            import gurobipy  # noqa: F401

            backend = "gurobi"
        except ImportError:
            backend = "scip"

    data = load_two_moons(n_train=100, n_test=200, noise=0.1, rng=0)
    X, y, X_test, y_test = data.X_train, data.y_train_signed, data.X_test, data.y_test_signed
    model = MLP.random([2, 16, 1], rng=0)
    epsilons = [1e-4, 1e-3, 1e-2, 2e-2]
    exact = f"{backend} ({args.formulation})"
    curves: dict[str, list[float]] = {"interval": [], exact: []}
    for eps in epsilons:
        for name, kwargs in (
            ("interval", {}),
            (exact, {"backend": backend, "formulation": args.formulation}),
        ):
            start = time.perf_counter()
            res = certified_training(
                model,
                X,
                y,
                perturbation=FeatureBox(eps),
                loss="hinge",
                epochs=args.epochs,
                learning_rate=args.learning_rate,
                executor=args.workers,
                time_limit=args.time_limit,
                **kwargs,
            )
            cert = certify_predictions(res, X_test)
            acc = cert.certified_accuracy(y_test)
            curves[name].append(acc)
            print(
                f"ε = {eps:g}  {name:22s} certified accuracy {acc:.3f}  "
                f"mean width {res.mean_widths()[-1]:.3g}  ({time.perf_counter() - start:.1f} s)"
            )
    print()
    print(res.summary())
    nominal = np.mean(res.nominal.predict(X_test) == y_test)
    print(f"\nnominal test accuracy after {args.epochs} epochs: {nominal:.3f}")
    ax = plot_certified_accuracy(
        epsilons, curves, nominal=float(nominal), title=f"two moons, {args.epochs} epochs"
    )
    ax.figure.savefig(args.output, dpi=120, bbox_inches="tight")
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
