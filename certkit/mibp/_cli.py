"""``certkit mibp``: certified training on an embedded data set or a user's CSV / NPZ file, and the demo
section."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from certkit.cli import cli_words, file_name
from certkit.mibp._cli_data import DATASETS, _builtin, _encode, load_data, load_file, load_weights
from certkit.mibp._demo import demo

__all__ = [
    "DATASETS",
    "DEFAULT_TIME_LIMIT",
    "HELP",
    "NAME",
    "add_arguments",
    "demo",
    "load_data",
    "load_file",
    "run",
]

NAME = "mibp"
HELP = "MIBP certified training: provable parameter bounds under training-data perturbations"

LOSSES = ("hinge", "mse", "cross_entropy", "binary_cross_entropy")
#: Seconds per solve on the CLI and in the examples: no solve runs for minutes without output.
DEFAULT_TIME_LIMIT = 10.0
#: The default run: PyTorch's initialisation, 3 full-batch epochs at rate 0.3.  Measured over seeds 0-9 with
#: ε = 0.01: the nominal test accuracy is at least 0.72 / 0.67 / 0.72 / 0.89 on two_moons / iris2 / iris3 /
#: breast_cancer (chance 0.50 / 0.50 / 0.33 / 0.63) and the certified one 0.71 / 0.67 / 0.47 / 0.78.  The
#: former defaults (He initialisation, 5 epochs at 0.1) left the model below chance for 1-3 epochs.
DEFAULT_EPOCHS, DEFAULT_LEARNING_RATE, DEFAULT_INIT = 3, 0.3, "torch"
DEFAULT_HIDDEN = 16
DEFAULT_EPSILON = 0.01


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``certkit mibp``."""
    from certkit.mibp import BACKENDS, CARRIES, FORMULATIONS
    from certkit.mibp.problem.mlp import INITS

    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--dataset", choices=DATASETS, default=None, help="a built-in data set (default two_moons)"
    )
    source.add_argument(
        "--data",
        type=file_name,
        metavar="FILE",
        help="a user's labelled data instead: a CSV file (header row, numeric rows, the label column last or "
        "--label) or an .npz archive of X (n, d) and y (n,); features are standardised with the training "
        "rows' statistics",
    )
    parser.add_argument(
        "--label", default=None, help="the label column of a --data CSV file (default: the last)"
    )
    parser.add_argument(
        "--test-size",
        type=float,
        default=0.25,
        help="share of the rows held out for the test (stratified; --data, iris2, iris3, breast_cancer; "
        "two_moons has 100 training / 200 test points) (default 0.25)",
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help=f"feature-box radius ε (default {DEFAULT_EPSILON:g}; with --label-flips the features move only "
        "when --epsilon is given)",
    )
    who = parser.add_mutually_exclusive_group()
    who.add_argument(
        "--budget",
        type=int,
        default=None,
        metavar="K",
        help="at most K rows have their features moved within ±ε (default: every row)",
    )
    who.add_argument(
        "--label-flips",
        type=int,
        default=None,
        metavar="K",
        help="at most K labels changed to another class (with --epsilon also every row's features moved)",
    )
    who.add_argument(
        "--paired",
        type=int,
        default=None,
        metavar="K",
        help="paired poisoning: at most K rows each moved within ±ε and relabelled",
    )
    parser.add_argument(
        "--loss",
        choices=LOSSES,
        default="hinge",
        help="training loss; labels are converted to what it expects: {-1, +1} for the binary hinge and MSE, "
        "{0, 1} for binary cross-entropy (one output), 0..C-1 for cross-entropy (C outputs) (default hinge)",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=DEFAULT_EPOCHS,
        help=f"certified training epochs (default {DEFAULT_EPOCHS})",
    )
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=DEFAULT_LEARNING_RATE,
        help=f"SGD step size (the first one with --lr-decay) (default {DEFAULT_LEARNING_RATE:g})",
    )
    parser.add_argument(
        "--lr-decay",
        type=float,
        default=None,
        metavar="D",
        help="decaying rate InverseDecay(lr, D, minimum=M): lr / (1 + D * step) (default: constant)",
    )
    parser.add_argument(
        "--lr-min", type=float, default=None, metavar="M", help="floor M of the decaying rate (default 0)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=None, help="rows per gradient step (default: the full batch)"
    )
    parser.add_argument(
        "--shuffle", action="store_true", help="a new batch order every epoch, drawn once from --seed"
    )
    parser.add_argument(
        "--momentum", type=float, default=0.0, help="heavy-ball momentum in [0, 1) (default 0)"
    )
    parser.add_argument(
        "--weight-decay", type=float, default=0.0, help="L2 coefficient added to the gradient (default 0)"
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="interval",
        help="bounding backend; the program backends take hinge or MSE, full batch, constant rate "
        "(default interval)",
    )
    parser.add_argument(
        "--formulation",
        choices=FORMULATIONS,
        default="decomposed",
        help=(
            "joint, per-sample (decomposed), decomposed ∩ joint LP (hybrid) or per-sample programs with "
            "zero-sum multipliers (lagrangian) (default decomposed)"
        ),
    )
    parser.add_argument(
        "--carry",
        choices=CARRIES,
        default="auto",
        help=(
            "carried between steps: auto (the tightest that bounds the run: influence for a linear model "
            "under --label-flips, else box), the box, the first-order influence of every row (influence: "
            "linear models, --hidden 0), or also a zonotope over the perturbed inputs (affine: hundreds of "
            "rows) or over the parameters (shared: thousands of rows) (default auto)"
        ),
    )
    parser.add_argument(
        "--scope",
        choices=("batch", "run"),
        default="batch",
        help="what K of --budget, --label-flips and --paired counts: the changed rows in every batch (batch, "
        "AGT's definition) or in the whole training set (run) (default batch)",
    )
    parser.add_argument(
        "--attack",
        action="store_true",
        help="with --label-flips or --paired: also an upper bound on any sound certificate, the share of "
        "test rows correct and unchanged by a label-flip attack that re-trains every change it reports "
        "(needs torch)",
    )
    parser.add_argument(
        "--hidden",
        type=int,
        default=None,
        help=f"hidden units of the 2-layer MLP, 0 for a linear model (default {DEFAULT_HIDDEN}; not with "
        "--weights)",
    )
    parser.add_argument(
        "--init",
        choices=INITS,
        default=None,
        help="initial weights: PyTorch's nn.Linear default (torch) or He-uniform (he) "
        f"(default {DEFAULT_INIT}; not with --weights)",
    )
    parser.add_argument(
        "--weights",
        type=file_name,
        metavar="FILE",
        default=None,
        help="start from your own weights instead: an .npz of W0, b0, W1, b1, ... (W<l> of shape (outputs, "
        "inputs), as nn.Linear) or a PyTorch state dict of an nn.Sequential of Linear and ReLU layers "
        "(torch.save(net.state_dict(), FILE)); its first layer takes the feature columns, its last gives "
        "the outputs --loss needs",
    )
    parser.add_argument(
        "--no-standardise",
        action="store_true",
        help="use the features as they are (default: standardised with the training rows' statistics; "
        "weights from --weights expect the scaling they were trained with)",
    )
    parser.add_argument(
        "--output",
        type=file_name,
        metavar="FILE",
        default=None,
        help="also write the results to FILE as JSON: the per-epoch boxes (summary and bounds), the "
        "per-epoch accuracies and the test certificate (see docs/cli.md)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT,
        help=f"seconds per solve; a solve stopped early contributes its dual bound, so boxes only loosen "
        f"(default {DEFAULT_TIME_LIMIT:g})",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="parallel worker processes (default serial)"
    )
    parser.add_argument("--tighten", action="store_true", help="LP bound tightening inside the programs")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the data split, the initialisation and the batch order (default 0)",
    )
    parser.add_argument("--verbose", action="store_true", help="show the solvers' logs")


