"""Process-tree helpers for tests that assert nothing is left running (reads /proc)."""

from __future__ import annotations

import os

from verigym import workers


def descendants(pid: int | None = None) -> dict[int, str]:
    """Every living (non-zombie) descendant of ``pid`` (default: this process): pid -> command line."""
    found: dict[int, str] = {}
    for child in workers.descendants(os.getpid() if pid is None else pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as handle:
                found[child] = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            found[child] = ""
    return found
