"""The ``verigym`` command line.

Each subcommand is a module in :mod:`verigym.commands` with ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``; heavy imports go inside ``run`` so that
``verigym --help`` stays fast. Add a command by adding its module name to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

COMMANDS: tuple[str, ...] = ("list", "play", "check", "doctor", "train", "eval", "leaderboard", "reverify", "export", "serve", "serve-env", "new-env")


def build_parser() -> argparse.ArgumentParser:
    from verigym import __version__

    parser = argparse.ArgumentParser(
        prog="verigym",
        description="Agent environments with verifiable rewards: list, play, check, train, evaluate.",
        allow_abbrev=False,  # "--learning-rat" is an error, never a silent prefix match
    )
    parser.add_argument("--version", action="version", version=f"verigym {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"verigym.commands.{name.replace('-', '_')}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP, allow_abbrev=False)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