def _perturbation(args: argparse.Namespace) -> tuple[object, str]:
    """The perturbation the options ask for and its description."""
    from certkit._validation import check_integer
    from certkit.mibp import Budget, FeatureBox, LabelFlips

    eps = DEFAULT_EPSILON if args.epsilon is None else args.epsilon
    box = FeatureBox(eps)  # checks --epsilon
    scope = args.scope
    per = " in every batch" if scope == "batch" else " in the training set"
    if args.paired is not None:
        k = check_integer(args.paired, "paired", minimum=0)
        return (
            Budget(box & LabelFlips(1), k, scope=scope),
            f"at most {k} rows{per} moved by ±{eps:g} and relabelled",
        )
    if args.budget is not None:
        k = check_integer(args.budget, "budget", minimum=0)
        return Budget(box, k, scope=scope), f"features ±{eps:g} on at most {k} rows{per}"
    if args.label_flips is not None:
        k = check_integer(args.label_flips, "label_flips", minimum=0)
        if args.epsilon is None:
            return LabelFlips(k, scope=scope), f"at most {k} label flips{per}"
        return (
            box & LabelFlips(k, scope=scope),
            f"features ±{eps:g} on every row and at most {k} label flips{per}",
        )
    return box, f"features ±{eps:g} on every row"


