"""``verigym check ENV_ID | --all``: the conformance checker (:mod:`verigym.checker`)."""

from __future__ import annotations

import argparse

from verigym.core import FAMILIES

HELP = "run the conformance checks on one env id, or on every registered id"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id", nargs="?", help="a registered id (verigym's or any Gymnasium id)")
    parser.add_argument("--all", action="store_true", help="check every registered verigym id")
    parser.add_argument("--family", choices=FAMILIES, help="with --all: only this family")
    parser.add_argument("--steps", type=int, default=200, help="length of the determinism rollouts")
    parser.add_argument("--seed", type=int, default=0, help="first reset seed")
    parser.add_argument("--verbose-pass", action="store_true", help="show details of passing checks too")
    parser.add_argument("--url", default=None, help="check ENV_ID as served by verigym serve-env at this URL (through verigym.remote)")
    parser.add_argument("--token", default=None, help="with --url: the server's token (default: $VERIGYM_TOKEN)")


def run(args: argparse.Namespace) -> int:
    from verigym.checker import CheckReport, check_all, check_env
    from verigym.commands import lookup_env, usage_error

    if bool(args.all) == bool(args.env_id):
        return usage_error("check", "give either ENV_ID or --all (see verigym check --help)")
    if args.env_id and lookup_env("check", args.env_id) is None:
        return 2

    def show(report: CheckReport) -> None:
        print(report.format(), flush=True)

    if args.url:  # the env as a verigym.remote client sees it (verigym serve-env)
        if args.all:
            return usage_error("check", "--url checks one ENV_ID, not --all")
        from verigym.remote import make as remote_make

        reports = [check_env(lambda: remote_make(args.env_id, url=args.url, token=args.token), steps=args.steps, seed=args.seed)]
        reports[0].env_id = f"{args.env_id} at {args.url}"
        show(reports[0])
    elif args.all:
        reports = check_all(family=args.family, steps=args.steps, seed=args.seed, on_report=show)
    else:
        reports = [check_env(args.env_id, steps=args.steps, seed=args.seed)]
        show(reports[0])
    failed = [r.env_id for r in reports if not r.passed]
    print(f"{len(reports) - len(failed)} passed, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
