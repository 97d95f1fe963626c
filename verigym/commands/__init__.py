"""Subcommands of the ``verigym`` CLI, one module each (see :mod:`verigym.cli`).

Every command fails the same way on a user mistake: one line ``verigym <command>: <what is wrong
and what to do>`` on stderr and exit status 2 (:func:`usage_error`); an env id is looked up once,
by :func:`lookup_env`, before any work starts.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_row_filters", "lookup_env", "usage_error"]


def usage_error(command: str, message: str) -> int:
    """Print ``verigym COMMAND: MESSAGE`` on stderr.

    Returns:
        2, the exit status of a usage error (as argparse uses).
    """
    print(f"verigym {command}: {message}", file=sys.stderr)
    return 2


def add_row_filters(parser: argparse.ArgumentParser) -> None:
    """Add ``--suite`` and ``--agent``, which pick the stored episodes a command reads (as
    :meth:`verigym.leaderboards.store.ResultsStore.suite_rows` takes them)."""
    parser.add_argument(
        "--suite",
        default=None,
        help="only the tasks, seeds and kwargs of this suite (name or .json path)",
    )
    parser.add_argument("--agent", default=None, help="only the episodes of this agent spec")


def lookup_env(command: str, env_id: str) -> str | None:
    """The api of ``env_id`` (``"gymnasium"``, ``"aec"``, ``"parallel"``), or ``None`` after
    printing a "did you mean" usage error (:func:`verigym.registration.require_id`)."""
    from verigym.registration import require_id

    try:
        return require_id(env_id)
    except KeyError as exc:
        usage_error(command, str(exc.args[0]))
        return None