def _learning_rate(args: argparse.Namespace) -> tuple[object, str]:
    from certkit._validation import check_nonnegative
    from certkit.mibp import InverseDecay

    if args.lr_decay is None:
        if args.lr_min is not None:
            raise ValueError("lr_min is the floor of a decaying rate: give --lr-decay too")
        return args.learning_rate, f"rate {args.learning_rate:g}"
    decay = check_nonnegative(args.lr_decay, "lr_decay")
    minimum = 0.0 if args.lr_min is None else check_nonnegative(args.lr_min, "lr_min")
    rate = InverseDecay(args.learning_rate, decay, minimum=minimum)
    return rate, f"rate {rate!r}"


def _recipe_words(args: argparse.Namespace, rate: str) -> str:
    words = [f"{args.loss} loss", rate]
    words.append("full batch" if args.batch_size is None else f"batches of {args.batch_size}")
    if args.shuffle:
        words[-1] += " (shuffled)"
    if args.momentum:
        words.append(f"momentum {args.momentum:g}")
    if args.weight_decay:
        words.append(f"weight decay {args.weight_decay:g}")
    return ", ".join(words)


def _majority_rate(y_test: np.ndarray) -> float:
    return float(np.max(np.unique(y_test, return_counts=True)[1]) / len(y_test))


def _chance_remark(
    nominal: float, certified: float, chance: float, args: argparse.Namespace, grown: float = 1.0
) -> str | None:
    """One line when the nominal or the certified accuracy is at or below chance (the majority-class rate);
    ``grown``: how much the largest parameter grew in training (training diverged above 1e3).  The advice
    names only options that act on this run."""
    if nominal <= chance and grown > 1e3:
        steeper = " or a smaller --momentum" if args.momentum else ""
        return (
            f"remark: the nominal accuracy is not above chance ({chance:.3f}) and the largest parameter grew "
            f"{grown:.3g}-fold in training: training diverged; use a smaller --learning-rate{steeper}"
        )
    if nominal <= chance:
        return (
            f"remark: the nominal accuracy is not above chance ({chance:.3f}, the majority class's share of "
            "the test labels): the model has not learnt the task; train longer (--epochs) or faster "
            "(--learning-rate)"
        )
    if certified <= chance:
        return (
            f"remark: the certified accuracy is not above chance ({chance:.3f}, the majority class's share "
            f"of the test labels): the bounds are too wide; try {_narrower(args)}"
        )
    return None


def _narrower(args: argparse.Namespace) -> str:
    """What narrows the bounds of this run, in the options that act on it."""
    options = []
    if args.epsilon is not None or args.label_flips is None:  # the features move
        options.append("a smaller --epsilon")
    for flag, value in (
        ("--budget", args.budget),
        ("--label-flips", args.label_flips),
        ("--paired", args.paired),
    ):
        if value is not None:
            options.append(f"a smaller {flag}")
    if args.epochs > 1:
        options.append("fewer --epochs")
    options.append("a smaller --learning-rate")
    if args.batch_size is not None:
        options.append("a larger --batch-size")
    if args.momentum:
        options.append("a smaller --momentum")
    return ", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0]


