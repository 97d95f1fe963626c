"""``verigym export --out DIR --format jsonl|parquet --path FILE``: trajectories as a dataset."""

from __future__ import annotations

import argparse

HELP = "write the stored trajectories as a Hugging Face datasets table (chat messages, reward, success, provenance)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=None, help="results folder (default: ./verigym-results)")
    parser.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl", help="JSON Lines or Parquet")
    parser.add_argument("--path", required=True, help="the file to write")
    parser.add_argument("--success", choices=("any", "only", "failed"), default="any",
                        help="keep every episode, only the successes (rejection sampling / SFT), or only the failures")
    parser.add_argument("--suite", default=None, help="only the tasks and seeds of this suite (name or .json path)")
    parser.add_argument("--agent", default=None, help="only the episodes of this agent spec")
    parser.add_argument("--include-errors", action="store_true", help="also episodes whose status is error or timeout")


def run(args: argparse.Namespace) -> int:
    from verigym.commands import usage_error
    from verigym.leaderboards.store import DEFAULT_DIR, ResultsStore
    from verigym.leaderboards.suite import load_suite
    from verigym.leaderboards.trajectories import dataset_records, export_dataset

    try:
        suite = load_suite(args.suite) if args.suite else None
        with ResultsStore(args.out or DEFAULT_DIR, create=False) as store:
            rows = store.suite_rows(suite, agent_spec=args.agent)
            if not args.include_errors:
                rows = [r for r in rows if r.status == "ok"]
            if args.success != "any":
                rows = [r for r in rows if r.success == (args.success == "only")]
            records = dataset_records(store, rows)
        path = export_dataset(records, args.path, args.format)
    except (RuntimeError, ValueError, FileNotFoundError, OSError) as exc:  # StoreError is a RuntimeError
        return usage_error("export", str(exc))
    print(f"wrote {len(records)} episodes to {path} (load it with datasets.load_dataset({args.format if args.format == 'parquet' else 'json'!r}, data_files={str(path)!r}))")
    return 0
