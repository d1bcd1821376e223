"""The training recipe: loss, learning-rate schedule, batch order, momentum, weight decay, L1 penalty and
per-sample gradient clipping, in one place.

`Recipe` is built once per run and read by the nominal run (`MLP.train`) and by every certified step
(`certkit.mibp.enclosures.interval`, `certkit.mibp.enclosures.affine`), so both follow the same steps over
the same batches.
The update follows PyTorch's ``torch.optim.SGD(lr, momentum, weight_decay)`` (no dampening, no
Nesterov):

$$d_s = g_s + \\omega\\,\\theta_s + \\lambda_1 \\operatorname{sign}(\\theta_s),\\qquad
v_{s+1} = \\mu\\, v_s + d_s\\ (v_1 = d_0),\\qquad \\theta_{s+1} = \\theta_s - \\lambda_s v_{s+1},$$

where ``g_s`` is the mean over batch ``s`` of the per-sample gradients of the loss, each clipped first when
the recipe clips (``clip_value``: every entry to ``[-c, c]``; ``clip_norm``: the whole per-sample gradient
scaled by ``min(1, c / (‖g_k‖₂ + 1e-6))``, as Opacus and DP-SGD do), and ``λ₁ sign(θ)`` (``sign(0) = 0``) is
the subgradient of an L1 penalty ``λ₁ ‖θ‖₁`` (``l1_penalty``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from certkit._typing import RNGLike
from certkit._validation import (
    check_allocation,
    check_array,
    check_bool,
    check_in_options,
    check_integer,
    check_rng,
)

__all__ = ["LOSSES", "InverseDecay", "Recipe", "make_recipe"]

LOSSES = ("hinge", "mse", "cross_entropy", "binary_cross_entropy")


class InverseDecay:
    """The learning rate ``max(learning_rate / (1 + decay * step), minimum)`` (steps counted from 0).

    This is the inverse-time decay of Abstract Gradient Training's SGD (``lr_decay``, ``lr_min``).

    Parameters
    ----------
    learning_rate : float
        The rate at step 0 (> 0).
    decay : float
        Decay per step (>= 0).
    minimum : float
        Floor of the rate (>= 0).

    Examples
    --------
    >>> rate = InverseDecay(2.0, 0.6, minimum=1e-3)
    >>> [round(rate(s), 4) for s in range(3)]
    [2.0, 1.25, 0.9091]
    """

    def __init__(self, learning_rate: float, decay: float, *, minimum: float = 0.0) -> None:
        self.learning_rate = _nonnegative(learning_rate, "learning_rate", strict=True)
        self.decay = _nonnegative(decay, "decay")
        self.minimum = _nonnegative(minimum, "minimum")
        if self.minimum > self.learning_rate:
            raise ValueError(
                f"minimum ({self.minimum!r}) must be at most learning_rate ({self.learning_rate!r}): the "
                "rate only decays, so a floor above the starting rate would replace it at every step"
            )

    def __call__(self, step: int) -> float:
        step = check_integer(step, "step", minimum=0)  # counted from 0: a negative step has no rate
        return max(self.learning_rate / (1.0 + self.decay * step), self.minimum)

    def __repr__(self) -> str:
        return f"InverseDecay({self.learning_rate!r}, {self.decay!r}, minimum={self.minimum!r})"


def _nonnegative(value: Any, name: str, *, strict: bool = False) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (strict and value == 0):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} 0, got {value!r}")
    return value


@dataclass(frozen=True)
class Recipe:
    """What one training run does, step by step (built by `make_recipe`).

    Attributes
    ----------
    loss : str
        One of `LOSSES`.
    epochs : int
        Passes over the data.
    rates : ndarray (n_steps,)
        The learning rate of every gradient step.
    batches : tuple of ndarray
        The row indices of every step's batch, in order (``steps_per_epoch`` per epoch).
    steps_per_epoch : int
    momentum, weight_decay : float
        PyTorch's ``SGD`` conventions (see the module docstring).
    batch_size : int or None
        None: full batch.
    shuffle, drop_last : bool
        How the batches were drawn.
    l1_penalty : float
        λ₁ of the L1 penalty (its subgradient ``λ₁ sign(θ)`` is added to every step's gradient).
    clip_value, clip_norm : float or None
        Per-sample gradient clipping: each entry to ``[-clip_value, clip_value]``, or each sample's whole
        gradient to ℓ2 norm ``clip_norm`` (see the module docstring); at most one of them.
    user_batches : bool
        The batch order was given (``batches=``) rather than drawn; ``batch_size`` is then its largest batch.
    n_rows : int or None
        The number of training rows the batches index.
    """

    loss: str
    epochs: int
    rates: np.ndarray
    batches: tuple[np.ndarray, ...]
    steps_per_epoch: int
    momentum: float = 0.0
    weight_decay: float = 0.0
    batch_size: int | None = None
    shuffle: bool = False
    drop_last: bool = False
    l1_penalty: float = 0.0
    clip_value: float | None = None
    clip_norm: float | None = None
    user_batches: bool = False
    n_rows: int | None = None

    @property
    def n_steps(self) -> int:
        """Number of gradient steps."""
        return len(self.batches)

    @property
    def plain(self) -> bool:
        """Full-batch gradient descent with one constant rate, no momentum, weight decay, L1 penalty or
        clipping."""
        return (
            self.batch_size is None
            and self.momentum == 0.0
            and self.weight_decay == 0.0
            and self.l1_penalty == 0.0
            and not self.clips
            and bool(np.all(self.rates == self.rates[0]))
        )

    @property
    def clips(self) -> bool:
        """Whether the per-sample gradients are clipped."""
        return self.clip_value is not None or self.clip_norm is not None

    @property
    def learning_rate(self) -> float | tuple[float, ...]:
        """The constant rate, or the per-step rates when they vary."""
        if np.all(self.rates == self.rates[0]):
            return float(self.rates[0])
        return tuple(float(r) for r in self.rates)

    def epoch_end(self, epoch: int) -> int:
        """Number of steps taken after ``epoch`` epochs."""
        return epoch * self.steps_per_epoch

    def clip_rows(self, G: np.ndarray) -> np.ndarray:
        """Per-sample gradients ``G`` (one row per sample) clipped as the recipe says (``G`` itself without
        clipping): every entry to ``[-clip_value, clip_value]``, or each row scaled by
        ``min(1, clip_norm / (‖g_k‖₂ + 1e-6))`` with ``‖g_k‖₂ = sqrt(Σ g²)`` in float64."""
        if self.clip_value is not None:
            return np.clip(G, -self.clip_value, self.clip_value)
        if self.clip_norm is not None:
            norms = np.sqrt((G * G).sum(axis=1))
            return G * np.minimum(self.clip_norm / (norms + 1e-6), 1.0)[:, None]
        return G

    def update(
        self, theta: np.ndarray, velocity: np.ndarray | None, grad: np.ndarray, step: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """One nominal SGD update in PyTorch's order; returns ``(theta, velocity)``."""
        d = grad + self.weight_decay * theta if self.weight_decay else grad
        if self.l1_penalty:
            d = d + self.l1_penalty * np.sign(theta)
        v = d if velocity is None or not self.momentum else self.momentum * velocity + d
        return theta - self.rates[step] * v, v

    def without(self, rows: Any) -> Recipe:
        """The same recipe with ``rows`` left out of every batch (the other rows' order, the steps and their
        rates unchanged): the run that `Removals` certifies against.  A batch left empty raises."""
        drop = check_array(rows, "rows", ndim=1, dtype=int, allow_empty=True)
        n = self.n_rows if self.n_rows is not None else 1 + max(int(b.max()) for b in self.batches if len(b))
        if drop.size and (drop.min() < 0 or drop.max() >= n):
            raise ValueError(f"rows must be row indices in 0..{n - 1}, got {drop.min()}..{drop.max()}")
        batches = tuple(b[~np.isin(b, drop)] for b in self.batches)
        if any(len(b) == 0 for b in batches):
            raise ValueError("removing these rows empties a batch")
        return replace(self, batches=batches)

    def describe(self) -> str:
        """One line: the recipe's options."""
        rate = self.learning_rate
        rate_text = (
            f"{rate:g}" if isinstance(rate, float) else f"{rate[0]:g}..{rate[-1]:g} ({len(rate)} steps)"
        )
        batch = "full batch" if self.batch_size is None else f"batch {self.batch_size}"
        if self.batch_size is not None and self.shuffle:
            batch += ", shuffled"
        if self.user_batches:
            smallest, largest = min(len(r) for r in self.batches), max(len(r) for r in self.batches)
            sizes = f"{smallest}" if smallest == largest else f"{smallest}-{largest}"
            shuffled = ", shuffled" if self.shuffle else ""
            batch = f"your batch order ({self.steps_per_epoch} batches of {sizes} rows per epoch{shuffled})"
        parts = [f"loss={self.loss}", f"learning_rate={rate_text}", batch]
        if self.momentum:
            parts.append(f"momentum={self.momentum:g}")
        if self.weight_decay:
            parts.append(f"weight_decay={self.weight_decay:g}")
        if self.l1_penalty:
            parts.append(f"l1_penalty={self.l1_penalty:g}")
        if self.clip_value is not None:
            parts.append(f"clip_value={self.clip_value:g}")
        if self.clip_norm is not None:
            parts.append(f"clip_norm={self.clip_norm:g}")
        return ", ".join(parts)


def make_recipe(
    n: int,
    *,
    loss: str,
    epochs: int,
    learning_rate: float | Sequence[float] | Callable[[int], float],
    batch_size: int | None = None,
    shuffle: bool = False,
    drop_last: bool = False,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    rng: RNGLike = None,
    l1_penalty: float = 0.0,
    clip_value: float | None = None,
    clip_norm: float | None = None,
    batches: Any = None,
) -> Recipe:
    """Validate the training options for ``n`` rows and draw the batch order once (or take the given one).

    Parameters
    ----------
    n : int
        Number of training rows.
    loss : str
        One of `LOSSES`.
    epochs : int or None
        Passes over the data (>= 0); None only with ``batches`` (one epoch per entry).
    learning_rate : float, sequence or callable
        A constant rate, one rate per gradient step (``epochs * steps_per_epoch`` of them), or a callable
        ``step -> rate`` with steps counted from 0 (e.g. `InverseDecay`).  Every rate must be finite and > 0.
    batch_size : int, optional
        Rows per step (None: the full batch, one step per epoch).
    shuffle : bool
        Draw a new order of the rows for every epoch from ``rng`` (as PyTorch's ``DataLoader(shuffle=True)``);
        the order is fixed once and stored in the recipe.
    drop_last : bool
        Drop each epoch's last batch when it is smaller than ``batch_size``.
    momentum : float
        Heavy-ball momentum in ``[0, 1)``.
    weight_decay : float
        L2 coefficient added to the gradient (>= 0).
    rng : None, int or numpy.random.Generator
        Source of the shuffled order (unused without ``shuffle``).
    l1_penalty : float
        λ₁ >= 0 of an L1 penalty ``λ₁ ‖θ‖₁``: ``λ₁ sign(θ)`` is added to every step's gradient.
    clip_value : float, optional
        Clip every entry of each per-sample gradient to ``[-clip_value, clip_value]`` (> 0).
    clip_norm : float, optional
        Scale each per-sample gradient to ℓ2 norm at most ``clip_norm`` (> 0):
        ``g_k min(1, clip_norm / (‖g_k‖₂ + 1e-6))``.  At most one of ``clip_value`` and ``clip_norm``.
    batches : sequence of sequences of int arrays, optional
        The batch order itself, as the user's training loop drew it: ``batches[e][s]`` holds the row
        indices of the ``s``-th batch of epoch ``e`` (lists, NumPy arrays or torch tensors of integers in
        ``0..n-1``, each row at most once per batch; every epoch has the same number of batches, as a
        ``DataLoader``'s epochs do).  Nothing is drawn then: ``batch_size`` and ``drop_last``, if given,
        must describe these batches (every batch of ``batch_size`` rows, the last of an epoch fewer unless
        ``drop_last``), ``shuffle`` only records that the order was shuffled, ``rng`` is unused.
    """
    n = check_integer(n, "n", minimum=1)
    loss = check_in_options(loss, "loss", LOSSES)
    update = _update_options(momentum, weight_decay, l1_penalty, clip_value, clip_norm)
    if batches is not None:
        return _given_recipe(n, loss, epochs, learning_rate, batch_size, shuffle, drop_last, batches, update)
    if epochs is None:
        raise TypeError(
            "epochs must be an integer (None only with batches=, which gives one entry per epoch)"
        )
    epochs = check_integer(epochs, "epochs", minimum=0)
    shuffle = check_bool(shuffle, "shuffle")
    drop_last = check_bool(drop_last, "drop_last")
    if batch_size is None:
        size = n
        if shuffle:
            raise ValueError("shuffle=True needs a batch_size (the full batch has one order)")
    else:
        size = check_integer(batch_size, "batch_size", minimum=1)
        if size > n:
            raise ValueError(f"batch_size must be at most the number of training rows ({n}), got {size}")
    per_epoch = n // size if drop_last else -(-n // size)
    # the batches (a shuffled order per epoch, about 100 bytes per batch) and the rates, before building them
    check_allocation(
        float(epochs) * (8.0 * n * shuffle + 112.0 * per_epoch), "epochs", epochs, what="the batch order"
    )
    gen = check_rng(rng) if shuffle else None
    batches: list[np.ndarray] = []
    for _ in range(epochs):
        order = gen.permutation(n) if gen is not None else np.arange(n)
        for s in range(per_epoch):
            batches.append(order[s * size : (s + 1) * size])
    rates = _rates(learning_rate, len(batches))
    return Recipe(
        loss=loss,
        epochs=epochs,
        rates=rates,
        batches=tuple(batches),
        steps_per_epoch=per_epoch,
        batch_size=None if batch_size is None else size,
        shuffle=shuffle,
        drop_last=drop_last,
        n_rows=n,
        **update,
    )


def _update_options(momentum, weight_decay, l1_penalty, clip_value, clip_norm) -> dict[str, Any]:
    """The checked options of the update: momentum, weight decay, L1 penalty and clipping."""
    momentum = _nonnegative(momentum, "momentum")
    if momentum >= 1.0:
        raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
    if clip_value is not None:
        clip_value = _nonnegative(clip_value, "clip_value", strict=True)
    if clip_norm is not None:
        clip_norm = _nonnegative(clip_norm, "clip_norm", strict=True)
    if clip_value is not None and clip_norm is not None:
        raise ValueError(
            "give at most one of clip_value and clip_norm (per-sample clipping by value or by norm)"
        )
    return dict(
        momentum=momentum,
        weight_decay=_nonnegative(weight_decay, "weight_decay"),
        l1_penalty=_nonnegative(l1_penalty, "l1_penalty"),
        clip_value=clip_value,
        clip_norm=clip_norm,
    )


def _given_recipe(n, loss, epochs, learning_rate, batch_size, shuffle, drop_last, batches, update) -> Recipe:
    """`make_recipe` with the user's batch order (``batches``), checked entry by entry."""
    shuffle = check_bool(shuffle, "shuffle")
    drop_last = check_bool(drop_last, "drop_last")
    if batch_size is not None:
        batch_size = check_integer(batch_size, "batch_size", minimum=1)
    elif drop_last:
        raise ValueError(
            "drop_last=True says how batches of batch_size rows are cut; with batches= give batch_size too "
            "(the loader's), or leave drop_last at False"
        )
    order = _epochs_of(batches)
    if epochs is not None:
        epochs = check_integer(epochs, "epochs", minimum=0)
        if epochs != len(order):
            raise ValueError(
                f"epochs={epochs} but batches holds {len(order)} epoch(s) (one sequence of batches per "
                "epoch): give one of them, or make them agree"
            )
    steps: list[np.ndarray] = []
    per_epoch = None
    for e, epoch in enumerate(order):
        rows_of_epoch = _batches_of(epoch, e)
        if per_epoch is None:
            per_epoch = len(rows_of_epoch)
        elif len(rows_of_epoch) != per_epoch:
            raise ValueError(
                f"batches[{e}] has {len(rows_of_epoch)} batches but batches[0] has {per_epoch}: every epoch "
                "must have the same number of batches (as a DataLoader's epochs do)"
            )
        for s, rows in enumerate(rows_of_epoch):
            steps.append(_batch_rows(rows, n, e, s))
            if batch_size is not None:
                _check_loader_batch(len(steps[-1]), batch_size, drop_last, e, s, s == per_epoch - 1)
    rates = _rates(learning_rate, len(steps))
    return Recipe(
        loss=loss,
        epochs=len(order),
        rates=rates,
        batches=tuple(steps),
        steps_per_epoch=per_epoch,
        batch_size=max(len(rows) for rows in steps) if batch_size is None else batch_size,
        shuffle=shuffle,
        drop_last=drop_last,
        user_batches=True,
        n_rows=n,
        **update,
    )


def _check_loader_batch(size: int, batch_size: int, drop_last: bool, e: int, s: int, last: bool) -> None:
    """A given batch of ``size`` rows agrees with a DataLoader's ``batch_size`` and ``drop_last``: every batch
    has ``batch_size`` rows, the last of an epoch fewer unless ``drop_last``."""
    if size == batch_size or (last and size < batch_size and not drop_last):
        return
    rule = "every batch has batch_size rows" + ("" if drop_last else ", the last of an epoch may have fewer")
    raise ValueError(
        f"batches[{e}][{s}] has {size} rows but batch_size={batch_size}, drop_last={drop_last} ({rule}): "
        "batches and batch_size contradict each other; give batches alone, or the loader's batch_size and "
        "drop_last"
    )


_BATCHES_FORMAT = (
    "batches holds one sequence of batches per epoch, each batch the row indices it trains on (e.g. record "
    "them in your loop: `for idx in DataLoader(range(n), batch_size=32, shuffle=True)`, one list of idx per "
    "epoch)"
)


def _is_index(value: Any) -> bool:
    """A single integer: a Python or NumPy integer, or a 0-d array or tensor."""
    return isinstance(value, numbers.Integral) or getattr(value, "ndim", None) == 0


def _epochs_of(batches: Any) -> list:
    if isinstance(batches, (str, bytes, Mapping)) or not isinstance(batches, Iterable):
        raise TypeError(f"{_BATCHES_FORMAT}; got {type(batches).__name__}")
    order = list(batches)
    if not order:
        raise ValueError(f"batches holds no epoch; {_BATCHES_FORMAT}")
    return order


def _batches_of(epoch: Any, e: int) -> list:
    if _is_index(epoch):
        raise TypeError(f"batches[{e}] is a single row index, not an epoch's batches; {_BATCHES_FORMAT}")
    if isinstance(epoch, (str, bytes, Mapping)) or not isinstance(epoch, Iterable):
        raise TypeError(f"batches[{e}] must be a sequence of batches, got {type(epoch).__name__}")
    rows = list(epoch)
    if not rows:
        raise ValueError(f"batches[{e}] holds no batch; every epoch needs at least one")
    return rows


def _batch_rows(rows: Any, n: int, e: int, s: int) -> np.ndarray:
    where = f"batches[{e}][{s}]"
    if _is_index(rows):
        raise TypeError(
            f"{where} is a single row index, so batches[{e}] is one batch rather than an epoch's batches; "
            f"{_BATCHES_FORMAT} (for one epoch: batches=[its_batches])"
        )
    if isinstance(rows, (str, bytes, Mapping)):
        raise TypeError(f"{where} must be row indices (integers), got {type(rows).__name__}")
    try:
        arr = np.asarray(rows)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"{where} must be row indices (integers), got {type(rows).__name__}") from exc
    if arr.ndim == 1 and arr.size == 0:
        raise ValueError(f"{where} is empty; every batch needs at least one row")
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        what = f"dtype {arr.dtype}" if arr.ndim == 1 else f"an array of shape {arr.shape}"
        raise TypeError(f"{where} must be a 1-D sequence of integer row indices, got {what}")
    if arr.min() < 0 or arr.max() >= n:
        bad = arr[(arr < 0) | (arr >= n)][0]
        raise ValueError(f"{where} holds row {int(bad)}, outside 0..{n - 1} ({n} training rows)")
    unique, counts = np.unique(arr, return_counts=True)
    if unique.size != arr.size:
        raise ValueError(
            f"{where} lists row {int(unique[counts > 1][0])} more than once; each batch must hold a row at "
            "most once (a sampler that draws with replacement is not supported: the budgets count rows, "
            "not draws)"
        )
    return arr.astype(np.intp)


