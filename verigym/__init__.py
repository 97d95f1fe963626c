"""verigym: agent environments with verifiable rewards under one API.

``import verigym`` registers every environment of the installed ``verigym.envs`` entry points,
verigym's own families and plugins' (lazily: string entry points, no torch, MuJoCo or browser
imports), so ``gymnasium.make("verigym/<Name>-v<N>")`` and
``pettingzoo.make("aec" | "parallel", "verigym/<Name>-v<N>")`` work.

Contracts (docs/design.md): :class:`TextInterface`, :class:`ActionParseError`, :data:`FAMILIES`, the
episode-end keys ``info["success"]``, ``info["score"]``, ``info["action_error"]``, and the episode
boundary (:class:`EpisodeGuard`, :class:`EpisodeEndedError`).

The subpackages ``verigym.agents``, ``verigym.wrappers``, ``verigym.leaderboards`` and
``verigym.envs`` are attributes of the package, imported on first use (module ``__getattr__``), so
``import verigym`` stays light and ``verigym.agents.make("ppo", env_id)`` works after it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from verigym.core import (
    ACTION_CANDIDATES,
    ACTION_ERROR,
    ACTION_MASK,
    FAMILIES,
    SCORE,
    SUCCESS,
    ActionParseError,
    EpisodeEndedError,
    EpisodeGuard,
    Family,
    OracleInterface,
    TextInterface,
    UnicodeText,
    action_error_info,
    coerce_action,
    episode_end,
)
from verigym.registration import EnvRow, make, register_all, register_rows, rows, variants

__version__ = "0.1.0"

__all__ = [
    "ACTION_CANDIDATES",
    "ACTION_ERROR",
    "ACTION_MASK",
    "FAMILIES",
    "SCORE",
    "SUCCESS",
    "ActionParseError",
    "EnvRow",
    "EpisodeEndedError",
    "EpisodeGuard",
    "Family",
    "OracleInterface",
    "TextInterface",
    "UnicodeText",
    "__version__",
    "agents",
    "action_error_info",
    "coerce_action",
    "envs",
    "episode_end",
    "leaderboards",
    "make",
    "register_rows",
    "rows",
    "variants",
    "wrappers",
]

_SUBPACKAGES = frozenset({"agents", "envs", "leaderboards", "wrappers"})
"""Subpackages imported on first attribute access (each imports torch, MuJoCo, ... only when used)."""


def __getattr__(name: str) -> ModuleType:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"verigym.{name}")
    raise AttributeError(f"module 'verigym' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBPACKAGES)


register_all()
