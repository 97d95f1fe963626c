"""``verigym reverify --out DIR [--suite S]``: replay stored episodes and recompute their verdicts."""

from __future__ import annotations

import argparse
import os

HELP = "replay every stored episode in the current env versions and report each verdict that changed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=None, help="results folder (default: ./verigym-results)")
    parser.add_argument("--suite", default=None, help="only the tasks and seeds of this suite (name or .json path)")
    parser.add_argument("--agent", default=None, help="only the episodes of this agent spec")


def run(args: argparse.Namespace) -> int:
    from verigym.commands import usage_error
    from verigym.leaderboards.runner import _descendants, end_env_processes, make_env, provenance
    from verigym.leaderboards.store import DEFAULT_DIR, ResultsStore
    from verigym.leaderboards.suite import load_suite
    from verigym.leaderboards.trajectories import reverify

    def show(row, reasons):
        print(f"CHANGED {row.agent_spec} {row.env_id} seed {row.seed}:")
        for reason in reasons:
            print(f"  {reason}")

    before = set(_descendants(os.getpid()))  # what ran before the replays is not ours to stop
    try:
        suite = load_suite(args.suite) if args.suite else None
        with ResultsStore(args.out or DEFAULT_DIR, create=False) as store:
            rows = store.suite_rows(suite, agent_spec=args.agent)
            report = reverify(store, rows, lambda env_id, kwargs, text_view: make_env(env_id, kwargs, text_view), current=provenance(), on_row=show)
    except (RuntimeError, ValueError, FileNotFoundError) as exc:  # StoreError is a RuntimeError
        return usage_error("reverify", str(exc))
    reasons: dict[str, int] = {}
    for _, why in report.skipped:
        reasons[why.split(" (")[0]] = reasons.get(why.split(" (")[0], 0) + 1
    for why, count in sorted(reasons.items()):
        print(f"  not replayed: {count} x {why}")
    print(report.summary(), flush=True)
    end_env_processes(keep=before)
    return 1 if report.changed else 0

