"""``verigym leaderboard [--suite NAME]``: standings as a terminal table, Markdown and HTML."""

from __future__ import annotations

import argparse
import pathlib

HELP = "print the standings and write them as Markdown and a static HTML page"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite",
        default=None,
        help="rank on this suite's tasks and seeds (default: everything recorded)",
    )
    parser.add_argument("--out", default=None, help="results folder (default: ./verigym-results)")
    parser.add_argument(
        "--train-logs",
        nargs="*",
        default=(),
        help="training metrics .jsonl files (or folders) for learning curves",
    )
    parser.add_argument(
        "--list-suites", action="store_true", help="list the shipped suites and exit"
    )


def run(args: argparse.Namespace) -> int:
    from verigym.commands import usage_error
    from verigym.leaderboards.standings import (
        compute_standings,
        load_curves,
        render_html,
        render_markdown,
        render_table,
    )
    from verigym.leaderboards.store import DEFAULT_DIR, ResultsStore, StoreError
    from verigym.leaderboards.suite import list_suites, load_suite
    from verigym.leaderboards.viewer import write_viewer

    if args.list_suites:
        for name in list_suites():
            suite = load_suite(name)
            print(
                f"{name:12s} {len(suite.tasks):3d} tasks {suite.episodes:5d} episodes  {suite.description}"
            )
        return 0
    out = pathlib.Path(args.out or DEFAULT_DIR)
    if out.is_dir() and not (out / "results.sqlite").exists():
        return usage_error(
            "leaderboard", f"no results in {out}; run verigym eval first (or give --out)"
        )
    try:
        suite = load_suite(args.suite) if args.suite else None
        with ResultsStore(out, create=False) as store:
            standings = compute_standings(store, suite)
            # the viewer lists what the standings count: a suite's tasks, seeds and kwargs only
            rows = store.suite_rows(suite)
            viewer = None
            if rows and suite is not None:  # own folder: the all-results viewer stays
                viewer = write_viewer(
                    store, out, rows, subfolder=f"episodes-{suite.name}", task_of=lambda r: r.env_id
                )
            elif rows:
                viewer = write_viewer(store, out, rows)
    except (FileNotFoundError, ValueError, StoreError) as exc:
        return usage_error("leaderboard", str(exc))
    logs = []
    for item in map(pathlib.Path, args.train_logs):
        logs += sorted(item.rglob("*.jsonl")) if item.is_dir() else [item]
    try:
        standings.curves = load_curves(logs)
    except ValueError as exc:
        return usage_error("leaderboard", f"--train-logs {exc}")
    if not standings.entries and not standings.ratings:
        where = f"suite {suite.name}" if suite else "any suite"
        return usage_error(
            "leaderboard", f"no results for {where} in {out} yet; run verigym eval first"
        )
    render_table(standings)
    stem = f"leaderboard-{suite.name}" if suite else "leaderboard"
    (out / f"{stem}.md").write_text(render_markdown(standings))
    (out / f"{stem}.html").write_text(
        render_html(standings, episodes_href=viewer.relative_to(out).as_posix() if viewer else None)
    )
    print(
        f"wrote {out / (stem + '.md')} and {out / (stem + '.html')}"
        + (f"; episodes in {viewer}" if viewer else "")
    )
    return 0
