"""``certkit performative``: performative generalization bounds and worst/best-case risks on the NSW data or a
user's labelled data (CSV or NPZ)."""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from certkit.cli import file_name

NAME = "performative"
HELP = "performative generalization bounds: Wasserstein worst/best-case risks and the change-learn trade-off"

_PAPER = {
    "diameter": 5.29,
    "loss_lipschitz": math.sqrt(28),
    "model_lipschitz": 0.25,
    "entropy_integral": 7.3855,
    "loss_range": 1.0,
    "wasserstein_constant": 0.001,
}


#: Most shares one run evaluates (each costs a bound and two Wasserstein risks; 5,000 took 6 minutes).
MAX_SHARES = 200


def lalonde_model() -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """NSW covariates and programme indicator scaled to [0, 1], labels +1 = employed in 1978, logistic fit."""
    from certkit.datasets import load_lalonde

    data = load_lalonde()
    return _fit_model(np.column_stack([data.X, data.treatment]), np.where(data.outcome > 0, 1.0, -1.0))


def _fit_model(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Columns scaled to [0, 1] (so ||x||_2 <= sqrt(d)), labels in {-1, +1}, the logistic fit (C = 1)."""
    from sklearn.linear_model import LogisticRegression

    low, high = X.min(axis=0), X.max(axis=0)
    constant = np.flatnonzero(high == low)
    if constant.size:
        raise ValueError(f"data has constant feature column(s) {constant.tolist()}; drop them")
    # halves first (exact): X - low overflows for columns spanning more than 1.8e308 (values near ±1e308)
    X = (X / 2 - low / 2) / (high / 2 - low / 2)
    model = LogisticRegression(C=1.0).fit(X, y)
    return X, y, model.coef_[0], float(model.intercept_[0])


def _load_data(path: str, label: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels (in {-1, +1}) of a user's CSV or NPZ file
    (`certkit._labelled_file.read_labelled`); ValueError naming --data otherwise."""
    from certkit._labelled_file import read_labelled

    read = read_labelled(path, label)
    classes = read.data.target_names
    if len(classes) != 2 or (read.numeric and set(classes) not in ({"0", "1"}, {"-1", "1"})):
        values = [float(c) for c in classes[:5]] if read.numeric else list(classes[:5])
        raise ValueError(
            f"data labels must be two classes coded 0/1 or -1/+1, got values {values}; or two class names "
            "(text), the later in sorted order taken as +1"
        )
    return read.data.X, np.where(read.data.y == 1, 1.0, -1.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the subcommand."""
    parser.add_argument(
        "--data",
        type=file_name,
        metavar="FILE",
        help="labelled data: a CSV file (header row, numeric feature columns, the label column last or "
        "--label) or an .npz archive of X and y; labels 0/1, -1/+1 or two class names (the later in sorted "
        "order +1); features are scaled to [0, 1] and a logistic model fitted (default: the NSW/LaLonde "
        "sample)",
    )
    parser.add_argument(
        "--label", default=None, help="the label column of a --data CSV file (default: the last)"
    )
    parser.add_argument(
        "--kind",
        default="thm3.13",
        choices=("thm3.13", "thm3.15", "rademacher"),
        help="bound (default thm3.13)",
    )
    parser.add_argument(
        "--shares",
        default="0.01,0.05,0.1,0.2,0.3,0.5",
        help="comma-separated shares m/n of affected units, at most 200 (default 0.01,0.05,0.1,0.2,0.3,0.5)",
    )
    parser.add_argument(
        "--n",
        type=int,
        default=None,
        help="sample size of the Thm bounds (default: the rows of the data, 445 for NSW); the risk table "
        "always uses the data's rows",
    )
    parser.add_argument("--p", type=float, default=2.0, help="Wasserstein order (default 2)")
    parser.add_argument("--confidence-level", type=float, default=0.95, help="1 - delta (default 0.95)")
    parser.add_argument(
        "--target",
        type=float,
        default=None,
        help="also report the largest share keeping the bound below this value",
    )
    parser.add_argument(
        "--weight-norm",
        type=float,
        default=None,
        help=f"a priori bound on ||(theta, b)||_2 for kind=rademacher (default {_WEIGHT_NORM:g})",
    )
    for key, value in _PAPER.items():
        kinds = {"model_lipschitz": "thm3.13", "wasserstein_constant": "thm3.15"}.get(key, "thm3.13/3.15")
        parser.add_argument(
            f"--{key.replace('_', '-')}",
            type=float,
            default=None,
            help=f"{kinds} constant (default {value:.6g}, the paper's study)",
        )


_WEIGHT_NORM = 5.0
#: The options each kind uses (the others are rejected when given, rather than silently ignored).
_USES = {
    "thm3.13": {"n", "diameter", "loss_lipschitz", "model_lipschitz", "entropy_integral", "loss_range"},
    "thm3.15": {"n", "diameter", "loss_lipschitz", "wasserstein_constant", "entropy_integral", "loss_range"},
    "rademacher": {"weight_norm"},
}


def _check_options(args: argparse.Namespace) -> None:
    """ValueError naming the given options that `args.kind` does not use; fill in the others' defaults."""
    optional = {"n", "weight_norm", *_PAPER}
    unused = sorted(k for k in optional - _USES[args.kind] if getattr(args, k) is not None)
    if unused:
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in unused)
        it = "it" if len(unused) == 1 else "them"
        raise ValueError(f"--kind {args.kind} does not use {flags}; leave {it} out")
    for key, value in _PAPER.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.weight_norm is None:
        args.weight_norm = _WEIGHT_NORM


def _shares(text: str) -> list[float]:
    try:
        shares = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"shares must be comma-separated numbers, got {text!r}") from None
    if not shares:
        raise ValueError(f"shares must list at least one share m/n of affected units, got {text!r}")
    outside = [r for r in shares if not 0.0 <= r <= 1.0]  # NaN included
    if outside:
        raise ValueError(f"shares must lie in [0, 1] (shares m/n of affected units), got {outside[0]:g}")
    if len(shares) > MAX_SHARES:
        raise ValueError(
            f"shares lists {len(shares)} values; at most {MAX_SHARES} (each costs a bound and two "
            "Wasserstein risks): use a coarser grid, or --target for the largest share under a bound"
        )
    return shares


