"""The HTTP front door both servers share (``verigym serve-env`` and ``verigym serve-model``).

Two parts, one under uvicorn and one in front of the app:

* :func:`uvicorn_protocol` -- uvicorn's HTTP protocol with a header timeout: a connection that has
  not sent a complete request's headers within ``header_timeout`` seconds of opening (or of its
  previous response) is closed, however slowly it trickles bytes. And when more than
  ``max_connections`` are open, the longest-idle one (no request in progress) is closed for each
  new one, so idle connections never refuse a request. uvicorn's own ``limit_concurrency`` (which
  counts idle connections, so 1,030 of them refused every request with 503) is not used.
* :class:`FrontDoor` -- ASGI middleware, placed behind :class:`verigym.serve.auth.TokenGate` so only
  requests with the right token count: at most ``max_requests`` HTTP requests in progress (more get
  503), each body at most ``max_body_bytes`` (413) and all bodies being read or held by requests in
  progress at most ``body_budget_bytes`` together (503 before the body is read where its
  ``Content-Length`` says so, else as soon as the budget is spent); a body must arrive within
  ``body_timeout`` seconds (408). The app gets the body already read, in one message.

:func:`loads_json` is ``json.loads`` with over-deep nesting raised as ``ValueError``: both servers
parse every client's JSON with it, so over-deep JSON is a 400.

Every error answer of both servers (the front door's refusals, the token gate's, the routes') is
:func:`error_response`: one body readable by both servers' clients, OpenAI's ``error`` object and
the env client's ``detail`` and ``code``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

__all__ = [
    "BODY_TIMEOUT_S",
    "HEADER_TIMEOUT_S",
    "FrontDoor",
    "error_body",
    "error_response",
    "guard",
    "json_response",
    "loads_json",
    "uvicorn_protocol",
]

HEADER_TIMEOUT_S = 10.0
"""Seconds a connection has to send a complete request's headers (from opening, or from its
previous response) before it is closed."""

BODY_TIMEOUT_S = 60.0
"""Seconds a request's body may take to arrive in full (longer: 408)."""


def loads_json(data: bytes | str) -> Any:
    """``json.loads(data)``; nesting deeper than the interpreter's recursion limit is a
    ``ValueError`` (``"JSON nested too deeply"``) instead of a ``RecursionError``.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``), not UTF-8, or nested too deeply.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def error_body(
    message: str,
    *,
    kind: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """The JSON of an error answer: OpenAI's error object and the env server's ``detail``/``code``.

    Args:
        message: what went wrong and what to do.
        kind: OpenAI's error ``type`` (``invalid_request_error``, ``not_found``, ``server_error``).
        code: the error's code (OpenAI's, e.g. ``model_not_found``, or the env protocol's, e.g.
            ``UNKNOWN_ENV``), or ``None``.
        param: the request field at fault, or ``None``.

    Returns:
        ``{"error": {"message", "type", "param", "code"}, "detail": message, "code": code or kind}``.
    """
    return {
        "error": {"message": message, "type": kind, "param": param, "code": code},
        "detail": message,
        "code": code or kind,
    }


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Any:
    """A JSON response written as Python's ``json`` writes it (``-Infinity`` log-probs included;
    Starlette's ``JSONResponse`` refuses them)."""
    from starlette.responses import Response

    return Response(
        json.dumps(body), status_code=status, headers=headers, media_type="application/json"
    )


