"""``verigym doctor``: which optional parts work here, with the command that fixes each."""

from __future__ import annotations

import argparse

HELP = "report which optional parts work here (MuJoCo rendering, Chromium, sandbox, CUDA, Ray)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from verigym.doctor import run_probes

    table = Table(title="verigym doctor")
    for column in ("part", "status", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for probe in run_probes():
        table.add_row(
            escape(probe.part),
            "[green]ok[/green]" if probe.ok else "[red]missing[/red]",
            escape(probe.detail),
            escape(probe.fix),
        )
    Console().print(table)
    return 0
