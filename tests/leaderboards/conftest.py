"""Fixtures of the leaderboard tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="module")
def _stop_the_resource_tracker():
    """Stop multiprocessing's resource tracker after each module: the eval workers are ``spawn``
    processes, which start it, and it otherwise lives until the interpreter exits (the session-end
    check counts it as a leaked child). It restarts on demand."""
    yield
    from multiprocessing import resource_tracker

    resource_tracker._resource_tracker._stop()
