"""The MiniWoB++ tasks (Liu et al. 2018) of the ``miniwob`` package in verigym's browser.

One id per task the package registers (``verigym/MiniWoB-<Task>-v0``, family ``gui``); the pages
are read from the installed package (``pip install 'verigym[miniwob]'``). Importing this package
is light: the env module is imported when an env is made.
"""

from __future__ import annotations

from typing import Any


def probe() -> Any:
    """``verigym doctor`` probe: the ``miniwob`` package and its task pages are installed."""
    from importlib import metadata

    from verigym.envs.gui.miniwob import catalog
    from verigym.envs.gui.miniwob.server import html_root
    from verigym.probe import Probe

    name = "MiniWoB++ envs (miniwob pages)"
    try:
        root = html_root()
        version = metadata.version("miniwob")
    except Exception as exc:  # noqa: BLE001 - a probe reports, never raises
        return Probe(
            name, False, f"{type(exc).__name__}: {str(exc)[:200]}", "pip install 'verigym[miniwob]'"
        )
    pages = sum(
        1
        for t in catalog.TASKS
        if t.startswith("flight.") or (root / "miniwob" / f"{t}.html").is_file()
    )
    return Probe(
        name,
        pages == len(catalog.TASKS),
        f"miniwob {version}: {pages}/{len(catalog.TASKS)} task pages at {root}",
        "pip install 'verigym[miniwob]'",
    )
