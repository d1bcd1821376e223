"""Plot helpers shared by the capabilities (matplotlib, imported lazily): certified accuracy against ε."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from certkit._optional import require
from certkit._validation import check_array

__all__ = ["plot_certified_accuracy"]


def plot_certified_accuracy(
    epsilons: Sequence[float],
    accuracies: Mapping[str, Sequence[float]],
    *,
    ax: Any = None,
    title: str | None = None,
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

    Returns
    -------
    matplotlib.axes.Axes
    """
    eps = check_array(epsilons, "epsilons", ndim=1)
    if np.any(eps < 0):
        raise ValueError("epsilons must be >= 0")
    if not accuracies:
        raise ValueError("accuracies must contain at least one method")
    plt = require("matplotlib.pyplot", extra="plot", purpose="plotting")
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    for label, acc in accuracies.items():
        acc = check_array(acc, f"accuracies[{label!r}]", ndim=1, shape=(len(eps),))
        if np.any((acc < 0) | (acc > 1)):
            raise ValueError(f"accuracies[{label!r}] must lie in [0, 1]")
        ax.plot(eps, acc, marker="o", label=label)
    if np.all(eps > 0):
        ax.set_xscale("log")
    ax.set_xlabel("training-data perturbation ε")
    ax.set_ylabel("certified accuracy")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return ax
