"""One env in a child process of its own (``verigym serve-env --isolate``).

:class:`IsolatedEnv` is a ``gymnasium.Env`` whose env lives in a spawned worker process
(:class:`verigym.workers.BoundedWorker`, a new interpreter), one per session: ``reset``, ``step``,
the text methods and ``close`` are calls over a pipe (arguments and results pickled). A native
crash (a segfault in MuJoCo or in a plugin's C extension) kills only that process: the call raises
:class:`EnvProcessDied`, which ends that session with ``ENV_CRASHED`` while the server and every
other session go on. An exception the env raises is raised again in the server with its class
(a builtin one) or as :class:`EnvProcessError` (any other), so the session treats it as it would
in process.

Costs (measured, docs/serving.md): the child's start (an interpreter importing verigym and the
env, about a second, paid by that session alone, on its own thread) and one pipe round trip per
call.
"""

from __future__ import annotations

import builtins
from typing import Any

import gymnasium as gym

from verigym.workers import BoundedWorker, VerifierTimeout

__all__ = ["EnvProcessDied", "EnvProcessError", "IsolatedEnv"]

_CALL_SECONDS = 1e7
"""CPU seconds a call may take in the child: no limit of its own (``--step-timeout`` ends a call
that overruns, and closing the env kills the child)."""

_RECOVERABLE_NAMES = ("TypeError", "ValueError", "LookupError", "NotImplementedError")


class EnvProcessDied(Exception):
    """The env's child process died during a call (a segfault, a kill): the env is gone."""


class EnvProcessError(Exception):
    """The env in the child raised an exception whose class is not a builtin one; the message
    starts with its ``module:qualname``."""


class EnvProcessRefused(RuntimeError):
    """The env in the child raised an error it raises on purpose (``gymnasium.error.Error``, a
    subclass of a builtin ``ValueError``...) whose own class is not a builtin one."""


_ENV: dict[str, Any] = {}
"""The child's env (key ``"env"``); empty in the server."""


def _child(method: str, args: tuple) -> tuple[str, Any]:
    """Run in the child: one call on its env, its exception as a value."""
    try:
        if method == "make":
            env_id, spec, kwargs = args
            env = gym.make(env_id if env_id in gym.registry else spec, **kwargs)
            _ENV["env"] = env
            inner = env.unwrapped
            from verigym.core import TextInterface
            from verigym.serve.session import TEXT_METHODS

            text = [
                m
                for m in TEXT_METHODS
                if isinstance(inner, TextInterface) and callable(getattr(inner, m, None))
            ]
            return "ok", (
                env.observation_space,
                env.action_space,
                dict(inner.metadata),
                tuple(getattr(env, "reward_range", (float("-inf"), float("inf")))),
                text,
            )
        env = _ENV["env"]
        if method == "reset":
            seed, options = args
            return "ok", env.reset(seed=seed, options=options)
        if method == "step":
            return "ok", env.step(*args)
        if method == "text":
            name, *rest = args
            return "ok", getattr(env.unwrapped, name)(*rest)
        if method == "close":
            _ENV.pop("env", None)
            env.close()
            return "ok", None
        raise ValueError(f"unknown call {method!r}")
    except Exception as exc:  # noqa: BLE001 - handed to the server as a value
        kind = type(exc)
        recoverable = isinstance(exc, (*_builtin_recoverable(), gym.error.Error))
        return "raised", (kind.__module__, kind.__qualname__, str(exc)[:2000], recoverable)


def _builtin_recoverable() -> tuple[type, ...]:
    return tuple(getattr(builtins, name) for name in (*_RECOVERABLE_NAMES, "RuntimeError"))


class IsolatedEnv(gym.Env):
    """A proxy for ``gym.make(env_id, **kwargs)`` built and stepped in a child process.

    Args:
        env_id: the id to make in the child.
        kwargs: its constructor kwargs (already checked by the server's kwargs policy).
        spec: the server's ``EnvSpec`` of ``env_id`` (made from it in the child when the child's
            registry lacks the id: ids registered at run time).

    Attributes:
        text_methods: the :data:`verigym.serve.session.TEXT_METHODS` the env answers.

    Raises:
        EnvProcessDied: the child died while making the env.
        EnvProcessError, or the env's own builtin exception: ``gym.make`` raised in the child.
    """

    def __init__(self, env_id: str, kwargs: dict[str, Any], spec: Any = None):
        self._worker: BoundedWorker | None = BoundedWorker(start_method="spawn")
        self.env_id = env_id
        (
            self.observation_space,
            self.action_space,
            self.metadata,
            self.reward_range,
            self.text_methods,
        ) = self._call("make", env_id, spec, dict(kwargs))
        self.spec = spec

    def _call(self, method: str, *args: Any) -> Any:
        worker = self._worker
        if worker is None:
            raise EnvProcessDied(f"{self.env_id}'s process is closed")
        try:
            status, value = worker.call(_child, (method, args), _CALL_SECONDS)
        except VerifierTimeout as exc:
            self._worker = None
            raise EnvProcessDied(
                f"{self.env_id}'s process died during {method} (a native crash, e.g. a "
                f"segfault, or it was killed): {exc}"
            ) from None
        except RuntimeError as exc:  # the child could not pickle the result, or ran out of memory
            raise EnvProcessError(f"{self.env_id} {method}: {exc}") from None
        if status == "ok":
            return value
        module, qualname, message, recoverable = value
        if module == "builtins" and (qualname in _RECOVERABLE_NAMES or qualname == "RuntimeError"):
            raise getattr(builtins, qualname)(message)
        if recoverable:
            raise EnvProcessRefused(f"{module}:{qualname}: {message}")
        raise EnvProcessError(f"{module}:{qualname}: {message}")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """The child env's ``reset(seed=seed, options=options)``."""
        return self._call("reset", seed, options)

    def step(self, action: Any) -> Any:
        """The child env's ``step(action)``."""
        return self._call("step", action)

    def text(self, method: str, *args: Any) -> Any:
        """The child env's text method ``method(*args)`` (one of :attr:`text_methods`)."""
        if method not in self.text_methods:
            raise ValueError(f"{self.env_id} has no text method {method!r}")
        return self._call("text", method, *args)

    def close(self) -> None:
        """Close the env in the child, then end the child (killed at once where a call is
        stuck in it: safe from any thread)."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        process = worker._process
        if worker._lock.acquire(timeout=0.0):  # no call running: close the env politely
            try:
                if worker.running:
                    worker._connection.send((_child, ("close", ())))
                    worker._connection.poll(5.0)
            except (OSError, EOFError, BrokenPipeError):
                pass
            finally:
                worker._kill()
                worker._lock.release()
            return
        if process is not None:  # a call is stuck in the child: kill it, the call sees EOF
            process.kill()
        with worker._lock:
            worker._kill()
