"""The ``verigym`` command line.

Each subcommand is a module in :mod:`verigym.commands` with ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``; heavy imports go inside ``run`` so that
``verigym --help`` stays fast. Add a command by adding its module name to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

COMMANDS: tuple[str, ...] = (
    "list",
    "play",
    "check",
    "doctor",
    "train",
    "eval",
    "leaderboard",
    "reverify",
    "export",
    "serve-model",
    "serve-env",
    "new-env",
)


class ArgumentParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors are one line on stderr.

    ``verigym <verb>: <message>`` and exit status 2, like every other usage error of the CLI
    (:func:`verigym.commands.usage_error`), never the usage block first; an unknown option gets a
    "did you mean" from the parser's own option strings. Subparsers are of this class too.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: MESSAGE`` (plus a suggestion) on stderr and exit with status 2."""
        hint = self.suggest(message)
        self.exit(2, f"{self.prog}: {message}{hint} ({self.prog} --help lists the options)\n")

    def suggest(self, message: str) -> str:
        """``"; did you mean X?"`` for an unknown option or choice named in ``message``, else ``""``."""
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            close = difflib.get_close_matches(
                choice.group(1), re.findall(r"'([^']*)'", choice.group(2)), n=1
            )
            return f"; did you mean {close[0]}?" if close else ""
        if not message.startswith("unrecognized arguments:"):
            return ""
        known = [
            option
            for action in self._actions
            for option in action.option_strings
            if option.startswith("--")
        ]
        words = re.findall(r"(?<!\S)--?[\w-]+", message.partition(":")[2])
        guesses = [
            close[0]
            for word in words
            if (close := difflib.get_close_matches(word, known, n=1, cutoff=0.6))
        ]
        return f"; did you mean {' or '.join(dict.fromkeys(guesses))}?" if guesses else ""


def build_parser() -> argparse.ArgumentParser:
    from verigym import __version__

    parser = ArgumentParser(
        prog="verigym",
        description="Agent environments with verifiable rewards: list, play, check, train, evaluate.",
        allow_abbrev=False,  # "--learning-rat" is an error, never a silent prefix match
    )
    parser.add_argument("--version", action="version", version=f"verigym {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"verigym.commands.{name.replace('-', '_')}")
        command = sub.add_parser(
            name, help=module.HELP, description=module.HELP, allow_abbrev=False
        )
        module.add_arguments(command)
        command.set_defaults(_run=module.run, _parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the verb's own parser: its prefix, and its options to suggest
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
