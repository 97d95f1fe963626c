"""The ASGI app of ``verigym serve-env``: registered envs over the OpenEnv wire protocol.

Protocol (the one OpenEnv's ``EnvClient``/``GenericEnvClient`` speak; verigym adds one message):

WebSocket ``/ws`` -- one session, one env instance, JSON text frames::

    -> {"type": "reset", "data": {"seed": 0, "env_id": "verigym/Wordle-v0", "kwargs": {}, "options": null}}
    <- {"type": "observation", "data": {"observation": {"observation": ..., "info": {...},
                                                       "terminated": false, "truncated": false},
                                       "reward": null, "done": false}}
    -> {"type": "step", "data": {"action": "crane"}}
    <- {"type": "observation", "data": {... "reward": 0.0, "done": false}}
    -> {"type": "state"}        <- {"type": "state", "data": {"episode_id": ..., "step_count": 3, ...}}
    -> {"type": "make", "data": {"env_id": ..., "kwargs": {}}}   (verigym: build without reset)
    <- {"type": "spaces", "data": {"observation_space": ..., "action_space": ..., "metadata": ...}}
    -> {"type": "text", "data": {"method": "parse_action", "value": "click 3"}}   (verigym: the
    <- {"type": "text", "data": {"value": ...}}       env's TextInterface, for LanguageWrapper)
    -> {"type": "close"}        (the server closes the socket)
    <- {"type": "error", "data": {"message": "...", "code": "NOT_RESET", ...}}

Values are encoded by :mod:`verigym.serve.wire` (arrays keep dtype and shape). ``env_id`` may be
left out when the server serves one id. Error codes: OpenEnv's ``INVALID_JSON``,
``UNKNOWN_TYPE``, ``VALIDATION_ERROR``, ``EXECUTION_ERROR``, ``CAPACITY_REACHED``,
``FACTORY_ERROR``, ``SESSION_ERROR``, and verigym's ``UNKNOWN_ENV``, ``NOT_RESET``,
``MESSAGE_TOO_LARGE``, ``STEP_TIMEOUT``, ``IDLE_TIMEOUT``, ``ENV_CRASHED``, ``INVALID_KWARGS`` (a
constructor kwarg the env does not declare client-settable, or out of its bounds; ``"param"`` names
it; the session goes on). An ``EXECUTION_ERROR``
carries ``"exception"`` (``"module:qualname"`` of the class, e.g. ``"builtins:TypeError"``) and
keeps the session (any ``TypeError``, ``ValueError``, ``LookupError``, ``RuntimeError`` or Gymnasium
error: what an env raises on purpose); any other exception is ``ENV_CRASHED``; the
codes ``STEP_TIMEOUT``, ``IDLE_TIMEOUT``, ``ENV_CRASHED`` and ``CAPACITY_REACHED`` end it.

HTTP: ``GET /health``, ``GET /metadata``, ``GET /schema[?env_id=...&kwargs=<json>]``,
``POST /reset`` (stateless, as in OpenEnv: build, reset, close), ``POST /step`` (HTTP has no
session: a 409 protocol error that points to ``/ws``), ``GET /state``.

Concurrency: the event loop never runs an env call (make, reset, step, text, close), so it
answers ``/health`` while any session computes, and parses no large frame: a frame over
:data:`~verigym.serve.session.INLINE_FRAME_BYTES` is parsed and decoded on the server's parser
thread (one at a time); permessage-deflate is not offered, so a frame is no larger than what was sent. Every session runs its calls on a thread of its
own (:mod:`verigym.serve.threads`), in order, so its calls queue only behind its own and no other
client's call delays it; ``workers`` idle threads are kept for new sessions (a GUI thread keeps its
Chromium: Playwright objects are thread-bound). Every call is bounded by ``step_timeout``, counted
from the moment it starts running: a call that overruns ends its session, its env is closed at once
from another thread (a tool env's sandbox tree is killed, so the stuck call returns), and its thread
is retired (it exits when the call returns). ``/health`` counts those calls as ``stuck_workers``.
Plugin ids (and, with ``isolate=True``, MuJoCo ids) run in a child process per session
(:mod:`verigym.serve.isolated`): a native crash (segfault) ends that session with ``ENV_CRASHED``,
not the server. An env stepped in the server's own process that crashes natively still takes the
server down: see "Isolation" in ``docs/design.md``.

Security: a token, when configured, is checked by :class:`verigym.serve.auth.TokenGate` in front
of every route. ``/schema`` answers are cached for the :data:`SCHEMA_CACHE_SIZE` most recent
(id, kwargs) pairs.

The pieces: :mod:`verigym.serve.served` (the settings, :class:`~verigym.serve.served.ServeConfig`,
and what sessions share: the ids, the session threads, the kwargs policy),
:class:`EnvServer` (that shared state plus the HTTP routes), :class:`verigym.serve.session.Session`
(one client's env and its messages), :mod:`verigym.serve.threads` (the threads env calls run on) and
:func:`create_app`, which puts them on Starlette.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from typing import Any

from verigym.serve.front import error_response, loads_json
from verigym.serve.served import ProtocolError, ServeConfig, ServedEnvs
from verigym.serve.session import Session, describe_env, forget
from verigym.serve.wire import space_json_schema

__all__ = [
    "REAP_SEND_TIMEOUT_S",
    "SCHEMA_CACHE_SIZE",
    "EnvServer",
    "create_app",
]

logger = logging.getLogger(__name__)

REAP_SEND_TIMEOUT_S = 10.0
"""Seconds the idle reaper waits to tell a session ``IDLE_TIMEOUT`` and close it before it ends
the session without telling it (a client that never reads its replies: one held every session's
reaping, its own included, for as long as it stayed connected)."""

SCHEMA_CACHE_SIZE = 128
"""``/schema`` answers kept (least recently used dropped first): one per (env id, kwargs) pair."""


class EnvServer(ServedEnvs):
    """The env server: what its sessions share (:class:`~verigym.serve.served.ServedEnvs`), the
    idle-session reaper and the HTTP routes.

    Args:
        config: the server's settings.

    Attributes:
        schema_cache: ``/schema`` answers by (env id, canonical kwargs), most recent last.
        reaper: the task that closes idle sessions (while the app runs).

    The other attributes are :class:`~verigym.serve.served.ServedEnvs`'.
    """

    def __init__(self, config: ServeConfig):
        super().__init__(config)
        self.schema_cache: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self.reaper: asyncio.Task | None = None
        self.http_envs = 0  # envs built by HTTP /reset and /schema requests in progress

    # --- lifecycle -------------------------------------------------------------------------------
    async def reap(self) -> None:
        """Close, every few seconds, the sessions idle past ``idle_timeout`` (``IDLE_TIMEOUT``),
        each on a task of its own (:meth:`close_idle`), so a client that does not read its
        replies never holds up the others' reaping."""
        period = max(0.05, min(5.0, self.config.idle_timeout / 4))
        closing: set[asyncio.Task] = set()
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if (
                    not session.busy
                    and not session.reaped
                    and now - session.last_active > self.config.idle_timeout
                ):
                    session.reaped = True
                    task = asyncio.get_running_loop().create_task(self.close_idle(session))
                    closing.add(task)
                    task.add_done_callback(closing.discard)

    async def close_idle(self, session: Session) -> None:
        """Tell an idle session ``IDLE_TIMEOUT`` and close it, waiting at most
        :data:`REAP_SEND_TIMEOUT_S`: a client whose buffers are full (it sends but never reads)
        cannot take that, so its session is ended without it (:meth:`Session.abandon`)."""
        idle = ProtocolError(
            "IDLE_TIMEOUT",
            f"no message for --idle-timeout {self.config.idle_timeout:g} s; session closed",
            fatal=True,
        )

        async def tell() -> None:
            await session.websocket.send_text(idle.frame())
            await session.websocket.close(code=1000)

        try:
            await asyncio.wait_for(tell(), REAP_SEND_TIMEOUT_S)
        except asyncio.TimeoutError:
            session.abandon()
        except Exception:  # noqa: BLE001 - the client may already be gone
            pass

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        """Run the idle reaper while the app runs; then close every env and stop the pools."""
        reaper = None
        if self.config.idle_timeout:
            reaper = asyncio.get_running_loop().create_task(self.reap())
        try:
            yield
        finally:
            if reaper is not None:
                reaper.cancel()
            for session in list(self.sessions.values()):
                await session.drop_env()
            self.pool.shutdown()
            self.parser.shutdown(wait=False, cancel_futures=True)

    # --- routes --------------------------------------------------------------------------------
    async def websocket(self, websocket: Any) -> None:
        """``/ws``: one :class:`Session`, or ``CAPACITY_REACHED`` (HTTP 503 where the server can
        refuse the upgrade) when ``max_sessions`` are open."""
        limit = self.config.max_sessions
        if len(self.sessions) + self.http_envs < limit:
            await Session(self, websocket).run()
            return
        full = self.full()
        if "websocket.http.response" in (websocket.scope.get("extensions") or {}):
            await websocket.send_denial_response(error_response(503, str(full), code=full.code))
        else:
            await websocket.accept()
            await websocket.send_text(full.frame())
            await websocket.close(code=1013)

    def full(self) -> ProtocolError:
        """``CAPACITY_REACHED``: ``max_sessions`` sessions (WebSocket sessions and HTTP requests
        building an env) are open."""
        limit = self.config.max_sessions
        return ProtocolError(
            "CAPACITY_REACHED",
            f"server full: {limit} sessions are open (--max-sessions); retry later",
            active_sessions=len(self.sessions) + self.http_envs,
            max_sessions=limit,
        )

    @contextlib.contextmanager
    def http_env(self) -> Iterator[None]:
        """An HTTP request's env (``/reset``, an uncached ``/schema``) counted as a session while
        it lives, so ``max_sessions`` bounds every env the server holds.

        Raises:
            ProtocolError: ``CAPACITY_REACHED`` (HTTP 503) when ``max_sessions`` are open.
        """
        if len(self.sessions) + self.http_envs >= self.config.max_sessions:
            raise self.full()
        self.http_envs += 1
        try:
            yield
        finally:
            self.http_envs -= 1

    async def health(self, request: Any) -> Any:
        """``GET /health``: sessions, threads, stuck calls and steps served."""
        from starlette.responses import JSONResponse

        return JSONResponse(
            {
                "status": "healthy",
                "sessions": len(self.sessions),
                "max_sessions": self.config.max_sessions,
                "workers": sum(1 for w in list(self.pool.workers) if w.sessions),
                "stuck_workers": self.stuck_calls(),
                "steps": self.steps,
            }
        )

    async def metadata(self, request: Any) -> Any:
        """``GET /metadata``: OpenEnv's environment metadata, with the served ``env_ids``."""
        from starlette.responses import JSONResponse

        from verigym import __version__

        ids = sorted(self.allowed if self.allowed is not None else self.families)
        return JSONResponse(
            {
                "name": ids[0] if len(ids) == 1 else "verigym",
                "description": "verigym environments with verifiable rewards over the OpenEnv protocol",
                "version": __version__,
                "env_ids": ids,
                "readme_content": None,
                "author": "verigym",
                "documentation_url": None,
            }
        )

    async def schema(self, request: Any) -> Any:
        """``GET /schema[?env_id=...&kwargs=<json>]``: JSON schemas of the action, observation and
        state (404 for an unknown id, 400 for bad kwargs)."""
        from starlette.responses import JSONResponse

        try:
            env_id = self.resolve(request.query_params.get("env_id"))
            kwargs = loads_json(request.query_params.get("kwargs") or "{}")
            if not isinstance(kwargs, dict):
                raise ProtocolError("VALIDATION_ERROR", "kwargs must be a JSON object")
            key = (env_id, json.dumps(kwargs, sort_keys=True))
            if key in self.schema_cache:
                self.schema_cache.move_to_end(key)
            else:
                with self.http_env():
                    self.schema_cache[key] = await self.env_schema(env_id, kwargs)
                while len(self.schema_cache) > SCHEMA_CACHE_SIZE:
                    self.schema_cache.popitem(last=False)
            return JSONResponse(self.schema_cache[key])
        except ProtocolError as exc:
            return _error_response(exc)
        except ValueError as exc:
            return error_response(400, f"bad kwargs: {exc}", code="VALIDATION_ERROR")

    async def env_schema(self, env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The ``/schema`` answer for ``env_id`` made with the client's ``kwargs``.

        Raises:
            ProtocolError: what :meth:`Session.make` raises.
        """
        session = Session(self, session_id="schema")
        try:
            await session.make(env_id, kwargs)
            described = describe_env(session.env, env_id)
            action_space = session.env.action_space
            observation_space = session.env.observation_space
        finally:
            await session.drop_env()
        return {
            "action": {
                "title": f"{env_id} action",
                "type": "object",
                "properties": {"action": space_json_schema(action_space)},
                "required": ["action"],
                "x-gymnasium-space": described["action_space"],
            },
            "observation": {
                "title": f"{env_id} observation",
                "type": "object",
                "properties": {
                    "observation": space_json_schema(observation_space),
                    "info": {"type": "object"},
                    "terminated": {"type": "boolean"},
                    "truncated": {"type": "boolean"},
                },
                "x-gymnasium-space": described["observation_space"],
                "x-metadata": described["metadata"],
            },
            "state": {
                "type": "object",
                "properties": {
                    "episode_id": {"type": ["string", "null"]},
                    "step_count": {"type": "integer"},
                    "env_id": {"type": ["string", "null"]},
                },
            },
        }

    async def http_reset(self, request: Any) -> Any:
        """``POST /reset``, stateless as in OpenEnv: make, reset, close; the observation data. Its
        env counts against ``max_sessions`` while it lives (503 ``CAPACITY_REACHED`` when full),
        as an uncached ``/schema``'s does."""

        session = Session(self, session_id="http")
        try:
            with self.http_env():
                return await self._reset(session, request)
        except ProtocolError as exc:
            forget(exc)
            return _error_response(exc)
        except ValueError as exc:
            return error_response(400, f"Invalid JSON: {exc}", code="INVALID_JSON")
        finally:
            await session.drop_env()

    async def _reset(self, session: Session, request: Any) -> Any:
        """``/reset``'s work, its env counted as a session (:meth:`http_reset`)."""
        from starlette.responses import JSONResponse

        body = await request.body()
        if len(body) > self.config.max_message_bytes:
            raise ProtocolError("MESSAGE_TOO_LARGE", "request body over --max-message-bytes")
        session.frame_bytes = len(body)
        data = await session.parsed(loads_json, body) if body.strip() else {}
        if not isinstance(data, dict):
            raise ProtocolError("VALIDATION_ERROR", "the body must be a JSON object")
        frame = json.loads(await session.reset(data))
        return JSONResponse(frame["data"])

    async def http_step(self, request: Any) -> Any:
        """``POST /step``: HTTP has no session, so a 409 that points to ``/ws``."""
        return error_response(
            409,
            "HTTP requests have no session, so there is nothing to step: open the WebSocket /ws, "
            "send reset, then step",
            code="NOT_RESET",
        )

    async def http_state(self, request: Any) -> Any:
        """``GET /state``: HTTP has no session, so no episode."""
        from starlette.responses import JSONResponse

        return JSONResponse({"episode_id": None, "step_count": 0})


def _error_response(exc: ProtocolError) -> Any:
    """A protocol error as HTTP: 404 for ``UNKNOWN_ENV``, 503 (``Retry-After``) for
    ``CAPACITY_REACHED``, else 400."""
    if exc.code == "CAPACITY_REACHED":
        return error_response(503, str(exc), code=exc.code, headers={"Retry-After": "1"})
    status = 404 if exc.code == "UNKNOWN_ENV" else 400
    return error_response(status, str(exc), code=exc.code)


def create_app(config: ServeConfig | None = None) -> Any:
    """Build the Starlette app that serves ``config``'s ids (see the module docstring).

    Args:
        config: server settings (default :class:`ServeConfig()`: every verigym id, no token).

    Returns:
        An ASGI app (behind :class:`verigym.serve.auth.TokenGate` when ``config.token`` is set);
        ``app.state.server`` is its :class:`EnvServer` (the session table, for tests and /health).
    """
    from starlette.applications import Starlette
    from starlette.routing import Route, WebSocketRoute

    from verigym.serve.auth import TokenGate

    server = EnvServer(config or ServeConfig())
    app = Starlette(
        routes=[
            WebSocketRoute("/ws", server.websocket),
            Route("/health", server.health),
            Route("/metadata", server.metadata),
            Route("/schema", server.schema),
            Route("/reset", server.http_reset, methods=["POST"]),
            Route("/step", server.http_step, methods=["POST"]),
            Route("/state", server.http_state),
        ],
        lifespan=server.lifespan,
    )
    app.state.server = server
    return app if server.config.token is None else TokenGate(app, server.config.token)
