"""`Builder`: the variables, constraints and exact products of an MIBP step `Program`.

A `Program` has continuous and binary variables with finite bounds, linear constraints (``<=`` and
``==``), bilinear equalities ``s = a * b`` and a list of linear objectives (one per bound to compute).
`Builder` accumulates them:

* a product of two varying factors becomes a variable ``s`` with ``s = a * b`` (bilinear); a constant
  factor is a coefficient; a product with an expression made of binaries is linearised exactly
  (``s = δ b`` by four big-M inequalities);
* ReLU with interval bounds ``l < 0 < u``: big-M with a binary ``δ``
  (``h >= 0, h >= z, h <= z - l (1 - δ), h <= u δ``); fixed when ``l > 0`` or ``u <= 0``;
* ``positive(v)``: the binary ``a = 1`` iff ``v > 0`` (both values allowed at ``v = 0``).

Every variable gets sound bounds from interval arithmetic over its defining expression (padded outward
for rounding), which is what big-M and McCormick use.  The network encoding of a gradient-descent step
(layers, loss derivative, backward pass, update) is `certkit.mibp.programs.encoding`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from certkit.mibp.enclosures.interval import pad
from certkit.mibp.programs.program import Lin, Program, lin_sum, widen

__all__ = ["BoundTightener", "Builder"]

_U = 2.0**-52

#: ``tighten(program, tasks) -> bounds``: sound bounds of the objectives ``tasks = [(index, ±1)]``.
BoundTightener = Callable[[Program, list[tuple[int, int]]], np.ndarray]


class Builder:
    """Accumulates variables and constraints; see the module docstring."""

    def __init__(self, *, tighten: BoundTightener | None = None) -> None:
        self.tighten = tighten
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.is_binary: list[bool] = []
        self.rows: list[tuple[dict[int, float], bool, float]] = []
        self.bilinear: list[tuple[int, int, int]] = []
        self.widened = 0

    # -- variables and bounds ---------------------------------------------------------
    def var(self, lo: float, hi: float, *, binary: bool = False) -> Lin:
        if not lo <= hi:
            raise RuntimeError(f"internal error: empty variable bounds [{lo}, {hi}]")
        self.lb.append(float(lo))
        self.ub.append(float(hi))
        self.is_binary.append(binary)
        return Lin({len(self.lb) - 1: 1.0})

    def binary(self) -> Lin:
        return self.var(0.0, 1.0, binary=True)

    def widen_box(self, lo: float, hi: float) -> tuple[float, float]:
        """`widen`, counting the boxes it widens (the exact solvers then run without presolve)."""
        out = widen(lo, hi)
        self.widened += out != (lo, hi)
        return out

    def _term_mag(self, e: Lin) -> float:
        return sum(max(abs(c * self.lb[k]), abs(c * self.ub[k])) for k, c in e.terms.items())

    def error(self, e: Lin, term_mag: float | None = None) -> float:
        """Bound on ``|float evaluation of e - e|`` at any point of the variable bounds.

        Covers the fold of the constant (`Lin.err`) and the rounding of ``Σ coef_i x_i`` in any
        summation order (a float computation such as the nominal training's matmul).
        """
        if not e.terms:
            return e.err
        if term_mag is None:
            term_mag = self._term_mag(e)
        return e.err + 2.0 * (len(e.terms) + e.nops + 2) * _U * term_mag

    def _maxabs(self, e: Lin) -> float:
        lo, hi = self.bounds(e)
        return max(abs(lo), abs(hi))

    def bounds(self, e: Lin) -> tuple[float, float]:
        """Sound interval of ``e`` over the variable bounds, padded for rounding.

        It contains the represented expression and every float evaluation of it (`error`), so
        a decision made from it (a ReLU or hinge fixed on or off) holds for the nominal float trajectory.
        """
        if e.is_const:
            r = e.err
            if r == 0.0:
                return e.const, e.const
            lo, hi = pad(np.float64(e.const - r), np.float64(e.const + r), abs(e.const) + r, 1)
            return float(lo), float(hi)
        lo = hi = mag = 0.0
        for k, c in e.terms.items():
            a, b = c * self.lb[k], c * self.ub[k]
            if a > b:
                a, b = b, a
            lo += a
            hi += b
            mag += max(abs(a), abs(b))
        r = self.error(e, mag)
        lo, hi = pad(
            np.float64(lo + e.const - r),
            np.float64(hi + e.const + r),
            mag + abs(e.const) + r,
            len(e.terms) + 2,
        )
        return float(lo), float(hi)

    def add_row(self, terms: dict[int, float], rhs: float, *, eq: bool = False) -> None:
        """``Σ terms <= rhs`` (or ``== rhs``)."""
        self.rows.append((terms, eq, float(rhs)))

    def _all_binary(self, e: Lin) -> bool:
        return bool(e.terms) and all(self.is_binary[k] for k in e.terms)

    def as_var(self, e: Lin) -> Lin:
        """A single variable equal to ``e`` (``e`` itself when it already is one)."""
        if e.is_const or (len(e.terms) == 1 and e.const == 0.0 and next(iter(e.terms.values())) == 1.0):
            return e
        lo, hi = self.bounds(e)
        v = self.var(lo, hi)
        v.xerr = self.error(e)
        (k,) = v.terms
        terms = {key: -c for key, c in e.terms.items()}
        terms[k] = 1.0
        self.add_row(terms, e.const, eq=True)
        return v

    def shared(self, e: Lin) -> Lin:
        """``e`` prepared for use in several products (materialised unless constant or all-binary)."""
        if e.is_const or self._all_binary(e):
            return e
        return self.as_var(e)

    # -- nonlinear pieces ---------------------------------------------------------------
    @staticmethod
    def _row(*parts: tuple[Lin | int, float]) -> tuple[dict[int, float], float]:
        """Terms and constant of ``Σ c * part`` (a part is an expression or a variable index)."""
        terms: dict[int, float] = {}
        const = 0.0
        for part, c in parts:
            if isinstance(part, Lin):
                const += c * part.const
                for k, v in part.terms.items():
                    terms[k] = terms.get(k, 0.0) + c * v
            else:
                terms[part] = terms.get(part, 0.0) + c
        return terms, const

    def _le(self, *parts: tuple[Lin | int, float], rhs: float = 0.0) -> None:
        """``Σ c * part <= rhs``."""
        terms, const = self._row(*parts)
        self.add_row(terms, rhs - const)

    def _binary_times(self, d: int, e: Lin) -> Lin:
        """``s = δ e`` for a binary ``δ`` by four big-M inequalities (exact)."""
        if e.is_const:
            return Lin({d: e.const}, xerr=e.err)
        bL, bU = self.bounds(e)
        s = self.var(min(0.0, bL), max(0.0, bU))
        (si,) = s.terms
        self._le((si, 1.0), (d, -bU))  # s <= u δ
        self._le((si, -1.0), (d, bL))  # s >= l δ
        self._le((si, 1.0), (e, -1.0), (d, -bL), rhs=-bL)  # s <= e - l (1 - δ)
        self._le((si, -1.0), (e, 1.0), (d, bU), rhs=bU)  # s >= e - u (1 - δ)
        return s

    def mul(self, e1: Lin, e2: Lin) -> Lin:
        """``e1 * e2``: linear, exact big-M (binary factor) or a bilinear variable."""
        if e2.is_const and not e1.is_const:
            e1, e2 = e2, e1
        if e1.is_const:
            r = e2 * e1.const
            if e1.err:
                r.xerr += e1.err * self._maxabs(e2)
            return r
        if not self._all_binary(e1) and self._all_binary(e2):
            e1, e2 = e2, e1
        if self._all_binary(e1):
            parts = [e2 * e1.const] + [self._binary_times(d, e2) * c for d, c in e1.terms.items()]
            return lin_sum(parts)
        a, b = self.as_var(e1), self.as_var(e2)
        (ai,), (bi,) = a.terms, b.terms
        p = np.array(
            [
                self.lb[ai] * self.lb[bi],
                self.lb[ai] * self.ub[bi],
                self.ub[ai] * self.lb[bi],
                self.ub[ai] * self.ub[bi],
            ]
        )
        lo, hi = pad(p.min(), p.max(), np.abs(p).max(), 0)
        s = self.var(float(lo), float(hi))
        ea, eb = a.err, b.err
        if ea or eb:
            ma = max(abs(self.lb[ai]), abs(self.ub[ai]))
            mb = max(abs(self.lb[bi]), abs(self.ub[bi]))
            s.xerr = ma * eb + mb * ea + ea * eb
        self.bilinear.append((next(iter(s.terms)), ai, bi))
        return s

    def tightened_bounds(self, exprs: list[Lin]) -> list[tuple[float, float]]:
        """Interval bounds of ``exprs``, tightened by ``self.tighten`` (if given) on the program so far.

        ``tighten(program, tasks)`` returns sound bounds of the program's objectives (e.g. its LP
        relaxation: McCormick envelopes, relaxed binaries, which contains every feasible point of the
        constraints written so far).
        """
        bounds = [self.bounds(e) for e in exprs]
        todo = [j for j, (lo, hi) in enumerate(bounds) if lo < 0 < hi]
        if self.tighten is None or not todo:
            return bounds
        program = self.finish([exprs[j] for j in todo])
        tasks = [(i, s) for i in range(len(todo)) for s in (1, -1)]
        values = self.tighten(program, tasks)
        for i, j in enumerate(todo):
            lo, hi = bounds[j]
            r = self.error(exprs[j])  # the LP bounds the represented value; widen to its float evaluations
            bounds[j] = (max(lo, values[2 * i] - r), min(hi, values[2 * i + 1] + r))
        return bounds

    def relu(self, z: Lin, bounds: tuple[float, float] | None = None) -> tuple[Lin, Lin]:
        """``h = max(z, 0)`` and the derivative indicator ``δ = [z > 0]`` (either value at ``z = 0``).

        ``bounds`` are sound bounds on ``z`` (default: its interval bounds).  The unit is fixed only
        when the padded bounds exclude the kink; otherwise ``δ`` stays free and the big-M rows are
        relaxed by the rounding error of ``z``, so the nominal float choice (``δ = [z_float > 0]``)
        stays feasible.
        """
        lo, hi = self.bounds(z) if bounds is None else bounds
        if lo > 0:
            h = self.as_var(z)
            if len(h.terms) == 1 and h.const == 0.0:
                (k,) = h.terms
                self.lb[k], self.ub[k] = max(self.lb[k], lo), min(self.ub[k], hi)
            return h, Lin(const=1.0)
        if hi <= 0:
            return Lin(), Lin()
        d = self.binary()
        h = self.var(0.0, hi)
        (di,), (hv,) = d.terms, h.terms
        r = self.error(z)
        self._le((z, 1.0), (hv, -1.0), rhs=r)  # h >= z - r
        self._le((hv, 1.0), (z, -1.0), (di, -lo), rhs=r - lo)  # h <= z + r - l (1 - δ)
        self._le((hv, 1.0), (di, -hi))  # h <= u δ
        return h, d

    def positive(self, v: Lin, bounds: tuple[float, float] | None = None) -> Lin:
        """Indicator ``a = [v > 0]`` (either value at ``v = 0``); ``bounds`` are sound bounds on ``v``."""
        lo, hi = self.bounds(v) if bounds is None else bounds
        if lo > 0:
            return Lin(const=1.0)
        if hi <= 0:
            return Lin()
        a = self.binary()
        (ai,) = a.terms
        r = self.error(v)  # rows relaxed by the rounding error of v: the float choice stays feasible
        terms = dict(v.terms)
        terms[ai] = terms.get(ai, 0.0) - hi
        self.add_row(terms, r - v.const)  # v <= u a + r
        terms = {k: -c for k, c in v.terms.items()}
        terms[ai] = terms.get(ai, 0.0) - lo
        self.add_row(terms, v.const - lo + r)  # v >= l (1 - a) - r
        return a

    def with_linear_term(self, e: Lin, theta: list[Lin], coef: np.ndarray) -> Lin:
        """``e + Σ_i coef_i θ_i`` for parameter variables ``θ_i`` (``coef_i = 0`` where ``θ_i`` is constant).

        A coefficient merged with one of ``e``'s own is rounded; that rounding (at most ``2**-52 |c|``
        times the variable's magnitude) is added to the error record, so the represented expression
        stays within `error` of the exact ``e + coef · θ``.
        """
        terms = dict(e.terms)
        xerr = e.xerr
        for i in np.flatnonzero(coef):
            if theta[i].is_const:
                raise RuntimeError("internal error: a multiplier on a parameter whose box is a point")
            (v,) = theta[i].terms
            old = terms.get(v, 0.0)
            new = old + float(coef[i])
            if old != 0.0:
                xerr += _U * abs(new) * max(abs(self.lb[v]), abs(self.ub[v]))
            if new == 0.0:
                terms.pop(v, None)
            else:
                terms[v] = new
        return Lin(terms, e.const, mag=e.mag, nops=e.nops, xerr=xerr)

    # -- output -------------------------------------------------------------------------
    def finish(self, objectives: list[Lin]) -> Program:
        n = len(self.lb)
        data, cols, ptr, rhs, eq = [], [], [0], [], []
        for terms, is_eq, r in self.rows:
            cols.extend(terms.keys())
            data.extend(terms.values())
            ptr.append(len(cols))
            rhs.append(r)
            eq.append(is_eq)
        A = sp.csr_matrix(
            (
                np.asarray(data, dtype=np.float64),
                np.asarray(cols, dtype=np.int64),
                np.asarray(ptr, dtype=np.int64),
            ),
            shape=(len(self.rows), n),
        )
        objs = []
        obounds = []
        oerrs = []
        for e in objectives:
            oerrs.append(self.error(e))
            idx = np.fromiter(e.terms.keys(), dtype=np.int64, count=len(e.terms))
            coef = np.fromiter(e.terms.values(), dtype=np.float64, count=len(e.terms))
            objs.append((idx, coef, e.const))
            obounds.append(self.bounds(e))
        return Program(
            lb=np.asarray(self.lb, dtype=np.float64),
            ub=np.asarray(self.ub, dtype=np.float64),
            binary=np.asarray(self.is_binary, dtype=bool),
            A=A,
            is_eq=np.asarray(eq, dtype=bool),
            rhs=np.asarray(rhs, dtype=np.float64),
            bilinear=np.asarray(self.bilinear, dtype=np.int64).reshape(-1, 3),
            objectives=objs,
            objective_bounds=np.asarray(obounds, dtype=np.float64).reshape(-1, 2),
            objective_errors=np.asarray(oerrs, dtype=np.float64),
            widened=self.widened,
        )