def run(args: argparse.Namespace) -> int:
    """Train with certified bounds, certify the test set, print both summaries."""
    from certkit.mibp import GurobiLicenseError

    parser = argparse.ArgumentParser()
    add_arguments(parser)  # to write the library's argument names as their flags
    start = time.perf_counter()
    try:
        setup = _setup(args)
        res, cert = _train_and_certify(args, *setup)
        bound = _attack_bound(args, res, cert, *setup[:3]) if args.attack else None
    except GurobiLicenseError as exc:
        print(f"certkit mibp: error: {exc.render(cli=True)}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, OSError, ImportError) as exc:
        sys.stdout.flush()
        print(f"certkit mibp: error: {cli_words(exc, parser, args)}", file=sys.stderr)
        return 2
    data, y_test, about = setup[0], setup[2], setup[-1]
    print(res.summary())
    print()
    nominal = float(np.mean(res.nominal.predict(data.X_test) == y_test))
    certified = cert.certified_accuracy(y_test)
    chance = _majority_rate(data.y_test)
    epochs = f"{args.epochs} epoch{'s' if args.epochs != 1 else ''}"
    carry = f"{res.carry} (chosen by --carry auto)" if res.auto_carry else res.carry
    print(f"{data.name}: {about}, {epochs}, backend {args.backend}, carry {carry}")
    print(
        f"  {len(data.y)} training / {len(data.y_test)} test rows, {data.X.shape[1]} features, "
        f"{data.n_classes} classes"
    )
    print(f"  nominal test accuracy   {nominal:.3f}")
    print(f"  certified accuracy      {certified:.3f}")
    print(f"  chance (majority class) {chance:.3f}")
    if bound is not None:
        print(f"  attack bound            {bound:.3f} (no sound certificate of this run can exceed it)")
    start_size = max(1.0, float(np.max(np.abs(res.nominal_path[0].to_vector()))))
    grown = float(np.max(np.abs(res.nominal.to_vector()))) / start_size
    remark = _chance_remark(nominal, certified, chance, args, grown)
    if remark is not None:
        print(f"  {remark}")
    if args.output is not None:
        try:
            _write_output(args, data, y_test, res, cert, about, chance, remark, bound)
        except (ValueError, OSError) as exc:
            sys.stdout.flush()
            print(f"certkit mibp: error: {cli_words(exc, parser, args)}", file=sys.stderr)
            return 2
        print(f"  results written to      {args.output}")
    print(f"  total time              {time.perf_counter() - start:.1f} s")
    return 0


def _check_output(path: str) -> None:
    """Before training: ``--output`` must name a file that can be written (it is opened for appending, which
    changes nothing, and removed again if it did not exist)."""
    import os

    if os.path.isdir(path):
        raise ValueError(f"output {path!r} is a directory; name a file, e.g. results.json")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"output {path!r}: the directory {folder} does not exist")
    existed = os.path.lexists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ValueError(f"output {path!r} cannot be written: {exc.strerror or exc}") from None
    if not existed:
        os.remove(path)


def _write_output(args, data, y_test, res, cert, about, chance, remark, bound) -> None:
    """The results as JSON (the format is described in docs/cli.md)."""
    import json

    import certkit

    def finite(values) -> list:
        return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float)]

    names = data.class_names or tuple(str(c) for c in range(data.n_classes))
    one_output = res.nominal.sizes[-1] == 1  # predictions -1 / +1 for the classes 0 / 1
    codes = (cert.prediction + 1) // 2 if one_output else cert.prediction
    per_epoch = res.certified_accuracy(data.X_test, y_test)  # interval bounds on each epoch's prediction
    nominal_per_epoch = res.nominal_accuracy(data.X_test, y_test)
    widths, mean_widths = res.widths(), res.mean_widths()
    epochs = [
        {
            "epoch": t,
            "max_width": float(widths[t]),
            "mean_width": float(mean_widths[t]),
            "seconds": float(res.epoch_seconds[t - 1]) if t else 0.0,
            "solves": int(res.solver_stats[t - 1]["solves"]) if t else 0,
            "not_optimal": int(res.solver_stats[t - 1]["not_optimal"]) if t else 0,
            "nominal_test_accuracy": float(nominal_per_epoch[t]),
            "certified_test_accuracy_interval": float(per_epoch[t]),
        }
        for t in range(res.epochs + 1)
    ]
    out = {
        "format": "certkit mibp results 1",
        "certkit_version": certkit.__version__,
        "data": {
            "name": data.name,
            "training_rows": len(data.y),
            "test_rows": len(data.y_test),
            "features": int(data.X.shape[1]),
            "classes": list(names),
            "standardised": not args.no_standardise,
        },
        "run": about,
        "recipe": res.recipe.describe(),
        "backend": res.backend,
        "formulation": res.formulation,
        "carry": res.carry,
        "initial_weights": args.weights
        if args.weights is not None
        else f"{args.init or DEFAULT_INIT}, seed {args.seed}",
        "layer_sizes": list(res.nominal.sizes),
        "epochs": epochs,
        "certificate": {
            "backend": cert.backend,
            "epoch": res.epochs,
            "nominal_test_accuracy": float(nominal_per_epoch[-1]),
            "certified_accuracy": float(cert.certified_accuracy(y_test)),
            "chance": chance,
            "certified_points": int(cert.certified.sum()),
            "prediction": [names[int(c)] for c in codes],
            "certified": [bool(c) for c in cert.certified],
            "margin_lower": finite(cert.margin_lower),
            "attack_bound": bound,
        },
        "remark": remark,
        "boxes": {
            "layout": "a vector per epoch 0..epochs: layer by layer, W (outputs x inputs) row by row, then b",
            "lower": [finite(m.to_vector()) for m in res.lower],
            "upper": [finite(m.to_vector()) for m in res.upper],
            "nominal": [finite(m.to_vector()) for m in res.nominal_path],
        },
    }
    with open(args.output, "w", encoding="utf-8") as handle:
        json.dump(out, handle, indent=1, allow_nan=False)
        handle.write("\n")


