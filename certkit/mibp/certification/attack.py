"""Attacks on certified-training results, each re-checked on the float training run the certificates bound.

* `attack_violation` searches for a dataset whose training trajectory leaves the certified boxes: it fixes
  the discrete choices of the perturbation (option values, which points deviate under a budget, which
  labels flip) at random and runs projected gradient ascent on the continuous input offsets through the
  unrolled training (torch autograd, float64), maximising one parameter's distance past one side of its box
  at one epoch (or a random signed combination of all of them); every candidate dataset is then trained
  with `MLP.run` and its largest box violation is recorded.
* `attack_predictions` (full-batch gradient descent) and `attack_label_flips` (any recipe, label flips,
  guided by each row's first-order influence) search for allowed datasets that change test predictions;
  every change they report is a re-trained witness, so the share of correct, unchanged predictions bounds
  the certified accuracy of every sound method from above.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import numpy as np

from certkit._optional import require
from certkit._typing import RNGLike
from certkit._validation import check_array, check_in_options, check_integer, check_positive, check_rng
from certkit.mibp._setup import check_perturbation
from certkit.mibp.certification.result import CertifiedTrainingResult, check_epoch
from certkit.mibp.enclosures.interval import allowed_labels
from certkit.mibp.problem.losses import check_labels, label_classes
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.perturbation import InputSets, Perturbation
from certkit.mibp.problem.recipe import LOSSES, Recipe, make_recipe
from certkit.parallel import single_threaded

__all__ = ["attack_label_flips", "attack_predictions", "attack_violation"]


def _violation(result, path) -> float:
    """Largest excess of ``path`` over its boxes after epochs ``1..T``; when there is none, minus the
    smallest slack to an edge of a box of positive width (a point box has no edge to approach)."""
    worst = -np.inf
    for t, model in enumerate(path[1:], start=1):
        v = model.to_vector()
        lo, hi = result.lower[t].to_vector(), result.upper[t].to_vector()
        excess = np.maximum(lo - v, v - hi)
        counted = (hi > lo) | (excess > 0)
        if np.any(counted):
            worst = max(worst, float(np.max(excess[counted])))
    return worst


def _torch_forward(torch, params, X, sizes):
    """Outputs ``(..., n, C)`` of the networks ``params`` (weights and biases interleaved, optionally with
    a leading batch dimension) at the rows of ``X`` (``(n, d)`` or ``(B, n, d)``)."""
    n_layers = len(sizes) - 1
    Ws, bs = params[0::2], params[1::2]
    h = X
    for i in range(n_layers):
        z = h @ Ws[i].transpose(-1, -2) + bs[i].unsqueeze(-2)
        h = torch.relu(z) if i < n_layers - 1 else z
    return h


def _per_sample_loss(torch, h, yb, loss):
    """Each sample's loss (``(..., n)``) at the outputs ``h`` (as `MLP.run`: hinge' = 0 at the kink)."""
    if loss == "mse":
        return ((h - yb) ** 2).sum(dim=-1)
    if loss == "cross_entropy":
        return torch.logsumexp(h, dim=-1) - h.gather(-1, yb[..., None])[..., 0]
    if loss == "binary_cross_entropy":
        return torch.nn.functional.softplus(h[..., 0]) - yb * h[..., 0]
    if h.shape[-1] == 1:
        return torch.relu(1.0 - yb * h[..., 0])
    fy = h.gather(-1, yb[..., None])
    margins = torch.relu(1.0 + h - fy)
    return margins.sum(dim=-1) - margins.gather(-1, yb[..., None])[..., 0]


def _clipped_mean_gradient(torch, params, X, yb, recipe: Recipe, sizes, sample_loss) -> list:
    """The mean of the per-sample gradients clipped by ``recipe`` (as `MLP.run`), differentiable: the
    per-sample gradients by backpropagation of each sample's output derivative (ReLU' = 0 at 0);
    ``sample_loss(h, yb)`` each sample's loss."""
    n_layers = len(sizes) - 1
    Ws, bs = params[0::2], params[1::2]
    acts, pres = [X], []
    for i in range(n_layers):
        z = acts[-1] @ Ws[i].transpose(-1, -2) + bs[i].unsqueeze(-2)
        pres.append(z)
        acts.append(torch.relu(z) if i < n_layers - 1 else z)
    # the samples are independent: the gradient of the summed loss at the outputs is per sample
    (delta,) = torch.autograd.grad(sample_loss(acts[-1], yb).sum(), acts[-1], create_graph=True)
    parts: list = []
    for layer in range(n_layers - 1, -1, -1):
        w = delta.unsqueeze(-1) * acts[layer].unsqueeze(-2)
        parts[:0] = [w.flatten(-2), delta]
        if layer > 0:
            delta = (delta @ Ws[layer]) * (pres[layer - 1] > 0)
    G = torch.cat(parts, dim=-1)  # (..., n, m)
    if recipe.clip_value is not None:
        G = G.clamp(-recipe.clip_value, recipe.clip_value)
    else:
        norms = torch.linalg.vector_norm(G, dim=-1, keepdim=True)  # its derivative at 0 is 0, not NaN
        G = G * (recipe.clip_norm / (norms + 1e-6)).clamp(max=1.0)
    mean = G.mean(dim=-2)
    out, pos = [], 0
    for i, p in enumerate(params):  # weights (..., o, i) and biases (..., o), interleaved
        size = sizes[i // 2 + 1] * (sizes[i // 2] if i % 2 == 0 else 1)
        out.append(mean[..., pos : pos + size].reshape(p.shape))
        pos += size
    return out


def _torch_train(torch, params, X, y, recipe: Recipe, sizes, sample_loss=None) -> list:
    """Unrolled SGD of ``recipe`` (as `MLP.run`: ReLU' = 0 at 0, hinge' = 0 at the kink, per-sample
    clipping and the L1 penalty as the recipe says); the parameters after every epoch.

    Batched when ``X`` is ``(B, n, d)`` and every parameter has a leading batch dimension ``B``: the
    ``B`` trainings are independent (``y`` is ``(n, ...)`` or ``(B, n, ...)``).  ``sample_loss(h, yb,
    rows)`` gives each sample's loss of the batch ``rows`` (default: the recipe's loss at ``yb``).
    """
    path, velocity = [params], None
    axis = 1 if X.ndim == 3 else 0
    y_axis = 1 if y.ndim > (2 if recipe.loss == "mse" else 1) else 0
    for step, rows in enumerate(recipe.batches):
        index = torch.as_tensor(rows)
        Xb, yb = X.index_select(axis, index), y.index_select(y_axis, index)

        def batch_loss(h, yb, index=index):
            if sample_loss is None:
                return _per_sample_loss(torch, h, yb, recipe.loss)
            return sample_loss(h, yb, index)

        if recipe.clips:
            grads = _clipped_mean_gradient(torch, params, Xb, yb, recipe, sizes, batch_loss)
        else:
            h = _torch_forward(torch, params, Xb, sizes)
            J = batch_loss(h, yb).mean(dim=-1).sum()
            grads = torch.autograd.grad(J, params, create_graph=True)
        if recipe.weight_decay:
            grads = [g + recipe.weight_decay * p for g, p in zip(grads, params)]
        if recipe.l1_penalty:
            grads = [g + recipe.l1_penalty * torch.sign(p) for g, p in zip(grads, params)]
        if velocity is not None and recipe.momentum:
            grads = [recipe.momentum * v + g for v, g in zip(velocity, grads)]
        velocity = grads
        lr = float(recipe.rates[step])
        params = [p - lr * v for p, v in zip(params, velocity)]
        if (step + 1) % recipe.steps_per_epoch == 0:
            path.append(params)
    return path


def _label_tensor(torch, labels: np.ndarray, loss: str):
    """Labels as torch wants them: int64 class indices, float64 otherwise."""
    return torch.tensor(
        labels,
        dtype=torch.int64
        if loss in ("cross_entropy", "hinge") and labels.dtype.kind == "i"
        else torch.float64,
    )


def _start(sets: InputSets, Xs: np.ndarray, gen: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A random start for the continuous search: ``(base, lo_off, hi_off, off)``, inputs ``base + off``.

    The discrete choices (option values; under a budget, the points that ``Xs`` moves) are fixed at
    random, the offsets are uniform in ``[lo_off, hi_off]``.
    """
    moved = np.any(Xs != sets.nominal, axis=1) if sets.budget is not None else np.ones(len(Xs), bool)
    n, d = Xs.shape
    pick = np.floor(gen.random((n, d)) * sets.n_options).astype(np.int64)
    base = np.take_along_axis(sets.options, pick[:, :, None], axis=2)[:, :, 0]
    lo_off = np.where(moved[:, None], sets.offset_lo, 0.0)
    hi_off = np.where(moved[:, None], sets.offset_hi, 0.0)
    base = np.where(moved[:, None], base, sets.nominal)
    off = lo_off + gen.random((n, d)) * (hi_off - lo_off)
    return base, lo_off, hi_off, off


def _batch_scope_rows(recipe: Recipe, n: int, k: int, order: np.ndarray) -> np.ndarray:
    """The rows of ``order`` (of ``n`` rows) taken greedily in that order while every batch of the run's
    batch order holds at most ``k`` of them (what ``scope="batch"`` allows: more than ``k`` rows in all, every
    row an epoch leaves out included); maximal when ``order`` holds every row."""
    held: list[list[int]] = [[] for _ in range(n)]
    for b, rows in enumerate(recipe.batches):
        for row in rows:
            held[int(row)].append(b)
    load = np.zeros(len(recipe.batches), dtype=np.int64)
    chosen = []
    for row in order:
        if all(load[b] < k for b in held[row]):
            load[held[row]] += 1
            chosen.append(row)
    return np.array(chosen, dtype=np.int64)


def attack_violation(
    result: Any,
    X: np.ndarray,
    y: np.ndarray,
    perturbation: Perturbation,
    *,
    restarts: int = 8,
    steps: int = 10,
    rng: RNGLike = None,
) -> tuple[float, int]:
    """Largest amount by which an attacked or sampled trajectory leaves its certified box.

    Returns ``(violation, trajectories)``: ``violation <= 0`` means every trajectory stayed inside (by at
    least ``-violation`` from every edge of a box of positive width; ``-inf`` when every box is a point
    and was met); ``trajectories`` is the number of datasets trained.  With a frozen extractor
    (``result.features``) ``X`` holds its raw inputs and the ascent runs through it; under `Removals`
    the attack retrains without every removal set on tiny data, else random and greedily chosen ones.  Under
    the per-batch label-flip budget every fourth restart changes a random maximal set of rows with at most
    ``k`` in every batch (more than ``k`` in all).
    """
    torch = require("torch", extra="torch", purpose="the soundness attack")
    if not isinstance(result, CertifiedTrainingResult):
        raise TypeError(f"result must be a CertifiedTrainingResult, got {type(result).__name__}")
    if not isinstance(perturbation, Perturbation):
        raise TypeError(f"perturbation must be a Perturbation, got {type(perturbation).__name__}")
    restarts = check_integer(restarts, "restarts", minimum=1)
    steps = check_integer(steps, "steps", minimum=0)
    gen = check_rng(rng)
    model = result.nominal_path[0]
    extractor = result.features  # the attack runs through the frozen extractor, from the raw inputs
    if extractor is None:
        X = check_array(perturbation.fill_missing(X), "X", ndim=2, shape=(None, model.sizes[0]))
    else:
        X = check_array(X, "X", shape=(None, *extractor.input_shape), finite=False)
        X = perturbation.fill_missing(X.reshape(len(X), -1))

    def features(Xr):
        return Xr if extractor is None else extractor.features(Xr)

    def torch_features(Xt):
        return Xt if extractor is None else extractor.torch_forward(Xt)

    sets: InputSets = perturbation.sets(X)
    sizes, loss, recipe, epochs = model.sizes, result.loss, result.recipe, result.epochs
    y_fit = check_labels(y, loss, sizes[-1], len(X))
    classes = None if loss == "mse" else label_classes(loss, sizes[-1])
    if sets.removals is not None:
        return _removal_attack(result, features(X), y_fit, sets.removals, restarts * (steps + 1), gen)
    worst, count = -np.inf, 0
    for r in range(restarts):
        # discrete choices of this restart
        Xs, y_r, deviates = sets._sample_dataset(y_fit, gen, bool(r % 2), classes)
        if sets.label_flips is not None and sets.scope == "batch" and r % 4 == 3:
            # the per-batch budget allows up to k changed labels in every batch: a fixed set of many rows
            rows = _batch_scope_rows(recipe, len(y_fit), sets.label_flips, gen.permutation(len(y_fit)))
            y_r = y_fit.copy()
            y_r[rows] = sets._changed(y_fit[rows], sets._classes(y_fit, classes), gen)
        y_r = y_r.astype(y_fit.dtype)
        path_np = model.run(features(Xs), y_r, recipe)
        worst = max(worst, _violation(result, path_np))
        count += 1
        base, lo_off, hi_off, off = _start(sets, Xs, gen)
        t_goal = int(gen.integers(1, epochs + 1))
        p_goal = int(gen.integers(model.n_params))
        sign = 1.0 if gen.random() < 0.5 else -1.0
        mix = gen.choice([-1.0, 1.0], size=(epochs, model.n_params)) if r % 3 == 2 else None
        theta0 = [
            torch.tensor(a, dtype=torch.float64, requires_grad=True)
            for w, b in zip(model.weights, model.biases)
            for a in (w, b)
        ]
        yt = _label_tensor(torch, y_r, loss)
        step = 0.25 * (hi_off - lo_off)
        # TargetBox: the deviating rows' targets are searched too, within their radius
        moves = sets.target_radius is not None
        if moves:
            radius = np.where(deviates, sets.target_radius, 0.0).reshape(-1, *([1] * (y_fit.ndim - 1)))
            y_off = y_r - y_fit
        for _ in range(steps):
            ot = torch.tensor(off, dtype=torch.float64, requires_grad=True)
            Xt = torch.tensor(base, dtype=torch.float64) + ot
            if moves:
                yo = torch.tensor(y_off, dtype=torch.float64, requires_grad=True)
                yt = torch.tensor(y_fit, dtype=torch.float64) + yo
            path = _torch_train(torch, theta0, torch_features(Xt), yt, recipe, sizes)
            flat = [torch.cat([p.reshape(-1) for p in params]) for params in path]
            if mix is None:
                goal = sign * flat[t_goal][p_goal]
            else:
                goal = sum((torch.tensor(mix[t - 1]) * flat[t]).sum() for t in range(1, epochs + 1))
            inputs = (ot, yo) if moves else (ot,)
            g, *gy = torch.autograd.grad(goal, inputs, allow_unused=True)
            if g is None and not (gy and gy[0] is not None):
                break
            # (a NaN direction, e.g. through the norm of a zero gradient under clip_norm, moves nothing)
            if g is not None:
                off = np.clip(off + step * _direction(g), lo_off, hi_off)
            if gy and gy[0] is not None:
                y_off = np.clip(y_off + 0.5 * radius * _direction(gy[0]), -radius, radius)
                y_r = y_fit + y_off
            Xp = base + off
            path_np = model.run(features(Xp), y_r, recipe)
            worst = max(worst, _violation(result, path_np))
            count += 1
    return worst, count


#: `Removals` on data with at most this many removal sets: every one of them is retrained.
ENUMERATE_REMOVALS = 4096


def _removal_attack(result, X, y, k: int, tries: int, gen: np.random.Generator) -> tuple[float, int]:
    """`attack_violation` under `Removals(k)`: retrain without every set of at most ``k`` rows when there are
    at most `ENUMERATE_REMOVALS` of them, else without ``tries`` sets drawn at random or chosen greedily (the
    rows whose gradient at θ_0 is largest or smallest in a random parameter, or in a random signed
    combination of all of them); with several steps also ``tries`` runs in which every batch loses its own
    random rows (up to ``k`` each, as `Removals` allows).  Sets that would empty a batch are not allowed
    removals and are skipped."""
    model, recipe = result.nominal_path[0], result.recipe
    n = len(X)
    k = min(k, n - 1)
    if sum(math.comb(n, size) for size in range(k + 1)) <= ENUMERATE_REMOVALS:
        candidates = (rows for size in range(k + 1) for rows in itertools.combinations(range(n), size))
    else:
        grads = np.stack([model._gradient_vector(X[i : i + 1], y[i : i + 1], recipe.loss) for i in range(n)])

        def drawn():
            for t in range(tries):
                size = k if gen.random() < 0.5 else int(gen.integers(0, k + 1))
                if t % 3 == 0:
                    yield gen.choice(n, size=size, replace=False)
                    continue
                weight = gen.choice([-1.0, 1.0], size=grads.shape[1])
                score = grads[:, int(gen.integers(grads.shape[1]))] if t % 3 == 1 else grads @ weight
                yield np.argsort(score * gen.choice([-1.0, 1.0]))[:size]

        candidates = drawn()
    worst, count = -np.inf, 0
    for rows in candidates:
        try:
            reduced = recipe.without(list(rows))
        except ValueError:  # a batch would be empty: not an allowed removal
            continue
        worst = max(worst, _violation(result, model.run(X, y, reduced)))
        count += 1
    if recipe.n_steps > 1:  # AGT's definition: each batch may lose other rows, at every step
        for _ in range(tries):
            batches = tuple(
                np.delete(
                    b, gen.choice(len(b), size=int(gen.integers(0, min(k, len(b) - 1) + 1)), replace=False)
                )
                for b in recipe.batches
            )
            worst = max(worst, _violation(result, model.run(X, y, replace(recipe, batches=batches))))
            count += 1
    return worst, count


def _direction(grad) -> np.ndarray:
    """The sign of a torch gradient, 0 where it is NaN."""
    return np.sign(np.nan_to_num(grad.detach().numpy(), nan=0.0))


def _margin(torch, params, X_test, pred, sizes):
    """Prediction margins of the batched networks ``params`` at their own test point (``X_test`` (B, d)):
    ``pred * f`` for one output, ``f_pred - max_{c != pred} f_c`` otherwise (negative: the prediction changed,
    up to the tie ``f = 0``)."""
    f = _torch_forward(torch, params, X_test[:, None, :], sizes)[:, 0, :]
    if f.shape[1] == 1:
        return pred * f[:, 0]
    own = f.gather(1, pred[:, None])[:, 0]
    others = f.masked_fill(torch.nn.functional.one_hot(pred, f.shape[1]).bool(), -torch.inf)
    return own - others.max(dim=1).values


def attack_predictions(
    model: MLP,
    X: Any,
    y: Any,
    perturbation: Perturbation,
    X_test: Any,
    *,
    loss: str = "hinge",
    epochs: int = 1,
    learning_rate: float = 0.1,
    restarts: int = 2,
    steps: int = 10,
    at_epochs: Any = None,
    rng: RNGLike = None,
) -> np.ndarray:
    """Test predictions that an allowed training set provably changes: no sound certificate can keep them.

    For every epoch ``t`` and test point ``x``, projected gradient descent on the continuous input offsets
    (discrete choices fixed at random per restart) through ``t`` unrolled full-batch GD steps (torch,
    float64, one independent search per test point, batched) minimises the margin of the nominal model's
    prediction at ``x``.  A flip counts only after the found training set is re-trained with `MLP.train`
    (the float trajectory the certificates bound) and its prediction at ``x`` differs from the nominal
    one, so every reported flip is a witness.

    ``at_epochs`` (a sequence of epochs in ``1..epochs``) limits the search to those epochs (default: all;
    the rows of the others stay False).

    Returns
    -------
    ndarray of bool (epochs + 1, m)
        ``flipped[t, i]``: a dataset allowed by ``perturbation`` whose model after ``t`` epochs predicts
        differently at ``X_test[i]`` was found (row 0, the fixed initial model, is all False).  The
        fraction of test points that are correct and not flipped after ``t`` epochs is an upper bound on
        the certified accuracy of every sound method at that epoch.
    """
    torch = require("torch", extra="torch", purpose="the prediction attack")
    if not isinstance(model, MLP):
        raise TypeError(f"model must be a certkit.mibp.MLP, got {type(model).__name__}")
    if not isinstance(perturbation, Perturbation):
        raise TypeError(f"perturbation must be a Perturbation, got {type(perturbation).__name__}")
    sizes = model.sizes
    X = check_array(X, "X", ndim=2, shape=(None, sizes[0]))
    X_test = check_array(X_test, "X_test", ndim=2, shape=(None, sizes[0]))
    loss = check_in_options(loss, "loss", LOSSES)
    y = check_labels(y, loss, sizes[-1], len(X))
    y_fit = y[:, 0] if loss == "mse" and y.shape[1] == 1 else y
    epochs = check_integer(epochs, "epochs", minimum=1)
    lr = check_positive(learning_rate, "learning_rate")
    restarts = check_integer(restarts, "restarts", minimum=1)
    steps = check_integer(steps, "steps", minimum=0)
    gen = check_rng(rng)
    sets: InputSets = perturbation.sets(X)
    nominal_path = model.train(X, y_fit, loss=loss, epochs=epochs, learning_rate=lr)
    classes = None if loss == "mse" else label_classes(loss, sizes[-1])
    m = len(X_test)
    flipped = np.zeros((epochs + 1, m), dtype=bool)
    Xt_test = torch.tensor(X_test, dtype=torch.float64)
    theta0 = [a for w, b in zip(model.weights, model.biases) for a in (w, b)]
    if at_epochs is None:
        at_epochs = range(1, epochs + 1)
    at_epochs = sorted({check_integer(t, "at_epochs[i]", minimum=1, maximum=epochs) for t in at_epochs})
    for t in at_epochs:
        pred_np = nominal_path[t].predict(X_test)
        pred = torch.tensor(pred_np, dtype=torch.float64 if sizes[-1] == 1 else torch.int64)
        for _ in range(restarts):
            todo = np.flatnonzero(~flipped[t])
            if todo.size == 0:
                break
            starts = [_start(sets, sets.sample(gen, vertex=True), gen) for _ in todo]
            base, lo_off, hi_off, off = (np.stack(parts) for parts in zip(*starts))
            labels = np.stack([sets.sample_labels(y, gen, classes=classes) for _ in todo])
            yt = _label_tensor(torch, labels, loss)
            recipe = make_recipe(len(X), loss=loss, epochs=t, learning_rate=lr)
            step = 0.25 * (hi_off - lo_off)
            params = [
                torch.tensor(np.broadcast_to(a, (len(todo), *a.shape)).copy(), requires_grad=True)
                for a in theta0
            ]
            for s in range(steps + 1):
                ot = torch.tensor(off, dtype=torch.float64, requires_grad=True)
                path_t = _torch_train(torch, params, torch.tensor(base) + ot, yt, recipe, sizes)
                margins = _margin(torch, path_t[-1], Xt_test[todo], pred[todo], sizes)
                # a margin at or below 0 in torch: confirm on the float trajectory of MLP.train
                for j in np.flatnonzero(margins.detach().numpy() <= 0):
                    i = todo[j]
                    if not flipped[t, i]:
                        path = model.run(base[j] + off[j], labels[j], recipe)
                        flipped[t, i] = path[-1].predict(X_test[i : i + 1])[0] != pred_np[i]
                if s == steps or flipped[t, todo].all():
                    break
                (g,) = torch.autograd.grad(margins.sum(), ot)
                off = np.clip(off - step * _direction(g), lo_off, hi_off)
    return flipped


def _label_losses(torch, h, loss: str, classes):
    """Every sample's loss (``(n, L)``) at the outputs ``h`` (``(n, C)``) under each label of ``classes``
    (``(L,)``, float), as `_per_sample_loss` computes it for one label."""
    if loss == "cross_entropy":
        return torch.logsumexp(h, dim=-1, keepdim=True) - h
    if loss == "binary_cross_entropy":
        return torch.nn.functional.softplus(h[:, :1]) - classes[None] * h[:, :1]
    if h.shape[-1] == 1:  # binary hinge
        return torch.relu(1.0 - classes[None] * h[:, :1])
    # multi-class hinge, label c: Σ_{c' ≠ c} max(0, 1 + h_c' - h_c)
    return torch.relu(1.0 + h[:, None, :] - h[:, :, None]).sum(dim=-1) - 1.0


def _flip_sets(decrease: np.ndarray, k: int, scope: str, recipe: Recipe) -> np.ndarray:
    """The rows an attack changes, from each row's first-order decrease of the margin (``decrease``, (n,),
    ``-inf`` where the row may not change): under ``scope="run"`` the ``k`` largest positive ones; under
    ``scope="batch"`` greedily from the largest, every row whose batches (all of the run's) still hold
    fewer than ``k`` chosen rows."""
    order = np.argsort(-decrease, kind="stable")
    order = order[decrease[order] > 0]
    if scope == "run":
        return order[:k]
    return _batch_scope_rows(recipe, len(decrease), k, order)


def attack_label_flips(
    result: Any,
    X: Any,
    y: Any,
    perturbation: Perturbation,
    X_test: Any,
    *,
    epoch: int = -1,
    competitors: int = 2,
) -> np.ndarray:
    """Test predictions that an allowed set of changed labels provably changes: no sound certificate can
    keep them.

    The first-order influence of every row's label on every attacked margin is computed exactly, by
    reverse-mode differentiation through the unrolled training of ``result``'s recipe (its batches,
    momentum, weight decay, clipping; torch, float64): each row's loss is written ``ℓ(h, y) + Σ_c w_c
    (ℓ(h, c) - ℓ(h, y))``, so ``∂margin/∂w_c`` at ``w = 0`` is the first-order change of the margin when the
    row's label becomes ``c``.  For every test point and each of its ``competitors`` closest classes (by the
    nominal margin), the rows whose allowed label change decreases that margin most are changed (the ``k``
    largest decreases under ``scope="run"``, greedily at most ``k`` in every batch under
    ``scope="batch"``), and that training set is re-trained with `MLP.run` (the float trajectory the
    certificates bound).  A prediction counts as changed only when a re-trained model predicts differently
    at it, so every reported change is a witness; every re-trained model is checked at every test point.

    Parameters
    ----------
    result : CertifiedTrainingResult
        Output of `certified_training` (its recipe and nominal run are attacked).
    X, y : array
        The training inputs (raw inputs of the extractor's input shape when the run had ``features=``)
        and labels it was trained on.
    perturbation : LabelFlips
        The allowed label changes (its ``k``, ``scope`` and ``target``).
    X_test : array (m, d)
        Test inputs (raw inputs when the run had ``features=``).
    epoch : int
        The epoch whose predictions are attacked (default: the last).
    competitors : int
        How many of each test point's closest other classes are attacked (>= 1; one output: the one
        margin).

    Returns
    -------
    ndarray of bool (m,)
        ``changed[i]``: a training set allowed by ``perturbation`` was found whose model after ``epoch``
        epochs predicts differently at ``X_test[i]``.  The share of test points that are correct and not
        changed is an upper bound on the certified accuracy of every sound method at that epoch.

    Examples
    --------
    >>> import numpy as np
    >>> from certkit.mibp import MLP, LabelFlips, certified_training
    >>> from certkit.mibp.certification.attack import attack_label_flips
    >>> gen = np.random.default_rng(0)
    >>> X = gen.normal(size=(40, 2)); y = (X[:, 0] > 0).astype(int)
    >>> model = MLP.random([2, 2], rng=0)
    >>> res = certified_training(model, X, y, perturbation=LabelFlips(3), loss="cross_entropy",
    ...                          epochs=3, learning_rate=1.0)
    >>> changed = attack_label_flips(res, X, y, LabelFlips(3), X[:5])
    >>> changed.shape, changed.dtype
    ((5,), dtype('bool'))
    """
    torch = require("torch", extra="torch", purpose="the label-flip attack")
    if not isinstance(result, CertifiedTrainingResult):
        raise TypeError(f"result must be a CertifiedTrainingResult, got {type(result).__name__}")
    if not isinstance(perturbation, Perturbation):
        raise TypeError(f"perturbation must be a Perturbation, got {type(perturbation).__name__}")
    if result.recipe is None:
        raise ValueError("result has no recipe: attack a result of certified_training")
    epoch = check_epoch(epoch, result.epochs) % (result.epochs + 1)
    competitors = check_integer(competitors, "competitors", minimum=1)
    if result.loss == "mse":
        raise ValueError("attack_label_flips attacks classification losses; result.loss is 'mse'")
    Xf = result.inputs(X, "X")
    Xq = result.inputs(X_test, "X_test")
    sets: InputSets = perturbation.sets(Xf)
    if (
        sets.label_flips is None
        or sets.budget is not None
        or sets.removals is not None
        or sets.neighbours is not None
        or np.any(sets.varies)
        or sets.target_radius is not None
    ):
        raise ValueError(
            f"perturbation must be LabelFlips alone (the attack changes labels), got {perturbation!r}; "
            "attack_violation attacks the other perturbations' boxes"
        )
    model, recipe, loss = result.nominal_path[0], result.recipe, result.loss
    sizes = model.sizes
    check_perturbation(sets, loss, sizes[-1])
    if len(Xf) != recipe.n_rows:
        raise ValueError(
            f"X has {len(Xf)} rows but result was trained on {recipe.n_rows}: pass result's training data"
        )
    y_fit = check_labels(y, loss, sizes[-1], len(Xf))
    with single_threaded():  # as certified_training runs it (other BLAS thread counts may round differently)
        nominal_run = model.run(Xf, y_fit, recipe)[epoch].to_vector()
    stored = result.nominal_path[epoch].to_vector()
    if np.max(np.abs(nominal_run - stored), initial=0.0) > 1e-8 * (1.0 + np.max(np.abs(stored), initial=0.0)):
        raise ValueError(
            "X and y are not the training data of result: training on them does not reproduce its nominal "
            f"model after epoch {epoch}"
        )
    classes = label_classes(loss, sizes[-1])
    allowed = allowed_labels(y_fit, classes, "other", sets.flip_target)  # (n, L)
    nominal = result.nominal_path[epoch]
    pred = nominal.predict(Xq)
    changed = np.zeros(len(Xq), dtype=bool)
    if epoch == 0 or not allowed.any():
        return changed
    # the attacked margins: per test point its closest competitors (one output: the one margin)
    out = nominal.forward(Xq)
    index = np.arange(len(Xq))
    if sizes[-1] == 1:
        targets = np.zeros((len(Xq), 1), dtype=np.int64)
    else:
        gaps = out[index, pred][:, None] - out
        gaps[index, pred] = np.inf
        targets = np.argsort(gaps, axis=1, kind="stable")[:, : min(competitors, sizes[-1] - 1)]
    weights = torch.zeros(allowed.shape, dtype=torch.float64, requires_grad=True)
    label_values = torch.tensor(classes, dtype=torch.float64)
    yt = _label_tensor(torch, y_fit, loss)

    def sample_loss(h, yb, rows):
        base = _per_sample_loss(torch, h, yb, loss)
        change = _label_losses(torch, h, loss, label_values) - base[:, None]
        return base + (weights.index_select(0, rows) * change).sum(dim=-1)

    theta0 = [
        torch.tensor(a, requires_grad=True) for layer in zip(model.weights, model.biases) for a in layer
    ]
    params = _torch_train(torch, theta0, torch.tensor(Xf), yt, recipe, sizes, sample_loss)[epoch]
    f = _torch_forward(torch, params, torch.tensor(Xq, dtype=torch.float64), sizes)
    if sizes[-1] == 1:
        margins = torch.tensor(pred, dtype=torch.float64)[:, None] * f
    else:
        own = f[torch.as_tensor(index), torch.as_tensor(pred)][:, None]
        margins = own - f.gather(1, torch.as_tensor(targets))
    flat = margins.reshape(-1)
    tried: set[bytes] = set()
    for i in range(flat.numel()):
        if changed[i // targets.shape[1]]:
            continue
        (g,) = torch.autograd.grad(flat[i], weights, retain_graph=True)
        # the first-order decrease of the margin when row i takes label c, the largest over the allowed c
        drop = np.where(allowed, -g.numpy(), -np.inf)
        best = drop.argmax(axis=1)
        rows = _flip_sets(drop[np.arange(len(Xf)), best], sets.label_flips, sets.scope, recipe)
        key = np.stack([rows, best[rows]]).tobytes()
        if len(rows) == 0 or key in tried:
            continue
        tried.add(key)
        labels = y_fit.copy()
        labels[rows] = classes[best[rows]]
        with single_threaded():
            changed |= model.run(Xf, labels.astype(y_fit.dtype), recipe)[epoch].predict(Xq) != pred
    return changed
