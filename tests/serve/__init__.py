"""Helpers shared by the server tests."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any


def run_coroutine(coro: Coroutine[Any, Any, Any], timeout: float = 300) -> Any:
    """``asyncio.run(coro)`` in a thread of its own, returning its result.

    A GUI env used earlier in the same pytest worker keeps sync Playwright's event loop marked as
    running in the main thread (its shared Chromium lives on), and ``asyncio.run`` refuses to start
    there, so which tests an xdist worker drew would decide whether a test passes.
    """
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(timeout=timeout)
