"""What the GUI test modules share."""

from __future__ import annotations

import pytest


def require_chromium() -> None:
    """Skip the calling test module (at import) where Playwright or a Chromium is missing."""
    pytest.importorskip("playwright")
    from verigym.envs.gui.browser import chromium_executable

    try:
        chromium_executable()
    except RuntimeError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(str(exc), allow_module_level=True)
