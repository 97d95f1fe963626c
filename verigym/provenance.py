"""Where the running verigym code comes from: the git commit of its source checkout.

Saved agents (``meta.json``) and leaderboard rows both record it (docs/design.md sections 4 and 6), so
both ask this one function and always agree.
"""

from __future__ import annotations

import functools
import logging
import subprocess
from pathlib import Path

__all__ = ["git_sha", "source_root"]

logger = logging.getLogger(__name__)

_GIT_TIMEOUT_S = 10.0


def source_root() -> Path:
    """The folder that holds the ``verigym`` import package (a checkout's root, or site-packages)."""
    import verigym

    return Path(verigym.__file__).resolve().parent.parent


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=_GIT_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("git %s failed: %s", " ".join(args), exc)
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def git_sha() -> str | None:
    """The commit of the git checkout verigym is imported from, ``"-dirty"`` appended when tracked
    files differ from it.

    Only a checkout whose root is :func:`source_root` counts: a wheel installed into a virtualenv
    that happens to sit inside some other git repository has no verigym commit, and gets ``None``
    rather than that repository's SHA. Computed once per process (two ``git`` calls, each bounded
    by 10 seconds).

    Returns:
        40 hex digits (plus ``"-dirty"``), or ``None`` when verigym is not imported from a git
        checkout or git is not installed.
    """
    root = source_root()
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root:
        return None
    sha = _git(root, "rev-parse", "HEAD")
    if not sha:
        return None
    if _git(root, "status", "--porcelain", "--untracked-files=no"):
        sha += "-dirty"
    return sha
