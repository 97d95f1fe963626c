"""The token check of ``verigym serve-env``, as ASGI middleware in front of the app.

A token, when configured, is required on every HTTP request and WebSocket upgrade, in one
``Authorization`` header: ``Bearer <token>`` or HTTP Basic auth with the token as password (what a
``ws://user:<token>@host`` URL sends, so OpenEnv's client works unchanged). Nothing else (a query
string, a second header) carries it. A client address that sends :data:`AUTH_FAILURE_LIMIT` wrong
tokens within :data:`AUTH_WINDOW_SECONDS` gets 429 for every request until the window ends (at
most :data:`AUTH_TRACKED_ADDRESSES` addresses are remembered).
"""

from __future__ import annotations

import base64
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = [
    "AUTH_FAILURE_LIMIT",
    "AUTH_TRACKED_ADDRESSES",
    "AUTH_WINDOW_SECONDS",
    "FailureLimiter",
    "TokenGate",
    "authorized",
]

AUTH_FAILURE_LIMIT = 10
"""Wrong or missing tokens one client address may send per :data:`AUTH_WINDOW_SECONDS`; past
that every request from it gets 429 until the window ends."""

AUTH_WINDOW_SECONDS = 60.0
"""Seconds over which :data:`AUTH_FAILURE_LIMIT` counts (from an address's first failure)."""

AUTH_TRACKED_ADDRESSES = 4096
"""Client addresses with failures remembered at most (the oldest is forgotten first)."""


class TokenGate:
    """ASGI middleware that lets a request through to ``app`` only with the right token.

    Args:
        app: the ASGI app behind the gate; its ``state`` is this gate's ``state``.
        token: the credential every HTTP request and WebSocket upgrade must carry.

    A missing or wrong token gets 401 (a refused upgrade, or a 1008 close where the server cannot
    refuse one) and counts against the client address; past :data:`AUTH_FAILURE_LIMIT` in
    :data:`AUTH_WINDOW_SECONDS` every request from that address gets 429 with ``Retry-After``.
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token
        self.state = app.state
        self.failures = FailureLimiter(
            AUTH_FAILURE_LIMIT, AUTH_WINDOW_SECONDS, AUTH_TRACKED_ADDRESSES
        )

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        address = (scope.get("client") or ("unknown",))[0]
        wait = self.failures.blocked(address)
        if wait:
            detail = f"too many wrong tokens from {address}; retry in {wait:.0f} s"
            await _deny(scope, receive, send, 429, detail, {"Retry-After": str(int(wait) + 1)})
            return
        if not authorized(self.token, list(scope.get("headers") or ())):
            self.failures.fail(address)
            detail = "missing or wrong token (send Authorization: Bearer <token>)"
            await _deny(scope, receive, send, 401, detail, None)
            return
        await self.app(scope, receive, send)


async def _deny(
    scope: dict,
    receive: Callable,
    send: Callable,
    status: int,
    detail: str,
    headers: dict[str, str] | None,
) -> None:
    """Answer ``{"detail": detail}`` with ``status``: an HTTP response or a refused upgrade."""
    from starlette.responses import JSONResponse
    from starlette.websockets import WebSocket

    response = JSONResponse({"detail": detail}, status_code=status, headers=headers)
    if scope["type"] != "websocket":
        await response(scope, receive, send)
    elif "websocket.http.response" in (scope.get("extensions") or {}):
        await WebSocket(scope, receive, send).send_denial_response(response)
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})


def authorized(token: str, headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request carries ``token`` in exactly one ``Authorization`` header (Bearer, or
    Basic with the token as password: what URL userinfo becomes); a query string never counts."""
    given = [value for name, value in headers if name.lower() == b"authorization"]
    if len(given) != 1:
        return False
    (value,) = given
    if value[:7].lower() == b"bearer ":
        candidate = value[7:].strip()
    elif value[:6].lower() == b"basic ":
        try:
            candidate = base64.b64decode(value[6:].strip(), validate=True).partition(b":")[2]
        except ValueError:
            return False
    else:
        return False
    return hmac.compare_digest(candidate, token.encode())


class FailureLimiter:
    """Failed logins per client address in a fixed window; bounded memory (oldest forgotten first).

    Args:
        limit: failures an address may have per window before :meth:`blocked` says so.
        window: seconds from an address's first failure until its count starts over.
        capacity: addresses remembered at most.
    """

    def __init__(self, limit: int, window: float, capacity: int) -> None:
        self.limit, self.window, self.capacity = limit, window, capacity
        self._failures: OrderedDict[str, tuple[float, int]] = (
            OrderedDict()
        )  # address -> (window start, count)

    def _current(self, address: str, now: float) -> int:
        entry = self._failures.get(address)
        if entry is None:
            return 0
        if now - entry[0] >= self.window:
            del self._failures[address]
            return 0
        return entry[1]

    def blocked(self, address: str) -> float:
        """Seconds ``address`` must wait (0.0: not blocked)."""
        now = time.monotonic()
        if self._current(address, now) < self.limit:
            return 0.0
        return max(0.0, self._failures[address][0] + self.window - now)

    def fail(self, address: str) -> None:
        """Count one failure of ``address``."""
        now = time.monotonic()
        count = self._current(address, now)
        start = self._failures[address][0] if count else now
        self._failures[address] = (start, count + 1)
        self._failures.move_to_end(address)
        while len(self._failures) > self.capacity:
            self._failures.popitem(last=False)
