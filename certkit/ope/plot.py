"""Plots of strategic off-policy evaluation: response-model calibration and sensitivity."""

from __future__ import annotations

from typing import Any

from certkit._plotting import axes, null_locator

__all__ = ["plot_move_calibration", "plot_sensitivity"]


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
    ax = axes(ax)
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
    ax = axes(ax)
    ax.fill_between(result.scales, lower, upper, alpha=0.25, label=f"{confidence_level:.0%} CI")
    ax.plot(result.scales, result.values, marker="o", label="estimate")
    ax.axvline(result.fitted_scale, color="0.4", ls=":", label="fitted s")
    ax.set_xscale("log")
    ticks = result.scales[:: max(1, result.scales.size // 5)]
    ax.set_xticks(ticks, [f"{t:.2g}" for t in ticks])
    ax.xaxis.set_minor_locator(null_locator())
    ax.set_xlabel("response scale s")
    ax.set_ylabel("estimated policy value")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)  # above the data
    if title:
        ax.set_title(title, pad=24)
    return ax
