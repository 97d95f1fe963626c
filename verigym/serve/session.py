"""One session of ``verigym serve-env``: one client, one env instance, its messages in order.

:meth:`Session.run` is the WebSocket ``/ws`` loop: receive a frame, answer it (:meth:`answer`
parses it, :meth:`handle` dispatches on its ``type`` to :meth:`make`, :meth:`reset`,
:meth:`step`, :meth:`text` or :meth:`state`), send the reply; a :class:`ProtocolError` is sent as
an error frame and ends the session when it is fatal. Every env call runs off the event loop
through :meth:`call`, bounded by ``--step-timeout``. The stateless HTTP ``/reset`` and ``/schema``
use a session without a socket. The shared parts (ids, session threads, kwargs policy) are the
server's (:class:`verigym.serve.served.ServedEnvs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from verigym.serve.front import loads_json
from verigym.serve.isolated import IsolatedEnv
from verigym.serve.served import ProtocolError, ServedEnvs
from verigym.serve.threads import Handoff, PinnedThread, quiet
from verigym.serve.wire import WireError, encode, space_to_json

__all__ = ["INLINE_FRAME_BYTES", "TEXT_METHODS", "Session", "describe_env", "forget"]

logger = logging.getLogger(__name__)

CLOSE_WAIT_S = 2.0
"""Seconds a session that ends waits to send its close frame (a client that never reads cannot
take one)."""

INLINE_FRAME_BYTES = 64 << 10
"""Frames (and HTTP bodies) up to this long are parsed and decoded on the event loop; a longer one
on a thread (:meth:`Session.parsed`), so one client's large frame never stalls the loop: before,
twenty 16 MB frames held ``/health`` and every other session for 19 s."""

TEXT_METHODS = ("instructions", "observation_text", "parse_action", "action_text")
"""The :class:`verigym.TextInterface` methods a client may call with a ``text`` message."""

_RECOVERABLE = (
    TypeError,
    ValueError,
    LookupError,
    NotImplementedError,
    RuntimeError,
    gym.error.Error,
)
"""Errors an env raises on purpose (bad argument, step after the end, ...): the session goes on."""


class Session:
    """One client's env and episode, driven by its messages in order.

    Args:
        server: the server whose ids, pools and settings this session uses.
        websocket: the client's Starlette ``WebSocket``; ``None`` for the stateless HTTP calls.
        session_id: a name for logs (default: a fresh random hex id).
    """

    def __init__(self, server: ServedEnvs, websocket: Any = None, session_id: str | None = None):
        self.server, self.config, self.websocket = server, server.config, websocket
        self.id = session_id or uuid.uuid4().hex
        self.env: gym.Env | None = None
        self.env_id: str | None = None
        self.kwargs_key = "{}"  # canonical JSON of the env's kwargs
        self.worker: PinnedThread | None = None  # this session's own thread, from its first call
        self.reset_done = False
        self.episode_over = False
        self.episode_id: str | None = None
        self.step_count = 0
        self.seed: int | None = None
        self.last_active = time.monotonic()
        self.busy = False  # a message is being handled (never reaped meanwhile)
        self.timed_out = False  # a call overran --step-timeout: the env is closed at once
        self.frame_bytes = 0  # length of the frame being answered (bounds what it may declare)
        self.task: asyncio.Task | None = None  # the task serving the WebSocket (run)
        self.reaped = False  # the idle reaper is closing it
        self.abandoned = False  # ended by abandon(): its task was cancelled

    # --- the WebSocket loop --------------------------------------------------------------------
    async def run(self) -> None:
        """Serve the WebSocket until the client closes it, sends ``close`` or a fatal error ends
        it; the env is closed and the session leaves the server's table either way."""
        self.task = asyncio.current_task()
        await self.websocket.accept()
        self.server.sessions[self.id] = self
        try:
            await self.serve()
        except asyncio.CancelledError:
            if not self.abandoned:
                raise
            self.task.uncancel()  # ended by the reaper (abandon): not a cancellation of the app
        finally:
            self.server.sessions.pop(self.id, None)
            await self.drop_env()
            with contextlib.suppress(Exception):  # already closed, or a client that never reads
                await asyncio.wait_for(self.websocket.close(), CLOSE_WAIT_S)

    def abandon(self) -> None:
        """End the session now, without a word to its client (whose buffers are full: it does not
        read): its task is cancelled wherever it waits, its env closed, its slot freed."""
        if self.task is not None and self.server.sessions.get(self.id) is self:  # still serving
            self.abandoned = True
            self.task.cancel()

    async def serve(self) -> None:
        """The frames of the WebSocket, answered in order, until the client leaves, sends
        ``close`` or a fatal error is sent."""
        while (frame := await self.receive()) is not None:
            try:
                reply = await self.answer(frame)
            except ProtocolError as exc:
                fatal, text = exc.fatal, exc.frame()
                forget(exc)  # a refused action's arrays go now, not at the next cyclic GC
                del exc
                await self.websocket.send_text(text)
                if fatal:
                    break
                continue
            except RecursionError as exc:
                forget(exc)
                del exc
                error = ProtocolError("VALIDATION_ERROR", "message nested too deeply")
                await self.websocket.send_text(error.frame())
                continue
            if reply is None:  # close
                break
            await self.websocket.send_text(reply)
            self.last_active = time.monotonic()

    async def receive(self) -> str | bytes | None:
        """The next text or binary frame; ``None`` once the client is gone."""
        from starlette.websockets import WebSocketDisconnect

        try:
            message = await self.websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return None
        if message["type"] == "websocket.disconnect":
            return None
        self.last_active = time.monotonic()
        text = message.get("text")
        return text if text is not None else message.get("bytes") or b""

    async def answer(self, frame: str | bytes) -> str | None:
        """The reply frame to one received frame (``None`` for ``close``).

        Raises:
            ProtocolError: ``MESSAGE_TOO_LARGE``, ``INVALID_JSON``, ``VALIDATION_ERROR`` for a
                frame that is not a message, or whatever :meth:`handle` raises.
        """
        limit = self.config.max_message_bytes
        self.frame_bytes = len(frame)
        if len(frame) > limit:
            unit = "character" if isinstance(frame, str) else "byte"
            raise ProtocolError(
                "MESSAGE_TOO_LARGE",
                f"a {len(frame)}-{unit} message is over the {limit}-byte limit (--max-message-bytes)",
            )
        try:
            request = await self.parsed(_frame_json, frame)
        except ValueError as exc:
            raise ProtocolError("INVALID_JSON", f"Invalid JSON: {exc}") from None
        if not isinstance(request, dict):
            raise ProtocolError(
                "VALIDATION_ERROR",
                f"a message must be a JSON object with a 'type', got {type(request).__name__}",
            )
        self.busy = True
        try:
            return await self.handle(request)
        finally:
            self.busy = False

    # --- the messages --------------------------------------------------------------------------
    async def handle(self, message: dict[str, Any]) -> str | None:
        """Dispatch one parsed message on its ``type``; the reply frame, ``None`` for ``close``.

        Raises:
            ProtocolError: ``UNKNOWN_TYPE``, ``VALIDATION_ERROR``, or what the message raised.
        """
        kind = message.get("type")
        data = message.get("data", {})
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ProtocolError(
                "VALIDATION_ERROR", f"'data' must be an object, got {type(data).__name__}"
            )
        if kind == "step":
            return await self.step(data)
        if kind == "reset":
            return await self.reset(data)
        if kind == "make":
            await self.make(data.get("env_id"), data.get("kwargs"))
            return json.dumps({"type": "spaces", "data": describe_env(self.env, self.env_id)})
        if kind == "text":
            return await self.text(data)
        if kind == "state":
            return json.dumps({"type": "state", "data": self.state()})
        if kind == "close":
            return None
        raise ProtocolError(
            "UNKNOWN_TYPE",
            f"Unknown message type: {kind!r} (use reset, step, state, make or close)",
        )

    async def make(self, env_id: Any, kwargs: Any) -> None:
        """Build ``env_id`` with the client's ``kwargs`` (kept when the session has it already).

        Raises:
            ProtocolError: ``UNKNOWN_ENV``, ``VALIDATION_ERROR``, ``INVALID_KWARGS``,
                ``FACTORY_ERROR`` (``gym.make`` raised), ``STEP_TIMEOUT``.
        """
        env_id = self.server.resolve(env_id)
        if kwargs is None:
            kwargs = {}
        if not isinstance(kwargs, dict):
            raise ProtocolError(
                "VALIDATION_ERROR", f"kwargs must be an object, got {type(kwargs).__name__}"
            )
        kwargs = await self.parsed(self.server.checked_kwargs, env_id, kwargs, self.frame_bytes)
        key = json.dumps(kwargs, sort_keys=True, default=repr)
        if self.env is not None and (self.env_id, self.kwargs_key) == (env_id, key):
            return
        await self.drop_env()
        self.worker = self.server.pool.assign()
        try:
            isolate = self.server.isolated(env_id)
            self.env = await self.call(_make_env, env_id, kwargs, isolate, late=_close)
        except ProtocolError:
            raise
        except (TypeError, ValueError, WireError) as exc:
            await self.drop_env()
            raise ProtocolError(
                "FACTORY_ERROR",
                f"gym.make({env_id!r}, **{kwargs}) raised {type(exc).__name__}: {exc}",
            ) from None
        except Exception as exc:
            await self.drop_env()
            raise ProtocolError(
                "FACTORY_ERROR", f"making {env_id} failed: {type(exc).__name__}: {exc}"
            ) from None
        self.env_id, self.kwargs_key = env_id, key
        self.reset_done = False

    async def reset(self, data: dict[str, Any]) -> str:
        """Reset (making the env first when ``data`` names another id or kwargs); an
        ``observation`` frame with ``reward`` null."""
        seed = data.get("seed")
        if seed is not None and (type(seed) is not int or seed < 0):
            raise ProtocolError(
                "VALIDATION_ERROR", f"seed must be a non-negative integer or null, got {seed!r}"
            )
        have_env = self.env is not None
        env_id = data.get("env_id", self.env_id if have_env else None)
        same = json.loads(self.kwargs_key) if have_env and "env_id" not in data else None
        await self.make(env_id, data.get("kwargs", same))
        try:
            options = await self.parsed(self.server.decode, data.get("options"), self.frame_bytes)
        except WireError as exc:
            raise ProtocolError("VALIDATION_ERROR", f"options: {exc}") from None
        reset = self.env.reset
        observation, info = await self.guarded(lambda: reset(seed=seed, options=options))
        self.reset_done, self.episode_over, self.seed = True, False, seed
        episode_id = data.get("episode_id")
        self.episode_id = episode_id if isinstance(episode_id, str) else uuid.uuid4().hex
        self.step_count = 0
        return _observation_frame(observation, None, False, False, info)

    async def step(self, data: dict[str, Any]) -> str:
        """Step with the decoded ``data["action"]``; an ``observation`` frame.

        Raises:
            ProtocolError: ``NOT_RESET``, ``VALIDATION_ERROR``, ``EXECUTION_ERROR`` (the env
                refused it; the session goes on), ``ENV_CRASHED``, ``STEP_TIMEOUT``.
        """
        if self.env is None or not self.reset_done:
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
            action = await self.parsed(self.server.decode, data["action"], self.frame_bytes)
        except WireError as exc:
            raise ProtocolError("VALIDATION_ERROR", f"action: {exc}") from None
        observation, reward, terminated, truncated, info = await self.guarded(self.env.step, action)
        self.step_count += 1
        self.server.steps += 1
        if terminated or truncated:
            self.episode_over = True
        return _observation_frame(observation, reward, terminated, truncated, info)

    async def text(self, data: dict[str, Any]) -> str:
        """The env's :class:`verigym.TextInterface` (verigym extension: ``{"type": "text", "data":
        {"method": "parse_action", "value": ...}}`` -> ``{"type": "text", "data": {"value": ...}}``)."""
        from verigym.core import TextInterface

        if self.env is None:
            raise ProtocolError("NOT_RESET", "no env yet: send make or reset first")
        inner = self.env.unwrapped
        method = data.get("method")
        if isinstance(inner, IsolatedEnv):  # the methods its child's env answers
            if method not in inner.text_methods:
                raise ProtocolError(
                    "VALIDATION_ERROR", f"{self.env_id} has no text method {method!r}"
                )
            target = functools.partial(inner.text, method)
        elif (
            method not in TEXT_METHODS
            or not isinstance(inner, TextInterface)
            or not callable(getattr(inner, method, None))
        ):
            raise ProtocolError("VALIDATION_ERROR", f"{self.env_id} has no text method {method!r}")
        else:
            target = getattr(inner, method)
        try:
            args = (
                ()
                if method == "instructions"
                else (await self.parsed(self.server.decode, data.get("value"), self.frame_bytes),)
            )
        except WireError as exc:
            raise ProtocolError("VALIDATION_ERROR", f"value: {exc}") from None
        value = await self.guarded(target, *args)
        return json.dumps({"type": "text", "data": {"value": encode(value)}})

    def state(self) -> dict[str, Any]:
        """The ``state`` message's answer: the episode id, step count, env id, kwargs, seed."""
        return {
            "episode_id": self.episode_id,
            "step_count": self.step_count,
            "env_id": self.env_id,
            "kwargs": json.loads(self.kwargs_key),
            "seed": self.seed,
            "episode_over": self.episode_over,
        }

    async def parsed(self, fn: Callable, *args: Any) -> Any:
        """``fn(*args)`` (parsing or decoding what the client sent): inline for a frame of at most
        :data:`INLINE_FRAME_BYTES`, else on the server's parser thread, one frame at a time, so the
        event loop keeps answering other clients meanwhile. Exceptions propagate as they are."""
        if self.frame_bytes <= INLINE_FRAME_BYTES:
            return fn(*args)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.server.parser, functools.partial(fn, *args))

    # --- env calls -----------------------------------------------------------------------------
    async def guarded(self, fn: Callable, *args: Any) -> Any:
        """:meth:`call` with the env's own errors as protocol errors.

        Raises:
            ProtocolError: ``EXECUTION_ERROR`` (with ``exception``, ``"module:qualname"``) for an
                error an env raises on purpose; ``ENV_CRASHED`` (fatal) for any other.
        """
        try:
            return await self.call(fn, *args)
        except ProtocolError:
            raise
        except Exception as exc:
            name = f"{type(exc).__module__}:{type(exc).__qualname__}"
            if isinstance(exc, _RECOVERABLE) and not isinstance(exc, RecursionError):
                raise ProtocolError(
                    "EXECUTION_ERROR", str(exc) or type(exc).__name__, exception=name
                ) from None
            logger.warning("session %s: %s crashed", self.id, self.env_id, exc_info=True)
            raise ProtocolError(
                "ENV_CRASHED",
                f"the env crashed ({name}: {exc}); this session is closed",
                fatal=True,
                exception=name,
            ) from None

    async def call(self, fn: Callable, *args: Any, late: Callable[[Any], Any] | None = None) -> Any:
        """``fn(*args)`` off the event loop, on this session's own thread (after its own earlier
        calls only: no other session's call is ever queued there).

        Args:
            fn, args: the env call.
            late: what to do with the result when it arrives after this call gave up (timeout, or
                the session's task cancelled): run on the thread that computed it, errors logged.
                ``make`` passes ``close``, so an env built after its timeout never leaks.

        Raises:
            ProtocolError: ``STEP_TIMEOUT`` (fatal) when the call runs longer than
                ``step_timeout``, counted from the moment it starts running (or waits that long
                behind this session's own previous call); the session is marked so that
                :meth:`drop_env` closes its env at once.
        """
        if self.worker is None:
            self.worker = self.server.pool.assign()
        worker = self.worker
        handoff = Handoff(late)
        job = handoff.wrap(fn, *args)
        began: list[float] = []  # when the call started running on the thread

        def run() -> Any:
            began.append(time.monotonic())
            return job()

        future = worker.run(run)
        timeout = self.config.step_timeout or None
        try:
            wait, queued = timeout, False
            while True:
                try:
                    return await asyncio.wait_for(asyncio.shield(future), wait)
                except asyncio.TimeoutError:
                    if began:  # count only from its start: the time queued is not its own
                        wait = began[0] + timeout - time.monotonic()
                    elif not queued:  # still behind this session's own previous call
                        wait, queued = timeout, True
                    else:
                        raise
                    if wait <= 0:
                        raise
        except asyncio.TimeoutError:
            if not handoff.abandon():  # it returned at the deadline: its result is on the way
                return await future
            self.timed_out = True
            future.cancel()
            self.server.pool.retire(worker)
            raise ProtocolError(
                "STEP_TIMEOUT",
                f"the env did not answer within --step-timeout {self.config.step_timeout:g} s; this session is closed and its env with it",
                fatal=True,
            ) from None
        except asyncio.CancelledError:
            if handoff.abandon():  # the thread hands a late result to ``late`` itself
                future.cancel()
            elif late is not None:  # computed already, but nobody will take it
                future.add_done_callback(functools.partial(_late_off_loop, late))
            raise

    async def drop_env(self) -> None:
        """Close the env off the event loop: after its pending calls, or at once from a thread of
        its own when a call overran (that call is stuck; closing kills its work)."""
        env, worker = self.env, self.worker
        self.env, self.worker, self.reset_done = None, None, False
        if env is not None:
            if self.timed_out:
                threading.Thread(
                    target=quiet(env.close), name="verigym-env-close", daemon=True
                ).start()
            elif worker is not None:
                worker.later(env.close)
            else:  # pragma: no cover - an env always has the thread that built it
                threading.Thread(target=quiet(env.close), daemon=True).start()
        if worker is not None:
            self.server.pool.release(worker)


