"""``verigym serve``: the old name of ``verigym serve-model``, kept one more version.

It takes the same arguments and runs the same server after a one-line notice on stderr; it goes
away in the next version.
"""

from __future__ import annotations

import argparse
import sys

from verigym.commands.serve_model import add_arguments

__all__ = ["HELP", "NOTICE", "add_arguments", "run"]

HELP = "renamed to serve-model (this name goes away in the next version)"

NOTICE = "verigym serve: renamed to verigym serve-model; `serve` goes away in the next version"


def run(args: argparse.Namespace) -> int:
    """Print :data:`NOTICE` on stderr, then run ``verigym serve-model`` with ``args``."""
    from verigym.commands import serve_model

    print(NOTICE, file=sys.stderr, flush=True)
    return serve_model.run(args)
