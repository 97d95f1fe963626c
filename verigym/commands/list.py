"""``verigym list [--family F]``: the registered ids as a table."""

from __future__ import annotations

import argparse

from verigym.core import FAMILIES

HELP = "list the registered environment ids with family, spaces and step limit"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", choices=FAMILIES, help="only this family")
    parser.add_argument("--spaces", action="store_true", help="also make each env to show its spaces (slower)")
    parser.add_argument("--ids", action="store_true", help="print bare ids, one per line")


def _spaces(env_id: str, api: str) -> tuple[str, str]:
    from verigym.registration import make

    try:
        env = make(env_id)
    except Exception as exc:  # an optional dependency may be missing
        return f"unavailable: {type(exc).__name__}", ""
    try:
        if api == "gymnasium":
            return str(env.observation_space), str(env.action_space)
        agent = env.possible_agents[0]
        return str(env.observation_space(agent)), str(env.action_space(agent))
    finally:
        env.close()


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from verigym.registration import rows

    selected = rows(args.family)
    if args.ids:
        print("\n".join(r.id for r in selected))
        return 0
    table = Table(title=f"verigym environments ({len(selected)})", show_lines=False)
    for column in ("id", "family", "api", "step limit", "description"):
        table.add_column(column, overflow="fold")
    if args.spaces:
        table.add_column("observation space", overflow="fold")
        table.add_column("action space", overflow="fold")
    for r in selected:
        cells = [r.id, r.family, r.api, "env" if r.max_episode_steps is None else str(r.max_episode_steps), r.description]
        if args.spaces:
            cells += list(_spaces(r.id, r.api))
        table.add_row(*(escape(c) for c in cells))
    Console().print(table)
    return 0
