"""Demo section for the shared layer: kernels and statistics (no subcommand of its own)."""

from __future__ import annotations

import numpy as np

NAME = "foundation"
HELP = "compiled kernels and shared statistics"


def demo(rng: np.random.Generator) -> str:
    """A short tour of the shared bounds and the vote-counting kernel (well under a second)."""
    from certkit import _core, stats
    from certkit._results import format_table
    from certkit._validation import seed_from_rng
    from certkit.stats._common import NOISES

    sections = []

    rows = []
    for alternative, level in [("two-sided", 0.95), ("greater", 0.999)]:
        low, high = stats.clopper_pearson(990, 1000, confidence_level=level, alternative=alternative)
        rows.append([alternative, level, float(low), float(high)])
    sections.append(
        format_table(["alternative", "level", "low", "high"], rows, title="Clopper-Pearson for 990/1000")
    )

    radii = np.array([0.0, 0.1, 0.25, 0.5])
    sigma = 0.25
    rows = [
        [noise, *stats.smoothing_lower_bound(0.9, radius=radii, sigma=sigma, noise=noise)]
        for noise in NOISES
    ]
    sections.append(
        format_table(
            ["noise", *(f"r={r:g}" for r in radii)],
            rows,
            title=f"smoothing certificate c[0.9, r] (sigma={sigma}: l2 for gaussian, l1 for uniform)",
        )
    )

    level = 0.9
    adjusted = stats.robust_level(level, radius=0.12, sigma=sigma)
    rows = []
    for n in (8, 9, 99, 999):
        scores = rng.standard_exponential(n)
        rank = stats.conformal_rank(n, level)
        rows.append(
            [
                n,
                rank,
                stats.conformal_quantile(scores, confidence_level=level),
                stats.conformal_rank(n, adjusted),
            ]
        )
    sections.append(
        format_table(
            ["n", "rank", "quantile (Exp(1) scores)", f"rank at RCP1 level {adjusted:.6f}"],
            rows,
            title=f"conformal quantile at level {level}: ceil((n+1) level)-th smallest score (inf if > n)",
        )
    )

    n, n_components, m, n_subsamples = 60, 6, 15, 2000
    scores = rng.normal(size=(n, n_components)) + np.linspace(1.0, 0.0, n_components)
    counts = _core.votes.subsample(
        scores, scheme="without_replacement", m=m, n_subsamples=n_subsamples, top_k=2, seed=seed_from_rng(rng)
    )
    low, high = stats.clopper_pearson(counts, n_subsamples, confidence_level=0.99, n_tests=n_components)
    rows = [
        [j, int(c), c / n_subsamples, float(lower), float(upper)]
        for j, (c, lower, upper) in enumerate(zip(counts, low, high))
    ]
    sections.append(
        format_table(
            ["component", "votes", "fraction", "low", "high"],
            rows,
            title=(
                f"_core.votes.subsample: top-2 of {n_components} components by mean score over "
                f"{n_subsamples} subsamples of {m}/{n}; 99% family-wise Clopper-Pearson"
            ),
        )
    )
    return "\n\n".join(sections)
