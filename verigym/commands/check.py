"""``verigym check ENV_ID | --all | --family F``: the conformance checkers.

Gymnasium ids go through :mod:`verigym.checker`, PettingZoo ids (``aec``/``parallel`` rows of the
``multiagent`` family) through :mod:`verigym.checker_multiagent`.
"""

from __future__ import annotations

import argparse

from verigym.core import FAMILIES

HELP = "run the conformance checks on one env id, or on every registered id"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id", nargs="?", help="a registered id (verigym's or any Gymnasium id)")
    parser.add_argument("--all", action="store_true", help="check every registered verigym id")
    parser.add_argument(
        "--family",
        choices=FAMILIES,
        help="check every registered id of this family (implies --all)",
    )
    parser.add_argument("--steps", type=int, default=200, help="length of the determinism rollouts")
    parser.add_argument("--seed", type=int, default=0, help="first reset seed")
    parser.add_argument(
        "--verbose-pass", action="store_true", help="show details of passing checks too"
    )
    parser.add_argument(
        "--url",
        default=None,
        help="check ENV_ID as served by verigym serve-env at this URL (through verigym.remote)",
    )
    parser.add_argument(
        "--token", default=None, help="with --url: the server's token (default: $VERIGYM_TOKEN)"
    )


def run(args: argparse.Namespace) -> int:
    from verigym.checker import CheckReport, check_all, check_env, print_progress
    from verigym.checker_multiagent import check_multiagent_all, check_multiagent_env
    from verigym.commands import lookup_env, usage_error

    every = bool(args.all or args.family)
    if every == bool(args.env_id):
        return usage_error(
            "check", "give either ENV_ID or --all/--family (see verigym check --help)"
        )
    api = lookup_env("check", args.env_id) if args.env_id else None
    if args.env_id and api is None:
        return 2

    def show(report: CheckReport) -> None:
        print(report.format(), flush=True)

    if args.url:  # the env as a verigym.remote client sees it (verigym serve-env)
        if every or api != "gymnasium":
            return usage_error(
                "check",
                "--url checks one Gymnasium ENV_ID (not --all, --family or a PettingZoo id)",
            )
        from verigym.remote import make as remote_make

        reports = [
            check_env(
                lambda: remote_make(args.env_id, url=args.url, token=args.token),
                steps=args.steps,
                seed=args.seed,
                progress=print_progress,
            )
        ]
        reports[0].env_id = f"{args.env_id} at {args.url}"
        show(reports[0])
    elif every:
        reports = check_all(
            family=args.family,
            steps=args.steps,
            seed=args.seed,
            on_report=show,
            progress=print_progress,
        )
        if args.family in (None, "multiagent"):
            reports += check_multiagent_all(steps=args.steps, seed=args.seed, on_report=show)
    elif api in ("aec", "parallel"):
        reports = [check_multiagent_env(args.env_id, steps=args.steps, seed=args.seed)]
        show(reports[0])
    else:
        reports = [
            check_env(args.env_id, steps=args.steps, seed=args.seed, progress=print_progress)
        ]
        show(reports[0])
    failed = [r.env_id for r in reports if not r.passed]
    print(
        f"{len(reports) - len(failed)} passed, {len(failed)} failed"
        + (f": {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0
