"""``verigym reverify --out DIR [--suite S]``: replay stored episodes and recompute their verdicts."""

from __future__ import annotations

import argparse
import os

from verigym.commands import add_row_filters

HELP = (
    "replay every stored result from its row's own env id, seed and kwargs in the current env versions; "
    "exit 1 naming each result whose verdict changed or that could not be replayed. It proves each stored "
    "trajectory's verdict on its row's task, not who produced the trajectory"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=None, help="results folder (default: ./verigym-results)")
    add_row_filters(parser)
    parser.add_argument(
        "--allow-kwargs",
        default="",
        metavar="NAMES",
        help="comma-separated operator-only env kwargs a stored row may replay with (as serve-env --allow-kwargs); "
        "kwargs declared never-settable stay refused",
    )


def run(args: argparse.Namespace) -> int:
    from verigym.commands import usage_error
    from verigym.leaderboards.episode import end_env_processes, make_env
    from verigym.leaderboards.runner import provenance
    from verigym.leaderboards.store import DEFAULT_DIR, ResultsStore
    from verigym.leaderboards.suite import load_suite
    from verigym.leaderboards.trajectories import reverify
    from verigym.workers import descendants

    def show(row, reasons):
        print(f"CHANGED {row.agent_spec} {row.env_id} seed {row.seed}:")
        for reason in reasons:
            print(f"  {reason}")

    def show_unverifiable(row, why):
        where = (
            f"{row.agent_spec} {row.env_id} seed {row.seed}"
            if hasattr(row, "seed")
            else f"row {row.rowid} ({row.key})"
        )
        print(f"UNVERIFIABLE {where}: {why}")

    allow = tuple(name.strip() for name in args.allow_kwargs.split(",") if name.strip())
    before = set(descendants(os.getpid()))  # what ran before the replays is not ours to stop
    try:
        suite = load_suite(args.suite) if args.suite else None
        with ResultsStore(args.out or DEFAULT_DIR, create=False) as store:
            refused: list = []
            rows = store.suite_rows(suite, agent_spec=args.agent, refused=refused)
            report = reverify(
                store,
                rows,
                lambda env_id, kwargs, text_view: make_env(env_id, kwargs, text_view),
                current=provenance(),
                on_row=show,
                on_unverifiable=show_unverifiable,
                refused=refused,
                allow_kwargs=allow,
            )
    except (RuntimeError, ValueError, FileNotFoundError) as exc:  # StoreError is a RuntimeError
        return usage_error("reverify", str(exc))
    finally:
        end_env_processes(keep=before)
    reasons: dict[str, int] = {}
    for _, why in report.skipped:
        reasons[why.split(" (")[0]] = reasons.get(why.split(" (")[0], 0) + 1
    for why, count in sorted(reasons.items()):
        print(f"  not replayed: {count} x {why}")
    print(report.summary(), flush=True)
    return 0 if report.verified else 1