def _rates(learning_rate: Any, n_steps: int) -> np.ndarray:
    if np.ndim(learning_rate) == 0 and hasattr(learning_rate, "item") and not callable(learning_rate):
        learning_rate = learning_rate.item()  # a 0-d NumPy array or torch tensor: a number
    if callable(learning_rate):
        values = []
        for step in range(n_steps):
            try:
                value = learning_rate(step)
            except Exception as exc:
                raise ValueError(
                    f"learning_rate({step}) raised {type(exc).__name__}: {exc} (learning_rate must be a "
                    "callable step -> rate, steps counted from 0)"
                ) from exc
            if np.ndim(value) == 0 and hasattr(value, "item"):
                value = value.item()
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                raise TypeError(
                    f"learning_rate({step}) must return a real number, got {type(value).__name__}"
                )
            values.append(float(value))
        rates = np.asarray(values, dtype=np.float64)
        what = "learning_rate(step)"
    elif isinstance(learning_rate, numbers.Real) and not isinstance(learning_rate, (bool, np.bool_)):
        rates = np.full(n_steps, float(learning_rate))
        what = "learning_rate"
        if not (math.isfinite(float(learning_rate)) and float(learning_rate) > 0):
            raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate!r}")
    elif isinstance(learning_rate, (str, bytes, dict)) or learning_rate is None:
        raise TypeError(
            "learning_rate must be a number, a sequence of one rate per gradient step or a callable "
            f"step -> rate, got {type(learning_rate).__name__}"
        )
    else:
        rates = check_array(learning_rate, "learning_rate", ndim=1, allow_empty=True)
        if rates.size != n_steps:
            raise ValueError(
                "learning_rate as a sequence needs one rate per gradient step "
                f"({n_steps} = epochs x steps per epoch), got {rates.size}"
            )
        what = "learning_rate"
    bad = np.flatnonzero(~(np.isfinite(rates) & (rates > 0)))
    if bad.size:
        raise ValueError(f"{what} must be finite and > 0 at every step; step {bad[0]} has {rates[bad[0]]!r}")
    rates.setflags(write=False)
    return rates
