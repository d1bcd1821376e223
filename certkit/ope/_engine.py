"""The estimation engine shared by the off-policy estimators and `sensitivity`: validation into a `_Problem`,
one estimate with its influence-function standard error, and the bootstrap."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from certkit._typing import ExecutorArg, Progress, RNGLike
from certkit._validation import check_integer, check_progress, check_rng
from certkit.ope._checks import _check_policy, _check_response, _check_work, _proba, _same_rows
from certkit.ope._data import StrategicData, as_strategic_data
from certkit.ope._diagnostics import _check_finite, _warn_weights, _weight_diagnostics
from certkit.ope.disclosure import X_POST_TOL, _check_disclosure
from certkit.ope.outcome import GLMOutcome, fit_outcome
from certkit.ope.response import _GaussianLogCost
from certkit.ope.result import OPEResult
from certkit.ope.target import _target_proba

_STRATEGIC = ("dr", "ipw", "dm")


@dataclasses.dataclass
class _Problem:
    """Validated inputs shared by a point estimate and its bootstrap replicates (picklable)."""

    kind: str
    data: StrategicData
    target: Any
    logging: Any
    response: Any
    outcome_model: Any
    cross_fit: int | None


def _validate(
    kind: str,
    data: Any,
    target_policy: Any,
    logging_policy: Any,
    response: Any,
    outcome_model: Any,
    cross_fit: Any,
) -> _Problem:
    data = as_strategic_data(data)
    strategic = kind in _STRATEGIC
    _check_policy(target_policy, "target_policy", explaining=strategic)
    _check_policy(logging_policy, "logging_policy", explaining=strategic)
    if strategic:
        if response is None:
            raise TypeError("response is required by the strategic estimators (e.g. LogNormalCostResponse)")
        _check_response(response, logging_policy, data.x_pre.shape[1])
        _check_disclosure(data, logging_policy, response.benefit, name="logging_policy",
                          tol=getattr(response, "x_post_tol", X_POST_TOL))
    p_log = _proba(logging_policy, data.x_post, "logging_policy", open_interval=True)
    expected = np.where(data.action == 1, p_log, 1.0 - p_log)
    if not np.allclose(data.pscore, expected, rtol=1e-6, atol=1e-12):
        raise ValueError(
            "data.pscore does not equal logging_policy's probability of the logged action at x_post; "
            "the data were logged under another policy"
        )
    if data.n < 2:
        raise ValueError(
            f"data must have at least 2 rows (a standard error needs two), got {data.n}"
        )
    if cross_fit is not None:
        cross_fit = check_integer(cross_fit, "cross_fit", minimum=2, maximum=data.n)
    return _Problem(kind, data, target_policy, logging_policy, response, outcome_model, cross_fit)


def _estimate(
    prob: _Problem,
    rng: np.random.Generator,
    *,
    with_se: bool = True,
    q_hat: tuple[np.ndarray, list[Any] | None] | None = None,
) -> tuple[float, float, float, np.ndarray | None]:
    """(value, std_error, response_std_error, importance weights or None) of one estimator on `prob.data`."""
    kind, data, response = prob.kind, prob.data, prob.response
    n = data.n
    strategic = kind in _STRATEGIC
    x = data.x_pre if strategic else data.x_post
    if strategic:
        p1, dp1 = _target_proba(data, prob.target, prob.logging, response, gradient=with_se)
    else:
        p1, dp1 = _proba(prob.target, data.x_post, "target_policy", open_interval=False), None
    p_logged = np.where(data.action == 1, p1, 1.0 - p1)
    weight = p_logged / data.pscore
    needs_q = kind in ("dr", "dm", "naive_dr")
    models = None
    if needs_q:
        if q_hat is None:
            folds = None
            if prob.cross_fit is not None:
                folds = rng.permutation(np.arange(n) % prob.cross_fit)
            q_hat = fit_outcome(x, data.action, data.reward, prob.outcome_model, folds=folds)
        q, models = q_hat
        q_logged = q[np.arange(n), data.action]
        baseline = (1.0 - p1) * q[:, 0] + p1 * q[:, 1]
    if kind in ("dr", "naive_dr"):
        terms = baseline + weight * (data.reward - q_logged)
    elif kind == "dm":
        terms = baseline
    else:
        terms = weight * data.reward
    value = float(np.mean(terms))
    used = None if kind == "dm" else weight
    if not with_se:
        return value, np.nan, np.nan, used
    influence = terms - value
    if kind == "dm" and models is not None and all(isinstance(m, GLMOutcome) for m in models):
        # Stack the GLM score equations: IFᵢ += n·1[aᵢ = a]·sᵢᵀ H_a⁻¹ ∂V/∂β_a.
        for a, model in zip((0, 1), models):
            p_a = p1 if a == 1 else 1.0 - p1
            dv = (model.gradient(x) * p_a[:, None]).mean(axis=0)
            rows = data.action == a
            influence[rows] += n * (model.scores(x[rows], data.reward[rows]) @ (model.hessian_inv_ @ dv))
    var = float(np.var(influence, ddof=1)) / n
    resp_var = 0.0
    if dp1 is not None:
        # ∂termsᵢ/∂η through p̂_π(1) (and p̂_π(aᵢ) = ±p̂_π(1) in the weight).
        sign = np.where(data.action == 1, 1.0, -1.0)
        if kind == "dr":
            dterms = dp1 * ((q[:, 1] - q[:, 0]) + sign * (data.reward - q_logged) / data.pscore)[:, None]
        elif kind == "dm":
            dterms = dp1 * (q[:, 1] - q[:, 0])[:, None]
        else:
            dterms = dp1 * (sign * data.reward / data.pscore)[:, None]
        g = dterms.mean(axis=0)
        infl = response._eta_influence
        if infl is not None and _same_rows(response, data):
            resp_part = n * (infl @ g)
            resp_var = float(np.sum(resp_part**2)) / n**2
            total = influence + resp_part
            var = float(np.var(total, ddof=1)) / n
        else:
            resp_var = float(g @ response._eta_cov @ g)
            var += resp_var
    return value, float(np.sqrt(var)), float(np.sqrt(resp_var)), used


def _bootstrap_replicate(prob: _Problem, seed: int) -> float:
    rng = np.random.default_rng(seed)
    data = prob.data
    rows = rng.integers(0, data.n, data.n)
    response = prob.response
    if isinstance(response, _GaussianLogCost):
        same = response._eta_influence is not None and _same_rows(response, data)
        try:
            response = response._bootstrap(rows if same else None, rng)
        except ValueError:
            return float("nan")  # counted and bounded by _run
    replicate = dataclasses.replace(prob, data=data.subset(rows), response=response)
    return _estimate(replicate, rng, with_se=False)[0]


def _as_estimates(results: list[Any]) -> np.ndarray:
    """The bootstrap replicates' results as floats; anything else means the executor lost them."""
    out = np.empty(len(results))
    for i, r in enumerate(results):
        if isinstance(r, (bool, np.bool_)) or not isinstance(r, (float, int, np.floating, np.integer)):
            raise TypeError(
                f"executor: bootstrap replicate {i} came back as {type(r).__name__}, not a float; the "
                "executor's futures must return the submitted function's result (future.result())"
            )
        out[i] = float(r)
    return out


