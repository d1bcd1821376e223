"""``certkit ope``: off-policy evaluation of a new threshold policy on data logged from strategic agents."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from certkit.cli import file_name

NAME = "ope"
HELP = "off-policy evaluation under strategic behaviour: strategic DR vs naive DR on logged explanations"


def _vector(text: str) -> np.ndarray:
    try:
        return np.array([float(v) for v in text.split(",")])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the subcommand."""
    parser.add_argument(
        "--data",
        type=file_name,
        metavar="FILE.npz",
        help="logged data: a NumPy .npz archive (numpy.savez) of the arrays x_pre, x_post, moved, action, "
        "reward, pscore (default: simulate)",
    )
    parser.add_argument("--n", type=int, default=4000, help="simulated logged agents (default %(default)s)")
    parser.add_argument(
        "--logging-theta",
        type=_vector,
        default="1,1",
        help="logging policy θ, one entry per covariate (default %(default)s)",
    )
    parser.add_argument(
        "--logging-tau", type=float, default=1.0, help="logging policy τ (default %(default)s)"
    )
    parser.add_argument(
        "--logging-temperature",
        type=float,
        default=1.0,
        help="logging policy temperature (default %(default)s)",
    )
    parser.add_argument(
        "--target-theta", type=_vector, default="1,0", help="target policy θ (default %(default)s)"
    )
    parser.add_argument("--target-tau", type=float, default=1.0, help="target policy τ (default %(default)s)")
    parser.add_argument(
        "--target-temperature",
        type=float,
        default=0.25,
        help="target policy temperature (default %(default)s)",
    )
    parser.add_argument(
        "--benefit", type=float, default=1.0, help="benefit B of acceptance (default %(default)s)"
    )
    parser.add_argument(
        "--x-post-tol",
        type=float,
        default=1e-6,
        help="how closely movers' x_post must equal the disclosed explanation (default %(default)s; raise it "
        "for data stored with fewer than 6 decimals)",
    )
    parser.add_argument("--bootstrap", type=int, default=0, help="bootstrap replicates (default 0: none)")
    parser.add_argument(
        "--cross-fit", type=int, default=None, help="folds for cross-fitting q̂ (default: none)"
    )
    parser.add_argument(
        "--confidence-level", type=float, default=0.95, help="confidence level (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")


_NPZ_KEYS = "x_pre, x_post, moved, action, reward, pscore"


def _load(path: str):
    """The logged data in `path`, a .npz archive; ValueError naming --data and the accepted format."""
    import zipfile

    from certkit.ope import StrategicData

    want = f"a NumPy .npz archive (numpy.savez) of the arrays {_NPZ_KEYS}"
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile):
        raise ValueError(f"data: {path} is not {want}") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError(f"data: {path} holds a single array; expected {want}")
    with loaded as f:
        missing = [k for k in _NPZ_KEYS.split(", ") if k not in f.files]
        if missing:
            raise ValueError(f"data: {path} lacks the arrays {missing}; expected {want}")
        try:
            arrays = {k: f[k] for k in f.files}
        except ValueError:  # object arrays, which are not read without allow_pickle
            raise ValueError(f"data: {path} holds arrays of Python objects; expected {want}") from None
        return StrategicData(**arrays)


def _check_thetas(args: argparse.Namespace, n_features: int | None) -> None:
    """--logging-theta and --target-theta have one entry per covariate (ValueError naming the option)."""
    lt, tt = args.logging_theta.size, args.target_theta.size
    if n_features is not None:
        for dest, size in (("logging_theta", lt), ("target_theta", tt)):
            if size != n_features:
                raise ValueError(
                    f"{dest} has {size} entries; the data have {n_features} covariates (one entry each)"
                )
    elif lt != tt:
        # Lead with the option whose length differs from the defaults' (two covariates).
        first, second = ("target_theta", "logging_theta") if lt == 2 else ("logging_theta", "target_theta")
        sizes = {"logging_theta": lt, "target_theta": tt}
        raise ValueError(
            f"{first} has {sizes[first]} entries and --{second.replace('_', '-')} {sizes[second]}; both need "
            "one entry per covariate"
        )


def _policies(args: argparse.Namespace):
    from certkit.ope import LinearThresholdPolicy

    def policy(which: str):
        theta, tau, temperature = (
            getattr(args, f"{which}_{name}") for name in ("theta", "tau", "temperature")
        )
        try:
            return LinearThresholdPolicy(theta, tau, temperature=temperature)
        except (ValueError, TypeError) as exc:  # "tau must be ...": say which policy's, as its option
            text = str(exc)
            if text.startswith(("theta", "tau", "temperature")):
                raise type(exc)(f"{which}_{text}") from None
            raise

    return policy("logging"), policy("target")


