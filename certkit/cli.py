"""The ``certkit`` command line: ``certkit --version``, ``certkit demo`` and one subcommand per capability.

Each capability contributes a module listed in ``_COMMANDS`` that defines

* ``NAME`` and ``HELP`` - the subcommand and its one-line help;
* ``add_arguments(parser)`` - its options;
* ``run(args) -> int`` - the subcommand itself (prints a summary, returns an exit code);
* ``demo(rng) -> str`` - a short section of the ``certkit demo`` tour on embedded data.

Mistakes in the user's input (``ValueError``, ``TypeError``, ``OSError`` and a missing optional
dependency's ``ImportError`` raised while a command runs) end in one line
``certkit <command>: error: ...`` on stderr and exit status 2, as argparse's own errors do.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import textwrap
import time
from collections.abc import Sequence
from typing import NoReturn

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

#: Exceptions that mean "the input was wrong" (or an extra is missing) rather than a bug in certkit.
_USER_ERRORS = (ValueError, TypeError, OSError, ImportError)


def _load_commands() -> list:
    return [importlib.import_module(name) for name in _COMMANDS]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line ``<prog>: error: <message>`` on stderr (no usage
    block; ``--help`` shows it) and exit status 2, and that takes options only as they are spelt (no prefix
    of a long option stands for it: ``--data`` is not ``--dataset``). Its subparsers are of this class too."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as the one error line and exit with status 2.

        Parameters
        ----------
        message : str
            argparse's message.
        """
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for the docs and the tests)."""
    commands = _load_commands()
    parser = _Parser(prog="certkit", description="Statistical guarantees for machine learning.")
    parser.add_argument("--version", action="version", version=f"certkit {certkit.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="a tour of every capability on embedded data",
        description="A tour of every capability on embedded data: each section prints a short table and "
        "its run time. Sections whose optional dependencies are missing say which extra would add what.",
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument(
        "--only",
        nargs="+",
        action="extend",
        default=None,
        metavar="SECTION",
        choices=[mod.NAME for mod in commands],
        help="run only these sections (one or more, or repeat the flag; default: all): "
        + ", ".join(mod.NAME for mod in commands),
    )
    for mod in commands:
        if hasattr(mod, "run"):
            p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
            mod.add_arguments(p)
    return parser


def _run_demo(seed: int, only: Sequence[str] | None) -> int:
    import numpy as np

    print(f"certkit {certkit.__version__} - demo tour (seed {seed})\n")
    for mod in _load_commands():
        if only and mod.NAME not in only:
            continue
        start = time.perf_counter()
        print(f"== {mod.NAME}: {mod.HELP}", flush=True)
        try:
            text = mod.demo(np.random.default_rng(seed))
        except ImportError as exc:  # a section's own optional parts are handled inside it; this is the rest
            text = f"skipped: {exc}"
        # every section indented alike, whatever indentation a section adds itself
        print("\n".join(f"   {line}".rstrip() for line in textwrap.dedent(text).splitlines()))
        print(f"   ({time.perf_counter() - start:.1f} s)\n", flush=True)
    return 0


def _asks_for_version(argv: Sequence[str]) -> bool:
    """True when ``argv`` is top-level options with ``--version`` before any ``-h``: answered without
    building the parser, which imports every capability (scipy, scikit-learn)."""
    for arg in argv:
        if arg == "--version":
            return True
        if arg in ("-h", "--help") or not arg.startswith("-"):
            return False
    return False


def file_name(value: str) -> str:
    """The ``type`` of an option or argument that names a file: any path but the empty one."""
    if not value:
        raise argparse.ArgumentTypeError("expected a file name, got an empty string")
    return value


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def _error_message(
    exc: BaseException, parser: argparse.ArgumentParser, args: argparse.Namespace | None = None
) -> str:
    """``exc`` as one line, with a leading Python argument name written as its command-line flag; a file
    that cannot be opened is named with the option that gave it (from ``args``, the parsed options)."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        given = [
            flag
            for action in parser._actions
            for flag in action.option_strings[:1]
            if args is not None and isinstance(getattr(args, action.dest, None), str)
            and getattr(args, action.dest) == exc.filename
        ]
        return f"{given[0] + ' ' if given else ''}{exc.filename}: {exc.strerror}"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if text.startswith("rng seed ") and any("--seed" in action.option_strings for action in parser._actions):
        return "--seed " + text[len("rng seed ") :]  # the commands pass --seed to the rng= argument
    for action in parser._actions:
        flags = [s for s in action.option_strings if s.startswith("--")]
        if flags and re.match(rf"{re.escape(action.dest)}\b(?![\[.(])", text):
            return flags[0] + text[len(action.dest) :]
    return text


def cli_words(
    exc: BaseException, parser: argparse.ArgumentParser, args: argparse.Namespace | None = None
) -> str:
    """The library's message as one line in the command line's words.

    ``backend='milp'`` becomes ``--backend milp``, and an option's name with an underscore
    (``batch_size``) its flag, wherever they appear in the message, except in the user's data: quoted
    text (``'search_samples'``, a column name) and paths (``./max_components.csv``) are left as they are.

    Parameters
    ----------
    exc : BaseException
        The library's error.
    parser : argparse.ArgumentParser
        The subcommand's options.
    args : argparse.Namespace, optional
        The parsed options: a file that cannot be opened is named with the option that gave it.

    Returns
    -------
    str
        The message, on one line.
    """
    if isinstance(exc, OSError):
        return _error_message(exc, parser, args)
    text = " ".join(str(exc).split()) or type(exc).__name__
    flags = {}  # dest -> (its first long flag, whether it is a switch)
    for action in parser._actions:
        long = [s for s in action.option_strings if s.startswith("--")]
        if long:
            flags[action.dest] = (long[0], isinstance(action, argparse._StoreTrueAction))
    # longest first (max_components before max); no options: a pattern that never matches
    names = "|".join(re.escape(dest) for dest in sorted(flags, key=len, reverse=True)) or "(?!)"
    words = re.compile(
        r"(?<!\w)(?P<quote>['\"]).*?(?P=quote)(?!\w)"  # quoted text (not an apostrophe): kept
        rf"|(?<![-\w./\\])(?P<dest>{names})"  # an argument name, not inside a path
        r"(?:=(?P<q>['\"]?)(?P<value>[\w.+-]+)(?P=q)|(?![\w(/\\]|\.\w))"  # =value, or not a call/file
    )

    def rewrite(match: re.Match) -> str:
        dest, value = match["dest"], match["value"]
        if dest is None:
            return match[0]
        flag, switch = flags[dest]
        if value is not None:
            return flag if switch and value == "True" else f"{flag} {value}"
        # a plain word otherwise (loss, epochs): left as the library says it
        return flag if "_" in dest else match[0]

    return _error_message(ValueError(words.sub(rewrite, text)), parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``certkit`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if _asks_for_version(argv):
        print(f"certkit {certkit.__version__}")
        return 0
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the parser they were given to: the subcommand's after its name
        after = args.command is not None and argv.index(args.command) < argv.index(extra[0])
        (_subparser(parser, args.command) if after else parser).error(
            f"unrecognized arguments: {' '.join(extra)}"
        )
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command == "demo":
            return _run_demo(args.seed, args.only)
        mod = next(mod for mod in _load_commands() if mod.NAME == args.command)
        return int(mod.run(args))
    except BrokenPipeError:
        # The reader went away (``certkit demo | head``): stop quietly, as other command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except _USER_ERRORS as exc:
        sys.stdout.flush()
        print(
            f"certkit {args.command}: error: {_error_message(exc, _subparser(parser, args.command), args)}",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
