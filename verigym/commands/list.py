"""``verigym list [--family F] [--json]``: the registered ids (verigym's and plugins').

On a terminal, a table with its legend; when stdout is not a terminal (a pipe, a file), plain
tab-separated rows with a header line and no legend, never wrapped or truncated; ``--json`` prints a JSON list of objects (``id``,
``family``, ``api``, ``step_limit``, ``description``, ``entry_point``, ``kwargs``, ``task_space``:
the number of distinct tasks the id draws, from the shipped table of
:mod:`verigym.leaderboards.heldout`; ``oracle``: whether the env has a scripted solver, the
``oracle`` agent, :attr:`~verigym.registration.EnvRow.oracle`) for scripts.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from verigym.core import FAMILIES
from verigym.registration import EnvRow

HELP = "list the registered environment ids with family, spaces and step limit"

# A step limit that only the made env knows is read by making each env once; the answers are
# cached until verigym, the rows or an env's source change (made_limits).


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", choices=FAMILIES, help="only this family")
    parser.add_argument(
        "--spaces", action="store_true", help="also make each env to show its spaces (slower)"
    )
    parser.add_argument("--ids", action="store_true", help="print bare ids, one per line")
    parser.add_argument(
        "--json", action="store_true", help="print a JSON list of the rows (for scripts)"
    )


def _limit_of(env: Any) -> int | None:
    """The smaller of a made env's own limit (``max_steps``/``max_turns``/``max_cycles`` of the
    unwrapped env, the verigym convention) and its ``TimeLimit``; ``None`` when it has neither."""
    unwrapped = getattr(env, "unwrapped", env)
    found = [getattr(unwrapped, name, None) for name in ("max_steps", "max_turns", "max_cycles")]
    spec = getattr(env, "spec", None)
    found.append(getattr(spec, "max_episode_steps", None))
    limits = [int(v) for v in found if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return min(limits) if limits else None


def _spaces(env_id: str, api: str) -> tuple[str, str, int | None, bool]:
    """(observation space, action space, the env's step limit, whether it could be made)."""
    from verigym.registration import make

    try:
        env = make(env_id)
    except Exception as exc:  # noqa: BLE001 - an optional dependency may be missing
        return f"unavailable: {type(exc).__name__}", "", None, False
    try:
        if api == "gymnasium":
            return str(env.observation_space), str(env.action_space), _limit_of(env), True
        agent = env.possible_agents[0]
        return str(env.observation_space(agent)), str(env.action_space(agent)), _limit_of(env), True
    finally:
        env.close()


NO_LIMIT = "-"
"""The step-limit cell of an env that has none: its episodes end by its rules (one answer, a game's end)."""
UNKNOWN = "?"
"""The step-limit cell of an env that cannot be made here (an optional part is missing)."""


def static_limit(row: EnvRow) -> str | None:
    """The step limit a registration row states (its ``TimeLimit``, else a ``max_steps``,
    ``max_turns`` or ``max_cycles`` kwarg), or ``None`` when only the made env knows it."""
    if row.max_episode_steps is not None:
        return str(row.max_episode_steps)
    for name in ("max_steps", "max_turns", "max_cycles"):
        value = row.kwargs.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def _cache_key(selected: list[EnvRow]) -> str:
    """Changes with verigym's version, the rows, and any edit to the envs' source files."""
    import hashlib
    import importlib.util
    import os

    from verigym import __version__

    digest = hashlib.sha256(__version__.encode())
    for r in selected:
        digest.update(f"{r.id}\0{r.entry_point}\0{sorted(r.kwargs.items())}\n".encode())
    # the folders of the entry points' packages (verigym.envs lives in envs/, not under verigym/)
    packages = {".".join(str(r.entry_point).partition(":")[0].split(".")[:2]) for r in selected}
    for package in sorted(packages):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or ()) if spec else ():
            for folder, _, files in os.walk(root):
                for name in sorted(files):
                    if name.endswith(".py"):
                        stat = os.stat(os.path.join(folder, name))
                        digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def made_limits(selected: list[EnvRow]) -> dict[str, str]:
    """Step-limit cells of the rows whose limit only the made env knows: each env is made once
    and the answers are cached (``$VERIGYM_CACHE/list-step-limits.json``, keyed by
    :func:`_cache_key`), so later listings make nothing."""
    import json

    from verigym.agents.llm.models import cache_root, write_cache_json

    todo = [r for r in selected if static_limit(r) is None]
    if not todo:
        return {}
    from verigym.registration import rows

    key = _cache_key(rows())  # every row: listing one family keeps the others' answers
    path = cache_root() / "list-step-limits.json"
    try:
        cached = json.loads(path.read_text())
        limits = dict(cached["limits"]) if cached.get("key") == key else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        limits = {}
    missing = [r for r in todo if not isinstance(limits.get(r.id), str)]
    for r in missing:
        _, _, limit, made = _spaces(r.id, r.api)
        limits[r.id] = str(limit) if limit is not None else (NO_LIMIT if made else UNKNOWN)
    if missing:
        write_cache_json(path, {"key": key, "limits": limits})
    return {r.id: limits[r.id] for r in todo}


