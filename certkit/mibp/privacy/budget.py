"""`PrivatePredictor`: private predictions of one trained model under a total privacy budget, the queries'
privacy composed with ``dp-accounting``'s privacy loss distributions."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from certkit._optional import require
from certkit._results import format_table
from certkit._typing import ExecutorArg, RNGLike
from certkit._validation import (
    check_in_options,
    check_positive,
    check_probability,
    check_progress,
)
from certkit.mibp.privacy.mechanisms import (
    ACCOUNTING_ROOM,
    MECHANISMS,
    check_epsilon_delta,
    private_predict,
    release_rng,
)
from certkit.mibp.privacy.profile import Ladder, prepare_ladder
from certkit.mibp.problem.mlp import MLP

__all__ = ["BudgetExhaustedError", "PrivatePredictor", "composed_epsilon"]


class BudgetExhaustedError(RuntimeError):
    """Answering the queries would spend more privacy than the `PrivatePredictor`'s budget."""


def composed_epsilon(epsilon: float, delta: float, count: int, total_delta: float) -> float:
    """The ε of ``count`` releases, each (ε, δ)-DP, at the total δ ``total_delta``: the privacy loss
    distribution of a generic (ε, δ)-DP mechanism (which dominates every one) composed ``count`` times by
    ``dp-accounting`` (pessimistic discretisation, on a grid of at most about ``2**20`` steps); ``count ε``
    where that is smaller or ``total_delta`` is 0 (basic composition, which needs
    ``count δ <= total_delta``, compared exactly; ``inf`` otherwise).  Rounded upward: ``count ε`` is the
    float at or above the exact product, dp-accounting's ε is padded by `PLD_ROOM`."""
    if count == 0:
        return 0.0
    deltas = count * Fraction(delta)  # exact: the floats' own rounding neither admits nor refuses
    basic = _upward(count * Fraction(epsilon)) if deltas <= Fraction(total_delta) else math.inf
    if Fraction(total_delta) <= deltas:
        return basic
    pld = require("dp_accounting.pld.privacy_loss_distribution", extra="privacy", purpose="PrivatePredictor")
    common = require("dp_accounting.pld.common", extra="privacy", purpose="PrivatePredictor")
    # the composed loss spans [-count ε, count ε]: a grid of at most about 2**20 steps (coarser: pessimistic)
    step = max(1e-4, 2.0 * count * epsilon / 2**20)
    one = pld.from_privacy_parameters(
        common.DifferentialPrivacyParameters(epsilon, delta), value_discretization_interval=step
    )
    composed = float(one.self_compose(count).get_epsilon_for_delta(total_delta))
    return min(basic, composed * (1.0 + PLD_ROOM))


#: Relative padding of dp-accounting's composed ε: its discretisation is pessimistic, but it computes in
#: floats (a grid point can land a few ulps low).
PLD_ROOM = 1e-8


def _upward(value: Fraction) -> float:
    """The smallest float at least ``value``."""
    out = float(value)
    return math.nextafter(out, math.inf) if Fraction(out) < value else out


