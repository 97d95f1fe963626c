"""The token check of both servers (``verigym serve-env``, ``verigym serve-model``), as ASGI
middleware in front of the app.

A token, when configured, is required on every HTTP request and WebSocket upgrade, in one
``Authorization`` header: ``Bearer <token>`` or HTTP Basic auth with the token as password (what a
``ws://user:<token>@host`` URL sends, so OpenEnv's client works unchanged). Nothing else (a query
string, a second header) carries it.

The token is checked first: a request with the right token always goes through, whatever its
address sent before. Only failures are limited: a client address that sent
:data:`AUTH_FAILURE_LIMIT` wrong or missing tokens, or a network (its ``/24`` for IPv4, its ``/64``
for IPv6) that sent :data:`AUTH_NETWORK_FAILURE_LIMIT`, within :data:`AUTH_WINDOW_SECONDS`, gets 429
instead of 401 for each further failure until the window ends (at most
:data:`AUTH_TRACKED_ADDRESSES` addresses and as many networks are remembered). The limiter bounds
what wrong tokens cost and how many are answered 401; guessing itself is hopeless because a token
must carry at least :data:`MIN_TOKEN_BITS` bits (:func:`token_weakness`).
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = [
    "AUTH_FAILURE_LIMIT",
    "AUTH_NETWORK_FAILURE_LIMIT",
    "AUTH_TRACKED_ADDRESSES",
    "AUTH_WINDOW_SECONDS",
    "MIN_TOKEN_BITS",
    "FailureLimiter",
    "TokenGate",
    "authorized",
    "check_token",
    "network_of",
    "token_weakness",
]

logger = logging.getLogger(__name__)

AUTH_FAILURE_LIMIT = 10
"""Wrong or missing tokens one client address may send per :data:`AUTH_WINDOW_SECONDS` before its
further failures get 429 (a right token still goes through)."""

AUTH_NETWORK_FAILURE_LIMIT = 100
"""Wrong or missing tokens one network (``/24`` IPv4, ``/64`` IPv6) may send per
:data:`AUTH_WINDOW_SECONDS` before its further failures get 429: an attacker who rotates addresses
within a network shares this count."""

AUTH_WINDOW_SECONDS = 60.0
"""Seconds over which the failure limits count (from an address's or network's first failure)."""

AUTH_TRACKED_ADDRESSES = 4096
"""Client addresses (and, separately, networks) with failures remembered at most (the oldest is
forgotten first)."""

MIN_TOKEN_BITS = 128
"""Bits a token must carry (as estimated by :func:`token_weakness`); ``secrets.token_urlsafe(16)``
(22 characters) or ``secrets.token_hex(16)`` (32) has them."""


def token_weakness(token: str) -> str | None:
    """Why ``token`` carries fewer than :data:`MIN_TOKEN_BITS` bits, or ``None`` when it does not.

    The estimate is ``len(token) x log2(alphabet)``, the alphabet being the union of the character
    classes the token uses (digits 10, hex 16, lower case 26, upper case 26, others 32): an upper
    bound on the entropy of a random token, so a token it calls weak is weak.
    """
    classes = 0
    if any(c.isdigit() for c in token):
        classes += 10
    letters = [c for c in token if c.isascii() and c.isalpha()]
    if letters and (set(letters) <= set("abcdef") or set(letters) <= set("ABCDEF")):
        classes += 6  # hex digits
    else:
        classes += 26 if any(c.islower() for c in letters) else 0
        classes += 26 if any(c.isupper() for c in letters) else 0
    if any(not (c.isascii() and c.isalnum()) for c in token):
        classes += 32
    bits = len(token) * math.log2(classes) if classes > 1 else 0.0
    if bits >= MIN_TOKEN_BITS:
        return None
    return (
        f"the token carries at most {bits:.0f} bits, under {MIN_TOKEN_BITS}: use e.g. "
        "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
    )


def check_token(token: str | None, host: str, server: str) -> None:
    """Refuse a weak token on an exposed address; warn about one on loopback.

    Args:
        token: the configured token (``None``/empty: no token, nothing to check).
        host: the address the server binds.
        server: the command, for the message (``serve-env``, ``serve-model``).

    Raises:
        ValueError: ``host`` is not loopback and :func:`token_weakness` finds the token weak (one
            line naming the estimate and how to make a strong one).
    """
    if not token:
        return
    weakness = token_weakness(token)
    if weakness is None:
        return
    from verigym.serve.hosting import is_loopback

    if not is_loopback(host):
        raise ValueError(f"{server}: refusing a weak token on {host}: {weakness}")
    logger.warning("%s: %s (accepted on loopback only)", server, weakness)


def network_of(address: str) -> str:
    """The network an address counts against: its ``/24`` (IPv4) or ``/64`` (IPv6); an IPv4-mapped
    IPv6 address counts as its IPv4 address; anything unparsable is its own network."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    prefix = 24 if ip.version == 4 else 64
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


