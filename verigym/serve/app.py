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
answers ``/health`` while any session computes. Every session runs its calls on a thread of its
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

The pieces: :class:`ServeConfig` (settings), :class:`EnvServer` (what sessions share: the ids, the
session threads, the kwargs policy; the HTTP routes), :class:`verigym.serve.session.Session` (one
client's env and its messages), :mod:`verigym.serve.threads` (the threads env calls run on) and
:func:`create_app`, which puts them on Starlette.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from verigym.serve.front import loads_json
from verigym.serve.session import ProtocolError, Session, describe_env, forget
from verigym.serve.threads import PinnedPool
from verigym.serve.wire import WireError, decode, frame_budget, space_json_schema

__all__ = [
    "INLINE_FAMILIES",
    "ISOLATED_FAMILIES",
    "SCHEMA_CACHE_SIZE",
    "EnvServer",
    "ServeConfig",
    "create_app",
]

logger = logging.getLogger(__name__)

INLINE_FAMILIES = frozenset({"text", "grid", "multiagent"})
"""Families whose envs are pure Python in the server's process (no sandbox, browser or native
library). Kept for compatibility: every session now runs on a thread of its own."""

ISOLATED_FAMILIES = frozenset({"mujoco"})
"""Families that ``--isolate`` runs in a child process per session, besides every plugin id."""

SCHEMA_CACHE_SIZE = 128
"""``/schema`` answers kept (least recently used dropped first): one per (env id, kwargs) pair."""


@dataclass(frozen=True)
class ServeConfig:
    """Settings of one server.

    Attributes:
        env_ids: the ids a session may ask for; empty: every registered verigym Gymnasium id
            (of ``family`` if given).
        family: restrict the default ids to this family.
        max_sessions: open WebSocket sessions at most; one more gets ``CAPACITY_REACHED``.
        idle_timeout: seconds without a message after which a session is closed
            (``IDLE_TIMEOUT``); 0 disables.
        step_timeout: seconds one make/reset/step/text call of any env may take before its
            session ends with ``STEP_TIMEOUT`` and its env is closed (a sandbox tree is killed);
            0 disables.
        token: required credential (``None``: none; mandatory for a non-loopback host).
        max_message_bytes: larger frames get ``MESSAGE_TOO_LARGE`` (the session goes on).
        workers: idle session threads kept for new sessions (each session runs on a thread of
            its own; this bounds no session).
        allow_kwargs: constructor parameters clients may set beyond those the env declares
            client-settable (``--allow-kwargs``; see :func:`verigym.registration.untrusted_kwargs`);
            declared bounds still apply, and ``unsafe`` is never accepted.
        isolate: which envs run in a child process per session
            (:class:`verigym.serve.isolated.IsolatedEnv`), so that a native crash ends only that
            session: ``None`` (the default) plugin ids, ``True`` (``--isolate``) plugin and
            MuJoCo ids, ``False`` (``--no-isolate``) none.
    """

    env_ids: tuple[str, ...] = ()
    family: str | None = None
    max_sessions: int = 1024
    idle_timeout: float = 600.0
    step_timeout: float = 120.0
    token: str | None = None
    max_message_bytes: int = 16 << 20
    workers: int = 32
    allow_kwargs: tuple[str, ...] = ()
    isolate: bool | None = None

    def __post_init__(self) -> None:
        from verigym.kwargs_policy import NEVER_REMOTE

        object.__setattr__(self, "allow_kwargs", tuple(self.allow_kwargs))
        never = sorted(set(self.allow_kwargs) & set(NEVER_REMOTE))
        if never:
            raise ValueError(
                f"--allow-kwargs cannot allow {', '.join(never)}: it is never accepted from a client"
            )
        if self.max_sessions < 1 or self.workers < 1:
            raise ValueError(
                f"max_sessions and workers must be >= 1, got {self.max_sessions}, {self.workers}"
            )
        if self.idle_timeout < 0 or self.step_timeout < 0:
            raise ValueError("idle_timeout and step_timeout must be >= 0 (0 disables)")
        if self.max_message_bytes < 1024:
            raise ValueError(f"max_message_bytes must be >= 1024, got {self.max_message_bytes}")


class EnvServer:
    """What the sessions of one server share, and its HTTP routes.

    Args:
        config: the server's settings.

    Attributes:
        sessions: the open WebSocket sessions by id.
        families: the family of every registered verigym Gymnasium id.
        pool: the sessions' threads (one per session, idle ones kept for reuse).
        plugin_ids: the served ids of plugins (outside ``verigym/``), isolated by default.
        schema_cache: ``/schema`` answers by (env id, canonical kwargs), most recent last.
        steps: env steps served so far.
    """

    def __init__(self, config: ServeConfig):
        import verigym  # noqa: F401  (registers the verigym ids)
        from verigym.registration import rows

        self.config = config
        if config.env_ids:
            self.allowed: frozenset[str] | None = frozenset(config.env_ids)
        elif config.family:
            self.allowed = frozenset(r.id for r in rows(config.family) if r.api == "gymnasium")
        else:
            self.allowed = None  # any verigym gymnasium id
        self.families = {r.id: r.family for r in rows() if r.api == "gymnasium"}
        self.plugin_ids = {i for i in self.families if not i.startswith("verigym/")}
        self.sessions: dict[str, Session] = {}
        self.pool = PinnedPool(config.workers)
        self.schema_cache: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self.reaper: asyncio.Task | None = None
        self.steps = 0

    # --- env ids and kwargs --------------------------------------------------------------------
    @property
    def default_id(self) -> str | None:
        return (
            next(iter(self.allowed))
            if self.allowed is not None and len(self.allowed) == 1
            else None
        )

    def resolve(self, env_id: Any) -> str:
        """``env_id`` checked against the served ids (``None``: the only one served).

        Raises:
            ProtocolError: ``VALIDATION_ERROR`` (no id, or not a string), ``UNKNOWN_ENV``.
        """
        if env_id is None:
            env_id = self.default_id
            if env_id is None:
                raise ProtocolError(
                    "VALIDATION_ERROR",
                    "this server serves several ids; name one with data.env_id (GET /metadata lists them)",
                )
        if not isinstance(env_id, str):
            raise ProtocolError(
                "VALIDATION_ERROR", f"env_id must be a string, got {type(env_id).__name__}"
            )
        if self.allowed is not None:
            if env_id not in self.allowed:
                raise ProtocolError(
                    "UNKNOWN_ENV",
                    f"{env_id} is not served here; served ids: {', '.join(sorted(self.allowed)[:20])}",
                )
        elif env_id not in self.families:
            from verigym.registration import unknown_id_message

            raise ProtocolError(
                "UNKNOWN_ENV",
                unknown_id_message(env_id)
                if env_id.startswith("verigym/")
                else f"{env_id} is not a verigym Gymnasium id",
            )
        if env_id not in gym.registry:
            raise ProtocolError(
                "UNKNOWN_ENV", f"{env_id} is not registered in this server's Gymnasium registry"
            )
        return env_id

    def isolated(self, env_id: str) -> bool:
        """Whether ``env_id`` runs in a child process per session (``ServeConfig.isolate``)."""
        if self.config.isolate is False:
            return False
        if env_id in self.plugin_ids:
            return True
        return bool(self.config.isolate) and self.families.get(env_id) in ISOLATED_FAMILIES

    def decode(self, value: Any, frame_bytes: int | None = None) -> Any:
        """:func:`verigym.serve.wire.decode` with the arrays a frame may declare bounded by its
        length (:func:`verigym.serve.wire.frame_budget`: 64 KiB plus 16 bytes per byte received,
        at most 4x ``max_message_bytes``), checked before anything is allocated: a 97-byte frame
        cannot make the server allocate 64 MB.

        Args:
            value: parsed JSON of one value of a frame (an action, options, kwargs).
            frame_bytes: length of the frame it came in; ``None``: a full-size frame's budget.

        Raises:
            WireError: malformed, or its arrays declare more than the budget.
        """
        cap = 4 * self.config.max_message_bytes
        return decode(
            value, max_bytes=cap if frame_bytes is None else frame_budget(frame_bytes, cap)
        )

    def stuck_calls(self) -> int:
        """Env calls still running for sessions that ended on ``STEP_TIMEOUT``."""
        return self.pool.retired

    def checked_kwargs(
        self, env_id: str, kwargs: dict[str, Any], frame_bytes: int | None = None
    ) -> dict[str, Any]:
        """A client's decoded kwargs, refused with ``INVALID_KWARGS`` unless the env declares them
        client-settable (or the operator allowed them) and they are within bounds; ``frame_bytes``
        as in :meth:`decode`."""
        from verigym.registration import KwargsRefused, untrusted_kwargs

        try:
            decoded = self.decode(kwargs, frame_bytes)
            return untrusted_kwargs(env_id, decoded, allow=self.config.allow_kwargs)
        except WireError as exc:
            raise ProtocolError("VALIDATION_ERROR", f"kwargs: {exc}") from None
        except KwargsRefused as exc:
            raise ProtocolError("INVALID_KWARGS", str(exc), param=exc.param) from None

    # --- lifecycle -------------------------------------------------------------------------------
    async def reap(self) -> None:
        """Close, every few seconds, the sessions idle past ``idle_timeout`` (``IDLE_TIMEOUT``)."""
        period = max(0.05, min(5.0, self.config.idle_timeout / 4))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if not session.busy and now - session.last_active > self.config.idle_timeout:
                    idle = ProtocolError(
                        "IDLE_TIMEOUT",
                        f"no message for --idle-timeout {self.config.idle_timeout:g} s; session closed",
                        fatal=True,
                    )
                    with contextlib.suppress(Exception):  # the client may already be gone
                        await session.websocket.send_text(idle.frame())
                        await session.websocket.close(code=1000)

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

    # --- routes --------------------------------------------------------------------------------
    async def websocket(self, websocket: Any) -> None:
        """``/ws``: one :class:`Session`, or ``CAPACITY_REACHED`` (HTTP 503 where the server can
        refuse the upgrade) when ``max_sessions`` are open."""
        from starlette.responses import JSONResponse

        limit = self.config.max_sessions
        if len(self.sessions) < limit:
            await Session(self, websocket).run()
            return
        full = ProtocolError(
            "CAPACITY_REACHED",
            f"server full: {limit} sessions are open (--max-sessions); retry later",
            active_sessions=len(self.sessions),
            max_sessions=limit,
        )
        if "websocket.http.response" in (websocket.scope.get("extensions") or {}):
            await websocket.send_denial_response(
                JSONResponse({"detail": str(full), "code": full.code}, status_code=503)
            )
        else:
            await websocket.accept()
            await websocket.send_text(full.frame())
            await websocket.close(code=1013)

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
                self.schema_cache[key] = await self.env_schema(env_id, kwargs)
                while len(self.schema_cache) > SCHEMA_CACHE_SIZE:
                    self.schema_cache.popitem(last=False)
            return JSONResponse(self.schema_cache[key])
        except ProtocolError as exc:
            return _error_response(exc)
        except ValueError as exc:
            return JSONResponse(
                {"detail": f"bad kwargs: {exc}", "code": "VALIDATION_ERROR"}, status_code=400
            )

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
        """``POST /reset``, stateless as in OpenEnv: make, reset, close; the observation data."""
        from starlette.responses import JSONResponse

        session = Session(self, session_id="http")
        try:
            body = await request.body()
            if len(body) > self.config.max_message_bytes:
                raise ProtocolError("MESSAGE_TOO_LARGE", "request body over --max-message-bytes")
            session.frame_bytes = len(body)
            data = loads_json(body) if body.strip() else {}
            if not isinstance(data, dict):
                raise ProtocolError("VALIDATION_ERROR", "the body must be a JSON object")
            frame = json.loads(await session.reset(data))
            return JSONResponse(frame["data"])
        except ProtocolError as exc:
            forget(exc)
            return _error_response(exc)
        except ValueError as exc:
            return JSONResponse(
                {"detail": f"Invalid JSON: {exc}", "code": "INVALID_JSON"}, status_code=400
            )
        finally:
            await session.drop_env()

    async def http_step(self, request: Any) -> Any:
        """``POST /step``: HTTP has no session, so a 409 that points to ``/ws``."""
        from starlette.responses import JSONResponse

        return JSONResponse(
            {
                "detail": "HTTP requests have no session, so there is nothing to step: open the WebSocket /ws, send reset, then step",
                "code": "NOT_RESET",
            },
            status_code=409,
        )

    async def http_state(self, request: Any) -> Any:
        """``GET /state``: HTTP has no session, so no episode."""
        from starlette.responses import JSONResponse

        return JSONResponse({"episode_id": None, "step_count": 0})


def _error_response(exc: ProtocolError) -> Any:
    """A protocol error as HTTP: 404 for ``UNKNOWN_ENV``, else 400."""
    from starlette.responses import JSONResponse

    status = 404 if exc.code == "UNKNOWN_ENV" else 400
    return JSONResponse({"detail": str(exc), "code": exc.code}, status_code=status)


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