def error_response(
    status: int,
    message: str,
    *,
    code: str | None = None,
    kind: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """An error answer with HTTP ``status`` and the body of :func:`error_body` (``kind``
    defaults to ``invalid_request_error`` under 500, else ``server_error``)."""
    if kind is None:
        kind = "invalid_request_error" if status < 500 else "server_error"
    body = error_body(message, kind=kind, code=code, param=param)
    return json_response(status, body, headers)


def uvicorn_protocol(*, header_timeout: float | None = None, max_connections: int = 1024) -> type:
    """uvicorn's HTTP protocol class (httptools when installed, else h11) with the header timeout
    and idle-connection eviction described in the module docstring; pass it as
    ``uvicorn.Config(http=...)``.

    Args:
        header_timeout: seconds a connection has to send a complete request's headers (``None``:
            :data:`HEADER_TIMEOUT_S`).
        max_connections: open connections above which the longest-idle one is closed for each new
            connection (connections with a request in progress are never closed for this).
    """
    try:
        import httptools  # noqa: F401
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol as base

    if header_timeout is None:
        header_timeout = HEADER_TIMEOUT_S
    attributes = {"header_timeout": float(header_timeout), "max_connections": int(max_connections)}
    return type(f"Guarded{base.__name__}", (_HeaderTimeout, base), attributes)


class _HeaderTimeout:
    """Mixin over a uvicorn HTTP protocol (see :func:`uvicorn_protocol`); it uses only the
    protocol's ``cycle``, ``transport``, ``loop`` and ``connections``."""

    header_timeout = HEADER_TIMEOUT_S
    max_connections = 1024
    _header_timer: asyncio.TimerHandle | None = None
    _header_cycle: Any = None
    _idle_since = 0.0

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_header_timer()
        if len(self.connections) > self.max_connections:  # type: ignore[attr-defined]
            self._close_longest_idle()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self._header_timer is not None and (
            self.cycle is not self._header_cycle  # type: ignore[attr-defined]
            or self.transport.get_protocol() is not self  # type: ignore[attr-defined]
        ):  # a request's headers are complete, or the connection became a WebSocket
            self._header_timer.cancel()
            self._header_timer = None

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():  # type: ignore[attr-defined]
            self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        loop = asyncio.get_running_loop()
        self._header_cycle = self.cycle  # type: ignore[attr-defined]
        self._idle_since = loop.time()
        self._header_timer = loop.call_later(self.header_timeout, self._header_deadline)

    def _awaiting_request(self) -> bool:
        """No request in progress on this connection (and it is still an HTTP connection)."""
        cycle = self.cycle  # type: ignore[attr-defined]
        return (cycle is None or cycle.response_complete) and (
            self.transport.get_protocol() is self  # type: ignore[attr-defined]
        )

    def _header_deadline(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():  # type: ignore[attr-defined]
            return
        if self.cycle is self._header_cycle and self._awaiting_request():  # type: ignore[attr-defined]
            self.transport.close()  # type: ignore[attr-defined]

    def _close_longest_idle(self) -> None:
        idle = [
            connection
            for connection in list(self.connections)  # type: ignore[attr-defined]
            if isinstance(connection, _HeaderTimeout)
            and connection is not self
            and connection._awaiting_request()
            and not connection.transport.is_closing()
        ]
        if idle:
            min(idle, key=lambda connection: connection._idle_since).transport.close()


def guard(app: Any, **limits: Any) -> Any:
    """``app`` with a :class:`FrontDoor` (``limits`` are its arguments) right in front of it:
    behind the :class:`~verigym.serve.auth.TokenGate` when ``app`` is one, so only requests with
    the right token count."""
    from verigym.serve.auth import TokenGate

    if isinstance(app, TokenGate):
        app.app = FrontDoor(app.app, **limits)
        return app
    return FrontDoor(app, **limits)


class FrontDoor:
    """ASGI middleware bounding requests in progress and the bytes of their bodies (see the module
    docstring).

    Args:
        app: the ASGI app behind it; its ``state`` is this middleware's ``state``.
        max_requests: HTTP requests in progress at once (more: 503 with ``Retry-After``).
        max_body_bytes: bytes one body may hold (more: 413).
        body_budget_bytes: bytes all bodies of requests in progress may hold together (more: 503).
        body_timeout: seconds a body may take to arrive (longer: 408).

    Attributes:
        requests: HTTP requests in progress.
        body_bytes: body bytes charged to requests in progress.
    """

    def __init__(
        self,
        app: Any,
        *,
        max_requests: int,
        max_body_bytes: int,
        body_budget_bytes: int,
        body_timeout: float = BODY_TIMEOUT_S,
    ) -> None:
        self.app = app
        self.state = app.state
        self.max_requests = max_requests
        self.max_body_bytes = max_body_bytes
        self.body_budget_bytes = max(body_budget_bytes, max_body_bytes)
        self.body_timeout = body_timeout
        self.requests = 0
        self.body_bytes = 0

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.requests >= self.max_requests:
            await error_response(
                503,
                f"the server has {self.max_requests} requests in progress; retry shortly",
                code="server_busy",
                headers={"Retry-After": "1"},
            )(scope, receive, send)
            return
        self.requests += 1
        charged = [0]
        try:
            try:
                body = await asyncio.wait_for(
                    self._read_body(scope, receive, charged), self.body_timeout
                )
            except asyncio.TimeoutError:
                body = error_response(
                    408, f"the body did not arrive within {self.body_timeout:.0f} s", code="timeout"
                )
            if not isinstance(body, bytes):
                await body(scope, receive, send)
                return
            await self._call_app(scope, receive, send, body)
        finally:
            self.requests -= 1
            self.body_bytes -= charged[0]

    async def _read_body(self, scope: dict, receive: Callable, charged: list[int]) -> Any:
        """The whole body as bytes, charged to the budget; or the refusal to send instead."""
        headers = dict(scope.get("headers") or ())
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                return error_response(400, "Content-Length is not a number", code="bad_request")
            if size > self.max_body_bytes:
                return self._too_large()
            if not self._charge(charged, size):
                return self._over_budget()
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # http.disconnect
                return error_response(
                    400, "the client left before its body arrived", code="client_gone"
                )
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_body_bytes:
                return self._too_large()
            if received > charged[0] and not self._charge(charged, received - charged[0]):
                return self._over_budget()
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _charge(self, charged: list[int], size: int) -> bool:
        if self.body_bytes + size > self.body_budget_bytes:
            return False
        self.body_bytes += size
        charged[0] += size
        return True

    def _too_large(self) -> Any:
        return error_response(
            413, f"the body must be at most {self.max_body_bytes} bytes", code="MESSAGE_TOO_LARGE"
        )

    def _over_budget(self) -> Any:
        return error_response(
            503,
            f"the server is reading {self.body_budget_bytes} bytes of bodies already; retry shortly",
            code="server_busy",
            headers={"Retry-After": "1"},
        )

    async def _call_app(self, scope: dict, receive: Callable, send: Callable, body: bytes) -> None:
        """Run the app on the read ``body``, handed over in one ``http.request`` message (the
        servers parse it with :func:`loads_json`: over-deep JSON is their 400, not a 500)."""
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