class TokenGate:
    """ASGI middleware that lets a request through to ``app`` only with the right token.

    Args:
        app: the ASGI app behind the gate; its ``state`` is this gate's ``state``.
        token: the credential every HTTP request and WebSocket upgrade must carry.

    The token is checked first: the right one always goes through. A missing or wrong one gets 401
    (a refused upgrade, or a 1008 close where the server cannot refuse one) and counts against the
    client address and its network; past :data:`AUTH_FAILURE_LIMIT` (address) or
    :data:`AUTH_NETWORK_FAILURE_LIMIT` (network) in :data:`AUTH_WINDOW_SECONDS` a failure gets 429
    with ``Retry-After`` instead.
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token
        self.state = app.state
        self.failures = FailureLimiter(
            AUTH_FAILURE_LIMIT, AUTH_WINDOW_SECONDS, AUTH_TRACKED_ADDRESSES
        )
        self.network_failures = FailureLimiter(
            AUTH_NETWORK_FAILURE_LIMIT, AUTH_WINDOW_SECONDS, AUTH_TRACKED_ADDRESSES
        )

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        if authorized(self.token, list(scope.get("headers") or ())):
            await self.app(scope, receive, send)
            return
        address = (scope.get("client") or ("unknown",))[0]
        network = network_of(address)
        wait = max(self.failures.blocked(address), self.network_failures.blocked(network))
        if wait:
            detail = f"too many wrong tokens from {address} or {network}; retry in {wait:.0f} s"
            await _deny(scope, receive, send, 429, detail, {"Retry-After": str(int(wait) + 1)})
            return
        self.failures.fail(address)
        self.network_failures.fail(network)
        detail = "missing or wrong token (send Authorization: Bearer <token>)"
        await _deny(scope, receive, send, 401, detail, None)


async def _deny(
    scope: dict,
    receive: Callable,
    send: Callable,
    status: int,
    detail: str,
    headers: dict[str, str] | None,
) -> None:
    """Answer ``detail`` with ``status`` in the shared error body
    (:func:`verigym.serve.front.error_response`): an HTTP response or a refused upgrade."""
    from starlette.websockets import WebSocket

    from verigym.serve.front import error_response

    code = "rate_limited" if status == 429 else "unauthorized"
    response = error_response(status, detail, code=code, headers=headers)
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
    """Failed logins per key (an address or a network) in a fixed window, counted by the
    ``limits`` library (``FixedWindowRateLimiter`` over its in-memory storage: the window starts
    at a key's first failure); at most ``capacity`` keys are remembered, the least recently failed
    forgotten first (a bound ``limits`` does not keep, so this class keeps it).

    Args:
        limit: failures a key may have per window before :meth:`blocked` says so.
        window: seconds from a key's first failure until its count starts over (whole seconds).
        capacity: keys remembered at most.

    Raises:
        ValueError: ``window`` is not a whole number of seconds >= 1.
    """

    def __init__(self, limit: int, window: float, capacity: int) -> None:
        from limits import RateLimitItemPerSecond
        from limits.storage import MemoryStorage
        from limits.strategies import FixedWindowRateLimiter

        if window != int(window) or window < 1:
            raise ValueError(f"window must be a whole number of seconds >= 1, got {window!r}")
        self.limit, self.window, self.capacity = limit, window, capacity
        self._item = RateLimitItemPerSecond(limit, int(window))
        self._counts = FixedWindowRateLimiter(MemoryStorage())
        self._keys: OrderedDict[str, None] = OrderedDict()  # least recently failed first

    def __len__(self) -> int:
        """Keys remembered (at most ``capacity``)."""
        return len(self._keys)

    def blocked(self, key: str) -> float:
        """Seconds ``key`` must wait (0.0: not blocked)."""
        if self._counts.test(self._item, key):
            return 0.0
        reset, _ = self._counts.get_window_stats(self._item, key)
        return max(0.0, reset - time.time())

    def fail(self, key: str) -> None:
        """Count one failure of ``key``."""
        self._counts.hit(self._item, key)
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self.capacity:
            forgotten, _ = self._keys.popitem(last=False)
            self._counts.clear(self._item, forgotten)
