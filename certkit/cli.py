"""The ``certkit`` command line: ``certkit --version``, ``certkit demo`` and one subcommand per capability.

Each capability contributes a module listed in ``_COMMANDS`` that defines

* ``NAME`` and ``HELP`` - the subcommand and its one-line help;
* ``add_arguments(parser)`` - its options;
* ``run(args) -> int`` - the subcommand itself (prints a summary, returns an exit code);
* ``demo(rng) -> str`` - a short section of the ``certkit demo`` tour on embedded data.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence

import certkit

# Order = order of the demo tour.
_COMMANDS = (
    "certkit._demo_foundation",
    "certkit.mibp._cli",
    "certkit.conformal._cli",
    "certkit.circuits._cli",
    "certkit.performative._cli",
    "certkit.ope._cli",
    "certkit.causal._cli",
)


def _load_commands() -> list:
    return [importlib.import_module(name) for name in _COMMANDS]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for the docs and the tests)."""
    parser = argparse.ArgumentParser(
        prog="certkit", description="Statistical guarantees for machine learning."
    )
    parser.add_argument("--version", action="version", version=f"certkit {certkit.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="a tour of every capability on embedded data")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument(
        "--only", action="append", default=None, metavar="SECTION",
        help="run only this section (repeatable); sections: "
        + ", ".join(mod.NAME for mod in _load_commands()),
    )
    for mod in _load_commands():
        if hasattr(mod, "run"):
            p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
            mod.add_arguments(p)
    return parser


def _run_demo(seed: int, only: Sequence[str] | None) -> int:
    import numpy as np

    commands = _load_commands()
    names = [mod.NAME for mod in commands]
    for name in only or ():
        if name not in names:
            print(f"certkit demo: unknown section {name!r}; expected one of {names}", file=sys.stderr)
            return 2
    print(f"certkit {certkit.__version__} - demo tour (seed {seed})\n")
    for mod in commands:
        if only and mod.NAME not in only:
            continue
        start = time.perf_counter()
        print(f"== {mod.NAME}: {mod.HELP}")
        print(mod.demo(np.random.default_rng(seed)))
        print(f"   ({time.perf_counter() - start:.1f} s)\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``certkit`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        return _run_demo(args.seed, args.only)
    for mod in _load_commands():
        if mod.NAME == args.command:
            return int(mod.run(args))
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse rejects it first
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
