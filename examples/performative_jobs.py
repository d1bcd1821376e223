"""Performative generalization bounds on the NSW job-training data (LaLonde): the change-learn trade-off.

The public analogue of the job-seeker study of Performative Learning Theory (Rodemann et al., ICML 2026),
whose administrative data are not public. A logistic model predicts employment in 1978 (re78 > 0) from the NSW
covariates and the programme indicator. Acting on its predictions is simulated as a self-negating effect: the
share r of employed people with the highest predicted chance of employment lose their support and end up
unemployed (`flip_top_positives`). The script

1. checks that every flipped sample lies inside the Wasserstein ball of radius `flip_radius(n, m, D_Z, p)`
   around the observed sample (a label flip is a move of the features along the model direction), so its risk
   lies between the ball's best case (`wasserstein_risk(..., direction="inf")`) and worst case (``"sup"``);
2. prints the Thm 3.13 bound (the paper's constants) and the Rademacher bound term by term against the share;
3. asks the planner's question: the largest share of affected units that keeps each bound below a target;
4. plots each bound and its terms against the share.

Usage::

    python examples/performative_jobs.py [PLOT.png]      # default: ./performative_jobs.png
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from certkit.datasets import load_lalonde
from certkit.performative import (
    flip_radius,
    flip_top_positives,
    generalization_bound,
    max_affected_share,
    wasserstein_risk,
)

P = 2  # Wasserstein order of the bounds (as in the paper's study)
LEVEL = 0.95
WEIGHT_NORM = 5.0  # a priori bound on ||theta||_2 (Rademacher class), fixed before fitting
PAPER = {
    "diameter": 5.29,
    "loss_lipschitz": 28**0.5,
    "model_lipschitz": 0.25,
    "entropy_integral": 7.3855,
    "loss_range": 1.0,
    "p": P,
    "confidence_level": LEVEL,
}


def load() -> tuple[np.ndarray, np.ndarray]:
    """Covariates and programme indicator scaled to [0, 1] (so ||x||_2 <= 3); labels +1 = employed in 1978."""
    data = load_lalonde()
    X = np.column_stack([data.X, data.treatment])
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    y = np.where(data.outcome > 0, 1.0, -1.0)
    return X, y


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path("performative_jobs.png")
    X, y = load()
    n, d = X.shape
    feature_norm = float(np.sqrt(d))
    model = LogisticRegression(C=1.0).fit(X, y)
    theta, b = model.coef_[0], float(model.intercept_[0])
    if np.linalg.norm(theta) > WEIGHT_NORM:
        raise SystemExit(f"||theta|| = {np.linalg.norm(theta):.2f} exceeds the a priori WEIGHT_NORM")
    margins = y * (X @ theta + b)
    # flipping unit i's label = moving x_i by 2 |margin_i| / ||theta|| along theta; the largest move is D_Z
    flip_cost = 2.0 * np.abs(margins) / np.linalg.norm(theta)
    D_Z = float(flip_cost.max())
    risk = float(np.logaddexp(0.0, -margins).mean())
    print(
        f"NSW/LaLonde: n = {n}, d = {d}, employed share {np.mean(y > 0):.3f}; logistic risk {risk:.4f}, "
        f"||theta|| = {np.linalg.norm(theta):.3f}, flip diameter D_Z = {D_Z:.3f}"
    )

    shares = np.linspace(0.0, 0.5, 11)
    pred = model.predict_proba(X)[:, 1]
    print("\n share    m  flipped risk   W2 inf   W2 sup  radius  exact W2 of the flips")
    for r in shares:
        flipped = flip_top_positives(pred, y, r)
        m = int((flipped != y).sum())
        radius = flip_radius(n, m, D_Z, p=P)
        exact = float(np.sqrt(np.sum(flip_cost[flipped != y] ** 2) / n))
        risk_flipped = float(np.logaddexp(0.0, -flipped * (X @ theta + b)).mean())
        lo, hi = (
            wasserstein_risk(theta, X, y, loss="logistic", radius=radius, p=P, intercept=b, direction=s)
            for s in ("inf", "sup")
        )
        assert lo <= risk_flipped <= hi and exact <= radius + 1e-12
        print(f"{r:6.2f} {m:4d} {risk_flipped:13.4f} {lo:8.4f} {hi:8.4f} {radius:7.3f} {exact:9.3f}")

    thm = [generalization_bound(kind="thm3.13", share=max(r, 1.0 / n), n=n, **PAPER) for r in shares]
    model_bound = {
        "theta": theta,
        "X": X,
        "y": y,
        "loss": "logistic",
        "diameter": D_Z,
        "p": P,
        "weight_norm": WEIGHT_NORM,
        "feature_norm": feature_norm,
        "confidence_level": LEVEL,
    }
    rad = [generalization_bound(kind="rademacher", share=r, **model_bound) for r in shares]
    print("\n share  Thm3.13 total (complexity, performative)   Rademacher total (sample, population perf.)")
    for r, t, q in zip(shares, thm, rad):
        print(
            f"{r:6.2f} {t.total:9.2f} ({t.terms['complexity']:7.2f}, {t.terms['performative']:6.2f})"
            f"            {q.total:7.3f} ({q.terms['sample_performative']:.3f}, "
            f"{q.terms['population_performative']:.3f})"
        )
    print(f"\nThm 3.13 at share 0.1:\n{thm[2].summary()}")

    target_thm = 80.0
    share_thm = max_affected_share(target_thm, kind="thm3.13", n=n, **PAPER)
    target_rad = 4.5
    share_rad = max_affected_share(target_rad, kind="rademacher", **model_bound)
    print(
        f"\nlargest share of affected units keeping the Thm 3.13 bound <= {target_thm:.1f}: {share_thm:.4f}"
    )
    print(f"largest share keeping the Rademacher bound <= {target_rad:.1f}: {share_rad:.4f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from certkit.plot import plot_bound_terms

    fig, axes = plt.subplots(2, 1, figsize=(7.5, 7), layout="constrained")
    grid = np.linspace(0.01, 0.5, 50)
    plot_bound_terms(
        grid,
        [generalization_bound(kind="thm3.13", share=r, n=n, **PAPER) for r in grid],
        ax=axes[0],
        title=f"Thm 3.13 (paper constants), n = {n}",
        log_scale=True,
    )
    plot_bound_terms(shares, rad, ax=axes[1], title="Rademacher bound, fitted logistic model")
    fig.savefig(out, dpi=120)
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
