"""``verigym export --out DIR --format jsonl|parquet|sft|swebench --path FILE``: trajectories as a dataset.

``--format sft`` writes chat SFT records of successful episodes on training seeds
(:mod:`verigym.leaderboards.demonstrations`), in the text view's protocol (``--protocol text``, the
default, what ``verigym train sft`` trains on) or native tool calling (``--protocol tools``, for TRL's
``SFTTrainer`` with a tool-aware chat template): from the store, or, with ``--play oracle``, played
in-process on ``--seeds`` of the ``--env`` ids or of a ``--suite``'s tasks (``--families``). An
episode whose task is an evaluation task of any shipped suite (or of ``--suite``) is left out,
whatever its seed (:mod:`verigym.leaderboards.heldout`).

``--format swebench`` writes the RepoFix-Real instances of the ``--env`` ids (default
``verigym/RepoFix-Real-v0``) as SWE-bench rows (:mod:`verigym.envs.tool.repofix.swebench`): the
training instances by default; evaluation instances only with ``--split eval`` or ``--split all``."""

from __future__ import annotations

import argparse
import sys

from verigym.commands import add_row_filters

HELP = "write the stored trajectories as a Hugging Face datasets table (chat messages, reward, success, provenance), or demonstrations as chat SFT data (--format sft)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=None, help="results folder (default: ./verigym-results)")
    parser.add_argument(
        "--format",
        choices=("jsonl", "parquet", "sft", "swebench"),
        default="jsonl",
        help="JSON Lines or Parquet; sft: JSON Lines of chat SFT records (successful episodes on training seeds, tool calls as OpenAI tool_calls); swebench: RepoFix-Real instances as SWE-bench rows (JSON Lines; training instances unless --split says otherwise)",
    )
    parser.add_argument(
        "--split",
        choices=("train", "eval", "all"),
        default="train",
        help="--format swebench: which instances (default train; eval or all only when asked: "
        "evaluation instances never become training data by default)",
    )
    parser.add_argument(
        "--protocol",
        choices=("text", "tools"),
        default="text",
        help="--format sft: text (default): the text view's protocol, tool calls as <tool_call> text "
        "(verigym train sft; any chat template); tools: native tool_calls with mapping arguments, "
        "schemas in tools only, the final answer as an answer-tool call (TRL's SFTTrainer with a "
        "tool-aware chat template, e.g. TRL's qwen2_5; docs/llm.md)",
    )
    parser.add_argument(
        "--play",
        choices=("oracle",),
        default=None,
        help="--format sft: play this agent on training seeds now instead of reading the store",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=None,
        help="--play: an env id to play (repeatable; default: the --suite's tasks); --format swebench: a RepoFix-Real id whose instances to write (default verigym/RepoFix-Real-v0)",
    )
    parser.add_argument(
        "--families",
        default=None,
        help="--play with --suite: only its tasks of these families (comma-separated, e.g. text,tool,gui)",
    )
    parser.add_argument(
        "--seeds",
        default="0:100",
        help="--play: training seeds START:END (END exclusive, below 1000000; default 0:100)",
    )
    parser.add_argument("--path", required=True, help="the file to write")
    parser.add_argument(
        "--success",
        choices=("any", "only", "failed"),
        default="any",
        help="keep every episode, only the successes (rejection sampling / SFT), or only the failures",
    )
    add_row_filters(parser)
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

    if args.format == "swebench":
        return _run_swebench(args)
    if args.format == "sft" or args.play:
        return _run_sft(args)
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


def _run_swebench(args: argparse.Namespace) -> int:
    """``--format swebench``: RepoFix-Real instances as SWE-bench rows (JSON Lines); exit 0 or 2.

    ``--env`` picks RepoFix-Real ids (default ``verigym/RepoFix-Real-v0``: every library);
    ``--split`` which instances (``train`` unless asked).
    """
    import json
    from pathlib import Path

    from verigym.commands import usage_error

    if args.play:
        return usage_error("export", "--play writes --format sft")
    try:
        from verigym.envs.tool.repofix.swebench import instance_rows
        from verigym.registration import row

        env_ids = list(args.env or ["verigym/RepoFix-Real-v0"])
        _require_ids(env_ids)
        libraries: list[str | None] = []
        for env_id in env_ids:
            entry = row(env_id)
            if ".repofix.real_env:" not in str(entry.entry_point):
                raise ValueError(
                    f"--format swebench writes RepoFix-Real instances; {env_id} is not a RepoFix-Real id"
                )
            libraries.append(entry.kwargs.get("library"))
        if None in libraries:
            libraries = [None]
        out = Path(args.path)
        out.parent.mkdir(parents=True, exist_ok=True)
        count = 0
        seen: set[str] = set()
        with out.open("w", encoding="utf-8") as handle:
            for library in dict.fromkeys(libraries):
                for record in instance_rows(library, args.split):
                    if record["instance_id"] in seen:
                        continue
                    seen.add(record["instance_id"])
                    handle.write(json.dumps(record, sort_keys=True) + "\n")
                    count += 1
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        return usage_error("export", str(exc.args[0] if isinstance(exc, KeyError) else exc))
    print(
        f"wrote {count} {args.split} instances as SWE-bench rows to {out} (load it with "
        f"datasets.load_dataset('json', data_files={str(out)!r}); evaluate on them with "
        f"verigym eval --agent SPEC --instances {out})"
    )
    return 0