def _run(
    kind: str,
    data: Any,
    *,
    target_policy: Any,
    logging_policy: Any,
    response: Any = None,
    outcome_model: Any = None,
    cross_fit: int | None = None,
    bootstrap: int | None = None,
    executor: ExecutorArg = None,
    progress: Progress = False,
    rng: RNGLike = None,
) -> OPEResult:
    from certkit.parallel import parallel_map

    prob = _validate(kind, data, target_policy, logging_policy, response, outcome_model, cross_fit)
    progress = check_progress(progress)
    gen = check_rng(rng)
    if bootstrap is not None:
        bootstrap = check_integer(bootstrap, "bootstrap", minimum=2)
        _check_work(bootstrap, "bootstrap", prob.data.n, what="bootstrap replicates")
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below, naming reward
        value, se, resp_se, weight = _estimate(prob, gen)
    _check_finite(value, se, prob.data, kind)
    diagnostics: dict[str, float] = {}
    if weight is not None:
        max_w, ess = _weight_diagnostics(weight)
        _warn_weights(kind, prob.data.n, max_w, ess, stacklevel=3)
        diagnostics = {"max_weight": max_w, "effective_sample_size": ess}
    boot = None
    if bootstrap is not None:
        seeds = [int(s) for s in gen.integers(0, 2**63 - 1, size=bootstrap, dtype=np.int64)]
        boot = _as_estimates(
            parallel_map(
                functools.partial(_bootstrap_replicate, prob), seeds, executor=executor, progress=progress
            )
        )
        if np.any(np.isinf(boot)):
            _check_finite(float(boot[np.isinf(boot)][0]), se, prob.data, kind)
        failures = int(np.sum(np.isnan(boot)))
        if failures > 0.1 * bootstrap or bootstrap - failures < 2:
            raise ValueError(
                f"bootstrap: the response model could not be refitted on {failures} of {bootstrap} "
                "replicates (weakly identified at this sample size); use the influence-function interval"
            )
        return OPEResult(
            kind, value, se, prob.data.n, resp_se, boot[~np.isnan(boot)], failures, **diagnostics
        )
    return OPEResult(kind, value, se, prob.data.n, resp_se, **diagnostics)
