"""Plot helpers shared by the capabilities (matplotlib, imported lazily).

- `plot_certified_accuracy`: certified accuracy against ε;
- `plot_bound_terms`: a bound and each term against the share of affected units (performative trade-off);
- `plot_move_calibration`, `plot_sensitivity`: strategic OPE response diagnostics;
- `plot_causal_graph`: a causal graph with edges coloured by a value (stability).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from certkit._optional import require
from certkit._validation import check_array

__all__ = [
    "plot_bound_terms",
    "plot_causal_graph",
    "plot_certified_accuracy",
    "plot_move_calibration",
    "plot_sensitivity",
]


def _pyplot() -> Any:
    return require("matplotlib.pyplot", extra="plot", purpose="plotting")


def _axes(ax: Any) -> Any:
    """`ax`, or a new figure's axes (matplotlib imported lazily)."""
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=(5, 3.5))
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
    ax = _axes(ax)
    for label, acc in accuracies.items():
        acc = check_array(acc, f"accuracies[{label!r}]", ndim=1, shape=(len(eps),))
        if np.any((acc < 0) | (acc > 1)):
            raise ValueError(f"accuracies[{label!r}] must lie in [0, 1]")
        ax.plot(eps, acc, marker="o", label=label)
    if nominal is not None:
        if not 0 <= nominal <= 1:
            raise ValueError(f"nominal must lie in [0, 1], got {nominal}")
        ax.axhline(nominal, color="grey", linestyle="--", linewidth=1,
                   label=f"nominal accuracy {nominal:.3f}")
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


def plot_bound_terms(
    shares: Sequence[float],
    bounds: Sequence[Any],
    *,
    ax: Any = None,
    title: str | None = None,
    log_scale: bool = False,
) -> Any:
    """Draw a bound's total and each of its terms against the share of affected units.

    The change-learn trade-off of performative learning: as more units are affected, the performative term
    grows while (for Thm 3.13/3.15) the complexity term shrinks.

    Parameters
    ----------
    shares : sequence of float
        Shares of affected units $m/n$ in $[0, 1]$ (x axis).
    bounds : sequence of BoundResult
        One `certkit.performative.BoundResult` per share, all with the same term names.
    ax : matplotlib Axes, optional
        Where to draw (a new figure is made otherwise).
    title : str, optional
    log_scale : bool, default False
        Logarithmic y axis (useful when the terms differ by orders of magnitude).

    Returns
    -------
    matplotlib.axes.Axes
    """
    x = check_array(shares, "shares", ndim=1)
    if np.any((x < 0) | (x > 1)):
        raise ValueError("shares must lie in [0, 1]")
    if len(bounds) != len(x):
        raise ValueError(f"bounds must have one result per share: got {len(bounds)} for {len(x)} shares")
    names = list(bounds[0].terms)
    if any(list(b.terms) != names for b in bounds):
        raise ValueError("every bound must have the same terms")
    if ax is None:
        _, ax = _pyplot().subplots(figsize=(7.0, 3.8), layout="constrained")
    totals = np.array([b.total for b in bounds], dtype=float)
    ax.plot(x, totals, marker="o", markersize=3, linewidth=2.0, color="black", label="total bound")
    for name in names:
        values = np.array([b.terms[name] for b in bounds], dtype=float)
        if log_scale and not np.any(values > 0):
            continue
        ax.plot(x, values, marker="o", markersize=2.5, linewidth=1.2, label=f"{name} term".replace("_", " "))
    if log_scale:
        ax.set_yscale("log")
    ax.set_xlabel("share of units affected (m / n)")
    ax.set_ylabel("bound and its terms")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # never over data
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


def plot_causal_graph(
    adjacency: Any,
    *,
    names: Sequence[str] | None = None,
    edge_values: Any = None,
    true_adjacency: Any = None,
    identified: Any = None,
    highlight: Sequence[int] = (),
    ax: Any = None,
    title: str | None = None,
) -> Any:
    """Draw a directed graph on a circle, edges coloured by a value in [0, 1] (e.g. bootstrap stability).

    Parameters
    ----------
    adjacency : array-like (d, d) of 0/1
        The edges to draw, ``adjacency[i, j] = 1`` for ``i -> j``.
    names : sequence of str, optional
        Node labels (default ``x0, x1, ...``).
    edge_values : array-like (d, d), optional
        Colour of edge ``i -> j`` (viridis, 0 to 1) with a colour bar; all edges black otherwise.
    true_adjacency : array-like (d, d) of 0/1, optional
        Reference graph: drawn edges that are in it are thick, the others thin, and its edges missing
        from ``adjacency`` are drawn as thin dashed grey arrows.
    identified : array-like (d, d) of bool, optional
        Which orientations the data identify (``CausalMixtureModel.identified_``): an edge whose
        orientation is not identified is drawn as a plain line without an arrowhead.
    highlight : sequence of int
        Nodes drawn in orange (e.g. nodes whose mechanism changes).
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    A = check_array(adjacency, "adjacency", ndim=2, dtype=None)
    d = A.shape[0]
    if A.shape != (d, d):
        raise ValueError(f"adjacency must be square, got shape {A.shape}")
    names = list(names) if names is not None else [f"x{j}" for j in range(d)]
    if len(names) != d:
        raise ValueError(f"names must have {d} entries, got {len(names)}")
    values = None if edge_values is None else check_array(edge_values, "edge_values", shape=(d, d))
    truth = None
    if true_adjacency is not None:
        truth = check_array(true_adjacency, "true_adjacency", shape=(d, d), dtype=None)
    oriented = np.ones((d, d), dtype=bool)
    if identified is not None:
        oriented = check_array(identified, "identified", shape=(d, d), dtype=bool)
    plt = _pyplot()
    from matplotlib import cm, colors

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 6))
    angle = np.pi / 2 - 2 * np.pi * np.arange(d) / d
    pos = np.column_stack([np.cos(angle), np.sin(angle)])
    cmap, norm = plt.get_cmap("viridis"), colors.Normalize(0.0, 1.0)
    arrow = {"arrowstyle": "-|>", "mutation_scale": 14, "shrinkA": 17, "shrinkB": 17}
    if truth is not None:
        for i, j in zip(*np.nonzero((truth != 0) & (A == 0))):
            ax.annotate("", pos[j], pos[i], arrowprops={**arrow, "color": "0.7", "linestyle": "--", "lw": 1})
    for i, j in zip(*np.nonzero(A)):
        color = "black" if values is None else cmap(norm(values[i, j]))
        width = 1.1 if truth is not None and truth[i, j] == 0 else 2.8
        style = {} if oriented[i, j] else {"arrowstyle": "-"}
        ax.annotate(
            "",
            pos[j],
            pos[i],
            arrowprops={**arrow, **style, "color": color, "lw": width, "connectionstyle": "arc3,rad=.08"},
        )
    for j in range(d):
        face = "#f5a142" if j in set(highlight) else "white"
        ax.text(
            *pos[j],
            names[j],
            ha="center",
            va="center",
            fontsize=9,
            zorder=3,
            bbox={"boxstyle": "round,pad=0.35", "fc": face, "ec": "0.3"},
        )
    if values is not None:
        plt.colorbar(
            cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, fraction=0.04, pad=0.02, label="edge stability"
        )
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax
