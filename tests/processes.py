"""Process-tree helpers for tests that assert nothing is left running (reads /proc)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

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


@contextlib.contextmanager
def starved(pid: int, share: float = 0.1, period: float = 0.1) -> Iterator[None]:
    """Give process ``pid`` only ``share`` of each ``period`` seconds while the block runs (SIGSTOP,
    then SIGCONT), as a loaded machine does; it is left running at the end."""
    done = threading.Event()

    def toggle() -> None:
        while not done.is_set():
            os.kill(pid, signal.SIGSTOP)
            time.sleep(period * (1 - share))
            os.kill(pid, signal.SIGCONT)
            time.sleep(period * share)

    thread = threading.Thread(target=toggle, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
