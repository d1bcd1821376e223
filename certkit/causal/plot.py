"""Plots of causal mixture models: the graph, its edge stability and identified orientations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from certkit._plotting import pyplot
from certkit._validation import check_array

__all__ = ["plot_causal_graph"]


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
    plt = pyplot()
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
