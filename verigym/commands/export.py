"""``verigym export --out DIR --format jsonl|parquet --path FILE``: trajectories as a dataset."""

from __future__ import annotations

import argparse
import sys

HELP = "write the stored trajectories as a Hugging Face datasets table (chat messages, reward, success, provenance)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=None, help="results folder (default: ./verigym-results)")
    parser.add_argument(
        "--format", choices=("jsonl", "parquet"), default="jsonl", help="JSON Lines or Parquet"
    )
    parser.add_argument("--path", required=True, help="the file to write")
    parser.add_argument(
        "--success",
        choices=("any", "only", "failed"),
        default="any",
        help="keep every episode, only the successes (rejection sampling / SFT), or only the failures",
    )
    parser.add_argument(
        "--suite",
        default=None,
        help="only the tasks, seeds and kwargs of this suite (name or .json path)",
    )
    parser.add_argument("--agent", default=None, help="only the episodes of this agent spec")
    parser.add_argument(
        "--include-errors",
        action="store_true",
        help="also episodes whose status is error or timeout",
    )


def run(args: argparse.Namespace) -> int:
    """Export; exit 0, or 1 when a row or trajectory was refused (each named on stderr; the rest is written)."""
    from verigym.commands import usage_error
    from verigym.leaderboards.store import DEFAULT_DIR, ResultsStore
    from verigym.leaderboards.suite import load_suite
    from verigym.leaderboards.trajectories import dataset_records, export_dataset

    refused_rows: list = []
    refused_trajectories: list = []
    try:
        suite = load_suite(args.suite) if args.suite else None
        with ResultsStore(args.out or DEFAULT_DIR, create=False) as store:
            store.require_trajectories()
            rows = store.suite_rows(suite, agent_spec=args.agent, refused=refused_rows)
            if not args.include_errors:
                rows = [r for r in rows if r.status == "ok"]
            if args.success != "any":
                rows = [r for r in rows if r.success == (args.success == "only")]
            path, count = export_dataset(
                dataset_records(store, rows, refused_trajectories), args.path, args.format
            )
    except (
        RuntimeError,
        ValueError,
        FileNotFoundError,
        OSError,
    ) as exc:  # StoreError is a RuntimeError
        return usage_error("export", str(exc))
    for row in refused_rows:
        print(f"verigym export: refused {row}", file=sys.stderr)
    for _, why in refused_trajectories:
        print(f"verigym export: refused the trajectory of {why}", file=sys.stderr)
    print(
        f"wrote {count} episodes to {path} (load it with datasets.load_dataset({args.format if args.format == 'parquet' else 'json'!r}, data_files={str(path)!r}))"
    )
    if refused_rows or refused_trajectories:
        print(
            f"verigym export: {len(refused_rows) + len(refused_trajectories)} episodes were refused and not written",
            file=sys.stderr,
        )
        return 1
    return 0
