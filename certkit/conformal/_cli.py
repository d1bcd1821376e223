"""``certkit conformal``: robust conformal prediction on the digits data or a user's labelled file, RCP1
against the baselines."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from typing import Any

import numpy as np

from certkit.cli import file_name

NAME = "conformal"
HELP = "robust conformal prediction sets with one noisy forward pass (RCP1) vs. baselines on digits or --data"

METHODS = ("split", "noisy", "rcp1", "bincp", "rscp+")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``certkit conformal``."""
    parser.add_argument(
        "--data",
        type=file_name,
        metavar="FILE",
        help="a user's labelled data instead of digits: a CSV file (header row, numeric feature columns, the "
        "label column last or --label; labels are class codes or names) or an .npz archive of X (n, d) and "
        "y (n,); the features are used as they are: --sigma and --radius are in their units",
    )
    parser.add_argument(
        "--label", default=None, help="the label column of a --data CSV file (default: the last)"
    )
    parser.add_argument("--sigma", type=float, default=0.25, help="smoothing noise std (default 0.25)")
    parser.add_argument("--radius", type=float, default=0.125, help="l2 attack radius (default 0.125)")
    parser.add_argument(
        "--confidence-level", type=float, default=0.9, help="target coverage under attack (default 0.9)"
    )
    parser.add_argument(
        "--method",
        action="append",
        choices=METHODS,
        default=None,
        help="method to run (repeatable; default: all)",
    )
    parser.add_argument(
        "--score", choices=("thr", "aps", "raps"), default="thr", help="conformity score (default thr)"
    )
    parser.add_argument(
        "--n-samples",
        type=int,
        default=256,
        help="noisy samples per input for BinCP / RSCP+ (default 256; RSCP+ returns every "
        "label with too few)",
    )
    parser.add_argument(
        "--attack-steps",
        type=int,
        default=10,
        help="smoothed-PGD steps (default 10; 0: no attack; the attack needs torch)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def _centroid_model(
    data: Any, sizes: tuple[int, int], sigma: float, scale: str, rng: np.random.Generator
) -> tuple:
    r"""A Gaussian class-conditional (nearest-centroid softmax) model of ``data`` (a `Dataset`) seen through
    noise, and its calibration and test parts.

    The rows are permuted; the first ``sizes[0]`` train the model, the next ``sizes[1]`` calibrate and the
    rest test. Class means and one shared isotropic variance (the training rows' variance around their class
    mean plus ``sigma**2``) give linear logits $(x \cdot \mu_k - \|\mu_k\|^2/2)/v$: trained in closed form,
    instantly, and well calibrated for inputs carrying the smoothing noise. ``scale`` says what ``sigma`` is
    measured against, for the error on a ``sigma`` whose square overflows.
    """
    if not math.isfinite(sigma * sigma):
        raise ValueError(
            f"sigma={sigma:g} is too large: its square overflows float64; use a sigma on the scale of {scale}"
        )
    n_train, n_cal = sizes
    perm = rng.permutation(len(data.y))
    train, cal, test = perm[:n_train], perm[n_train : n_train + n_cal], perm[n_train + n_cal :]
    X_tr, y_tr = data.X[train], data.y[train]
    n_classes = len(data.target_names)
    missing = np.flatnonzero(np.bincount(y_tr, minlength=n_classes) == 0)
    if missing.size:
        k = int(missing[0])
        raise ValueError(
            f"data: the class {data.target_names[k]!r} has no row among the {n_train} that train the model "
            f"(a third of the rows, drawn with --seed; it has {int(np.sum(data.y == k))} of {len(data.y)}): "
            "give more rows of it, or leave it out"
        )
    mu = np.stack([X_tr[y_tr == k].mean(axis=0) for k in range(n_classes)])
    var = float(np.mean((X_tr - mu[y_tr]) ** 2)) + sigma**2
    coef, intercept = mu / var, -0.5 * (mu**2).sum(axis=1) / var
    return coef, intercept, (data.X[cal], data.y[cal]), (data.X[test], data.y[test])


