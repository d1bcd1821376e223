"""Checks shared by the off-policy estimators: the policies, the response model, the rows it was fitted on and
the size of the requested work."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_allocation, check_array, check_is_fitted
from certkit.ope._data import StrategicData
from certkit.ope.disclosure import _require_explaining
from certkit.ope.policies import Policy
from certkit.ope.response import CostDistribution, _GaussianLogCost

#: Largest work accepted in one call, in row evaluations (about 1 µs each; 1e10 is hours of computing).
_MAX_WORK = 1e10
#: Fixed cost of one replicate or grid point (refits, set-up), in row evaluations.
_ITEM_OVERHEAD = 2e4


def _check_policy(policy: Any, name: str, *, explaining: bool) -> None:
    if explaining:
        _require_explaining(policy, name)
    elif not isinstance(policy, Policy):
        raise TypeError(f"{name} must have an action_proba(x) method, got {type(policy).__name__}")


def _proba(policy: Policy, x: np.ndarray, name: str, *, open_interval: bool) -> np.ndarray:
    p = check_array(policy.action_proba(x), f"{name}.action_proba(x)", ndim=1, shape=(x.shape[0],))
    bad = (p <= 0) | (p >= 1) if open_interval else (p < 0) | (p > 1)
    if np.any(bad):
        want = (
            "(0, 1) (a logging policy must give both actions positive probability)"
            if open_interval
            else "[0, 1]"
        )
        raise ValueError(f"{name}.action_proba(x) must lie in {want}")
    return p


def _check_response(response: Any, logging_policy: Any, n_features: int) -> None:
    if not isinstance(response, CostDistribution):
        raise TypeError(
            "response must be a response model (log_cdf, log_sf and benefit; e.g. LogNormalCostResponse), "
            f"got {type(response).__name__}"
        )
    if isinstance(response, _GaussianLogCost):
        check_is_fitted(response, "_eta", method="fit")
        if response._eta.size != n_features + 2:
            raise ValueError(
                f"response was fitted on {response._eta.size - 2} covariates, the data have {n_features}"
            )
    fitted_under = getattr(response, "policy_", None)
    if fitted_under is not None and not (fitted_under is logging_policy or fitted_under == logging_policy):
        raise ValueError(
            "response was fitted to another policy than logging_policy; refit it with "
            "response.fit(data, policy=logging_policy)"
        )


def _same_rows(response: Any, data: StrategicData) -> bool:
    """Whether `response` was fitted on exactly these rows (x_pre, and `moved` for the probit model), so its
    per-row scores can be stacked with the estimator's influence function."""

    def equal(a: np.ndarray, b: np.ndarray) -> bool:
        return a is b or (a.shape == b.shape and np.array_equal(a, b))

    fit_data = getattr(response, "_fit_data", None)
    if getattr(response, "_fit_x", None) is None:
        return False
    if fit_data is not None:
        return equal(fit_data.x_pre, data.x_pre) and equal(fit_data.moved, data.moved)
    return equal(response._fit_x, data.x_pre)


def _check_work(count: int, name: str, n: int, *, what: str) -> None:
    """Raise ValueError naming `name` before `count` repetitions of a pass over `n` rows that would take hours
    (or whose bookkeeping would not fit in memory)."""
    operations = float(count) * (float(n) + _ITEM_OVERHEAD)
    if operations > _MAX_WORK:
        raise ValueError(
            f"{name}={count} is too large: {count} {what} of n = {n} rows would need about "
            f"{operations:.2g} row evaluations (more than {_MAX_WORK:.0e}, hours of computing); reduce {name}"
        )
    check_allocation(200.0 * count, name, count, what=f"{count} {what}")
