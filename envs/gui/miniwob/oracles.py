"""Scripted solvers of MiniWoB++ tasks: the next action from the utterance and the element list."""

from __future__ import annotations

from typing import Any

ORACLES: dict[str, Any] = {}
