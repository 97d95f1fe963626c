"""Environments served by ``verigym serve-env`` (or any OpenEnv-protocol server of verigym ids),
used as local ``gymnasium.Env`` objects.

Example::

    import verigym.remote

    env = verigym.remote.make("verigym/GuessNumber-v0", url="http://127.0.0.1:8000")
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("50")

Spaces come from the server (rebuilt with :func:`verigym.serve.wire.space_from_json`), values
cross the wire losslessly, so the same seeds and actions give the same episodes as
``gym.make`` in process. Errors the env raises for programmer mistakes (``TypeError``,
``ValueError``, ...) are raised again here with the server's message; protocol failures raise
:class:`RemoteEnvError` with the server's error ``code``.

:class:`AsyncRemoteEnv` is the ``asyncio`` version for trainers that step thousands of sessions
at once from one thread (one WebSocket each, no thread per session).
"""

from __future__ import annotations

import builtins
import json
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import gymnasium as gym

from verigym.serve.wire import decode, encode, space_from_json

__all__ = ["AsyncRemoteEnv", "RemoteEnv", "RemoteEnvError", "RemoteTextEnv", "make", "make_async"]

_EXCEPTION_MODULES = ("builtins", "verigym.", "gymnasium.")


class RemoteEnvError(RuntimeError):
    """The server answered with a protocol error (or the connection broke).

    Attributes:
        code: the server's error code (``"NOT_RESET"``, ``"UNKNOWN_ENV"``, ``"STEP_TIMEOUT"``,
            ``"CAPACITY_REACHED"``, ...; ``"CONNECTION"`` when the socket closed).
        data: the whole error payload.
    """

    def __init__(self, message: str, code: str, data: dict[str, Any] | None = None):
        super().__init__(f"{message} [{code}]")
        self.code, self.data = code, data or {}


def _ws_url(url: str) -> str:
    parts = urlsplit(url if "://" in url else "http://" + url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"url must be http(s):// or ws(s)://, got {url!r}")
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/") + "/ws", "", ""))


def _token(url: str, token: str | None) -> str | None:
    if token is None:
        token = (
            urlsplit(url if "://" in url else "http://" + url).password
            or os.environ.get("VERIGYM_TOKEN")
            or None
        )
    return token


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _refused(url: str, exc: Any) -> RemoteEnvError:
    """The error for a refused WebSocket upgrade: ``CONNECTION`` for the token gate's refusals
    (401/403, 429), else the server's code (server full: 503 ``CAPACITY_REACHED``)."""
    status = exc.response.status_code
    try:
        body = json.loads(exc.response.body or b"{}")
    except ValueError:
        body = {}
    if status not in (401, 403, 429) and isinstance(body, dict) and body.get("code"):
        return RemoteEnvError(str(body.get("detail", "")), str(body["code"]), body)
    hint = ": missing or wrong token (token=... or $VERIGYM_TOKEN)" if status in (401, 403) else ""
    return RemoteEnvError(
        f"the server at {url} refused the connection (HTTP {status}){hint}", "CONNECTION"
    )


class _Refused(Exception):
    def __init__(self, response: Any):
        self.response = response


class _Closed(Exception):
    pass


