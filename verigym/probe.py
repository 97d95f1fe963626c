"""One line of ``verigym doctor``'s report, on the ground floor.

:class:`Probe` imports nothing from verigym, so a lower layer (the sandbox, an env family, an
agent family) writes its own doctor probe without importing :mod:`verigym.doctor`, which sits above
them all. Plugin authors keep the documented name ``verigym.doctor.Probe`` (the same class).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Probe"]


@dataclass(frozen=True)
class Probe:
    """One line of the doctor's report.

    Attributes:
        part: what was probed ("MuJoCo rendering", ...).
        ok: True works, False broken or missing.
        detail: what was seen (a version, an error).
        fix: the command that fixes it, when not ok.
    """

    part: str
    ok: bool
    detail: str
    fix: str = ""
