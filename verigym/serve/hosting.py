"""How both servers are hosted (``verigym serve-env`` and ``verigym serve-model``): exposure, the
listening socket and uvicorn, written once.

* :func:`exposed_token` -- the token a server on ``host`` runs with: ``$VERIGYM_TOKEN`` when none
  is given; refused when ``host`` is not loopback and there is none, or a weak one
  (:func:`verigym.serve.auth.check_token`).
* :func:`bind_socket`, :func:`http_url` -- the listening socket and the URL that reaches it.
* :func:`uvicorn_server` -- uvicorn with the shared front door: the header-timeout protocol of
  :func:`verigym.serve.front.uvicorn_protocol` and the :class:`verigym.serve.front.FrontDoor`
  behind the token gate.
* :class:`Hosted` -- an app bound to a socket, run on this thread (:meth:`Hosted.run`) or on a
  background thread (:meth:`Hosted.start`), stopped by :meth:`Hosted.stop`.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from typing import Any

__all__ = [
    "Hosted",
    "bind_socket",
    "exposed_token",
    "http_url",
    "is_loopback",
    "uvicorn_server",
]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposed_token(token: str | None, host: str, server: str, reach: str) -> str | None:
    """The token a server bound to ``host`` runs with: ``token``, else ``$VERIGYM_TOKEN``, else
    ``None``. A token under :data:`verigym.serve.auth.MIN_TOKEN_BITS` bits is logged as a warning
    on loopback.

    Args:
        token: the configured token (``None``/empty: none).
        host: the address the server binds.
        server: the command, for the messages (``serve-env``, ``serve-model``).
        reach: what anyone who reaches the port could do, for the refusal (``"use the model"``).

    Raises:
        ValueError: ``host`` is not loopback and there is no token, or a weak one.
    """
    from verigym.serve.auth import check_token

    token = token or os.environ.get("VERIGYM_TOKEN") or None
    if not is_loopback(host) and not token:
        raise ValueError(
            f"refusing to serve on {host} without a token: anyone who reaches the port could {reach}. "
            "Pass --token or set VERIGYM_TOKEN, or bind 127.0.0.1."
        )
    check_token(token, host, server)
    return token


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


def http_url(host: str, port: int) -> str:
    """``http://host:port`` with an IPv6 host in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def uvicorn_server(
    app: Any,
    host: str,
    *,
    max_requests: int,
    max_body_bytes: int,
    body_budget_bytes: int,
    **settings: Any,
) -> Any:
    """A ``uvicorn.Server`` for ``app`` behind the shared front door.

    Args:
        app: the ASGI app (a :class:`verigym.serve.auth.TokenGate` or not: the
            :class:`~verigym.serve.front.FrontDoor` goes behind the gate).
        host: the address it binds (uvicorn's ``host``; the socket comes from :func:`bind_socket`).
        max_requests: HTTP requests in progress at once (more: 503), and open connections above
            which the longest-idle one is closed for each new one.
        max_body_bytes: bytes one request body may hold (more: 413).
        body_budget_bytes: bytes the bodies of all requests in progress may hold together (more: 503).
        **settings: more ``uvicorn.Config`` settings (``lifespan``, ``ws_max_size``, ...).

    Raises:
        ImportError: uvicorn or Starlette is missing (``pip install verigym[serve]``).
    """
    import uvicorn

    from verigym.serve.front import guard, uvicorn_protocol

    guarded = guard(
        app,
        max_requests=max_requests,
        max_body_bytes=max_body_bytes,
        body_budget_bytes=body_budget_bytes,
    )
    config = {
        "host": host,
        "http": uvicorn_protocol(max_connections=max_requests),
        "log_level": "warning",
        "timeout_keep_alive": 30,
        **settings,
    }
    return uvicorn.Server(uvicorn.Config(guarded, **config))


class Hosted:
    """An ASGI app served by uvicorn on a socket bound at construction.

    Args:
        host, port: where to bind (port 0: a free port).
        name: the name of the background thread of :meth:`start`.
        **server: the arguments of :func:`uvicorn_server` after ``app`` and ``host``.

    Attributes:
        app: the guarded ASGI app uvicorn runs.
        address: the bound (host, port).
        url: ``http://host:port`` of the server.

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, app: Any, host: str, port: int, *, name: str, **server: Any) -> None:
        self._sock = bind_socket(host, port)
        try:
            self._server = uvicorn_server(app, host, **server)
        except BaseException:
            self._sock.close()
            raise
        self.app = self._server.config.app
        self.address: tuple[str, int] = tuple(self._sock.getsockname()[:2])  # type: ignore[assignment]
        self.url = http_url(host, self.address[1])
        self._name = name
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._stopped.set()

    def run(self) -> None:
        """Serve on this thread until :meth:`stop` or, on the main thread, SIGINT/SIGTERM."""
        self._stopped.clear()
        try:
            self._server.run(sockets=[self._sock])
        finally:
            self._stopped.set()

    def start(self, timeout: float = 30.0) -> None:
        """Serve on a background thread; return once it accepts connections.

        Raises:
            RuntimeError: it did not start within ``timeout`` seconds.
        """
        self._thread = threading.Thread(target=self.run, name=self._name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            raise RuntimeError(f"the server on {self.url} did not start")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and wait (at most ``timeout`` seconds) until :meth:`run` has returned."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        else:
            self._stopped.wait(timeout)

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self._sock.close()
