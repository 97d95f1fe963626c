"""Serve verigym environments over the OpenEnv wire protocol (``verigym serve-env``).

* :func:`create_app` -- the ASGI app (Starlette); :class:`ServeConfig` -- its settings.
* :func:`serve` -- run it on uvicorn until interrupted; :func:`start` -- run it on a background
  thread (tests, notebooks, the examples in docs/serving.md) and get a handle with ``url`` and ``stop()``.
* :mod:`verigym.serve.wire` -- the JSON encoding of values and spaces.
* :mod:`verigym.serve.ray_serve` -- the same app as replicas of a Ray Serve deployment.
* :mod:`verigym.serve.client` -- the client, a ``gymnasium.Env`` over the protocol (public name
  :mod:`verigym.remote`).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import threading
from typing import Any

from verigym.serve.app import INLINE_FAMILIES, ServeConfig, create_app

__all__ = [
    "INLINE_FAMILIES",
    "ServeConfig",
    "ServerHandle",
    "bind_socket",
    "check_exposure",
    "create_app",
    "http_url",
    "is_loopback",
    "serve",
    "start",
]

logger = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(config: ServeConfig, host: str) -> ServeConfig:
    """``config`` with the token of ``VERIGYM_TOKEN`` when it has none.

    A token under :data:`verigym.serve.auth.MIN_TOKEN_BITS` bits is logged as a warning on
    loopback.

    Raises:
        ValueError: ``host`` is not loopback and there is no token, or a weak one.
    """
    if config.token is None and os.environ.get("VERIGYM_TOKEN"):
        import dataclasses

        config = dataclasses.replace(config, token=os.environ["VERIGYM_TOKEN"])
    if not is_loopback(host) and not config.token:
        raise ValueError(
            f"refusing to serve on {host} without a token: anyone who reaches the port could run envs "
            "(and tool sandboxes) here. Pass --token or set VERIGYM_TOKEN, or bind 127.0.0.1."
        )
    from verigym.serve.auth import check_token

    check_token(config.token, host, "serve-env")
    return config


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when the host has a colon; ``port=0`` picks a
    free port), inheritable so uvicorn workers can share it. Both servers bind through it.

    Raises:
        OSError: the address is taken or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


MAX_REQUESTS = 1024
"""HTTP requests ``serve-env`` serves at once (more get 503); idle connections do not count."""


def _uvicorn_server(config: ServeConfig, host: str) -> Any:
    import uvicorn

    from verigym.serve.front import guard, uvicorn_protocol

    app = guard(
        create_app(config),
        max_requests=MAX_REQUESTS,
        max_body_bytes=config.max_message_bytes,
        body_budget_bytes=4 * config.max_message_bytes,
    )
    settings = uvicorn.Config(
        app,
        host=host,
        http=uvicorn_protocol(max_connections=MAX_REQUESTS),
        log_level="warning",
        ws_max_size=config.max_message_bytes * 4
        + 4096,  # larger frames: close 1009; between: MESSAGE_TOO_LARGE
        ws_ping_interval=20.0,
        ws_ping_timeout=60.0,
        timeout_keep_alive=30,
        lifespan="on",
    )
    return uvicorn.Server(settings)


def serve(
    config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8000, ready: Any = None
) -> None:
    """Serve ``config`` on ``host:port`` until interrupted (SIGINT/SIGTERM).

    Args:
        config: what to serve.
        host: address to bind; anything but loopback requires ``config.token``.
        port: TCP port; 0 picks a free one.
        ready: called with the base URL (``http://host:port``) once the socket is bound.

    Raises:
        ValueError: a non-loopback host without a token.
        OSError: the address cannot be bound.
    """
    config = check_exposure(config, host)
    sock = bind_socket(host, port)
    server = _uvicorn_server(config, host)
    if ready is not None:
        ready(http_url(host, sock.getsockname()[1]))
    server.run(sockets=[sock])


def http_url(host: str, port: int) -> str:
    """``http://host:port`` with an IPv6 host in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class ServerHandle:
    """A server running on a background thread of this process (see :func:`start`).

    Attributes:
        url: ``http://host:port`` of the server.
        app: the ASGI app (``app.state.server`` is the live session table).
    """

    def __init__(self, config: ServeConfig, host: str, port: int):
        config = check_exposure(config, host)
        self._sock = bind_socket(host, port)
        self._server = _uvicorn_server(config, host)
        self.app = self._server.config.app
        self.url = http_url(host, self._sock.getsockname()[1])
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name="verigym-serve",
            daemon=True,
        )
        self._thread.start()
        import time

        deadline = time.monotonic() + 30
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            raise RuntimeError(f"the server on {self.url} did not start")

    def stop(self, timeout: float = 10.0) -> None:
        """Close every session and stop serving (idempotent)."""
        self._server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start(*env_ids: str, host: str = "127.0.0.1", port: int = 0, **settings: Any) -> ServerHandle:
    """Serve ``env_ids`` from a background thread of this process.

    Args:
        *env_ids: ids to serve (none: every verigym id).
        host, port: where to bind (port 0: a free port).
        **settings: other :class:`ServeConfig` fields (``max_sessions``, ``token``, ...).

    Returns:
        A handle; use it as a context manager or call ``stop()``.

    Example::

        with verigym.serve.start("verigym/GuessNumber-v0") as server:
            env = verigym.remote.make("verigym/GuessNumber-v0", url=server.url)
    """
    return ServerHandle(ServeConfig(env_ids=tuple(env_ids), **settings), host, port)