class PrivatePredictor:
    """Differentially private predictions of a model trained once, within a total privacy budget.

    Each query is answered by `private_predict` (ε, δ per query, from the certified stability of its
    prediction); the queries answered so far and the new ones are composed by ``dp-accounting``
    (`composed_epsilon`), and `predict` refuses (`BudgetExhaustedError`) queries that would take the total
    past ``(total_epsilon, total_delta)``.  `fit` trains the certified ladder; the boxes of each rung are
    kept, so new queries are certified without training again (a rung is trained when a query first needs
    it).

    Parameters
    ----------
    epsilon : float
        ε of each query, in ``[1e-6, 100]`` (`certkit.mibp.privacy.mechanisms.EPSILON_RANGE`).
    total_epsilon : float
        The budget: the composed ε of every query answered stays at most this.
    delta : float
        δ of each query (0 for ``cauchy``, > 0 for ``laplace`` and ``ptr``).
    total_delta : float
        The budget's δ (in [0, 1), at least ``delta``: a ValueError otherwise, since every query spends its
        δ); with 0 (``cauchy`` and ``global``) the queries compose by their sum, ``total_epsilon / epsilon``
        of them.  Each query is composed at ``ε (1 - 2**-30)``, the ε its table is checked at
        (`certkit.mibp.privacy.mechanisms.ACCOUNTING_ROOM`), so that ``epsilon=0.1, total_epsilon=0.3``
        answers three queries despite the rounding of the floats; the δs are summed exactly.
    mechanism : {"cauchy", "laplace", "ptr", "global"}
        See `private_predict`.
    rng : None, int or numpy.random.Generator
        The randomness of the releases: None (the default, fresh entropy from the OS); an int seed makes
        the noise reproducible by whoever knows it and gives a UserWarning (for tests).

    Examples
    --------
    >>> import numpy as np
    >>> from certkit.mibp import MLP, PrivatePredictor
    >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
    >>> predictor = PrivatePredictor(epsilon=0.5, total_epsilon=5.0, total_delta=1e-6).fit(
    ...     MLP.random([2, 2], rng=0), X, y, ks=range(6), loss="cross_entropy", clip_value=0.1,
    ...     learning_rate=0.5)
    >>> predictor.predict(X[:3]).shape
    (3,)
    """

    def __init__(
        self,
        epsilon: float,
        *,
        total_epsilon: float,
        delta: float = 0.0,
        total_delta: float = 0.0,
        mechanism: str = "cauchy",
        rng: RNGLike = None,
    ) -> None:
        self.mechanism = check_in_options(mechanism, "mechanism", MECHANISMS)
        self.epsilon, self.delta = check_epsilon_delta(epsilon, delta, self.mechanism)
        self.total_epsilon = check_positive(total_epsilon, "total_epsilon")
        self.total_delta = check_probability(total_delta, "total_delta")
        if self.total_delta >= 1.0:
            raise ValueError(f"total_delta must be in [0, 1), got {total_delta!r}")
        if self.epsilon > self.total_epsilon:
            raise ValueError(f"epsilon ({epsilon!r}) must be at most total_epsilon ({total_epsilon!r})")
        if self.delta > self.total_delta:
            raise ValueError(
                f"total_delta ({total_delta!r}) must be at least delta ({delta!r}) for mechanism="
                f"{self.mechanism!r}: every query spends its δ, so a smaller total answers none"
            )
        # each release is checked at this ε (mechanisms.ACCOUNTING_ROOM): composed so
        self._accounted = self.epsilon * (1.0 - ACCOUNTING_ROOM)
        self._gen = release_rng(rng)
        self._ladder: Ladder | None = None
        self.queries_answered = 0

    def fit(
        self,
        model: MLP,
        X: Any,
        y: Any,
        *,
        ks: Sequence[int],
        loss: str,
        perturbation: Any = None,
        features: Any = None,
        executor: ExecutorArg = None,
        **recipe: Any,
    ) -> PrivatePredictor:
        """Check the training run and prepare its ladder (arguments as in `stability_profile`, the recipe
        options of `certified_training` as ``**recipe``, full-batch training only); returns self.  A refit
        keeps `queries_answered`: the privacy spent on earlier queries stays spent."""
        self._executor = executor
        self._ladder = prepare_ladder(
            model,
            X,
            y,
            ks=ks,
            loss=loss,
            perturbation=perturbation,
            features=features,
            executor=executor,
            **recipe,
        )
        if self._ladder.relation != "neighbours":
            raise ValueError(
                "PrivatePredictor needs the Neighbours relation (perturbation=None or a Neighbours instance)"
            )
        return self

    @property
    def spent(self) -> tuple[float, float]:
        """The composed ``(ε, δ)`` of the queries answered so far (δ is ``total_delta`` once any was)."""
        eps = composed_epsilon(self._accounted, self.delta, self.queries_answered, self.total_delta)
        return eps, (self.total_delta if self.queries_answered else 0.0)

    def queries_left(self) -> int:
        """How many more queries the budget allows (found by doubling, then bisection)."""
        lo, hi = self.queries_answered, self.queries_answered + 1
        while self._fits(hi):  # doubling, then bisection on the first count that does not fit
            lo, hi = hi, 2 * hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self._fits(mid) else (lo, mid)
        return lo - self.queries_answered

    def _fits(self, count: int) -> bool:
        return composed_epsilon(self._accounted, self.delta, count, self.total_delta) <= self.total_epsilon

    def predict(self, X_query: Any, *, progress: bool | str = False) -> np.ndarray:
        """Private labels for the rows of ``X_query`` (each row one query), as in the ``y`` of `fit`.

        Raises `BudgetExhaustedError`, answering none of them, when they would take the composed privacy past
        ``(total_epsilon, total_delta)``.
        """
        if self._ladder is None:
            raise RuntimeError("this PrivatePredictor is not fitted yet: call fit(model, X, y, ...) first")
        progress = check_progress(progress)
        start, cpu = time.perf_counter(), time.process_time()
        Xq, index = self._ladder.queries(X_query)
        count = self.queries_answered + len(Xq)
        if not self._fits(count):
            spend = composed_epsilon(self._accounted, self.delta, count, self.total_delta)
            raise BudgetExhaustedError(
                f"answering {len(Xq)} more queries would spend ε = {spend:.4g} > total_epsilon = "
                f"{self.total_epsilon:g} (at total δ = {self.total_delta:g}); {self.queries_left()} queries "
                "remain"
            )
        profile = self._ladder.profile(Xq, index, self._executor, progress, start, cpu)
        out = private_predict(
            profile, epsilon=self.epsilon, delta=self.delta, mechanism=self.mechanism, rng=self._gen
        )
        self.queries_answered = count
        return out

    def summary(self) -> str:
        eps, delta = self.spent
        rows = [
            ["mechanism", self.mechanism],
            ["per query (ε, δ)", f"({self.epsilon:g}, {self.delta:g})"],
            ["budget (ε, δ)", f"({self.total_epsilon:g}, {self.total_delta:g})"],
            ["queries answered", self.queries_answered],
            ["spent (ε, δ)", f"({eps:.4g}, {delta:g})"],
            ["queries left", self.queries_left()],
        ]
        return format_table(["quantity", "value"], rows, title="Private predictor (certkit.mibp)")

    def __repr__(self) -> str:
        return (
            f"PrivatePredictor(epsilon={self.epsilon:g}, total_epsilon={self.total_epsilon:g}, "
            f"mechanism={self.mechanism!r}, queries_answered={self.queries_answered})"
        )
