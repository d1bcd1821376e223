"""Performative generalization bounds with every term: `generalization_bound` (Thm 3.13/3.15 here, the
Rademacher bound in `_rademacher`).

Each bound returns a `BoundResult` (`bound_result`); `retraining_bound` (Cor 3.8) is in `retraining` and
`max_affected_share`, which inverts a bound for a planner, in `affected_share`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from scipy.stats import norm as normal

from certkit._validation import (
    check_in_options,
    check_integer,
    check_level,
    check_nonnegative,
    check_probability,
)
from certkit.performative._inputs import check_order
from certkit.performative._rademacher import _rademacher
from certkit.performative.bound_result import BoundResult, _overflow_guard, _result, _zero_radius_error
from certkit.performative.retraining import retraining_bound

# BoundResult and retraining_bound stay importable from here.
__all__ = ["BoundResult", "generalization_bound", "retraining_bound"]

KINDS = ("thm3.13", "thm3.15", "rademacher")


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
    constant = (
        ("model_lipschitz", model_lipschitz)
        if kind == "thm3.13"
        else ("wasserstein_constant", wasserstein_constant)
    )
    given = (
        ("diameter", diameter),
        ("loss_lipschitz", loss_lipschitz),
        constant,
        ("entropy_integral", entropy_integral),
        ("loss_range", loss_range),
    )
    # an overflow names the huge constants, else the ones raised to the power p (and p)
    huge = [f"{name}={value!r}" for name, value in given if abs(value) >= 1e100]
    culprits = ", ".join(huge) if huge else f"diameter={diameter!r}, p={p!r}"
    R = _overflow_guard(lambda: notebook_radius(share, n, diameter, p, confidence_level), culprits)
    if R == 0 and (kind == "thm3.15" or p > 1.0):
        zero = "share=0" if share == 0 else "diameter=0"
        term = "L_loss L_f D_Z^p / R^(p-1)" if kind == "thm3.13" else "B 2^(p-1) (1 + D_Z/R)^p"
        raise _zero_radius_error(
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
    $1 + \Lambda X$ (hinge), $\log(1 + e^{\Lambda X})$ (logistic); a ``loss_bound`` below a loss observed on
    the sample is refused. ``intercept`` $b$ (e.g. a fitted scikit-learn model's ``intercept_``) makes the
    class affine, $x \mapsto \theta^\top x + b$: then
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


def __getattr__(name: str) -> Any:  # PEP 562: max_affected_share moved to its own module
    if name == "max_affected_share":
        import warnings

        from certkit.performative.affected_share import max_affected_share

        warnings.warn(
            "certkit.performative.bounds.max_affected_share moved to certkit.performative.affected_share; "
            "import it from certkit.performative",
            DeprecationWarning,
            stacklevel=2,
        )
        return max_affected_share
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
