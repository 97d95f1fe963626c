"""What every part of the env server shares (``verigym serve-env``): its settings
(:class:`ServeConfig`), the error a session sends (:class:`ProtocolError`) and the state its
sessions share (:class:`ServedEnvs`: the served ids, the session table, the sessions' threads, the
kwargs policy). :mod:`verigym.serve.session` (one client's env) and :mod:`verigym.serve.app` (the
routes) both build on it, so neither imports the other's module for it.
"""

from __future__ import annotations

import concurrent.futures
import json
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from verigym.serve.threads import PinnedPool
from verigym.serve.wire import WireError, decode, frame_budget

__all__ = [
    "INLINE_FAMILIES",
    "ISOLATED_FAMILIES",
    "ProtocolError",
    "ServeConfig",
    "ServedEnvs",
]

INLINE_FAMILIES = frozenset({"text", "grid", "multiagent"})
"""Families whose envs are pure Python in the server's process (no sandbox, browser or native
library). Kept for compatibility: every session now runs on a thread of its own."""

ISOLATED_FAMILIES = frozenset({"mujoco"})
"""Families that ``--isolate`` runs in a child process per session, besides every plugin id."""


@dataclass(frozen=True)
class ServeConfig:
    """Settings of one server.

    Attributes:
        env_ids: the ids a session may ask for; empty: every registered verigym Gymnasium id
            (of ``family`` if given).
        family: restrict the default ids to this family.
        max_sessions: open sessions at most (WebSocket sessions, and HTTP ``/reset`` and
            uncached ``/schema`` requests while their env lives); one more gets
            ``CAPACITY_REACHED`` (HTTP 503).
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


class ProtocolError(Exception):
    """An error sent to the client as ``{"type": "error", "data": {"code": code, ...}}``.

    Args:
        code: the protocol's error code (``"NOT_RESET"``, ``"STEP_TIMEOUT"``, ...).
        message: what went wrong and what to do, for the client.
        fatal: the session ends after this error is sent.
        **extra: more fields of the error's ``data`` (``param``, ``exception``, ...).
    """

    def __init__(self, code: str, message: str, *, fatal: bool = False, **extra: Any):
        super().__init__(message)
        self.code, self.fatal, self.extra = code, fatal, extra

    def frame(self) -> str:
        """The error as a JSON text frame."""
        return json.dumps(
            {"type": "error", "data": {"message": str(self), "code": self.code, **self.extra}}
        )


class ServedEnvs:
    """What the sessions of one server share: the served ids, the session table, the sessions'
    threads and the kwargs policy (:class:`verigym.serve.app.EnvServer` adds the routes).

    Args:
        config: the server's settings.

    Attributes:
        sessions: the open WebSocket sessions by id.
        families: the family of every registered verigym Gymnasium id.
        pool: the sessions' threads (one per session, idle ones kept for reuse).
        parser: the one thread that parses and decodes large frames
            (:meth:`verigym.serve.session.Session.parsed`): one at a time, so that neither the
            event loop's share of the interpreter nor the memory of parsed frames grows with the
            number of clients sending them.
        plugin_ids: the served ids of plugins (outside ``verigym/``), isolated by default.
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
        self.sessions: dict[str, Any] = {}  # verigym.serve.session.Session by id
        self.pool = PinnedPool(config.workers)
        self.parser = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="verigym-parse")
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
