"""Performative generalization bounds with every term: Thm 3.13/3.15, Rademacher, retraining (Cor 3.8).

Each bound returns a `BoundResult`; `max_affected_share` inverts a bound for a planner: the largest share of
performatively affected units for which the bound stays below a target.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy.stats import norm as normal

from certkit._results import ResultMixin, format_table
from certkit._validation import (
    check_in_options,
    check_integer,
    check_level,
    check_nonnegative,
    check_positive,
    check_probability,
)
from certkit.performative._inputs import check_order, check_problem
from certkit.performative.closed_form import loss_values
from certkit.performative.risk import wasserstein_risk

__all__ = ["BoundResult", "generalization_bound", "max_affected_share", "retraining_bound"]

KINDS = ("thm3.13", "thm3.15", "rademacher")
_BRUTE_FORCE_BELOW = 200  # > q^2 for every confidence level below 1 - 1e-40


@dataclasses.dataclass(frozen=True)
class BoundResult(ResultMixin):
    """A bound and its additive terms.

    Attributes
    ----------
    total : float
        The bound: the sum of `terms` (always finite: a bound that would be infinite or overflow, e.g. at a
        zero radius with $p > 1$, raises ValueError instead).
    terms : dict of str to float
        Each additive term by name (``"complexity"``, ``"sampling"``, ``"performative"``, ...).
    assumptions : dict of str to object
        The constants the bound was evaluated with and the conditions it needs, by name.
    """

    total: float
    terms: Mapping[str, float]
    assumptions: Mapping[str, Any]

    @property
    def loss_range(self) -> float | None:
        """The range of the loss the bound assumes (F or M), None when the bound does not fix one."""
        for key in _RANGE_KEYS:
            if key in self.assumptions:
                return float(self.assumptions[key])
        return None

    @property
    def vacuous(self) -> bool:
        """Whether the bound exceeds the loss range: a gap above it holds for every loss with values in that
        range, so the bound says nothing."""
        return self.loss_range is not None and self.total > self.loss_range

    def summary(self) -> str:
        """The terms, the total and the assumptions as plain text."""
        rows = [[name, value] for name, value in self.terms.items()] + [["total", self.total]]
        lines = [format_table(["term", "value"], rows, title=self.assumptions.get("bound", "bound"))]
        if self.vacuous:
            lines.append(
                f"vacuous: the total {self.total:.4g} exceeds the loss range {self.loss_range:g}, which "
                "bounds every gap of a loss with values in that range"
            )
        lines.append("assumptions:")
        lines.extend(f"  {k}: {v}" for k, v in self.assumptions.items() if k != "bound")
        return "\n".join(lines)


_RANGE_KEYS = ("F (loss range)", "loss_bound M")


class _ZeroRadius(ValueError):
    """A Thm 3.13 (p > 1) / 3.15 bound at radius R = 0, where its complexity term is infinite."""


def _result(terms: dict[str, float], assumptions: dict[str, Any], *, culprits: str) -> BoundResult:
    """The result with the total; ValueError naming `culprits` when a term or the total overflows float64."""
    try:
        total = math.fsum(terms.values()) if all(np.isfinite(v) for v in terms.values()) else math.inf
    except OverflowError:  # finite terms whose sum overflows
        total = math.inf
    if not math.isfinite(total):
        big = ", ".join(f"{k} = {v:.3g}" for k, v in terms.items())
        raise ValueError(
            f"{culprits}: the bound overflows float64 ({big}); it is vacuous at this scale - rescale the "
            "problem (e.g. the data space to a unit diameter)"
        )
    return BoundResult(total=float(total), terms=dict(terms), assumptions=dict(assumptions))


def _overflow_guard(fn: Callable[[], float], culprits: str) -> float:
    """`fn()` with Python's OverflowError (from ** and math functions) turned into a ValueError naming
    `culprits`."""
    try:
        with np.errstate(over="ignore"):
            return fn()
    except OverflowError:
        raise ValueError(
            f"{culprits}: a term of the bound overflows float64; it is vacuous at this scale - rescale the "
            "problem (e.g. the data space to a unit diameter)"
        ) from None


def notebook_radius(share: float, n: int, diameter: float, p: float, confidence_level: float) -> float:
    r"""$R = \max((q\sqrt{r(1-r)/n})^{1/p} D_Z,\ r^{1/p} D_Z)$ with $q = \Phi^{-1}(1 - \delta/2)$
    (reference notebook)."""
    q = float(normal.ppf(1.0 - (1.0 - confidence_level) / 2.0))
    spread = (q * math.sqrt(share * (1.0 - share) / n)) ** (1.0 / p) * diameter
    return max(spread, share ** (1.0 / p) * diameter)


def _thm_terms(
    kind: str,
    *,
    n: int,
    share: float,
    diameter: float,
    p: float,
    loss_lipschitz: float,
    model_lipschitz: float | None,
    entropy_integral: float,
    loss_range: float,
    wasserstein_constant: float | None,
    confidence_level: float,
) -> BoundResult:
    delta = 1.0 - confidence_level
    culprits = f"diameter={diameter!r}, loss_lipschitz={loss_lipschitz!r}"
    R = _overflow_guard(lambda: notebook_radius(share, n, diameter, p, confidence_level), culprits)
    if R == 0 and (kind == "thm3.15" or p > 1.0):
        zero = "share=0" if share == 0 else "diameter=0"
        term = "L_loss L_f D_Z^p / R^(p-1)" if kind == "thm3.13" else "B 2^(p-1) (1 + D_Z/R)^p"
        raise _ZeroRadius(
            f"{zero} gives the radius R = 0, where the Thm {kind[3:]} complexity term {term} is infinite: "
            "the bound is vacuous; give share > 0 and diameter > 0"
            + (" (or p=1)" if kind == "thm3.13" else "")
        )
    if kind == "thm3.13":
        extra = _overflow_guard(
            lambda: loss_lipschitz * model_lipschitz * diameter**p / R ** (p - 1.0), culprits
        )
    else:
        extra = _overflow_guard(
            lambda: wasserstein_constant * 2.0 ** (p - 1.0) * (1.0 + diameter / R) ** p, culprits
        )
    terms = {
        "complexity": 48.0 / math.sqrt(n) * (entropy_integral + extra),
        "sampling": loss_range * math.sqrt(2.0 * math.log(2.0 / delta) / n),
        "performative": 2.0 * loss_lipschitz * R,
    }
    assumptions: dict[str, Any] = {
        "bound": f"Thm {kind[3:]}-style performative generalization gap (reference-notebook constants)",
        "n": n,
        "share r = m/n": share,
        "diameter D_Z": diameter,
        "p": p,
        "L_loss": loss_lipschitz,
        "C_inf (entropy integral)": entropy_integral,
        "F (loss range)": loss_range,
        "confidence_level": confidence_level,
        "radius R": R,
        "conditions": "loss L_loss-Lipschitz on Z, data in a set of diameter D_Z, i.i.d. sample, m of n "
        "units affected; R = max((q sqrt(r(1-r)/n))^(1/p), r^(1/p)) D_Z, q = Phi^-1(1 - delta/2)",
    }
    if kind == "thm3.13":
        assumptions["L_f (model Lipschitz)"] = model_lipschitz
    else:
        assumptions["B (Wasserstein constant)"] = wasserstein_constant
    return _result(terms, assumptions, culprits=culprits)


def generalization_bound(
    *,
    kind: str,
    share: float | None = None,
    n: int | None = None,
    diameter: float | None = None,
    p: float = 2,
    confidence_level: float = 0.95,
    loss_lipschitz: float | None = None,
    model_lipschitz: float | None = None,
    entropy_integral: float | None = None,
    loss_range: float | None = None,
    wasserstein_constant: float | None = None,
    theta: Any = None,
    X: Any = None,
    y: Any = None,
    loss: str = "hinge",
    weight_norm: float | None = None,
    feature_norm: float | None = None,
    loss_bound: float | None = None,
    radius_population: float | None = None,
    radius_sample: float | None = None,
    intercept: float | None = None,
) -> BoundResult:
    r"""Performative generalization bound $R(\mathcal D_{perf}, \theta) - \hat R(S_{perf}, \theta) \le$ total.

    ``kind="thm3.13"`` / ``"thm3.15"`` (the bounds of the paper's job-seeker study, as evaluated in the
    reference notebook; $r = m/n$ the share of affected units, $\delta = 1 -$ ``confidence_level``, $q =
    \Phi^{-1}(1 - \delta/2)$):

    - radius $R = \max((q\sqrt{r(1-r)/n})^{1/p} D_Z,\ r^{1/p} D_Z)$;
    - complexity $\frac{48}{\sqrt n}(C_\infty + L_\ell L_f D_Z^p / R^{p-1})$ (3.13) or $\frac{48}{\sqrt
      n}(C_\infty + B\,2^{p-1}(1 + D_Z/R)^p)$ (3.15);
    - sampling $F\sqrt{2\log(2/\delta)/n}$; performative $2 L_\ell R$.

    Required: ``share``, ``n``, ``diameter``, ``loss_lipschitz``, ``entropy_integral``, ``loss_range``, and
    ``model_lipschitz`` (3.13) or ``wasserstein_constant`` (3.15). The paper's reference constants are $D_Z =
    5.29$, $L_\ell = \sqrt{28}$, $L_f = 0.25$, $C_\infty = 7.3855$, $p = 2$, $F = 1$, $B = 0.001$.

    ``kind="rademacher"``: for linear models with $\|\theta\|_2 \le \Lambda$, $\|x\|_2 \le X$ and a margin
    loss that is 1-Lipschitz in the margin (hinge, logistic) with values in $[0, M]$: with probability
    $\ge 1 - \delta$,

    $$R(\mathcal D_{perf}, \theta) - \hat R(S_{perf}, \theta) \le \frac{2\Lambda X}{\sqrt n} +
    M\sqrt{\frac{\log(1/\delta)}{2n}} + \Big[\sup_{B_p(\mathcal D, \rho_D)} R - R(\mathcal D)\Big] +
    \Big[\hat R(S) - \inf_{B_p(\hat S, \rho_S)} R\Big],$$

    for every $\mathcal D_{perf}$ within $W_p$ distance $\rho_D$ of the population $\mathcal D$ and every
    $S_{perf}$ within $\rho_S$ of the sample (labels fixed, $\ell_2$ transport). The sample term is computed
    exactly with `wasserstein_risk` on (``theta``, ``X``, ``y``). The population term cannot be evaluated on
    the unknown $\mathcal D$; it is replaced by its distribution-free bound $\rho_D\|\theta\|_2$, which is
    the exact $W_1$ excess of a 1-Lipschitz margin loss on every distribution and bounds the $W_p$ excess
    because $W_1 \le W_p$ (computed as the $W_1$ `wasserstein_risk` excess on the sample, which equals it).
    Required: ``theta``, ``X``, ``y``, ``weight_norm`` $\Lambda$ and ``feature_norm`` $X$ (a priori bounds,
    not fitted to the sample), and either both radii or ``share`` and ``diameter`` (then $\rho_D = \rho_S =
    r^{1/p} D_Z$, the `flip_radius`). ``loss_bound`` $M$ defaults to the loss's maximum over the class:
    $1 + \Lambda X$ (hinge), $\log(1 + e^{\Lambda X})$ (logistic). ``intercept`` $b$ (e.g. a fitted
    scikit-learn model's ``intercept_``) makes the class affine, $x \mapsto \theta^\top x + b$: then
    $\Lambda$ bounds $\|(\theta, b)\|_2$ and $X$ is replaced by $\sqrt{X^2 + 1}$ (the features augmented by a
    constant 1) in the complexity term and the default $M$; $b$ does not move with $x$, so the performative
    terms keep their form.

    Returns
    -------
    BoundResult
        Terms ``complexity``, ``sampling``, ``performative`` (Thm kinds) or ``complexity``, ``sampling``,
        ``population_performative``, ``sample_performative`` (Rademacher).
    """
    kind = check_in_options(kind, "kind", KINDS)
    confidence_level = check_level(confidence_level)
    p = check_order(p)
    given = {
        k: v
        for k, v in {
            "model_lipschitz": model_lipschitz,
            "entropy_integral": entropy_integral,
            "loss_range": loss_range,
            "wasserstein_constant": wasserstein_constant,
            "theta": theta,
            "X": X,
            "y": y,
            "weight_norm": weight_norm,
            "feature_norm": feature_norm,
            "loss_bound": loss_bound,
            "radius_population": radius_population,
            "radius_sample": radius_sample,
            "loss_lipschitz": loss_lipschitz,
            "n": n,
            "intercept": intercept,
        }.items()
        if v is not None
    }
    if kind == "rademacher":
        _reject(
            given,
            kind,
            (
                "model_lipschitz",
                "entropy_integral",
                "loss_range",
                "wasserstein_constant",
                "loss_lipschitz",
                "n",
            ),
        )
        return _rademacher(
            theta=theta,
            X=X,
            y=y,
            loss=loss,
            weight_norm=weight_norm,
            feature_norm=feature_norm,
            loss_bound=loss_bound,
            radius_population=radius_population,
            radius_sample=radius_sample,
            share=share,
            diameter=diameter,
            p=p,
            confidence_level=confidence_level,
            intercept=intercept,
        )
    specific = "model_lipschitz" if kind == "thm3.13" else "wasserstein_constant"
    _reject(
        given,
        kind,
        (
            "theta",
            "X",
            "y",
            "weight_norm",
            "feature_norm",
            "loss_bound",
            "radius_population",
            "radius_sample",
            "intercept",
            "wasserstein_constant" if kind == "thm3.13" else "model_lipschitz",
        ),
    )
    values = {
        "share": share,
        "n": n,
        "diameter": diameter,
        "loss_lipschitz": loss_lipschitz,
        "entropy_integral": entropy_integral,
        "loss_range": loss_range,
        specific: given.get(specific),
    }
    missing = [k for k, v in values.items() if v is None]
    if missing:
        raise TypeError(f"generalization_bound(kind={kind!r}) needs {', '.join(missing)}")
    return _thm_terms(
        kind,
        n=check_integer(n, "n", minimum=1),
        share=check_probability(share, "share"),
        diameter=check_nonnegative(diameter, "diameter"),
        p=p,
        loss_lipschitz=check_nonnegative(loss_lipschitz, "loss_lipschitz"),
        model_lipschitz=None
        if model_lipschitz is None
        else check_nonnegative(model_lipschitz, "model_lipschitz"),
        entropy_integral=check_nonnegative(entropy_integral, "entropy_integral"),
        loss_range=check_nonnegative(loss_range, "loss_range"),
        wasserstein_constant=None
        if wasserstein_constant is None
        else check_nonnegative(wasserstein_constant, "wasserstein_constant"),
        confidence_level=confidence_level,
    )


def _reject(given: Mapping[str, Any], kind: str, names: tuple[str, ...]) -> None:
    extra = [k for k in names if k in given]
    if extra:
        raise TypeError(f"generalization_bound(kind={kind!r}) does not use {', '.join(extra)}")


def _rademacher(
    *,
    theta,
    X,
    y,
    loss,
    weight_norm,
    feature_norm,
    loss_bound,
    radius_population,
    radius_sample,
    share,
    diameter,
    p,
    confidence_level,
    intercept,
) -> BoundResult:
    loss = check_in_options(loss, "loss", ("hinge", "logistic"))
    for name, value in (
        ("theta", theta),
        ("X", X),
        ("y", y),
        ("weight_norm", weight_norm),
        ("feature_norm", feature_norm),
    ):
        if value is None:
            raise TypeError(f"generalization_bound(kind='rademacher') needs {name}")
    Lam = check_nonnegative(weight_norm, "weight_norm")
    Xb = check_nonnegative(feature_norm, "feature_norm")
    if intercept is not None and np.ndim(intercept) != 0:
        raise ValueError(f"intercept must be a scalar for kind='rademacher', got shape {np.shape(intercept)}")
    b_in = 0.0 if intercept is None else intercept
    thetas, X_arr, y_arr, bs, batch = check_problem(theta, X, y, loss, b_in)
    if batch:
        raise ValueError(f"theta must be 1-D for kind='rademacher', got shape {thetas.shape}")
    theta_arr, b = thetas[0], float(bs[0])
    affine = intercept is not None
    weight = float(np.hypot(np.linalg.norm(theta_arr), b))  # ||(theta, b)||_2 (= ||theta||_2 without b)
    if weight > Lam * (1 + 1e-12):
        what = "||(theta, intercept)||_2" if affine else "||theta||_2"
        raise ValueError(
            f"{what} = {weight:.6g} exceeds weight_norm = {Lam:g}; the class bound covers only "
            f"{what} <= weight_norm"
        )
    if np.linalg.norm(X_arr, axis=1).max() > Xb * (1 + 1e-12):
        raise ValueError(
            "some rows of X have ||x||_2 > feature_norm; feature_norm must bound every feature vector"
        )
    Xc = math.hypot(Xb, 1.0) if affine else Xb  # bound on ||(x, 1)||_2 for the affine class
    both_radii = radius_population is not None and radius_sample is not None
    if both_radii and (share is not None or diameter is not None):
        raise TypeError(
            "give the radii (radius_population, radius_sample) or share and diameter, not both: "
            "with both radii given, share and diameter would be ignored"
        )
    if radius_population is None or radius_sample is None:
        if radius_population is not None or radius_sample is not None:
            raise TypeError("give both radius_population and radius_sample, or share and diameter")
        if share is None or diameter is None:
            raise TypeError("generalization_bound(kind='rademacher') needs the radii or share and diameter")
        rho = check_probability(share, "share") ** (1.0 / p) * check_nonnegative(diameter, "diameter")
        radius_population = radius_sample = rho
    rho_d = check_nonnegative(radius_population, "radius_population")
    rho_s = check_nonnegative(radius_sample, "radius_sample")
    if loss_bound is None:
        loss_bound = 1.0 + Lam * Xc if loss == "hinge" else float(np.logaddexp(0.0, Lam * Xc))
    M = check_nonnegative(loss_bound, "loss_bound")
    n = X_arr.shape[0]
    empirical = float(loss_values(loss, y_arr * (X_arr @ theta_arr + b)).mean())
    best = wasserstein_risk(
        theta_arr, X_arr, y_arr, loss=loss, radius=rho_s, p=p, norm=2, direction="inf", intercept=b
    )
    # population term: the W_1 excess rho_D ||theta||_2, exact on every distribution, bounds the W_p excess
    population = rho_d * float(np.linalg.norm(theta_arr)) * (1.0 + 1e-12)
    delta = 1.0 - confidence_level
    terms = {
        "complexity": 2.0 * 1.0 * Lam * Xc / math.sqrt(n),
        "sampling": M * math.sqrt(math.log(1.0 / delta) / (2.0 * n)),
        "population_performative": population,
        "sample_performative": empirical - best,
    }
    assumptions = {
        "bound": "Rademacher performative generalization gap",
        "n": n,
        "loss": f"{loss} (1-Lipschitz in the margin)",
        "weight_norm Lambda": Lam,
        "feature_norm X": Xb,
        "intercept b": b if affine else "none (linear class)",
        "loss_bound M": M,
        "p": p,
        "radius_population": rho_d,
        "radius_sample": rho_s,
        "confidence_level": confidence_level,
        "empirical_risk": empirical,
        "conditions": "i.i.d. sample; ||theta||_2 <= Lambda and ||x||_2 <= X fixed before seeing the data; "
        "loss in [0, M]; W_p(D_perf, D) <= radius_population, W_p(S_perf, S) <= radius_sample (l2 "
        "transport, labels fixed); population term = its distribution-free W_1 bound"
        + ("; affine class: ||(theta, b)||_2 <= Lambda, features augmented by 1" if affine else ""),
    }
    return _result(terms, assumptions, culprits="weight_norm, feature_norm, loss_bound or the radii")


def retraining_bound(
    *,
    n: int,
    share: float,
    diameter: float,
    loss_lipschitz: float,
    contraction: float,
    n_rounds: int,
    map_lipschitz: float,
    dimension: float,
    concentration: tuple[float, float] = (1.0, 1.0),
    p: float = 2,
    confidence_level: float = 0.95,
    empirical_risk: float = 0.0,
) -> BoundResult:
    r"""Risk after $T$ rounds of retraining on performatively distorted samples (Cor. 3.8-style).

    $\mathcal R(d_0, \hat\theta_T) \le \mathcal R(\hat d_{T-1}, \hat\theta_T) +
    L_\ell\left(\frac{\log(C_a/\delta)}{C_b n}\right)^{p/\nu} + \frac{\kappa^{T-1} - 1}{L_\ell^{-1}(\kappa -
    1)}\left(\frac mn\right)^{1/p} D_Z \tilde L_a$,

    with the last term's limit $(T - 1) L_\ell (m/n)^{1/p} D_Z \tilde L_a$ at $\kappa = 1$ (it is computed as
    the geometric sum $L_\ell\sum_{j<T-1}\kappa^j$, exact for every $\kappa$). Symbols as in the reference
    notebook of the paper's Cor. 3.8:

    Parameters
    ----------
    n : int
        Sample size.
    share : float
        $m/n$, the share of units the deployed model affects in each round.
    diameter : float
        $D_Z$, the diameter of the data space.
    loss_lipschitz : float
        $L_\ell$, the Lipschitz constant of the loss in $z$.
    contraction : float
        $\kappa > 0$ (the notebook's $\varepsilon$): the factor by which one round of retraining can amplify a
        distribution shift, i.e. the Lipschitz constant of one retrain-and-redeploy step (the notebook takes
        $\kappa = 1 + L_a$, $L_a$ the Lipschitz constant of the best response $G(d) = \arg\min_\theta \mathcal
        R(d, \theta)$). Not the radius.
    n_rounds : int
        $T \ge 1$ retraining rounds ($T = 1$: no accumulation).
    map_lipschitz : float
        $\tilde L_a$, the Lipschitz constant of the performative map in $\theta$ (the notebook uses $1/(1 +
        L_a)$).
    dimension : float
        $\nu > 0$, the (effective) dimension in the Wasserstein concentration of the empirical measure.
    concentration : (float, float), default (1, 1)
        $(C_a, C_b)$, the constants of that concentration inequality (not identified by the model; the
        notebook uses 1).
    p : float, default 2
        Wasserstein order.
    confidence_level : float, default 0.95
        $1 - \delta$.
    empirical_risk : float, default 0
        $\mathcal R(\hat d_{T-1}, \hat\theta_T)$; 0 gives a bound on the gap.

    Returns
    -------
    BoundResult
        Terms ``empirical_risk``, ``sampling``, ``performative`` (the accumulation term).
    """
    n = check_integer(n, "n", minimum=1)
    share = check_probability(share, "share")
    diameter = check_nonnegative(diameter, "diameter")
    L = check_positive(loss_lipschitz, "loss_lipschitz")
    kappa = check_positive(contraction, "contraction")
    T = check_integer(n_rounds, "n_rounds", minimum=1)
    La = check_nonnegative(map_lipschitz, "map_lipschitz")
    nu = check_positive(dimension, "dimension")
    if not isinstance(concentration, (tuple, list)) or len(concentration) != 2:
        raise TypeError("concentration must be a pair (C_a, C_b)")
    Ca = check_positive(concentration[0], "concentration[0] (C_a)")
    Cb = check_positive(concentration[1], "concentration[1] (C_b)")
    p = check_order(p)
    delta = 1.0 - check_level(confidence_level)
    if not np.isfinite(empirical_risk):
        raise ValueError("empirical_risk must be finite")
    accumulation = L * _geometric_sum(kappa, T - 1)
    terms = {
        "empirical_risk": float(empirical_risk),
        "sampling": L * max(math.log(Ca / delta) / (Cb * n), 0.0) ** (p / nu),
        "performative": accumulation * share ** (1.0 / p) * diameter * La,
    }
    assumptions = {
        "bound": f"retraining bound (Cor 3.8-style), T = {T}",
        "n": n,
        "share m/n": share,
        "diameter D_Z": diameter,
        "L_loss": L,
        "contraction kappa": kappa,
        "n_rounds T": T,
        "map_lipschitz L_a~": La,
        "dimension nu": nu,
        "concentration (C_a, C_b)": (Ca, Cb),
        "p": p,
        "confidence_level": 1.0 - delta,
        "conditions": "repeated risk minimisation; each round affects m of n units; loss L-Lipschitz; "
        "W_p concentration P(W_p > t) <= C_a exp(-C_b n t^(nu/p))",
    }
    return _result(terms, assumptions, culprits=f"n_rounds={T}, contraction={kappa!r}, diameter={diameter!r}")


def _geometric_sum(kappa: float, count: int) -> float:
    """Σ_{j < count} κ^j: summed exactly (fsum) up to 10,000 terms, in closed form beyond; ValueError naming
    n_rounds when it overflows float64."""
    if count == 0:
        return 0.0
    if kappa == 1.0:
        return float(count)
    log_top = (count - 1) * math.log(kappa)  # log of the largest term when κ > 1
    if kappa > 1.0 and log_top > 700.0:
        raise ValueError(
            f"n_rounds={count + 1} is too large for contraction={kappa!r}: the accumulation term grows like "
            f"kappa^(T - 1) = e^{log_top:.4g}, beyond float64; the bound is vacuous long before (reduce "
            "n_rounds or use contraction <= 1)"
        )
    if count <= 10_000:
        return math.fsum(kappa**j for j in range(count))
    return math.expm1(count * math.log(kappa)) / (kappa - 1.0)


def max_affected_share(target: float, *, kind: str, **kwargs: Any) -> float:
    r"""Largest share $m/n$ of affected units for which a bound stays at or below ``target``.

    Parameters
    ----------
    target : float
        The largest acceptable bound.
    kind : {"thm3.13", "thm3.15", "rademacher", "retraining"}
        Which bound (``"retraining"`` is `retraining_bound`, the others `generalization_bound`).
    **kwargs
        The bound's other arguments, without ``share``; ``n`` (or, for ``"rademacher"``, the length of ``y``)
        fixes the grid of shares $m/n$.

    Returns
    -------
    float
        $m/n$ for the largest integer $m \le n$ with bound $\le$ target. The Rademacher and retraining bounds
        increase with the share; the Thm 3.13/3.15 bounds first fall (the complexity term shrinks as the
        radius grows) and then rise; for $n$ above $q^2$ (here: $n \ge 200$) the radius $R$ increases with the
        share, their feasible shares form an interval and its right end is found by ternary search and
        bisection; smaller $n$ are checked share by share.

    Raises
    ------
    ValueError
        When no share keeps the bound below ``target`` (the message gives the smallest achievable bound).
    """
    target = float(target)
    if not np.isfinite(target):
        raise ValueError("target must be finite")
    kind = check_in_options(kind, "kind", (*KINDS, "retraining"))
    if "share" in kwargs:
        raise TypeError("max_affected_share varies share itself; do not pass it")
    fixed_radii = sorted({"radius_population", "radius_sample"} & kwargs.keys())
    if fixed_radii:
        raise TypeError(
            f"max_affected_share derives the radii from the share; do not pass {', '.join(fixed_radii)} "
            "(give diameter instead)"
        )
    if kind == "rademacher":
        if "y" not in kwargs or kwargs["y"] is None:
            raise TypeError("max_affected_share(kind='rademacher') needs y")
        n = len(kwargs["y"])
    else:
        if "n" not in kwargs:
            raise TypeError(f"max_affected_share(kind={kind!r}) needs n")
        n = check_integer(kwargs["n"], "n", minimum=1)

    def total(m: int) -> float:
        if kind == "retraining":
            return retraining_bound(share=m / n, **kwargs).total
        try:
            return generalization_bound(kind=kind, share=m / n, **kwargs).total
        except _ZeroRadius:  # share 0: the complexity term is infinite, never the best share
            return math.inf

    if kind in ("thm3.13", "thm3.15") and n < _BRUTE_FORCE_BELOW:
        # R(r) is increasing (so the bound unimodal in r) only when n exceeds q^2; small n: check every m
        feasible = [m for m in range(n + 1) if total(m) <= target]
        if feasible:
            return max(feasible) / n
        lo = min(range(n + 1), key=total)
    else:
        lo = _argmin_unimodal(total, n) if kind in ("thm3.13", "thm3.15") else 0
    best = total(lo)
    if best > target:
        raise ValueError(
            f"no share of affected units keeps the {kind} bound below target={target:g}; the smallest "
            f"bound is {best:.6g} at share {lo / n:.6g}"
        )
    hi = n
    if total(hi) <= target:
        return 1.0
    while hi - lo > 1:  # total(lo) <= target < total(hi), total increasing on [lo, hi]
        mid = (lo + hi) // 2
        if total(mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo / n


def _argmin_unimodal(f: Callable[[int], float], n: int) -> int:
    """Integer minimiser of a unimodal function on {0, ..., n} (ternary search)."""
    lo, hi = 0, n
    while hi - lo > 2:
        a = lo + (hi - lo) // 3
        b = hi - (hi - lo) // 3
        if f(a) <= f(b):
            hi = b
        else:
            lo = a
    return min(range(lo, hi + 1), key=f)