def _table(data, pi, pi0, resp, *, bootstrap=None, cross_fit=None, level=0.95, rng=0, progress=False):
    from certkit._results import format_table
    from certkit.ope import direct_method, naive_dr, naive_ipw, strategic_dr, strategic_ipw

    kw = dict(target_policy=pi, logging_policy=pi0, bootstrap=bootstrap, rng=rng, progress=progress)
    results = [
        strategic_dr(data, response=resp, cross_fit=cross_fit, **kw),
        strategic_ipw(data, response=resp, **kw),
        direct_method(data, response=resp, cross_fit=cross_fit, **kw),
        naive_dr(data, cross_fit=cross_fit, **kw),
        naive_ipw(data, **kw),
    ]
    rows = []
    for res in results:
        ci = res.confidence_interval(level)
        row = [res.estimator, res.value, res.std_error, f"[{ci.low:.4f}, {ci.high:.4f}]"]
        if bootstrap:
            b = res.confidence_interval(level, method="percentile")
            row.append(f"[{b.low:.4f}, {b.high:.4f}]")
        rows.append(row)
    headers = ["estimator", "value", "std. error", f"{level:.0%} CI"] + (
        ["bootstrap CI"] if bootstrap else []
    )
    return results, format_table(headers, rows)


def run(args: argparse.Namespace) -> int:
    """Fit the response model, run every estimator and print the comparison."""
    from certkit.cli import _error_message
    from certkit.ope import LogNormalCostResponse, StrategicSimulator
    from certkit.ope.disclosure import _XPostMismatchError

    try:
        data = None if args.data is None else _load(args.data)
        _check_thetas(args, None if data is None else data.x_pre.shape[1])
        pi0, pi = _policies(args)
        sim = None
        if data is None:
            sim = StrategicSimulator(n_features=pi0.theta.size, benefit=args.benefit)
            data = sim.sample(pi0, args.n, rng=args.seed)
        start = time.perf_counter()
        resp = LogNormalCostResponse(benefit=args.benefit, x_post_tol=args.x_post_tol).fit(data, policy=pi0)
        _, table = _table(
            data,
            pi,
            pi0,
            resp,
            bootstrap=args.bootstrap or None,
            cross_fit=args.cross_fit,
            level=args.confidence_level,
            rng=args.seed,
            progress=True,
        )
        elapsed = time.perf_counter() - start
    except (ValueError, TypeError, OSError, KeyError) as exc:
        parser = argparse.ArgumentParser()
        add_arguments(parser)  # to write a leading argument name as its flag (n=... -> --n=...)
        if isinstance(exc, _XPostMismatchError):  # the command line sets the tolerance with --x-post-tol
            exc = ValueError(exc.command_line_message)
        text = _error_message(exc, parser, args)
        if args.data is None and text.startswith(("--data:", "--data ")):  # simulated, not a --data file
            text = "simulated data" + text[len("--data") :]
        print(f"certkit ope: error: {text}", file=sys.stderr)
        return 2
    print(
        f"logging policy {pi0}\ntarget policy  {pi}\n{data.n} logged agents, {int(data.moved.sum())} moved\n"
    )
    print(resp.summary())
    print()
    print(table)
    if sim is not None:
        print(f"\ntrue value of the target policy (simulator): {sim.true_value(pi):.4f}")
    print(f"\nestimated in {elapsed:.2f} s")
    return 0


def demo(rng: np.random.Generator) -> str:
    """4,000 simulated agents who gamed a logging threshold; strategic vs naive DR for a new policy."""
    from certkit.ope import LinearThresholdPolicy, LogNormalCostResponse, StrategicSimulator

    sim = StrategicSimulator()
    pi0 = LinearThresholdPolicy([1.0, 1.0], 1.0, temperature=1.0)
    pi = LinearThresholdPolicy([1.0, 0.0], 1.0, temperature=0.25)
    start = time.perf_counter()
    data = sim.sample(pi0, 4000, rng=rng)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    _, table = _table(data, pi, pi0, resp, rng=rng)
    elapsed = time.perf_counter() - start
    lines = [
        f"   4000 agents, {int(data.moved.sum())} moved to the disclosed explanation; response fit "
        f"s = {resp.scale_:.3f} ± {resp.std_errors_[-1]:.3f} (true {sim.scale})",
        *("   " + line for line in table.splitlines()),
        f"   true value {sim.true_value(pi):.4f}; estimated in {elapsed:.2f} s",
    ]
    return "\n".join(lines)
