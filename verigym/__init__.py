"""verigym: agent environments with verifiable rewards under one API.

``import verigym`` registers every environment of the installed ``verigym.envs`` entry points,
verigym's own families and plugins' (lazily: string entry points, no torch, MuJoCo or browser
imports), so ``gymnasium.make("verigym/<Name>-v<N>")`` and
``pettingzoo.make("aec" | "parallel", "verigym/<Name>-v<N>")`` work.

Contracts (docs/design.md): :class:`TextInterface`, :class:`ActionParseError`, :data:`FAMILIES`, the
episode-end keys ``info["success"]``, ``info["score"]``, ``info["action_error"]``, and the episode
boundary (:class:`EpisodeGuard`, :class:`EpisodeEndedError`).
"""

from __future__ import annotations

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
    "action_error_info",
    "coerce_action",
    "episode_end",
    "make",
    "register_rows",
    "rows",
    "variants",
]

register_all()