class _BlockingWebSocket:
    """A WebSocket client on a blocking socket, driven in the caller's thread (websockets'
    sans-I/O protocol): no I/O thread and no thread hand-off per message, so a step costs one
    ``send`` and one ``recv`` system call pair on the caller's thread.

    Raises (from the constructor, :meth:`send`, :meth:`recv`): ``_Refused`` (the server answered
    the upgrade with another status), ``_Closed`` (the connection ended), ``TimeoutError``,
    ``OSError``.
    """

    def __init__(self, url: str, headers: dict[str, str], timeout: float):
        import socket

        from websockets.client import ClientProtocol
        from websockets.http11 import Response
        from websockets.uri import parse_uri

        uri = parse_uri(url)
        sock = socket.create_connection((uri.host, uri.port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if uri.secure:
            import ssl

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=uri.host)
        self._sock, self._messages, self._parts = sock, [], []
        self._protocol = ClientProtocol(uri, max_size=None)
        request = self._protocol.connect()
        request.headers.update(headers)
        self._protocol.send_request(request)
        self._flush()
        while True:
            for event in self._read():
                if isinstance(event, Response):
                    if event.status_code != 101 or self._protocol.handshake_exc is not None:
                        self.close()
                        raise _Refused(event)
                    return

    def _flush(self) -> None:
        for data in self._protocol.data_to_send():
            if data:
                self._sock.sendall(data)

    def _read(self) -> list[Any]:
        data = self._sock.recv(1 << 16)
        if data:
            self._protocol.receive_data(data)
        else:
            self._protocol.receive_eof()
        events = self._protocol.events_received()
        self._flush()  # pongs, close replies
        if not data and not events:
            raise _Closed("the server closed the connection")
        return events

    def send(self, text: str) -> None:
        from websockets.protocol import State

        if self._protocol.state is not State.OPEN:
            raise _Closed("the connection is closed")
        self._protocol.send_text(text.encode("utf-8", "surrogatepass"))
        self._flush()

    def recv(self, timeout: float) -> str:
        from websockets.frames import Opcode

        self._sock.settimeout(timeout)
        while not self._messages:
            for frame in self._read():
                if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                    self._parts.append(frame.data)
                    if frame.fin:
                        self._messages.append(
                            b"".join(self._parts).decode("utf-8", "surrogatepass")
                        )
                        self._parts = []
                elif frame.opcode is Opcode.CLOSE and not self._messages:
                    raise _Closed(
                        f"the server closed the session ({self._protocol.close_code} {self._protocol.close_reason})"
                    )
        return self._messages.pop(0)

    def close(self) -> None:
        try:
            self._protocol.send_close()
            self._flush()
        except Exception:  # noqa: BLE001 - already closed
            pass
        self._sock.close()


def _error(data: dict[str, Any]) -> Exception:
    message, code = str(data.get("message", "unknown error")), str(data.get("code", "UNKNOWN"))
    if code == "EXECUTION_ERROR":
        cls = _exception_class(data.get("exception"))
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - a class with another signature
            return RuntimeError(message)
    return RemoteEnvError(message, code, data)


def _exception_class(name: Any) -> type[Exception]:
    """The exception class ``"module:qualname"`` names, if it is a builtin, verigym or Gymnasium
    exception (nothing else is imported); ``RuntimeError`` otherwise."""
    import importlib

    if isinstance(name, str) and ":" in name:
        module_name, _, qualname = name.partition(":")
        if module_name == "builtins" or module_name.startswith(_EXCEPTION_MODULES[1:]):
            try:
                obj: Any = importlib.import_module(module_name)
                for part in qualname.split("."):
                    obj = getattr(obj, part)
            except (ImportError, AttributeError):
                obj = None
            if isinstance(obj, type) and issubclass(obj, Exception):
                return obj
    return RuntimeError


def _parse(raw: str | bytes, expect: str) -> dict[str, Any]:
    frame = json.loads(raw)
    if frame.get("type") == "error":
        raise _error(frame.get("data") or {})
    if frame.get("type") != expect:
        raise RemoteEnvError(f"expected a {expect!r} frame, got {str(frame)[:200]}", "PROTOCOL")
    return frame.get("data") or {}


def _reset_message(env_id: str, kwargs: dict[str, Any], seed: int | None, options: Any) -> str:
    return json.dumps(
        {
            "type": "reset",
            "data": {
                "env_id": env_id,
                "kwargs": encode(kwargs),
                "seed": seed,
                "options": encode(options),
            },
        }
    )


def _step_result(data: dict[str, Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    body = data["observation"]
    return (
        decode(body["observation"]),
        float(data["reward"]),
        bool(body["terminated"]),
        bool(body["truncated"]),
        decode(body["info"]),
    )


def _reset_result(data: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    body = data["observation"]
    return decode(body["observation"]), decode(body["info"])


def _apply_description(env: Any, description: dict[str, Any]) -> None:
    env.observation_space = space_from_json(description["observation_space"])
    env.action_space = space_from_json(description["action_space"])
    metadata = decode(description.get("metadata") or {})
    env.metadata = {**metadata, "render_modes": []}
    env.remote_max_episode_steps = description.get("max_episode_steps")
    env.text_methods = tuple(description.get("text_interface") or ())


class RemoteEnv(gym.Env):
    """A ``gymnasium.Env`` whose env instance lives on a server (one WebSocket session).

    Args:
        env_id: a registered id the server serves.
        url: the server's base URL (``http://host:port``; ``ws://`` works too; a password in the
            URL, ``http://user:TOKEN@host:port``, is used as the token).
        token: credential for a server started with ``--token`` (default ``VERIGYM_TOKEN``).
        timeout: seconds to wait for any answer (connect included).
        **kwargs: constructor arguments of the env, sent to the server.

    Raises:
        RemoteEnvError: the server refused (``UNKNOWN_ENV``, ``CAPACITY_REACHED``, a wrong token
            as ``CONNECTION``, ...).
        TypeError, ValueError: the env's constructor rejected ``kwargs``.

    Pickling and ``copy.deepcopy`` open a new session and replay the current episode from its
    seeded reset, which gives an equal, independent env for deterministic envs.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        env_id: str,
        *,
        url: str,
        token: str | None = None,
        timeout: float = 120.0,
        **kwargs: Any,
    ):
        self.env_id, self.url, self.timeout, self.kwargs = env_id, url, float(timeout), dict(kwargs)
        self._token = _token(url, token)
        self._ws: Any = None
        self._replay: list[str] = []
        self._connect()

    def _connect(self) -> None:
        try:
            self._ws = _BlockingWebSocket(_ws_url(self.url), _headers(self._token), self.timeout)
        except _Refused as exc:
            raise _refused(self.url, exc) from None
        except (OSError, _Closed) as exc:
            raise RemoteEnvError(f"cannot reach {self.url}: {exc}", "CONNECTION") from None
        description = _parse(
            self._call(
                json.dumps(
                    {"type": "make", "data": {"env_id": self.env_id, "kwargs": encode(self.kwargs)}}
                )
            ),
            "spaces",
        )
        _apply_description(self, description)
        if type(self) is RemoteEnv and {"instructions", "observation_text", "parse_action"} <= set(
            self.text_methods
        ):
            self.__class__ = RemoteTextEnv

    def _call(self, message: str) -> str | bytes:
        if self._ws is None:
            raise RemoteEnvError("the env is closed", "CLOSED")
        try:
            self._ws.send(message)
            return self._ws.recv(self.timeout)
        except TimeoutError:
            self._close_socket()
            raise RemoteEnvError(
                f"no answer from {self.url} within {self.timeout:g} s", "TIMEOUT"
            ) from None
        except (_Closed, OSError) as exc:
            ws, self._ws = self._ws, None
            ws.close()
            raise RemoteEnvError(
                f"the connection to {self.url} closed ({exc})", "CONNECTION"
            ) from None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        message = _reset_message(self.env_id, self.kwargs, seed, options)
        result = _reset_result(_parse(self._call(message), "observation"))
        if seed is not None:
            self._replay = [message]
        elif self._replay:
            self._replay.append(message)
        return result

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        message = json.dumps({"type": "step", "data": {"action": encode(action)}})
        result = _step_result(_parse(self._call(message), "observation"))
        if self._replay:
            self._replay.append(message)
        return result

    def state(self) -> dict[str, Any]:
        """The server's view of this session: ``episode_id``, ``step_count``, ``seed``, ..."""
        return _parse(self._call(json.dumps({"type": "state"})), "state")

    def _close_socket(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.send(json.dumps({"type": "close"}))
            except Exception:  # noqa: BLE001 - best effort
                pass
            ws.close()

    def close(self) -> None:
        """End the session (the server closes its env instance); idempotent."""
        self._close_socket()

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k != "_ws"}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._ws = None
        self._connect()
        for message in self._replay:
            _parse(self._call(message), "observation")

    def __repr__(self) -> str:
        return f"RemoteEnv({self.env_id!r} at {self.url})"


class RemoteTextEnv(RemoteEnv):
    """A :class:`RemoteEnv` whose server-side env implements :class:`verigym.TextInterface`: the
    text view (``LanguageWrapper``) uses the env's own formatter and parser, over the wire."""

    def _text(self, method: str, *args: Any) -> Any:
        message = {
            "type": "text",
            "data": {"method": method, **({"value": encode(args[0])} if args else {})},
        }
        return decode(_parse(self._call(json.dumps(message)), "text")["value"])

    def instructions(self) -> str:
        """The env's rules and action format."""
        return self._text("instructions")

    def observation_text(self, observation: Any) -> str:
        """The env's text rendering of ``observation``."""
        return self._text("observation_text", observation)

    def parse_action(self, text: str) -> Any:
        """The env's parser (raises :class:`verigym.ActionParseError` like the env)."""
        return self._text("parse_action", text)

    @property
    def action_text(self) -> Any:
        """The env's ``action_text(action) -> str``, if the env has one (else ``AttributeError``)."""
        if "action_text" not in self.text_methods:
            raise AttributeError("action_text")
        return lambda action: self._text("action_text", action)


def make(
    env_id: str, *, url: str, token: str | None = None, timeout: float = 120.0, **kwargs: Any
) -> RemoteEnv:
    """Connect to ``env_id`` on the server at ``url`` (see :class:`RemoteEnv`)."""
    return RemoteEnv(env_id, url=url, token=token, timeout=timeout, **kwargs)


class AsyncRemoteEnv:
    """The ``asyncio`` client: ``await env.reset(seed=...)``, ``await env.step(action)``.

    Build it with ``await AsyncRemoteEnv.connect(env_id, url=..., **kwargs)`` (or
    :func:`make_async`); it has ``observation_space``, ``action_space`` and ``metadata`` like
    :class:`RemoteEnv` and returns the same tuples. Thousands can run on one event loop.
    """

    def __init__(
        self, env_id: str, url: str, token: str | None, timeout: float, kwargs: dict[str, Any]
    ):
        self.env_id, self.url, self.timeout, self.kwargs = env_id, url, timeout, kwargs
        self._token = token
        self._ws: Any = None
        self.observation_space: gym.Space | None = None
        self.action_space: gym.Space | None = None
        self.metadata: dict[str, Any] = {}

    @classmethod
    async def connect(
        cls,
        env_id: str,
        *,
        url: str,
        token: str | None = None,
        timeout: float = 120.0,
        **kwargs: Any,
    ) -> AsyncRemoteEnv:
        """Open the session and fetch the spaces (raises like :class:`RemoteEnv`)."""
        import asyncio

        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus

        env = cls(env_id, url, _token(url, token), float(timeout), dict(kwargs))
        try:
            env._ws = await asyncio.wait_for(
                connect(
                    _ws_url(url),
                    additional_headers=_headers(env._token),
                    max_size=None,
                    compression=None,
                    proxy=None,
                ),
                timeout,
            )
        except InvalidStatus as exc:
            raise _refused(url, exc) from None
        except OSError as exc:
            raise RemoteEnvError(f"cannot reach {url}: {exc}", "CONNECTION") from None
        _apply_description(
            env,
            _parse(
                await env._call(
                    json.dumps(
                        {"type": "make", "data": {"env_id": env_id, "kwargs": encode(env.kwargs)}}
                    )
                ),
                "spaces",
            ),
        )
        return env

    async def _call(self, message: str) -> str | bytes:
        import asyncio

        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise RemoteEnvError("the env is closed", "CLOSED")
        try:
            await self._ws.send(message)
            return await asyncio.wait_for(self._ws.recv(), self.timeout)
        except ConnectionClosed as exc:
            self._ws = None
            raise RemoteEnvError(
                f"the connection to {self.url} closed ({exc})", "CONNECTION"
            ) from None
        except builtins.TimeoutError:
            await self.close()
            raise RemoteEnvError(
                f"no answer from {self.url} within {self.timeout:g} s", "TIMEOUT"
            ) from None

    async def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        return _reset_result(
            _parse(
                await self._call(_reset_message(self.env_id, self.kwargs, seed, options)),
                "observation",
            )
        )

    async def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return _step_result(
            _parse(
                await self._call(json.dumps({"type": "step", "data": {"action": encode(action)}})),
                "observation",
            )
        )

    async def close(self) -> None:
        """End the session; idempotent."""
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                await ws.send(json.dumps({"type": "close"}))
            except Exception:  # noqa: BLE001 - best effort
                pass
            await ws.close()

    async def __aenter__(self) -> AsyncRemoteEnv:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def make_async(
    env_id: str, *, url: str, token: str | None = None, timeout: float = 120.0, **kwargs: Any
) -> AsyncRemoteEnv:
    """``await make_async(env_id, url=...)``: an :class:`AsyncRemoteEnv` with an open session."""
    return await AsyncRemoteEnv.connect(env_id, url=url, token=token, timeout=timeout, **kwargs)
