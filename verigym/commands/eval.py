"""``verigym eval --agent SPEC --suite NAME``: evaluate an agent on a leaderboard suite."""

from __future__ import annotations

import argparse

HELP = "evaluate an agent on a leaderboard suite, recording one row per episode (resumable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", required=True, action="append", help="random | oracle | <plugin agent name> | <agent>:<checkpoint dir> | llm:<model dir> | openai:<base url>#<model> | <module>:<factory>; repeat it to evaluate several agents (a competitive suite needs two or more entrants)")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--suite", help="a suite name (verigym leaderboard --list-suites) or a path to a suite .json file")
    target.add_argument("--env", help="evaluate on this one registered id instead of a suite (held-out seeds; --episodes, default 20)")
    parser.add_argument("--out", default=None, help="results folder (default: ./verigym-results)")
    parser.add_argument("--workers", type=int, default=None, help="parallel episodes (default: CPU cores)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local", help="local processes or a Ray cluster (RAY_ADDRESS)")
    parser.add_argument("--resume", action="store_true", help="finish a run that was interrupted: run only the missing episodes")
    parser.add_argument("--episodes", type=int, default=None, help="override every task's episode count")
    parser.add_argument("--time-limit-scale", type=float, default=1.0, metavar="X",
                        help="multiply every task's time limit by X (> 0) for an agent slower than the suite assumes, "
                             "e.g. an LLM served on a CPU; only which episodes time out can change")
    parser.add_argument("--device", default="cpu", help="torch device for learned agents (auto, cpu, cuda)")
    parser.add_argument("--export", default=None, help="also export every row to this .json or .csv file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--env-url", default=None, help="play on the envs served by verigym serve-env at this URL (verigym.remote; local backend)")
    parser.add_argument("--env-token", default=None, help="with --env-url: the server's token (default: $VERIGYM_TOKEN)")
    parser.add_argument("--record-frames", type=int, default=0, metavar="K",
                        help="also store a rendered frame (PNG) every K steps of each episode (default 0: none; trajectories are always stored)")


def run(args: argparse.Namespace) -> int:
    from verigym.leaderboards.arena import play_arena
    from verigym.leaderboards.runner import ResultsExistError, evaluate
    from verigym.leaderboards.store import DEFAULT_DIR, ResultsStore
    from verigym.leaderboards.suite import load_suite

    out = args.out or DEFAULT_DIR
    if args.env_url:  # read by the runner's env factory in every worker process (leaderboards/runner.py)
        import os

        if args.backend == "ray":
            from verigym.commands import usage_error

            return usage_error("eval", "--env-url works with the local backend (Ray workers do not see this process's environment)")
        os.environ["VERIGYM_ENV_URL"] = args.env_url
        if args.env_token:
            os.environ["VERIGYM_TOKEN"] = args.env_token
    try:
        if args.env:
            from verigym.commands import lookup_env
            from verigym.leaderboards.suite import Suite, Task

            if lookup_env("eval", args.env) is None:
                return 2
            suite = Suite(args.env, (Task(args.env, args.episodes or Task.episodes),), description=f"the one env {args.env}")
        else:
            suite = load_suite(args.suite)
        if suite.kind == "competitive":
            arena = play_arena(args.agent, suite, out=out, resume=args.resume, progress=not args.no_progress)
            print(f"{', '.join(arena.entrants)} on {arena.suite}: played {arena.ran} matches, {arena.skipped} already recorded")
            for note in arena.unavailable:
                print(f"  skipped: {note}")
        for agent in args.agent if suite.kind == "single" else ():
            summary = evaluate(agent, suite, out=out, workers=args.workers, backend=args.backend, resume=args.resume,
                               device=args.device, episodes=args.episodes, progress=not args.no_progress, record_frames=args.record_frames,
                               time_limit_scale=args.time_limit_scale)
            statuses = ", ".join(f"{n} {s}" for s, n in sorted(summary.statuses.items())) or "nothing new"
            print(f"{summary.agent_spec} on {summary.suite}: ran {summary.ran} episodes ({statuses}), {summary.skipped} already recorded; results in {summary.store_path}")
            if summary.recorded_elsewhere:
                print(f"  {summary.recorded_elsewhere} more episodes were played but another run on this store had recorded them first (not counted above)")
            if summary.rejected:
                print(f"  {summary.rejected} results were refused by validation and recorded as errors (see their error column); --resume retries them")
            if summary.not_covered:
                print(f"  not covered (no saved agent for): {', '.join(summary.not_covered)}")
    except (ValueError, TypeError, FileNotFoundError, ResultsExistError, RuntimeError) as exc:
        from verigym.commands import usage_error

        return usage_error("eval", str(exc))
    if args.export:
        try:
            with ResultsStore(out) as store:
                print(f"exported to {store.export(args.export)}")
        except (RuntimeError, ValueError, OSError) as exc:  # StoreError is a RuntimeError
            from verigym.commands import usage_error

            return usage_error("eval", str(exc))
    return 0