def _setup(args: argparse.Namespace) -> tuple:
    """Checked options, the data and the labels in the loss's form; ValueError etc. on bad input."""
    from certkit._validation import check_integer, check_level
    from certkit.mibp import MLP
    from certkit.parallel import MAX_LOCAL_WORKERS

    if args.weights is not None:
        for flag, value in (("hidden", args.hidden), ("init", args.init)):
            if value is not None:
                raise ValueError(
                    f"{flag} sets up a random initial network; --weights gives it: drop --{flag}"
                )
    else:
        check_integer(DEFAULT_HIDDEN if args.hidden is None else args.hidden, "hidden", minimum=0)
    check_integer(args.seed, "seed", minimum=0)
    if args.output is not None:
        _check_output(args.output)
    if args.workers is not None:
        check_integer(args.workers, "workers", minimum=1, maximum=MAX_LOCAL_WORKERS)
    check_level(args.test_size, "test_size")
    perturbation, perturbed = _perturbation(args)
    if args.attack and args.label_flips is None and args.paired is None:
        raise ValueError("--attack changes training labels: give --label-flips or --paired")
    rate, rate_words = _learning_rate(args)
    standardise = not args.no_standardise
    if args.data is not None:
        data = load_file(
            args.data, label=args.label, test_size=args.test_size, rng=args.seed, standardise=standardise
        )
    else:
        if args.label is not None:
            raise ValueError("label names a column of a --data CSV file")
        name = args.dataset or "two_moons"
        data = _builtin(name, rng=args.seed, test_size=args.test_size, standardise=standardise)
    y, y_test, n_out = _encode(data, args.loss)
    if args.weights is not None:
        why = f"--loss {args.loss} on {data.n_classes} classes " + (
            "(one output; --loss cross_entropy takes two)" if n_out == 1 else "(one output per class)"
        )
        model = load_weights(args.weights, data.X.shape[1], n_out, why)
    else:
        hidden = DEFAULT_HIDDEN if args.hidden is None else args.hidden
        sizes = [data.X.shape[1], hidden, n_out] if hidden else [data.X.shape[1], n_out]
        model = MLP.random(sizes, init=args.init or DEFAULT_INIT, rng=args.seed)
    return data, y, y_test, model, perturbation, rate, f"{perturbed}; {_recipe_words(args, rate_words)}"


def _attack_bound(args, res, cert, data, y, y_test) -> float:
    """The share of test rows correct and unchanged by `attack_label_flips` with the run's label changes
    (``--label-flips`` or ``--paired`` K, at the observed features, which every feature box holds)."""
    from certkit.mibp import LabelFlips
    from certkit.mibp.certification.attack import attack_label_flips

    k = args.label_flips if args.label_flips is not None else args.paired
    changed = attack_label_flips(res, data.X, y, LabelFlips(k, scope=args.scope), data.X_test)
    return float(np.mean((cert.prediction == y_test) & ~changed))


def _train_and_certify(args, data, y, y_test, model, perturbation, rate, about) -> tuple:
    from certkit.mibp import certified_training, certify_predictions

    res = certified_training(
        model,
        data.X,
        y,
        perturbation=perturbation,
        loss=args.loss,
        epochs=args.epochs,
        learning_rate=rate,
        batch_size=args.batch_size,
        shuffle=args.shuffle,
        momentum=args.momentum,
        weight_decay=args.weight_decay,
        rng=args.seed,
        backend=args.backend,
        formulation=args.formulation,
        carry=args.carry,
        time_limit=args.time_limit,
        tighten_bounds=args.tighten and args.backend != "interval",
        executor=args.workers,
        progress=None,  # the library's default: a bar per epoch for program runs of 10 s or more
        verbose=args.verbose,
    )
    cert = certify_predictions(
        res,
        data.X_test,
        backend=args.backend,
        time_limit=args.time_limit,
        executor=args.workers,
        progress="certifying the test points",
        verbose=args.verbose,
    )
    return res, cert