def _bound_kwargs(args: argparse.Namespace, n: int, X, y, theta, D_Z: float, b: float = 0.0) -> dict:
    common = {"p": args.p, "confidence_level": args.confidence_level}
    if args.kind == "rademacher":
        return {
            **common,
            "theta": theta,
            "intercept": b,
            "X": X,
            "y": y,
            "loss": "logistic",
            "diameter": D_Z,
            "weight_norm": args.weight_norm,
            "feature_norm": math.sqrt(X.shape[1]),
        }
    names = ["diameter", "loss_lipschitz", "entropy_integral", "loss_range"]
    names.append("model_lipschitz" if args.kind == "thm3.13" else "wasserstein_constant")
    return {**common, "n": n, **{k: getattr(args, k) for k in names}}


def _parser() -> argparse.ArgumentParser:
    """The subcommand's options, to write a leading argument name of an error as its flag."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the bound term by term against the share, the Wasserstein risks behind it and the inverse."""
    from certkit._results import format_table
    from certkit.cli import _error_message
    from certkit.performative import flip_radius, generalization_bound, max_affected_share, wasserstein_risk

    try:
        shares = _shares(args.shares)
        _check_options(args)
        if args.target is not None and not math.isfinite(args.target):
            raise ValueError(f"target must be finite, got {args.target}")
        start = time.perf_counter()
        if args.data is None:
            X, y, theta, b = lalonde_model()
            source = "the NSW model"
        else:
            X, y, theta, b = _fit_model(*_load_data(args.data, args.label))
            source = f"the logistic model of {args.data}"
        margins = y * (X @ theta + b)
        D_Z = float(2.0 * np.abs(margins).max() / np.linalg.norm(theta))  # largest label flip, as a move of x
        n = args.n if args.n is not None else X.shape[0]
        kwargs = _bound_kwargs(args, n, X, y, theta, D_Z, b)
        bounds = [generalization_bound(kind=args.kind, share=r, **kwargs) for r in shares]
        risks = []
        for r in shares:
            radius = flip_radius(X.shape[0], round(r * X.shape[0]), D_Z, p=args.p)
            lo, hi = (
                wasserstein_risk(
                    theta, X, y, loss="logistic", radius=radius, p=args.p, intercept=b, direction=d
                )
                for d in ("inf", "sup")
            )
            risks.append((r, radius, lo, hi))
    except (ValueError, TypeError, OSError) as exc:
        print(f"certkit performative: error: {_error_message(exc, _parser(), args)}", file=sys.stderr)
        return 2
    names = list(bounds[0].terms)
    rows = [[r, *(bd.terms[k] for k in names), bd.total] for r, bd in zip(shares, bounds)]
    print(
        format_table(
            ["share", *names, "total"],
            rows,
            title=f"{args.kind} bound, p = {args.p:g}, confidence {args.confidence_level:g}"
            + ("" if args.kind == "rademacher" else f", n = {n}"),
        )
    )
    vacuous = [r for r, bd in zip(shares, bounds) if bd.vacuous]
    if vacuous:
        print(
            f"vacuous (total above the loss range {bounds[0].loss_range:g}) at shares "
            + ", ".join(f"{r:g}" for r in vacuous)
        )
    print()
    print(
        format_table(
            ["share", "radius", "W_p inf (self-fulfilling)", "W_p sup (self-negating)"],
            risks,
            title=f"logistic risk of {source} ({float(np.logaddexp(0, -margins).mean()):.4f}) over the flip "
            f"ball on its {X.shape[0]} rows, D_Z = {D_Z:.3f}",
        )
    )
    if args.target is not None:
        try:
            share = max_affected_share(args.target, kind=args.kind, **kwargs)
            print(f"\nlargest share of affected units with {args.kind} bound <= {args.target:g}: {share:.4f}")
        except ValueError as exc:  # the options passed every bound above: the target is out of reach
            print(f"\n--target {args.target:g} is unreachable: {exc}")
    print(f"\n({time.perf_counter() - start:.2f} s)")
    return 0


