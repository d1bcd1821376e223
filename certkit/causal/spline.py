"""Mechanisms of the causal mixture model: the design matrix of a node given its parents.

``mechanism="linear"``: $[1, x_{pa(j)}]$. ``mechanism="spline"``: each parent through its own cubic
B-spline basis (additive in the parents), $[1, B_{j,1}(x_{p_1}), B_{j,2}(x_{p_2}), \\dots]$; the
mechanism stays linear in its coefficients, so every EM kernel runs unchanged on the wider design and
the BIC counts the basis columns.

The basis of parent ``i`` with ``k`` interior knots: knots at the ``1/(k+1), ..., k/(k+1)`` quantiles of
``x_i``, boundary knots at its minimum and maximum, ``k + 4`` cubic B-splines. They sum to one, which
would duplicate the intercept, so the first is dropped and the other ``k + 3`` are the parent's columns
(the condition number of ``[1, basis]`` stays below about 150 for up to 10 knots on normal or skewed
data). When a quantile falls in a gap of the data and leaves ``[1, basis]`` rank deficient, the number
of knots is lowered until it does not (``spline_basis``). The columns are not centred: each is zero
outside four knot intervals, so a mixture component whose samples miss an interval has an all-zero
column there, which the EM kernels' relative ridge ($10^{-8} G_{aa}$, the only ridge; ``K = 1`` is plain
least squares) sets to a zero coefficient. That does not remove every collinearity with the intercept:
on a component with no sample below the first interior knot the dropped B-spline is zero, the kept
columns sum to one there and duplicate its intercept. The ridge keeps that component's weighted Gram
matrix solvable and splits the constant between the intercept and the basis; the fitted mechanism (and
the likelihood) is the same, only that split is arbitrary, and the BIC still counts the column.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from certkit._validation import check_in_options, check_integer

__all__ = [
    "BIC_MAX_KNOTS",
    "MAX_KNOTS",
    "MECHANISMS",
    "NodeDesigns",
    "check_n_knots",
    "max_width",
    "spline_basis",
]

#: The mechanisms a node can have.
MECHANISMS = ("linear", "spline")

#: Most interior knots per parent (``n_knots`` as an int).
MAX_KNOTS = 50

#: ``n_knots="bic"`` tries, per (node, parent), the linear term and 0 .. BIC_MAX_KNOTS interior knots.
BIC_MAX_KNOTS = 3

#: ``NodeDesigns`` code for a parent that enters linearly (one column).
LINEAR = -1


def check_n_knots(n_knots: Any) -> int | str:
    """``"bic"`` or an int in ``0 .. MAX_KNOTS``; a ValueError / TypeError naming ``n_knots`` otherwise."""
    if isinstance(n_knots, str):
        return check_in_options(n_knots, "n_knots", ("bic",))
    return check_integer(n_knots, "n_knots", minimum=0, maximum=MAX_KNOTS)


def max_width(n_variables: int, mechanism: str, n_knots: int | str) -> int:
    """Most columns of a node's design (the intercept included): every other variable a parent, each with
    its widest basis (``n_knots + 3`` columns, ``BIC_MAX_KNOTS + 3`` for ``"bic"``; 1 if linear)."""
    if mechanism == "linear":
        return n_variables
    return 1 + (n_variables - 1) * ((BIC_MAX_KNOTS if n_knots == "bic" else int(n_knots)) + 3)


def _usable_knots(x: np.ndarray, n_knots: int) -> int:
    """``n_knots``, fewer when ``x`` has too few distinct values for ``n_knots + 3`` columns;
    ``LINEAR`` when it has at most 4 (a cubic basis would be rank deficient)."""
    distinct = np.unique(x).size
    if distinct <= 4:
        return LINEAR
    return min(n_knots, distinct - 5)


def spline_basis(x: Any, n_knots: int) -> np.ndarray:
    """The cubic B-spline basis of ``x`` with ``n_knots`` interior knots at its quantiles (not centred).

    Parameters
    ----------
    x : array-like (n,)
        One parent's values (finite).
    n_knots : int
        Interior knots (0 .. `MAX_KNOTS`), at the ``1/(n_knots+1), ..., n_knots/(n_knots+1)`` quantiles;
        repeated quantiles (ties in ``x``) are kept once. While a quantile falls in a gap of the data
        that leaves the basis rank deficient (no distinct value of ``x`` in the support of one
        B-spline, past those of the B-splines before it: the Schoenberg-Whitney condition fails),
        one knot fewer is tried, so ``[1, basis]`` always has full column rank.

    Returns
    -------
    ndarray (n, q)
        The B-splines but the first (they sum to one; the intercept is the design's own column):
        ``q = k + 3`` for the ``k <= n_knots`` distinct knots kept.

    Raises
    ------
    ValueError
        ``x`` has fewer than 4 distinct values: even with no interior knot ``[1, basis]`` has 4 columns
        and rank at most the number of distinct values (enter such a variable linearly, as
        ``NodeDesigns`` does for at most 4).
    """
    from scipy.interpolate import BSpline

    from certkit._validation import check_array

    x = check_array(x, "x", ndim=1)
    n_knots = check_integer(n_knots, "n_knots", minimum=0, maximum=MAX_KNOTS)
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:
        raise ValueError("x is constant; a spline basis needs a variable that varies")
    distinct = np.unique(x)
    if distinct.size < 4:
        raise ValueError(
            f"x has {distinct.size} distinct values; a cubic B-spline basis needs at least 4 for [1, basis] "
            "to have full column rank (enter a variable with so few values linearly)"
        )
    for k in range(n_knots, -1, -1):
        inner = np.unique(np.quantile(x, np.arange(1, k + 1) / (k + 1)))
        inner = inner[(inner > lo) & (inner < hi)]
        knots = np.concatenate([np.full(4, lo), inner, np.full(4, hi)])
        # no interior knot: the 4 B-splines span the cubics, full rank at >= 4 distinct values
        if k == 0 or _full_rank(BSpline.design_matrix(distinct, knots, 3).toarray()):
            break
    return np.ascontiguousarray(BSpline.design_matrix(x, knots, 3).toarray()[:, 1:])


def _full_rank(basis: np.ndarray) -> bool:
    """Schoenberg-Whitney on ``basis`` (B-splines at the distinct values, sorted): full column rank iff
    some increasing run of rows has a nonzero in each column in turn (each column's nonzero rows are one
    interval, moving right with the column, so the earliest row that fits is the one to take)."""
    row = -1
    for column in basis.T:
        later = np.flatnonzero(column[row + 1 :] > 0.0)
        if later.size == 0:
            return False
        row += 1 + int(later[0])
    return True


class NodeDesigns:
    """Design matrices ``[1, f(x_pa)]`` of the nodes of ``X`` for one mechanism, bases cached.

    With ``mechanism="spline"`` the knots of parent ``i`` in the mechanism of node ``j`` are fixed once per
    (node, parent): ``n_knots`` if an int, else (``"bic"``) the candidate with the lowest BIC of the
    single-parent least-squares regression of ``x_j`` on it, among the linear term (one column) and
    0 .. `BIC_MAX_KNOTS` interior knots ($n \\log(\\mathrm{RSS}/n) + q \\log n$, $q$ columns; ties go to
    the smaller basis). Each (parent, knots) basis is computed once and shared by every design that uses
    it. A pickled copy (sent to a worker) keeps the knot choices and recomputes the bases it needs.
    """

    def __init__(self, X: np.ndarray, mechanism: str = "linear", n_knots: int | str = "bic") -> None:
        self.X = X
        self.mechanism = mechanism
        self.n_knots = n_knots
        self._knots: dict[int, np.ndarray] = {}  # per parent: knots of each node (LINEAR: linear term)
        self._bases: dict[tuple[int, int], np.ndarray] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_bases"] = {}
        return state

    def _basis(self, parent: int, knots: int) -> np.ndarray:
        key = (parent, knots)
        if key not in self._bases:
            x = self.X[:, parent]
            self._bases[key] = x[:, None] if knots == LINEAR else spline_basis(x, knots)
        return self._bases[key]

    def knots(self, parent: int) -> np.ndarray:
        """Interior knots of ``parent``'s basis in the mechanism of every node (``LINEAR`` = -1: linear)."""
        if parent not in self._knots:
            x = self.X[:, parent]
            if self.n_knots != "bic":
                choice = np.full(self.X.shape[1], _usable_knots(x, int(self.n_knots)))
            else:
                choice = self._bic_knots(parent, x)
            self._knots[parent] = choice
        return self._knots[parent]

    def _bic_knots(self, parent: int, x: np.ndarray) -> np.ndarray:
        """The knot choice for ``parent`` in each node's mechanism; ``LINEAR`` for the parent itself and
        constant columns (never a mechanism it enters)."""
        n = x.size
        ladder = list(dict.fromkeys([LINEAR, *(_usable_knots(x, k) for k in range(BIC_MAX_KNOTS + 1))]))
        Y = self.X - self.X.mean(axis=0)
        total = np.einsum("ij,ij->j", Y, Y)
        children = np.flatnonzero(total > 0.0)
        children = children[children != parent]
        Y, total = Y[:, children], total[children]
        bics = []
        for knots in ladder:
            basis = self._basis(parent, knots)
            basis = basis - basis.mean(axis=0)  # centred: the intercept is fitted too
            coef, _, rank, _ = np.linalg.lstsq(basis, Y, rcond=None)  # rank: the columns the fit has
            resid = Y - basis @ coef
            rss = np.maximum(np.einsum("ij,ij->j", resid, resid), 1e-12 * total)
            bics.append(n * np.log(rss / n) + rank * np.log(n))
        choice = np.full(self.X.shape[1], LINEAR)
        choice[children] = np.asarray(ladder)[np.argmin(np.array(bics), axis=0)]
        return choice

    def blocks(self, node: int, parents: Iterable[int]) -> list[np.ndarray]:
        """The columns of each parent in the mechanism of ``node``, in the order given."""
        return [self._basis(int(p), int(self.knots(int(p))[node])) for p in parents]

    def design(self, node: int, parents: Sequence[int], order: str = "C") -> np.ndarray:
        """``[1, ...]`` (n, p): the parents' columns (linear) or bases (spline, C-contiguous) in order.

        ``order="F"``: a linear design column-major (``np.column_stack``), the layout the joint fits
        used before the spline mechanism existed, which their least-squares starts round with; the
        single-node score's linear design is C-contiguous as it always was.
        """
        n = self.X.shape[0]
        if self.mechanism == "linear":
            if order == "F":
                return np.column_stack([np.ones(n), self.X[:, list(parents)]])
            design = np.ones((n, len(parents) + 1))
            design[:, 1:] = self.X[:, list(parents)]
            return design
        return np.ascontiguousarray(np.column_stack([np.ones(n), *self.blocks(node, parents)]))

    def width(self, node: int, parents: Sequence[int]) -> int:
        """Columns of ``design(node, parents)``, the intercept included."""
        if self.mechanism == "linear":
            return len(parents) + 1
        return 1 + sum(block.shape[1] for block in self.blocks(node, parents))

    def prepare(self, parents: Iterable[int]) -> None:
        """Fix the knots of these parents now (before the designs are sent to workers)."""
        if self.mechanism == "spline":
            for p in set(parents):
                self.knots(int(p))