def _linear_model(coef: np.ndarray, intercept: np.ndarray) -> Any:
    """A torch linear module (logits) when torch is installed, else a NumPy logits function."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is installed in the test environment
        return (lambda X: X @ coef.T + intercept), False
    net = torch.nn.Linear(coef.shape[1], coef.shape[0]).double()
    with torch.no_grad():
        net.weight.copy_(torch.as_tensor(coef))
        net.bias.copy_(torch.as_tensor(intercept))
    return net, True


def compare(
    *,
    sigma: float,
    radius: float,
    confidence_level: float,
    methods: tuple = METHODS,
    score: str = "thr",
    n_samples: int = 256,
    attack_steps: int = 10,
    rng: np.random.Generator,
    data: str | None = None,
    label: str | None = None,
) -> str:
    """Calibrate the chosen methods on the labelled file ``data`` (label column ``label``, read by
    `certkit._labelled_file.read_labelled`; None: digits) and return the comparison table.

    A method whose every clean prediction set holds all labels is marked trivial (``*`` and a note
    under the table); without torch the attack is skipped and a note says what torch would add.
    """
    from certkit._validation import check_integer, check_level, check_nonnegative, check_positive
    from certkit.conformal import (
        BinCPClassifier,
        RCP1Classifier,
        RSCPPlusClassifier,
        SplitConformalClassifier,
        evaluate_sets,
        evaluation_table,
    )
    from certkit.conformal.attacks import _MAX_PASSES, smoothed_pgd

    # validate the options before the data, the model and the attack (seconds of work)
    check_positive(sigma, "sigma")
    check_nonnegative(radius, "radius")
    check_level(confidence_level)
    check_integer(n_samples, "n_samples", minimum=1)
    check_integer(attack_steps, "attack_steps", minimum=0)
    if data is None:
        from certkit.datasets import load_digits

        if label is not None:
            raise ValueError("label names a column of a --data CSV file")
        rows, source, scale, sizes = load_digits(), "digits", "the pixels (in [0, 1])", (600, 800)
    else:
        from certkit._labelled_file import read_labelled

        read = read_labelled(data, label)
        rows, source, scale = read.data, f"{read.data.name} ({read.where})", "the feature columns"
        n = len(rows.y)
        sizes = (round(n / 3), round(4 * n / 9))  # about digits' shares (600 / 800 / 397 of 1797)
        if n - sum(sizes) < 1:
            raise ValueError(f"data: {data} has {n} rows; it needs at least 3 (to train, calibrate and test)")
    coef, intercept, (X_cal, y_cal), (X_test, y_test) = _centroid_model(rows, sizes, sigma, scale, rng)
    model, is_torch = _linear_model(coef, intercept)
    common = {"conformity_score": score, "confidence_level": confidence_level, "output": "logits", "rng": rng}
    smooth = {"sigma": sigma, "radius": radius, **common}
    makers = {
        "split": lambda: SplitConformalClassifier(model, **common),
        "noisy": lambda: SplitConformalClassifier(model, noise="gaussian", sigma=sigma, **common),
        "rcp1": lambda: RCP1Classifier(model, **smooth),
        "bincp": lambda: BinCPClassifier(model, n_samples=n_samples, **smooth),
        "rscp+": lambda: RSCPPlusClassifier(model, n_samples=max(n_samples, 2), **smooth),
    }
    X_att = None
    note = "no attack"
    notes = []
    if attack_steps > 0 and radius > 0:
        if is_torch:
            most = int(_MAX_PASSES // (8 * len(y_test)))  # the attack's cap, for its 8 noise draws per step
            if attack_steps > most:
                raise ValueError(
                    f"attack_steps={attack_steps} is too large: smoothed PGD on {len(y_test)} test inputs "
                    f"with 8 noise draws per step would take hours; use at most {most}"
                )
            X_att = smoothed_pgd(
                model, X_test, y_test, radius, sigma, steps=attack_steps, n_noise=8, output="logits", rng=rng
            )
            note = f"smoothed PGD, {attack_steps} steps, l2 radius {radius}"
        else:
            note = "none (needs torch)"
            notes.append('pip install "certkit[torch]" adds the attacked columns (smoothed-PGD coverage)')
    names = {
        "split": "split CP (clean)",
        "noisy": "noisy CP (uncorrected)",
        "rcp1": "RCP1",
        "bincp": f"BinCP (m={n_samples})",
        "rscp+": f"RSCP+ (n_s={n_samples})",
    }
    results = [
        evaluate_sets(makers[m]().calibrate(X_cal, y_cal), X_test, y_test, X_attacked=X_att, method=names[m])
        for m in methods
    ]
    n_classes = coef.shape[0]
    trivial = [r.method for r in results if r.set_size == n_classes]
    if trivial:
        results = [replace(r, method=f"{r.method} *") if r.method in trivial else r for r in results]
        notes.insert(
            0,
            f"* trivial: every prediction set holds all {n_classes} labels (no information); "
            "more --n-samples or a smaller --radius make it informative",
        )
    title = (
        f"{source}, nearest-centroid softmax; sigma={sigma}, radius={radius}, "
        f"confidence_level={confidence_level}, score={score}; {len(y_cal)} calibration / "
        f"{len(y_test)} test points; attack: {note}"
    )
    return "\n".join([evaluation_table(results, title=title), *notes])


def run(args: argparse.Namespace) -> int:
    """Run ``certkit conformal``."""
    from certkit._validation import check_rng

    methods = tuple(dict.fromkeys(args.method)) if args.method else METHODS
    print(
        compare(
            sigma=args.sigma,
            radius=args.radius,
            confidence_level=args.confidence_level,
            methods=methods,
            score=args.score,
            n_samples=args.n_samples,
            attack_steps=args.attack_steps,
            rng=check_rng(args.seed),  # a negative --seed: ValueError, named by the command
            data=args.data,
            label=args.label,
        )
    )
    return 0


def demo(rng: np.random.Generator) -> str:
    """A short comparison on digits (a few seconds)."""
    return compare(
        sigma=0.25,
        radius=0.125,
        confidence_level=0.9,
        methods=("noisy", "rcp1", "bincp"),
        n_samples=32,
        attack_steps=5,
        rng=rng,
    )
