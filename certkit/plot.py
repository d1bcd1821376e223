"""Plot helpers shared by the capabilities (matplotlib, imported lazily): certified accuracy against ε."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from certkit._validation import check_array

__all__ = ["plot_certified_accuracy", "plot_move_calibration", "plot_sensitivity"]


def _axes(ax: Any) -> Any:
    """`ax`, or a new figure's axes (matplotlib imported lazily)."""
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError('plotting needs matplotlib: pip install "certkit[plot]"') from exc
    _, ax = plt.subplots(figsize=(5, 3.5))
    return ax


def _null_locator() -> Any:
    from matplotlib.ticker import NullLocator

    return NullLocator()


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
    ax = _axes(ax)
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


def plot_move_calibration(table: Any, *, ax: Any = None, title: str | None = None) -> Any:
    """Observed vs predicted move rates of a response model (`response.calibration(data)`), ±2 SE bars.

    Parameters
    ----------
    table : certkit.ope.CalibrationTable
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    from certkit.ope import CalibrationTable

    if not isinstance(table, CalibrationTable):
        raise TypeError(f"table must be a CalibrationTable, got {type(table).__name__}")
    ax = _axes(ax)
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect calibration")
    ax.errorbar(table.predicted, table.observed, yerr=2 * table.std_error, fmt="o", capsize=3,
                label="bins (±2 SE under the model)")
    ax.set_xlabel("predicted move probability")
    ax.set_ylabel("observed move rate")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    if title:
        ax.set_title(title)
    return ax


def plot_sensitivity(result: Any, *, confidence_level: float = 0.95, ax: Any = None,
                     title: str | None = None) -> Any:
    """Value estimate and confidence band against the response scale s (`certkit.ope.sensitivity`).

    Parameters
    ----------
    result : certkit.ope.SensitivityResult
    confidence_level : float, default 0.95
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    from certkit.ope import SensitivityResult

    if not isinstance(result, SensitivityResult):
        raise TypeError(f"result must be a SensitivityResult, got {type(result).__name__}")
    lower, upper = result.confidence_intervals(confidence_level)
    ax = _axes(ax)
    ax.fill_between(result.scales, lower, upper, alpha=0.25, label=f"{confidence_level:.0%} CI")
    ax.plot(result.scales, result.values, marker="o", label="estimate")
    ax.axvline(result.fitted_scale, color="0.4", ls=":", label="fitted s")
    ax.set_xscale("log")
    ticks = result.scales[:: max(1, result.scales.size // 5)]
    ax.set_xticks(ticks, [f"{t:.2g}" for t in ticks])
    ax.xaxis.set_minor_locator(_null_locator())
    ax.set_xlabel("response scale s")
    ax.set_ylabel("estimated policy value")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)  # above the data
    if title:
        ax.set_title(title, pad=24)
    return ax