def forget(exc: BaseException) -> None:
    """Drop what ``exc`` keeps alive: the locals of every finished frame of its traceback and of
    the exceptions it was raised from (an env's error holds the frame that held the action), and
    the tracebacks themselves. Without it a refused action's arrays stay referenced through a
    cycle (exception -> traceback -> frame -> the exception) until the cyclic GC runs."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        error = stack.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        stack += [error.__context__, error.__cause__]
        if error.__traceback__ is not None:
            traceback.clear_frames(error.__traceback__)
            error.__traceback__ = None
        error.__context__ = error.__cause__ = None


def describe_env(env: gym.Env, env_id: str | None) -> dict[str, Any]:
    """The ``spaces`` message's data: ``env_id``, both spaces (wire JSON), metadata, spec limits,
    the text methods it answers and its reward range."""
    spec = env.spec
    text_interface = _is_text_interface(env)
    return {
        "env_id": env_id,
        "observation_space": space_to_json(env.observation_space),
        "action_space": space_to_json(env.action_space),
        "metadata": encode(dict(env.unwrapped.metadata)),
        "max_episode_steps": getattr(spec, "max_episode_steps", None),
        "nondeterministic": bool(getattr(spec, "nondeterministic", False)),
        "text_interface": list(env.unwrapped.text_methods)
        if isinstance(env.unwrapped, IsolatedEnv)
        else [
            m for m in TEXT_METHODS if text_interface and callable(getattr(env.unwrapped, m, None))
        ],
        "reward_range": encode(
            tuple(float(x) for x in getattr(env, "reward_range", (float("-inf"), float("inf"))))
        ),
    }


def _is_text_interface(env: gym.Env) -> bool:
    from verigym.core import TextInterface

    return isinstance(env.unwrapped, TextInterface)


def _make_env(env_id: str, kwargs: dict[str, Any], isolate: bool = False) -> gym.Env:
    if isolate:
        return IsolatedEnv(env_id, {"disable_env_checker": True, **kwargs}, gym.spec(env_id))
    return gym.make(env_id, disable_env_checker=True, **kwargs)


def _frame_json(frame: str | bytes) -> Any:
    """A received frame parsed (:func:`~verigym.serve.front.loads_json`; bytes as UTF-8, bad bytes
    replaced)."""
    return loads_json(frame if isinstance(frame, str) else frame.decode("utf-8", "replace"))


def _close(env: gym.Env) -> None:
    env.close()


def _late_off_loop(late: Callable[[Any], Any], future: asyncio.Future) -> None:
    """Run ``late`` on the result of a finished call nobody awaits, on a thread of its own."""
    if future.cancelled() or future.exception() is not None:
        return
    result = future.result()
    threading.Thread(
        target=quiet(lambda: late(result)), name="verigym-env-close", daemon=True
    ).start()


def _observation_frame(
    observation: Any, reward: Any, terminated: Any, truncated: Any, info: Any
) -> str:
    payload = {
        "observation": {
            "observation": encode(observation),
            "info": encode(info),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        },
        "reward": None if reward is None else float(reward),
        "done": bool(terminated) or bool(truncated),
    }
    return json.dumps({"type": "observation", "data": payload})