def step_limit(row: EnvRow, made: dict[str, str] | None = None) -> str:
    """The step-limit cell of a row: :func:`static_limit`, else the made env's limit from
    ``made`` (:func:`made_limits`), ``-`` when the env has none, ``?`` when it cannot be made."""
    stated = static_limit(row)
    if stated is not None:
        return stated
    return (made or {}).get(row.id, UNKNOWN)


COLUMNS = (
    "id: pass it to gym.make (api gymnasium) or pettingzoo.make(api, id) (api aec / parallel); "
    "family: verigym list --family F; "
    "step limit: steps (moves of each agent in a game) before the episode is truncated with its verdict; "
    f"'{NO_LIMIT}': none, the episode ends by its rules (one answer, a game's end); '{UNKNOWN}': the env cannot be made here; "
    "description: the task."
)


def _cells(r: EnvRow, spaces: bool, made: dict[str, str]) -> list[str]:
    """One row's cells: id, family, api, step limit, description (+ observation and action space
    when ``spaces``)."""
    cells = [r.id, r.family, r.api, step_limit(r, made), r.description]
    if spaces:
        observation_space, action_space, _, _ = _spaces(r.id, r.api)
        cells += [observation_space, action_space]
    return cells


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from verigym.registration import rows

    selected = rows(args.family)
    if args.ids:
        print("\n".join(r.id for r in selected))
        return 0
    made = made_limits(selected)
    if args.json:
        from verigym.leaderboards.heldout import small_task_space, task_spaces

        spaces = task_spaces()  # a shipped table: distinct tasks per id, measured once
        records = []
        for r in selected:
            cells = _cells(r, args.spaces, made)
            record = {
                "id": r.id,
                "family": r.family,
                "api": r.api,
                "step_limit": cells[3],
                "description": r.description,
                "entry_point": r.entry_point,
                "kwargs": dict(r.kwargs),
                "oracle": r.oracle,  # false: no scripted solver (docs/environments.md says why)
                # distinct tasks among the first training seeds ("100": all there are, "~N":
                # estimated, ">= N": none repeated); small: fewer than 10,000 (evaluation tasks
                # are drawn by training seeds too); null: not measured
                "task_space": (
                    {**spaces[r.id], "small": small_task_space(spaces[r.id])}
                    if isinstance(spaces.get(r.id), dict)
                    else None
                ),
            }
            if args.spaces:
                record["observation_space"], record["action_space"] = cells[5:]
            records.append(record)
        print(json.dumps(records, indent=1, default=str))
        return 0
    if not sys.stdout.isatty():  # piped: one plain line a row, nothing wrapped or cut
        header = ["id", "family", "api", "step limit", "description"] + (
            ["observation space", "action space"] if args.spaces else []
        )
        lines = ["\t".join(header)]
        for r in selected:
            lines.append(
                "\t".join(
                    c.replace("\t", " ").replace("\n", " ") for c in _cells(r, args.spaces, made)
                )
            )
        print("\n".join(lines))  # no legend: a pipe or a file gets the data alone
        return 0
    table = Table(
        title=f"verigym environments ({len(selected)})", caption=COLUMNS, show_lines=False
    )
    for column in ("id", "family", "api", "step limit", "description"):
        table.add_column(column, overflow="fold")
    if args.spaces:
        table.add_column("observation space", overflow="fold")
        table.add_column("action space", overflow="fold")
    for r in selected:
        table.add_row(*(escape(c) for c in _cells(r, args.spaces, made)))
    Console().print(table)
    return 0
