"""``verigym eval --agent SPEC --suite NAME``: evaluate an agent on a leaderboard suite."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from typing import Any

HELP = "evaluate an agent on a leaderboard suite, recording one row per episode (resumable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        required=True,
        action="append",
        help="random | oracle | <plugin agent name> | <agent>:<checkpoint dir> | llm:<model dir> | openai:<base url>#<model> | <module>:<factory>; repeat it to evaluate several agents (a competitive suite needs two or more entrants)",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--suite",
        help="a suite name (verigym leaderboard --list-suites) or a path to a suite .json file",
    )
    target.add_argument(
        "--env",
        help="evaluate on this one registered id instead of a suite (held-out seeds; --episodes, default 20)",
    )
    target.add_argument(
        "--instances",
        metavar="FILE",
        help="evaluate on the RepoFix-Real instances named by this file of SWE-bench rows "
        "(verigym export --format swebench; JSON Lines or a JSON array): each row is checked "
        "against the vendored library and the validated data, a bad row is refused by name",
    )
    parser.add_argument("--out", default=None, help="results folder (default: ./verigym-results)")
    parser.add_argument(
        "--workers", type=int, default=None, help="parallel episodes (default: CPU cores)"
    )
    parser.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="local processes or a Ray cluster (RAY_ADDRESS)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="finish a run that was interrupted: run only the missing episodes",
    )
    parser.add_argument(
        "--episodes", type=int, default=None, help="override every task's episode count"
    )
    parser.add_argument(
        "--time-limit-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply every task's time limit by X (> 0) for an agent slower than the suite assumes, "
        "e.g. an LLM served on a CPU; only which episodes time out can change",
    )
    parser.add_argument(
        "--device", default="cpu", help="torch device for learned agents (auto, cpu, cuda)"
    )
    parser.add_argument(
        "--export", default=None, help="also export every row to this .json or .csv file"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--env-url",
        default=None,
        help="play on the envs served by verigym serve-env at this URL (verigym.remote)",
    )
    parser.add_argument(
        "--env-token",
        default=None,
        help="with --env-url: the server's token (default: $VERIGYM_TOKEN)",
    )
    parser.add_argument(
        "--record-frames",
        type=int,
        default=0,
        metavar="K",
        help="also store a rendered frame (PNG) every K steps of each episode (default 0: none; trajectories are always stored)",
    )


logger = logging.getLogger(__name__)


def _check_openai(spec: Any) -> None:
    """The server of an ``openai:`` spec answers ``GET /models`` and lists the spec's model.

    A server without ``/models`` (HTTP 404/405) is let through: the episodes will tell.

    Raises:
        ValueError: the server cannot be reached, refuses the request, or does not serve the model.
    """
    import json
    import os
    import urllib.error
    import urllib.request

    base_url, _, model = spec.target.partition("#")
    url = base_url.rstrip("/") + "/models"
    key = os.environ.get(str(dict(spec.options).get("api_key_env", "OPENAI_API_KEY")))
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            listing = json.loads(response.read(1 << 20).decode())
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405):
            logger.warning(
                "%s answered HTTP %d; cannot check that it serves %r", url, exc.code, model
            )
            return
        raise ValueError(f"{spec.text}: GET {url} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ValueError(
            f"{spec.text}: cannot reach {url} ({getattr(exc, 'reason', exc)}); is the server running?"
        ) from None
    data = listing.get("data") if isinstance(listing, dict) else None
    served = (
        [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    )
    if model not in served:
        raise ValueError(
            f"{spec.text}: {base_url} does not serve model {model!r}; it serves: {', '.join(served[:20]) or 'nothing'}"
        )


def _check_envs(spec: Any, env_ids: list[str], env_url: str | None, token: str | None) -> None:
    """Each env can be built where the episodes will run, and the agent can play it.

    With ``env_url``: the server answers and serves every id (one session each, closed at once).
    For ``oracle``: every env has a scripted solver (``oracle_action``), which remote envs lack.

    Raises:
        ValueError: the first problem, in one line.
    """
    import gymnasium as gym

    from verigym.core import OracleInterface

    for env_id in env_ids:
        if env_url:
            from verigym.remote import make

            try:
                env = make(env_id, url=env_url, token=token, timeout=30.0)
            except (
                RuntimeError,
                OSError,
                TypeError,
                ValueError,
            ) as exc:  # RemoteEnvError is a RuntimeError
                raise ValueError(
                    f"--env-url {env_url}: cannot play {env_id} there: {exc}"
                ) from None
            try:
                if spec.kind == "oracle" and not isinstance(env.unwrapped, OracleInterface):
                    raise ValueError(
                        f"oracle cannot play {env_id} through --env-url: a remote env has no oracle_action(); "
                        "evaluate random, a saved agent or an LLM there, or drop --env-url"
                    )
            finally:
                env.close()
        elif spec.kind == "oracle":
            from verigym.registration import entry_point_class

            # None: a factory, or an optional part is missing (the episodes will say which)
            entry = entry_point_class(gym.spec(env_id).entry_point)
            if entry is not None and not hasattr(entry, "oracle_action"):
                raise ValueError(
                    f"oracle cannot play {env_id}: its env has no scripted solver (oracle_action)"
                )


def _preflight(
    agents: list[str], env_ids: list[str], env_url: str | None, token: str | None
) -> None:
    """What can be checked before any episode: the specs parse, an ``llm:`` model exists, an
    ``openai:`` server serves its model, the envs answer (``--env-url``) and the agent plays them.

    Raises:
        ValueError, FileNotFoundError: the first problem found.
    """
    from verigym.leaderboards.agent_spec import parse_agent_spec

    for text in agents:
        spec = parse_agent_spec(text)
        if spec.kind == "llm":
            from verigym.agents.llm.models import check_model

            check_model(spec.target)
        elif spec.kind == "openai":
            _check_openai(spec)
        _check_envs(spec, [e for e in env_ids if spec.covers(e)], env_url, token)


def _all_errors(out: str, summary: Any, tasks: list[Any]) -> list[str]:
    """One line per task whose recorded episodes of this agent are all ``error`` rows."""
    from verigym.leaderboards.store import ResultsStore

    lines = []
    with ResultsStore(out) as store:
        rows = store.rows(env_ids=[t.env_id for t in tasks], agent_spec=summary.agent_spec)
    for task in tasks:
        seeds = set(task.seeds)
        mine = [
            r
            for r in rows
            if r.env_id == task.env_id and r.config_hash == summary.config_hash and r.seed in seeds
        ]
        if mine and all(r.status == "error" for r in mine):
            reason = next(
                (line.strip() for line in (mine[0].error or "").splitlines() if line.strip()),
                "no message",
            )[:300]
            lines.append(
                f"every episode of {summary.agent_spec} on {task.env_id} is an error ({len(mine)} of {len(mine)}), e.g.: {reason}"
            )
    return lines


def run(args: argparse.Namespace) -> int:
    from verigym.commands import usage_error
    from verigym.leaderboards.runner import ResultsExistError
    from verigym.leaderboards.store import DEFAULT_DIR, ResultsStore
    from verigym.leaderboards.suite import load_suite

    out = args.out or DEFAULT_DIR
    failures: list[str] = []
    refused: list[str] = []
    try:
        if args.instances:
            from verigym.envs.tool.repofix.swebench import read_rows
            from verigym.leaderboards.instances import instance_suites

            selected, refused = read_rows(args.instances)
            for line in refused:
                print(
                    f"verigym eval: --instances {args.instances}: refused {line}", file=sys.stderr
                )
            if not selected:
                return usage_error(
                    "eval", f"--instances {args.instances}: no valid row ({len(refused)} refused)"
                )
            if args.episodes:
                return usage_error("eval", "--instances plays each instance once; drop --episodes")
            suites = instance_suites(selected)
        elif args.env:
            from verigym.commands import lookup_env
            from verigym.leaderboards.suite import Suite, Task

            if lookup_env("eval", args.env) is None:
                return 2
            suite = Suite(
                args.env,
                (Task(args.env, args.episodes or Task.episodes),),
                description=f"the one env {args.env}",
            )
        else:
            suite = load_suite(args.suite)
        if not args.instances:
            suites = [suite]
        for suite in suites:
            failures += _run_suite(args, suite, out)
    except (ValueError, TypeError, FileNotFoundError, ResultsExistError, RuntimeError) as exc:
        return usage_error("eval", str(exc))
    for line in failures:  # the run could not do its work: say so, and exit non-zero
        print(f"verigym eval: {line}", file=sys.stderr)
    if refused:
        print(
            f"verigym eval: {len(refused)} rows of {args.instances} were refused and not played",
            file=sys.stderr,
        )
    if args.export:
        try:
            with ResultsStore(out) as store:
                print(f"exported to {store.export(args.export)}")
        except (RuntimeError, ValueError, OSError) as exc:  # StoreError is a RuntimeError
            return usage_error("eval", str(exc))
    return 1 if failures or refused else 0


def _run_suite(args: argparse.Namespace, suite: Any, out: str) -> list[str]:
    """Play every agent of ``args`` on ``suite``; one line per task whose episodes all errored."""
    import os

    from verigym.leaderboards.arena import play_arena
    from verigym.leaderboards.runner import evaluate

    failures: list[str] = []
    if suite.kind == "single":
        _preflight(
            args.agent,
            [t.env_id for t in suite],
            args.env_url,
            args.env_token or os.environ.get("VERIGYM_TOKEN"),
        )
    if suite.kind == "competitive":
        arena = play_arena(
            args.agent, suite, out=out, resume=args.resume, progress=not args.no_progress
        )
        print(
            f"{', '.join(arena.entrants)} on {arena.suite}: played {arena.ran} matches, {arena.skipped} already recorded"
        )
        for note in arena.unavailable:
            print(f"  skipped: {note}")
    for agent in args.agent if suite.kind == "single" else ():
        summary = evaluate(
            agent,
            suite,
            out=out,
            workers=args.workers,
            backend=args.backend,
            resume=args.resume,
            device=args.device,
            episodes=args.episodes,
            progress=not args.no_progress,
            record_frames=args.record_frames,
            time_limit_scale=args.time_limit_scale,
            env_url=args.env_url,
            env_token=args.env_token,  # None: the URL's userinfo, then $VERIGYM_TOKEN
        )
        statuses = (
            ", ".join(f"{n} {s}" for s, n in sorted(summary.statuses.items())) or "nothing new"
        )
        print(
            f"{summary.agent_spec} on {summary.suite}: ran {summary.ran} episodes ({statuses}), {summary.skipped} already recorded; results in {summary.store_path}"
        )
        if summary.recorded_elsewhere:
            print(
                f"  {summary.recorded_elsewhere} more episodes were played but another run on this store had recorded them first (not counted above)"
            )
        if summary.rejected:
            print(
                f"  {summary.rejected} results were refused by validation and recorded as errors (see their error column); --resume retries them"
            )
        if summary.not_covered:
            print(
                f"  not played (the agent does not cover them: no saved agent for, another family, no scripted solver): {', '.join(summary.not_covered)}"
            )
        tasks = [
            dataclasses.replace(t, episodes=args.episodes) if args.episodes else t
            for t in suite
            if t.env_id not in summary.not_covered
        ]
        failures += _all_errors(out, summary, tasks)
    return failures
