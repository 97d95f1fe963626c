"""``verigym doctor``'s line for the world family: which open-world games can be made here."""

from __future__ import annotations

import importlib.metadata

from verigym.probe import Probe


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def probe() -> Probe:
    """Crafter's package (the ``crafter`` extra), whether numba compiles its world generator, and
    whether nle (the optional NetHack ids) is installed.

    Imports nothing heavy: installed versions only.
    """
    crafter = _version("crafter")
    if crafter is None:
        return Probe(
            "Open worlds (Crafter)",
            False,
            "crafter not installed: the verigym/Crafter-* ids cannot be made",
            "pip install 'verigym[crafter]'",
        )
    numba = _version("numba")
    speed = (
        f"numba {numba}: worlds generate in ~0.1 s"
        if numba
        else "no numba: each new world takes ~1-3 s to generate (pip install numba)"
    )
    nle = _version("nle")
    nethack = (
        f"NetHack: nle {nle} (NetHack-v0 and 4 tasks)"
        if nle
        else "NetHack: nle not installed (optional, NetHack GPL: pip install --no-deps 'nle>=1.3,<1.4')"
    )
    return Probe("Open worlds (Crafter)", True, f"crafter {crafter}; {speed}; {nethack}")
