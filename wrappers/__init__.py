"""verigym.wrappers -- one concern a wrapper.

* :class:`LanguageWrapper` -- any env as Text -> Text (the text view for LLM agents).
* :class:`CandidateActionWrapper`, :class:`HashedNGramObservation` -- the tensor view of text envs.
* :class:`ScreenshotClickWrapper` -- the tensor view of GUI envs (screenshot in, ``Discrete`` clicks out).
* :class:`ActionDelay`, :class:`ObservationNoise`, :class:`DynamicsPerturbation` -- robustness
  variants (latency, sensor noise, per-episode mass/friction/damping scales).

Every wrapper keeps the episode boundary of the envs (:class:`verigym.core.EpisodeGuard`): after a
step returned ``terminated`` or ``truncated`` -- the env's end or one the wrapper decided -- ``step``
raises :class:`verigym.core.EpisodeEndedError` until ``reset``.

Names are imported lazily, so ``import verigym.wrappers`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LanguageWrapper": "verigym.wrappers.language",
    "CandidateActionWrapper": "verigym.wrappers.tensor_view",
    "HashedNGramObservation": "verigym.wrappers.tensor_view",
    "hashed_ngrams": "verigym.wrappers.tensor_view",
    "ScreenshotClickWrapper": "verigym.wrappers.tensor_view",
    "ActionDelay": "verigym.wrappers.robustness",
    "ObservationNoise": "verigym.wrappers.robustness",
    "DynamicsPerturbation": "verigym.wrappers.robustness",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'verigym.wrappers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