def demo(rng: np.random.Generator) -> str:
    """The NSW logistic model: worst/best-case risks at a 10% flip radius, Thm 3.13 trade-off, the inverse."""
    from certkit.performative import flip_radius, generalization_bound, max_affected_share, wasserstein_risk

    X, y, theta, b = lalonde_model()
    n = X.shape[0]
    margins = y * (X @ theta + b)
    D_Z = float(2.0 * np.abs(margins).max() / np.linalg.norm(theta))
    radius = flip_radius(n, n // 10, D_Z, p=2)
    lo, hi = (
        wasserstein_risk(theta, X, y, loss="logistic", radius=radius, p=2, intercept=b, direction=d)
        for d in ("inf", "sup")
    )
    paper = {k: v for k, v in _PAPER.items() if k != "wasserstein_constant"}
    totals = [
        generalization_bound(kind="thm3.13", share=r, n=n, p=2, **paper).total for r in (0.01, 0.1, 0.5)
    ]
    share = max_affected_share(80.0, kind="thm3.13", n=n, p=2, **paper)
    return "\n".join(
        [
            f"   NSW/LaLonde logistic model (n = {n}): risk {float(np.logaddexp(0, -margins).mean()):.4f}; "
            f"10% of units flipped -> W2 radius {radius:.3f}",
            f"   best case (self-fulfilling sample) {lo:.4f}, worst case (self-negating population) {hi:.4f}",
            "   Thm 3.13 bound (paper constants) at shares 0.01 / 0.1 / 0.5: "
            + " / ".join(f"{t:.1f}" for t in totals),
            f"   largest share of affected units keeping the Thm 3.13 bound <= 80: {share:.4f}",
        ]
    )