def _seed_range(text: str) -> range:
    from verigym.leaderboards.suite import TRAIN_SEED_END

    start, sep, end = text.partition(":")
    try:
        seeds = range(int(start), int(end)) if sep else range(int(start), int(start) + 1)
    except ValueError:
        raise ValueError(f"--seeds must be START:END (integers), got {text!r}") from None
    if not seeds or seeds.start < 0 or seeds.stop > TRAIN_SEED_END or len(seeds) > 100_000:
        raise ValueError(
            f"--seeds {text!r}: 1 to 100000 training seeds in [0, {TRAIN_SEED_END}); evaluation seeds are never exported for training"
        )
    return seeds


def _run_sft(args: argparse.Namespace) -> int:
    """``--format sft``: demonstrations as chat SFT JSON Lines; exit 0, or 1 when rows were refused."""
    from verigym.commands import usage_error
    from verigym.leaderboards.demonstrations import (
        EVALUATION_TASK,
        play_demonstrations,
        stored_demonstrations,
    )
    from verigym.leaderboards.heldout import HeldOutTasks
    from verigym.leaderboards.suite import list_suites, load_suite
    from verigym.leaderboards.trajectories import export_dataset

    if args.format != "sft":
        return usage_error("export", "--play writes --format sft")
    refused: list = []
    held_out = None
    try:
        suite = load_suite(args.suite) if args.suite else None
        # every shipped suite's evaluation tasks, and those of a suite given by path
        held_out = HeldOutTasks([load_suite(n) for n in list_suites()] + ([suite] if suite else []))
        if args.play:
            env_ids = list(args.env or [])
            if not env_ids and suite is not None:
                env_ids = _suite_envs(suite, args.families)
            if not env_ids:
                raise ValueError("--play needs --env ID (repeatable) or --suite")
            _require_ids(env_ids)
            records = play_demonstrations(
                env_ids,
                _seed_range(args.seeds),
                agent=args.play,
                refused=refused,
                held_out=held_out,
                protocol=args.protocol,
            )
            path, count = export_dataset(records, args.path, "jsonl")
        else:
            from verigym.leaderboards.store import DEFAULT_DIR, ResultsStore

            with ResultsStore(args.out or DEFAULT_DIR, create=False) as store:
                store.require_trajectories()
                rows = store.rows(agent_spec=args.agent, refused=refused)
                if suite is not None:
                    names = {task.env_id for task in suite}
                    rows = [r for r in rows if r.env_id in names]
                rows = [r for r in rows if r.status == "ok" and r.success]
                path, count = export_dataset(
                    stored_demonstrations(
                        store, rows, refused, held_out=held_out, protocol=args.protocol
                    ),
                    args.path,
                    "jsonl",
                )
    except (RuntimeError, ValueError, FileNotFoundError, OSError) as exc:
        return usage_error("export", str(exc))
    # episodes whose task an evaluation seed poses: one summary line, not one line each
    refused = [
        item
        for item in refused
        if not (item[1] if isinstance(item, tuple) else item).endswith(EVALUATION_TASK)
    ]
    if held_out is not None and held_out.dropped:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(held_out.dropped.items()))
        print(
            f"verigym export: left out {sum(held_out.dropped.values())} episodes whose task is an "
            f"evaluation task of a suite (the same task as an evaluation seed's): {counts}",
            file=sys.stderr,
        )
    for item in refused:
        why = item[1] if isinstance(item, tuple) else item
        print(f"verigym export: not exported: {why}", file=sys.stderr)
    if refused and not args.play:
        print(
            "verigym export: stored evaluation episodes never become training data; "
            "play demonstrations on training seeds with --play oracle",
            file=sys.stderr,
        )
    how = (
        f"verigym train sft --model M --data {path}"
        if args.protocol == "text"
        else "TRL's SFTTrainer with a tool-aware chat template, e.g. TRL's qwen2_5 (docs/llm.md)"
    )
    print(
        f"wrote {count} demonstrations to {path} in the {args.protocol} protocol (train on it: {how})"
    )
    return 1 if refused and not args.play else 0


def _require_ids(env_ids: list[str]) -> None:
    """Raise ``ValueError`` (one line, the closest ids) unless every id can be made here."""
    from verigym.registration import require_id

    for env_id in env_ids:
        try:
            require_id(env_id)
        except KeyError as exc:
            raise ValueError(str(exc.args[0])) from None


def _suite_envs(suite, families: str | None) -> list[str]:
    from verigym.core import FAMILIES
    from verigym.registration import row

    wanted = tuple(f for f in (families or "").split(",") if f)
    bad = [f for f in wanted if f not in FAMILIES]
    if bad:
        raise ValueError(f"unknown families {bad}; choose from {', '.join(FAMILIES)}")
    _require_ids([task.env_id for task in suite])
    return [task.env_id for task in suite if not wanted or row(task.env_id).family in wanted]
