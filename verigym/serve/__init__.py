"""Serve verigym environments over the OpenEnv wire protocol (``verigym serve-env``); the model
server (``verigym serve-model``) is :mod:`verigym.serve.model`, and both are hosted by one HTTP
layer (:mod:`verigym.serve.hosting`, :mod:`verigym.serve.front`, :mod:`verigym.serve.auth`).

* :func:`create_app` -- the ASGI app (Starlette); :class:`ServeConfig` -- its settings.
* :func:`serve` -- run it on uvicorn until interrupted; :func:`start` -- run it on a background
  thread (tests, notebooks, the examples in docs/serving.md) and get a handle with ``url`` and ``stop()``.
* :mod:`verigym.serve.wire` -- the JSON encoding of values and spaces.
* :mod:`verigym.serve.ray_serve` -- the same app as replicas of a Ray Serve deployment.
* :mod:`verigym.serve.client` -- the client, a ``gymnasium.Env`` over the protocol (public name
  :mod:`verigym.remote`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from verigym.serve.app import create_app
from verigym.serve.hosting import Hosted, bind_socket, exposed_token, http_url, is_loopback
from verigym.serve.served import INLINE_FAMILIES, ServeConfig

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


def check_exposure(config: ServeConfig, host: str) -> ServeConfig:
    """``config`` with the token of ``VERIGYM_TOKEN`` when it has none
    (:func:`verigym.serve.hosting.exposed_token`).

    A token under :data:`verigym.serve.auth.MIN_TOKEN_BITS` bits is logged as a warning on
    loopback.

    Raises:
        ValueError: ``host`` is not loopback and there is no token, or a weak one.
    """
    token = exposed_token(config.token, host, "serve-env", "run envs (and tool sandboxes) here")
    return config if token == config.token else dataclasses.replace(config, token=token)


MAX_REQUESTS = 1024
"""HTTP requests ``serve-env`` serves at once (more get 503); idle connections do not count."""


def _hosted(config: ServeConfig, host: str, port: int) -> Hosted:
    """``config``'s app bound to ``host:port`` behind the shared front door."""
    return Hosted(
        create_app(config),
        host,
        port,
        name="verigym-serve",
        max_requests=MAX_REQUESTS,
        max_body_bytes=config.max_message_bytes,
        body_budget_bytes=4 * config.max_message_bytes,
        # larger frames: close 1009; between: MESSAGE_TOO_LARGE
        ws_max_size=config.max_message_bytes * 4 + 4096,
        # no permessage-deflate: a 16 KB compressed frame inflated to 16 MB of JSON (no verigym
        # client asks for it)
        ws_per_message_deflate=False,
        ws_ping_interval=20.0,
        ws_ping_timeout=60.0,
        lifespan="on",
    )


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
    hosted = _hosted(check_exposure(config, host), host, port)
    try:
        if ready is not None:
            ready(hosted.url)
        hosted.run()
    finally:
        hosted.close()


class ServerHandle:
    """A server running on a background thread of this process (see :func:`start`).

    Attributes:
        url: ``http://host:port`` of the server.
        app: the ASGI app (``app.state.server`` is the live session table).
    """

    def __init__(self, config: ServeConfig, host: str, port: int):
        self._hosted = _hosted(check_exposure(config, host), host, port)
        self.app = self._hosted.app
        self.url = self._hosted.url
        try:
            self._hosted.start()
        except BaseException:
            self._hosted.close()
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Close every session and stop serving (idempotent)."""
        self._hosted.stop(timeout)
        self._hosted.close()

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
