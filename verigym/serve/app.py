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
answers ``/health`` while any session computes. Text, grid and multi-agent-seat sessions run their
calls on a shared pool of at most ``workers`` threads (any free thread takes the next call; their
verifiers and generators are bounded in a worker process of their own). Any other env (GUI, tool
sandbox, MuJoCo, third-party ids) is pinned for its whole life to one thread of a second pool of at
most ``workers`` long-lived threads (Playwright objects are thread-bound; a thread's Chromium serves
all its GUI sessions), the least-loaded one. Every call is bounded by ``step_timeout``: a call that
overruns ends its session, its env is closed at once from another thread (a tool env's sandbox
tree is killed, so the stuck call returns), and a pinned thread is retired from the pool (a fresh
thread takes its place; the stuck one exits when the call returns). ``/health`` counts the calls
still running for ended sessions as ``stuck_workers``. A native crash (segfault) of an env takes
the whole server process down: see "Isolation" in ``docs/design.md``.

Security: a token, when configured, is required on every HTTP request and WebSocket upgrade, in
one ``Authorization`` header: ``Bearer <token>`` or HTTP Basic auth with the token as password
(what a ``ws://user:<token>@host`` URL sends, so OpenEnv's client works unchanged). Nothing else
(a query string, a second header) carries it. A client address that sends
:data:`AUTH_FAILURE_LIMIT` wrong tokens within :data:`AUTH_WINDOW_SECONDS` gets 429 for every
request until the window ends (at most :data:`AUTH_TRACKED_ADDRESSES` addresses are remembered).
``/schema`` answers are cached for the :data:`SCHEMA_CACHE_SIZE` most recent (id, kwargs) pairs.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import hmac
import json
import logging
import queue
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from verigym.serve.wire import WireError, decode, encode, space_json_schema, space_to_json

__all__ = [
    "AUTH_FAILURE_LIMIT",
    "AUTH_TRACKED_ADDRESSES",
    "AUTH_WINDOW_SECONDS",
    "INLINE_FAMILIES",
    "SCHEMA_CACHE_SIZE",
    "ServeConfig",
    "create_app",
]

logger = logging.getLogger(__name__)

INLINE_FAMILIES = frozenset({"text", "grid", "multiagent"})
"""Families whose env calls run on the shared thread pool (any free thread); all others are pinned
to one thread of the worker pool for their whole life."""

SCHEMA_CACHE_SIZE = 128
"""``/schema`` answers kept (least recently used dropped first): one per (env id, kwargs) pair."""

AUTH_FAILURE_LIMIT = 10
"""Wrong or missing tokens one client address may send per :data:`AUTH_WINDOW_SECONDS`; past
that every request from it gets 429 until the window ends."""

AUTH_WINDOW_SECONDS = 60.0
"""Seconds over which :data:`AUTH_FAILURE_LIMIT` counts (from an address's first failure)."""

AUTH_TRACKED_ADDRESSES = 4096
"""Client addresses with failures remembered at most (the oldest is forgotten first)."""

_RECOVERABLE = (
    TypeError,
    ValueError,
    LookupError,
    NotImplementedError,
    RuntimeError,
    gym.error.Error,
)
"""Errors an env raises on purpose (bad argument, step after the end, ...): the session goes on."""


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
        workers: threads of each of the two pools: the one that runs text/grid/multi-agent
            calls and the one whose threads GUI/sandbox/MuJoCo/third-party sessions are pinned to.
        allow_kwargs: constructor parameters clients may set beyond those the env declares
            client-settable (``--allow-kwargs``; see :func:`verigym.registration.untrusted_kwargs`);
            declared bounds still apply, and ``unsafe`` is never accepted.
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


class ProtocolError(Exception):
    """An error sent to the client as ``{"type": "error", "data": {"code": code, ...}}``."""

    def __init__(self, code: str, message: str, *, fatal: bool = False, **extra: Any):
        super().__init__(message)
        self.code, self.fatal, self.extra = code, fatal, extra

    def frame(self) -> str:
        return json.dumps(
            {"type": "error", "data": {"message": str(self), "code": self.code, **self.extra}}
        )


class _Worker:
    """One daemon thread that runs every call of the sessions pinned to it, in order."""

    def __init__(self, on_exit: Callable[[_Worker], None]):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._on_exit = on_exit
        self.sessions = 0
        self.retired = False
        self._thread = threading.Thread(target=self._main, name="verigym-env-worker", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                loop, future, fn, args = job
                if loop is None:
                    fn()
                    continue
                try:
                    result = fn(*args)
                except BaseException as exc:  # noqa: BLE001 - handed to the event loop
                    loop.call_soon_threadsafe(_settle, future, None, exc)
                else:
                    loop.call_soon_threadsafe(_settle, future, result, None)
        finally:
            _release_thread_browser()
            self._on_exit(self)

    def run(self, fn: Callable, *args: Any) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((loop, future, fn, args))
        return future

    def later(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` (e.g. ``env.close``) after the pending calls, ignoring its errors."""
        self._jobs.put((None, None, _quiet(fn), ()))

    def stop(self) -> None:
        """End the thread after the pending calls."""
        self._jobs.put(None)


def _release_thread_browser() -> None:
    """Close the shared Chromium of this (exiting) thread: thread ids are reused, and the next
    thread with this id must not find a Playwright driver bound to a dead thread."""
    browser = sys.modules.get("verigym.envs.gui.browser")
    shared = getattr(browser, "_SHARED", None)
    if isinstance(shared, dict):
        entry = shared.pop(threading.get_ident(), None)
        if entry is not None:
            for close in (getattr(entry[2], "close", None), getattr(entry[1], "stop", None)):
                if close is not None:
                    _quiet(close)()


class _Pool:
    """At most ``size`` long-lived worker threads; each blocking session is pinned to one."""

    def __init__(self, size: int):
        self.size = size
        self.workers: list[_Worker] = []
        self.retired = 0  # stuck threads still running an abandoned call
        self._lock = threading.Lock()

    def assign(self) -> _Worker:
        with self._lock:
            idle = [w for w in self.workers if w.sessions == 0]
            if idle:
                worker = idle[0]
            elif len(self.workers) < self.size:
                worker = _Worker(self._exited)
                self.workers.append(worker)
            else:
                worker = min(self.workers, key=lambda w: w.sessions)
            worker.sessions += 1
            return worker

    def release(self, worker: _Worker) -> None:
        with self._lock:
            worker.sessions -= 1

    def retire(self, worker: _Worker) -> None:
        """Take a stuck worker out of the pool; it exits once its current call returns."""
        with self._lock:
            if worker in self.workers:
                self.workers.remove(worker)
                self.retired += 1
                worker.retired = True
        worker.stop()

    def _exited(self, worker: _Worker) -> None:
        with self._lock:
            if worker.retired:
                self.retired -= 1
            elif worker in self.workers:
                self.workers.remove(worker)

    def shutdown(self) -> None:
        with self._lock:
            workers, self.workers = list(self.workers), []
        for worker in workers:
            worker.stop()


def _settle(future: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def _quiet(fn: Callable[[], Any]) -> Callable[[], None]:
    def call() -> None:
        try:
            fn()
        except Exception:  # noqa: BLE001 - closing a broken env
            logger.debug("closing an env raised", exc_info=True)

    return call


@dataclass
class _Session:
    id: str
    env: gym.Env | None = None
    env_id: str | None = None
    kwargs_key: str = "{}"
    worker: _Worker | None = None
    reset_done: bool = False
    episode_over: bool = False
    episode_id: str | None = None
    step_count: int = 0
    seed: int | None = None
    last_active: float = field(default_factory=time.monotonic)
    busy: bool = False  # a message is being handled (never reaped meanwhile)
    close_reason: ProtocolError | None = None
    timed_out: bool = (
        False  # a call overran --step-timeout: the env is closed at once, not after it
    )


class _Server:
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
        self.sessions: dict[str, tuple[_Session, Any]] = {}
        self.pool = _Pool(config.workers)
        self.inline_pool = concurrent.futures.ThreadPoolExecutor(
            config.workers, thread_name_prefix="verigym-env-call"
        )
        self.abandoned: set[concurrent.futures.Future] = (
            set()
        )  # calls of ended sessions still running
        self.schema_cache: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self.auth_failures = _FailureLimiter(
            AUTH_FAILURE_LIMIT, AUTH_WINDOW_SECONDS, AUTH_TRACKED_ADDRESSES
        )
        self.reaper: asyncio.Task | None = None
        self.steps = 0

    # --- env ids ---------------------------------------------------------------------------
    @property
    def default_id(self) -> str | None:
        return (
            next(iter(self.allowed))
            if self.allowed is not None and len(self.allowed) == 1
            else None
        )

    def resolve(self, env_id: Any) -> str:
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

    def inline(self, env_id: str) -> bool:
        return self.families.get(env_id) in INLINE_FAMILIES

    # --- running env calls -------------------------------------------------------------------
    async def call(self, session: _Session, fn: Callable, *args: Any) -> Any:
        """``fn(*args)`` off the event loop: on the session's pinned thread, else on the shared pool.

        Raises:
            ProtocolError: ``STEP_TIMEOUT`` (fatal) when the call overruns ``step_timeout``; the
                session is marked so that :meth:`drop_env` closes its env at once.
        """
        pending: concurrent.futures.Future | None = None
        if session.worker is None:
            pending = self.inline_pool.submit(fn, *args)
            future: asyncio.Future = asyncio.wrap_future(pending)
        else:
            future = session.worker.run(fn, *args)
        timeout = self.config.step_timeout or None
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            session.timed_out = True
            future.cancel()  # a shared-pool call that has not started is cancelled with it
            if pending is None:
                self.pool.retire(session.worker)
            elif not pending.done():  # running: counted as stuck until it returns
                self.abandoned.add(pending)
                pending.add_done_callback(self.abandoned.discard)
            raise ProtocolError(
                "STEP_TIMEOUT",
                f"the env did not answer within --step-timeout {self.config.step_timeout:g} s; this session is closed and its env with it",
                fatal=True,
            ) from None

    def decode(self, value: Any) -> Any:
        """:func:`verigym.serve.wire.decode` with arrays of at most 4x ``max_message_bytes``
        declared: a short frame cannot make the server allocate more than a full one could."""
        return decode(value, max_bytes=4 * self.config.max_message_bytes)

    def stuck_calls(self) -> int:
        """Env calls still running for sessions that ended on ``STEP_TIMEOUT``."""
        return self.pool.retired + sum(1 for f in list(self.abandoned) if not f.done())

    def checked_kwargs(self, env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """A client's decoded kwargs, refused with ``INVALID_KWARGS`` unless the env declares them
        client-settable (or the operator allowed them) and they are within bounds."""
        from verigym.registration import KwargsRefused, untrusted_kwargs

        try:
            return untrusted_kwargs(env_id, self.decode(kwargs), allow=self.config.allow_kwargs)
        except WireError as exc:
            raise ProtocolError("VALIDATION_ERROR", f"kwargs: {exc}") from None
        except KwargsRefused as exc:
            raise ProtocolError("INVALID_KWARGS", str(exc), param=exc.param) from None

    async def make(self, session: _Session, env_id: Any, kwargs: Any) -> None:
        env_id = self.resolve(env_id)
        if kwargs is None:
            kwargs = {}
        if not isinstance(kwargs, dict):
            raise ProtocolError(
                "VALIDATION_ERROR", f"kwargs must be an object, got {type(kwargs).__name__}"
            )
        kwargs = self.checked_kwargs(env_id, kwargs)
        key = json.dumps(kwargs, sort_keys=True, default=repr)
        if session.env is not None and (session.env_id, session.kwargs_key) == (env_id, key):
            return
        await self.drop_env(session)
        if not self.inline(env_id):
            session.worker = self.pool.assign()
        try:
            session.env = await self.call(session, _make_env, env_id, kwargs)
        except ProtocolError:
            raise
        except (TypeError, ValueError, WireError) as exc:
            await self.drop_env(session)
            raise ProtocolError(
                "FACTORY_ERROR",
                f"gym.make({env_id!r}, **{kwargs}) raised {type(exc).__name__}: {exc}",
            ) from None
        except Exception as exc:
            await self.drop_env(session)
            raise ProtocolError(
                "FACTORY_ERROR", f"making {env_id} failed: {type(exc).__name__}: {exc}"
            ) from None
        session.env_id, session.kwargs_key = env_id, key
        session.reset_done = False

    async def drop_env(self, session: _Session) -> None:
        """Close the session's env off the event loop: after its pending calls, or at once from a
        thread of its own when a call overran (that call is stuck; closing kills its work)."""
        env, worker = session.env, session.worker
        session.env, session.worker, session.reset_done = None, None, False
        if env is not None:
            if session.timed_out:
                threading.Thread(
                    target=_quiet(env.close), name="verigym-env-close", daemon=True
                ).start()
            elif worker is not None:
                worker.later(env.close)
            else:
                self.inline_pool.submit(_quiet(env.close))
        if worker is not None:
            self.pool.release(worker)

    # --- protocol ------------------------------------------------------------------------------
    async def handle(self, session: _Session, message: dict[str, Any]) -> str | None:
        kind = message.get("type")
        data = message.get("data", {})
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ProtocolError(
                "VALIDATION_ERROR", f"'data' must be an object, got {type(data).__name__}"
            )
        if kind == "step":
            return await self.step(session, data)
        if kind == "reset":
            return await self.reset(session, data)
        if kind == "make":
            await self.make(session, data.get("env_id"), data.get("kwargs"))
            return json.dumps({"type": "spaces", "data": _describe(session.env, session.env_id)})
        if kind == "text":
            return await self.text(session, data)
        if kind == "state":
            return json.dumps(
                {
                    "type": "state",
                    "data": {
                        "episode_id": session.episode_id,
                        "step_count": session.step_count,
                        "env_id": session.env_id,
                        "kwargs": json.loads(session.kwargs_key),
                        "seed": session.seed,
                        "episode_over": session.episode_over,
                    },
                }
            )
        if kind == "close":
            return None
        raise ProtocolError(
            "UNKNOWN_TYPE",
            f"Unknown message type: {kind!r} (use reset, step, state, make or close)",
        )

    async def reset(self, session: _Session, data: dict[str, Any]) -> str:
        seed = data.get("seed")
        if seed is not None and (type(seed) is not int or seed < 0):
            raise ProtocolError(
                "VALIDATION_ERROR", f"seed must be a non-negative integer or null, got {seed!r}"
            )
        env_id = data.get("env_id", session.env_id if session.env is not None else None)
        kwargs = data.get(
            "kwargs",
            json.loads(session.kwargs_key)
            if session.env is not None and "env_id" not in data
            else None,
        )
        await self.make(session, env_id, kwargs)
        try:
            options = self.decode(data.get("options"))
        except WireError as exc:
            raise ProtocolError("VALIDATION_ERROR", f"options: {exc}") from None
        observation, info = await self.guarded(
            session, session.env.reset, seed, options, reset=True
        )
        session.reset_done, session.episode_over, session.seed = True, False, seed
        session.episode_id = (
            data.get("episode_id") if isinstance(data.get("episode_id"), str) else uuid.uuid4().hex
        )
        session.step_count = 0
        return _observation_frame(observation, None, False, False, info)

    async def step(self, session: _Session, data: dict[str, Any]) -> str:
        if session.env is None or not session.reset_done:
            raise ProtocolError(
                "NOT_RESET",
                'step before reset: send {"type": "reset", "data": {"seed": ..., "env_id": ...}} first',
            )
        if "action" not in data:
            raise ProtocolError(
                "VALIDATION_ERROR",
                "a step needs data.action (text, number, nested list or an encoded array)",
            )
        try:
            action = self.decode(data["action"])
        except WireError as exc:
            raise ProtocolError("VALIDATION_ERROR", f"action: {exc}") from None
        observation, reward, terminated, truncated, info = await self.guarded(
            session, session.env.step, action
        )
        session.step_count += 1
        self.steps += 1
        if terminated or truncated:
            session.episode_over = True
        return _observation_frame(observation, reward, terminated, truncated, info)

    async def text(self, session: _Session, data: dict[str, Any]) -> str:
        """The env's :class:`verigym.TextInterface` (verigym extension: ``{"type": "text", "data":
        {"method": "parse_action", "value": ...}}`` -> ``{"type": "text", "data": {"value": ...}}``)."""
        from verigym.core import TextInterface

        if session.env is None:
            raise ProtocolError("NOT_RESET", "no env yet: send make or reset first")
        inner = session.env.unwrapped
        method = data.get("method")
        if (
            method not in _TEXT_METHODS
            or not isinstance(inner, TextInterface)
            or not callable(getattr(inner, method, None))
        ):
            raise ProtocolError(
                "VALIDATION_ERROR", f"{session.env_id} has no text method {method!r}"
            )
        try:
            args = () if method == "instructions" else (self.decode(data.get("value")),)
        except WireError as exc:
            raise ProtocolError("VALIDATION_ERROR", f"value: {exc}") from None
        value = await self.guarded(session, getattr(inner, method), *args)
        return json.dumps({"type": "text", "data": {"value": encode(value)}})

    async def guarded(
        self, session: _Session, fn: Callable, *args: Any, reset: bool = False
    ) -> Any:
        try:
            if reset:
                return await self.call(session, lambda s, o: fn(seed=s, options=o), *args)
            return await self.call(session, fn, *args)
        except ProtocolError:
            raise
        except Exception as exc:
            name = f"{type(exc).__module__}:{type(exc).__qualname__}"
            if isinstance(exc, _RECOVERABLE) and not isinstance(exc, RecursionError):
                raise ProtocolError(
                    "EXECUTION_ERROR", str(exc) or type(exc).__name__, exception=name
                ) from None
            logger.warning("session %s: %s crashed", session.id, session.env_id, exc_info=True)
            raise ProtocolError(
                "ENV_CRASHED",
                f"the env crashed ({name}: {exc}); this session is closed",
                fatal=True,
                exception=name,
            ) from None

    # --- lifecycle -------------------------------------------------------------------------------
    async def reap(self) -> None:
        period = max(0.05, min(5.0, self.config.idle_timeout / 4))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for session, websocket in list(self.sessions.values()):
                if not session.busy and now - session.last_active > self.config.idle_timeout:
                    session.close_reason = ProtocolError(
                        "IDLE_TIMEOUT",
                        f"no message for --idle-timeout {self.config.idle_timeout:g} s; session closed",
                        fatal=True,
                    )
                    try:
                        await websocket.send_text(session.close_reason.frame())
                        await websocket.close(code=1000)
                    except Exception:  # noqa: BLE001 - the client may already be gone
                        pass


_TEXT_METHODS = ("instructions", "observation_text", "parse_action", "action_text")


def _make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    return gym.make(env_id, disable_env_checker=True, **kwargs)


def _observation_frame(
    observation: Any, reward: Any, terminated: Any, truncated: Any, info: Any
) -> str:
    done = bool(terminated) or bool(truncated)
    payload = {
        "observation": {
            "observation": encode(observation),
            "info": encode(info),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        },
        "reward": None if reward is None else float(reward),
        "done": done,
    }
    return json.dumps({"type": "observation", "data": payload})


def _describe(env: gym.Env, env_id: str | None) -> dict[str, Any]:
    spec = env.spec
    return {
        "env_id": env_id,
        "observation_space": space_to_json(env.observation_space),
        "action_space": space_to_json(env.action_space),
        "metadata": encode(dict(env.unwrapped.metadata)),
        "max_episode_steps": getattr(spec, "max_episode_steps", None),
        "nondeterministic": bool(getattr(spec, "nondeterministic", False)),
        "text_interface": [
            m
            for m in _TEXT_METHODS
            if _is_text_interface(env) and callable(getattr(env.unwrapped, m, None))
        ],
        "reward_range": encode(
            tuple(float(x) for x in getattr(env, "reward_range", (float("-inf"), float("inf"))))
        ),
    }


def _is_text_interface(env: gym.Env) -> bool:
    from verigym.core import TextInterface

    return isinstance(env.unwrapped, TextInterface)


def _authorized(token: str, headers: list[tuple[bytes, bytes]]) -> bool:
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


class _FailureLimiter:
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


def create_app(config: ServeConfig | None = None) -> Any:
    """Build the Starlette app that serves ``config``'s ids (see the module docstring).

    Args:
        config: server settings (default :class:`ServeConfig()`: every verigym id, no token).

    Returns:
        An ASGI app; ``app.state.server`` holds the session table (for tests and /health).
    """
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    config = config or ServeConfig()
    server = _Server(config)

    async def ws_endpoint(websocket: WebSocket) -> None:
        if len(server.sessions) >= config.max_sessions:
            full = ProtocolError(
                "CAPACITY_REACHED",
                f"server full: {config.max_sessions} sessions are open (--max-sessions); retry later",
                active_sessions=len(server.sessions),
                max_sessions=config.max_sessions,
            )
            if "websocket.http.response" in (
                websocket.scope.get("extensions") or {}
            ):  # refuse the upgrade: HTTP 503
                await websocket.send_denial_response(
                    JSONResponse({"detail": str(full), "code": full.code}, status_code=503)
                )
            else:
                await websocket.accept()
                await websocket.send_text(full.frame())
                await websocket.close(code=1013)
            return
        await websocket.accept()
        session = _Session(uuid.uuid4().hex)
        server.sessions[session.id] = (session, websocket)
        try:
            while True:
                try:
                    message = await websocket.receive()
                except (WebSocketDisconnect, RuntimeError):
                    break
                if message["type"] == "websocket.disconnect":
                    break
                session.last_active = time.monotonic()
                text = message.get("text")
                if text is None:
                    raw = message.get("bytes") or b""
                    text = (
                        raw.decode("utf-8", "replace")
                        if len(raw) <= config.max_message_bytes
                        else None
                    )
                    if text is None:
                        text = " " * (config.max_message_bytes + 1)
                try:
                    if len(text) > config.max_message_bytes:
                        raise ProtocolError(
                            "MESSAGE_TOO_LARGE",
                            f"a {len(text)}-character message is over the {config.max_message_bytes}-byte limit (--max-message-bytes)",
                        )
                    try:
                        request = json.loads(text)
                    except ValueError as exc:
                        raise ProtocolError("INVALID_JSON", f"Invalid JSON: {exc}") from None
                    if not isinstance(request, dict):
                        raise ProtocolError(
                            "VALIDATION_ERROR",
                            f"a message must be a JSON object with a 'type', got {type(request).__name__}",
                        )
                    session.busy = True
                    try:
                        reply = await server.handle(session, request)
                    finally:
                        session.busy = False
                except ProtocolError as exc:
                    await websocket.send_text(exc.frame())
                    if exc.fatal:
                        break
                    continue
                except RecursionError:
                    await websocket.send_text(
                        ProtocolError("VALIDATION_ERROR", "message nested too deeply").frame()
                    )
                    continue
                if reply is None:  # close
                    break
                await websocket.send_text(reply)
                session.last_active = time.monotonic()
        finally:
            server.sessions.pop(session.id, None)
            await server.drop_env(session)
            try:
                await websocket.close()
            except Exception:  # noqa: BLE001 - already closed
                pass

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "status": "healthy",
                "sessions": len(server.sessions),
                "max_sessions": config.max_sessions,
                "workers": len(server.pool.workers),
                "stuck_workers": server.stuck_calls(),
                "steps": server.steps,
            }
        )

    async def metadata(request: Request) -> JSONResponse:
        from verigym import __version__

        ids = sorted(server.allowed if server.allowed is not None else server.families)
        name = ids[0] if len(ids) == 1 else "verigym"
        return JSONResponse(
            {
                "name": name,
                "description": "verigym environments with verifiable rewards over the OpenEnv protocol",
                "version": __version__,
                "env_ids": ids,
                "readme_content": None,
                "author": "verigym",
                "documentation_url": None,
            }
        )

    async def schema(request: Request) -> JSONResponse:
        try:
            env_id = server.resolve(request.query_params.get("env_id"))
            kwargs = json.loads(request.query_params.get("kwargs") or "{}")
            if not isinstance(kwargs, dict):
                raise ProtocolError("VALIDATION_ERROR", "kwargs must be a JSON object")
            key = (env_id, json.dumps(kwargs, sort_keys=True))
            if key in server.schema_cache:
                server.schema_cache.move_to_end(key)
            else:
                session = _Session("schema")
                try:
                    await server.make(session, env_id, kwargs)
                    described = _describe(session.env, env_id)
                    action_space, observation_space = (
                        session.env.action_space,
                        session.env.observation_space,
                    )
                finally:
                    await server.drop_env(session)
                server.schema_cache[key] = {
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
                while len(server.schema_cache) > SCHEMA_CACHE_SIZE:
                    server.schema_cache.popitem(last=False)
            return JSONResponse(server.schema_cache[key])
        except ProtocolError as exc:
            return JSONResponse(
                {"detail": str(exc), "code": exc.code},
                status_code=404 if exc.code == "UNKNOWN_ENV" else 400,
            )
        except ValueError as exc:
            return JSONResponse(
                {"detail": f"bad kwargs: {exc}", "code": "VALIDATION_ERROR"}, status_code=400
            )

    async def http_reset(request: Request) -> JSONResponse:
        session = _Session("http")
        try:
            body = await request.body()
            if len(body) > config.max_message_bytes:
                raise ProtocolError("MESSAGE_TOO_LARGE", "request body over --max-message-bytes")
            data = json.loads(body) if body.strip() else {}
            if not isinstance(data, dict):
                raise ProtocolError("VALIDATION_ERROR", "the body must be a JSON object")
            frame = json.loads(await server.reset(session, data))
            return JSONResponse(frame["data"])
        except ProtocolError as exc:
            return JSONResponse(
                {"detail": str(exc), "code": exc.code},
                status_code=404 if exc.code == "UNKNOWN_ENV" else 400,
            )
        except ValueError as exc:
            return JSONResponse(
                {"detail": f"Invalid JSON: {exc}", "code": "INVALID_JSON"}, status_code=400
            )
        finally:
            await server.drop_env(session)

    async def http_step(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "detail": "HTTP requests have no session, so there is nothing to step: open the WebSocket /ws, send reset, then step",
                "code": "NOT_RESET",
            },
            status_code=409,
        )

    async def http_state(request: Request) -> JSONResponse:
        return JSONResponse({"episode_id": None, "step_count": 0})

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        if config.idle_timeout:
            server.reaper = asyncio.get_running_loop().create_task(server.reap())
        try:
            yield
        finally:
            if server.reaper is not None:
                server.reaper.cancel()
            for session, _ws in list(server.sessions.values()):
                await server.drop_env(session)
            server.pool.shutdown()
            server.inline_pool.shutdown(wait=False, cancel_futures=True)

    inner = Starlette(
        routes=[
            WebSocketRoute("/ws", ws_endpoint),
            Route("/health", health),
            Route("/metadata", metadata),
            Route("/schema", schema),
            Route("/reset", http_reset, methods=["POST"]),
            Route("/step", http_step, methods=["POST"]),
            Route("/state", http_state),
        ],
        lifespan=lifespan,
    )
    inner.state.server = server

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] in ("http", "websocket") and config.token is not None:
            address = (scope.get("client") or ("unknown",))[0]
            wait = server.auth_failures.blocked(address)
            if wait:
                await deny(
                    scope,
                    receive,
                    send,
                    429,
                    f"too many wrong tokens from {address}; retry in {wait:.0f} s",
                    {"Retry-After": str(int(wait) + 1)},
                )
                return
            if not _authorized(config.token, list(scope.get("headers") or ())):
                server.auth_failures.fail(address)
                await deny(
                    scope,
                    receive,
                    send,
                    401,
                    "missing or wrong token (send Authorization: Bearer <token>)",
                    None,
                )
                return
        await inner(scope, receive, send)

    async def deny(
        scope: dict,
        receive: Callable,
        send: Callable,
        status: int,
        detail: str,
        headers: dict[str, str] | None,
    ) -> None:
        if scope["type"] == "websocket":
            if "websocket.http.response" in (
                scope.get("extensions") or {}
            ):  # refuse the upgrade with this status
                await WebSocket(scope, receive, send).send_denial_response(
                    JSONResponse({"detail": detail}, status_code=status, headers=headers)
                )
            else:
                await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})
            return
        await JSONResponse({"detail": detail}, status_code=status, headers=headers)(
            scope, receive, send
        )

    app.state = inner.state  # type: ignore[attr-defined]
    return app
