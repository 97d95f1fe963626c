"""Helpers shared by the server tests."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import urllib.error
import urllib.request
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


def post_json(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """POST ``body`` (bytes as they are, anything else as JSON) and return ``(HTTP status, the
    reply's JSON)``; an error status returns its JSON body too (``{}`` when it has none)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")
