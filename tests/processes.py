"""Process-tree helpers for tests that assert nothing is left running (reads /proc)."""

from __future__ import annotations

import os


def descendants(pid: int | None = None) -> dict[int, str]:
    """Every living (non-zombie) descendant of ``pid`` (default: this process): pid -> command line."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: dict[int, str] = {}
    todo = [os.getpid() if pid is None else pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child in found:
                continue
            try:
                with open(f"/proc/{child}/cmdline", "rb") as handle:
                    found[child] = handle.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                found[child] = ""
            todo.append(child)
    return found
