"""``verigym list [--family F] [--json]``: the registered ids (verigym's and plugins').

On a terminal, a table; when stdout is not a terminal (a pipe, a file), plain tab-separated rows
with a header line, never wrapped or truncated; ``--json`` prints a JSON list of objects (``id``,
``family``, ``api``, ``step_limit``, ``description``, ``entry_point``, ``kwargs``) for scripts.
"""

from __future__ import annotations

import argparse
import json
import sys

from verigym.core import FAMILIES
from verigym.registration import EnvRow

HELP = "list the registered environment ids with family, spaces and step limit"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", choices=FAMILIES, help="only this family")
    parser.add_argument("--spaces", action="store_true", help="also make each env to show its spaces (slower)")
    parser.add_argument("--ids", action="store_true", help="print bare ids, one per line")
    parser.add_argument("--json", action="store_true", help="print a JSON list of the rows (for scripts)")


def _spaces(env_id: str, api: str) -> tuple[str, str, int | None]:
    """(observation space, action space, the env's own step limit) of a made env."""
    from verigym.registration import make

    try:
        env = make(env_id)
    except Exception as exc:  # an optional dependency may be missing
        return f"unavailable: {type(exc).__name__}", "", None
    try:
        limits = (getattr(env.unwrapped, name, None) for name in ("max_steps", "max_turns", "max_cycles"))
        limit = next((v for v in limits if isinstance(v, int)), None)
        if api == "gymnasium":
            return str(env.observation_space), str(env.action_space), limit
        agent = env.possible_agents[0]
        return str(env.observation_space(agent)), str(env.action_space(agent)), limit
    finally:
        env.close()


def step_limit(row: EnvRow) -> str:
    """The step-limit cell of a row without making the env: the registered ``TimeLimit``, else
    the row's ``max_steps`` kwarg, else ``"own"`` (the env truncates itself at its default)."""
    if row.max_episode_steps is not None:
        return str(row.max_episode_steps)
    if isinstance(row.kwargs.get("max_steps"), int):
        return str(row.kwargs["max_steps"])
    return "own"


COLUMNS = (
    "id: pass it to gym.make (api gymnasium) or pettingzoo.make(api, id) (api aec / parallel); "
    "family: verigym list --family F; "
    "step limit: steps before the episode is truncated with its verdict ('own': the env's "
    "max_steps default, shown with --spaces); description: the task."
)


def _cells(r: EnvRow, spaces: bool) -> list[str]:
    """One row's cells: id, family, api, step limit, description (+ observation and action space,
    which also fill in an ``own`` step limit, when ``spaces``)."""
    cells = [r.id, r.family, r.api, step_limit(r), r.description]
    if spaces:
        observation_space, action_space, limit = _spaces(r.id, r.api)
        if cells[3] == "own" and limit is not None:
            cells[3] = str(limit)
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
    if args.json:
        records = []
        for r in selected:
            cells = _cells(r, args.spaces)
            record = {"id": r.id, "family": r.family, "api": r.api, "step_limit": cells[3], "description": r.description,
                      "entry_point": r.entry_point, "kwargs": dict(r.kwargs)}
            if args.spaces:
                record["observation_space"], record["action_space"] = cells[5:]
            records.append(record)
        print(json.dumps(records, indent=1, default=str))
        return 0
    if not sys.stdout.isatty():  # piped: one plain line a row, nothing wrapped or cut
        header = ["id", "family", "api", "step limit", "description"] + (["observation space", "action space"] if args.spaces else [])
        lines = ["\t".join(header)]
        for r in selected:
            lines.append("\t".join(c.replace("\t", " ").replace("\n", " ") for c in _cells(r, args.spaces)))
        print("\n".join(lines))
        print(f"columns: {COLUMNS}", file=sys.stderr)  # the table's caption, off the data stream
        return 0
    table = Table(title=f"verigym environments ({len(selected)})", caption=COLUMNS, show_lines=False)
    for column in ("id", "family", "api", "step limit", "description"):
        table.add_column(column, overflow="fold")
    if args.spaces:
        table.add_column("observation space", overflow="fold")
        table.add_column("action space", overflow="fold")
    for r in selected:
        table.add_row(*(escape(c) for c in _cells(r, args.spaces)))
    Console().print(table)
    return 0
