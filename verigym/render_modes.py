"""The render mode an env accepts, as Gymnasium's own envs accept it (docs/design.md section 2).

Gymnasium's ``make`` only warns when ``render_mode`` is not in an env's
``metadata["render_modes"]``, and its own envs (``CartPole-v1``, ...) take any mode at
construction. Third-party code relies on that: Stable-Baselines3's ``make_vec_env`` asks every
env for ``render_mode="rgb_array"`` and retries without it only on a ``TypeError``. verigym's envs
therefore accept an unsupported mode too, with a warning, and render nothing in it (``render()``
returns ``None``, as with ``render_mode=None``). A value that is not ``None`` or a short string
is still refused: ``render_mode`` comes from clients (the server allow-lists it as well).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gymnasium import logger

__all__ = ["accept_render_mode"]

MAX_MODE_LENGTH = 64


def accept_render_mode(render_mode: Any, modes: Iterable[str | None]) -> str | None:
    """The mode an env renders in, given the requested ``render_mode`` and its supported ``modes``.

    Args:
        render_mode: ``None`` or the requested mode (``str``).
        modes: the env's supported modes (its ``metadata["render_modes"]``; ``None`` is ignored).

    Returns:
        ``render_mode`` when it is ``None`` or one of ``modes``; otherwise ``None`` (rendering
        off), after a Gymnasium warning naming the supported modes.

    Raises:
        ValueError: ``render_mode`` is neither ``None`` nor a string of at most 64 characters.
    """
    if render_mode is None:
        return None
    if not isinstance(render_mode, str) or len(render_mode) > MAX_MODE_LENGTH:
        raise ValueError(
            f"render_mode must be None or a mode name (str), got {type(render_mode).__name__}"
        )
    supported = [m for m in modes if m is not None]
    if render_mode in supported:
        return render_mode
    logger.warn(
        f"render_mode={render_mode!r} is not one of this env's render_modes {supported}: "
        "it renders nothing (render() returns None), as Gymnasium's envs accept any mode"
    )
    return None
