"""Plots of certified training: certified accuracy against the perturbation size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from certkit._plotting import axes
from certkit._validation import check_array

__all__ = ["plot_certified_accuracy"]


def plot_certified_accuracy(
    epsilons: Sequence[float],
    accuracies: Mapping[str, Sequence[float]],
    *,
    ax: Any = None,
    title: str | None = None,
    nominal: float | None = None,
) -> Any:
    """Draw one line of certified accuracy vs ε per method (e.g. per backend).

    Parameters
    ----------
    epsilons : sequence of float
        The radii (x axis, log scale when all are positive).
    accuracies : mapping label -> sequence of float
        Certified accuracy in [0, 1] for each ε.
    ax : matplotlib Axes, optional
        Where to draw (a new figure is made otherwise).
    title : str, optional
    nominal : float, optional
        Test accuracy of the nominally trained model, drawn as a dashed reference line (the ceiling of every
        certified accuracy).

    Returns
    -------
    matplotlib.axes.Axes
    """
    eps = check_array(epsilons, "epsilons", ndim=1)
    if np.any(eps < 0):
        raise ValueError("epsilons must be >= 0")
    if not accuracies:
        raise ValueError("accuracies must contain at least one method")
    ax = axes(ax)
    for label, acc in accuracies.items():
        acc = check_array(acc, f"accuracies[{label!r}]", ndim=1, shape=(len(eps),))
        if np.any((acc < 0) | (acc > 1)):
            raise ValueError(f"accuracies[{label!r}] must lie in [0, 1]")
        ax.plot(eps, acc, marker="o", label=label)
    if nominal is not None:
        if not 0 <= nominal <= 1:
            raise ValueError(f"nominal must lie in [0, 1], got {nominal}")
        ax.axhline(
            nominal, color="grey", linestyle="--", linewidth=1, label=f"nominal accuracy {nominal:.3f}"
        )
    if np.all(eps > 0):
        ax.set_xscale("log")
    ax.set_xlabel("training-data perturbation ε")
    ax.set_ylabel("certified accuracy")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    if title:
        ax.set_title(title)
    return ax
