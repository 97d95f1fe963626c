"""One episode of an evaluation: the :class:`Job` that names it, how its env is made
(:func:`make_env`) and played (:func:`run_episode`), and the :class:`EpisodePlayer` a worker plays
jobs with.

Everything here runs in a worker (a spawned process or a Ray task) and is built from plain values:
the backends (:mod:`verigym.leaderboards.backends`) import this module, and the runner
(:mod:`verigym.leaderboards.runner`) imports both, so no import goes back up.
"""

from __future__ import annotations

import contextlib
import json
import logging
import numbers
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from verigym.leaderboards.agent_spec import parse_agent_spec
from verigym.leaderboards.trajectories import Recorder
from verigym.workers import descendants, process_executable

__all__ = [
    "EpisodePlayer",
    "Job",
    "end_env_processes",
    "failed_result",
    "make_env",
    "run_episode",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """One episode to run: the env (registered id and constructor kwargs), its seed, and the
    wall-clock seconds it may take before its worker is killed (``time_limit_s``)."""

    env_id: str
    env_kwargs: dict[str, Any]
    seed: int
    time_limit_s: float
    frames_every: int = 0
    """Record a rendered frame every this many steps (0: none)."""


def make_env(
    env_id: str,
    env_kwargs: dict[str, Any],
    text_view: bool,
    *,
    render: bool = False,
    env_url: str | None = None,
    env_token: str | None = None,
) -> Any:
    """The env of an episode as the runner builds it (``reverify`` rebuilds it the same way).

    Args:
        env_id, env_kwargs: the task.
        text_view: wrap it in :class:`~verigym.wrappers.LanguageWrapper` (agents that read text).
        render: ask for ``render_mode="rgb_array"`` (recorded frames) when the env offers it
            (local envs only).
        env_url: play on the env served by ``verigym serve-env`` at this URL
            (:func:`verigym.remote.make`) instead of a local one.
        env_token: with ``env_url``, the server's token (None: :func:`verigym.remote.make`'s
            default, ``$VERIGYM_TOKEN``).

    Raises:
        gymnasium.error.Error: ``env_id`` is not registered (local envs).
        verigym.remote.RemoteEnvError: the server refused the env (with ``env_url``).
    """
    import gymnasium as gym

    import verigym  # noqa: F401  (registers the ids)

    if env_url:
        from verigym.remote import make as remote_make

        env = remote_make(env_id, url=env_url, token=env_token, **env_kwargs)
    else:
        if render and "render_mode" not in env_kwargs and "rgb_array" in _render_modes(env_id):
            env_kwargs = {**env_kwargs, "render_mode": "rgb_array"}
        env = gym.make(env_id, **env_kwargs)
    if text_view:
        from verigym.wrappers import LanguageWrapper

        env = LanguageWrapper(env)
    return env


def _render_modes(env_id: str) -> list[str]:
    """``metadata["render_modes"]`` of a registered env's class (imported, not built)."""
    import gymnasium as gym

    from verigym.registration import entry_point_class

    entry = entry_point_class(gym.spec(env_id).entry_point)
    return list(getattr(entry, "metadata", {}).get("render_modes", [])) if entry else []


def run_episode(agent: Any, env: Any, seed: int, *, recorder: Any = None) -> dict[str, Any]:
    """Play one episode; returns ``status, score, success, episode_return, length, error``.

    The agent acts deterministically (greedy policies, greedy decoding). An exception from the
    agent or the env is recorded as status ``error`` with its message.

    Args:
        agent, env, seed: the episode.
        recorder: a :class:`~verigym.leaderboards.trajectories.Recorder` that sees every step.
    """
    total, length = 0.0, 0
    try:
        if callable(getattr(agent, "reset", None)):
            agent.reset(seed=seed)
        observation, info = env.reset(seed=seed)
        if recorder is not None:
            recorder.reset(observation, info)
        while True:
            action = agent.act(observation, info, deterministic=True)
            observation, reward, terminated, truncated, info = env.step(action)
            if recorder is not None:
                recorder.step(action, observation, reward, terminated, truncated, info)
            total += float(
                reward
            )  # a NaN reward makes a NaN return, which the store refuses with a message
            length += 1
            if terminated or truncated:
                break
    except Exception as exc:
        return failed_result(
            f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}",
            episode_return=total,
            length=length,
        )
    if "score" not in info or "success" not in info:
        return failed_result(
            "the episode ended without info['success']/info['score'] (not a verigym-conformant env?)",
            episode_return=total,
            length=length,
        )
    return {
        "status": "ok",
        "score": _number(info["score"]),
        "success": _boolean(info["success"]),
        "episode_return": total,
        "length": length,
        "error": "",
    }


def failed_result(
    error: str,
    *,
    status: str = "error",
    episode_return: float = 0.0,
    length: int = 0,
    time_s: float | None = None,
) -> dict[str, Any]:
    """The result fields of an episode that has no verdict (it raised, timed out, its worker died, or
    its result was refused): score 0, not a success, and why.

    Args:
        error: what went wrong; the last 2,000 characters are kept (a traceback's end says most).
        status: ``"error"`` or ``"timeout"``.
        episode_return: the reward summed before the failure.
        length: steps taken before the failure.
        time_s: wall-clock seconds, when the caller knows them (else the caller adds ``time_s``).

    Returns:
        ``status``, ``score``, ``success``, ``episode_return``, ``length``, ``error`` (and
        ``time_s``): the fields of :class:`~verigym.leaderboards.store.EpisodeRow` an episode fills.
    """
    result: dict[str, Any] = {
        "status": status,
        "score": 0.0,
        "success": False,
        "episode_return": episode_return,
        "length": length,
        "error": error[-2000:],
    }
    if time_s is not None:
        result["time_s"] = time_s
    return result


def _number(value: Any) -> Any:
    """A real number as ``float``; anything else as it is (plain values) or its repr, for validation to refuse with a message."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    return value if isinstance(value, (bool, str, type(None))) else repr(value)[:200]


def _boolean(value: Any) -> Any:
    """``bool`` or NumPy bool as ``bool``; anything else as a plain value or its repr (refused by validation)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return (
        int(value)
        if isinstance(value, numbers.Integral)
        else value
        if isinstance(value, (str, float, type(None)))
        else repr(value)[:200]
    )


class EpisodePlayer:
    """Plays :class:`Job` s in one worker, keeping the env and agent while the task stays the same.

    Built from plain values, so a spawned worker process or a Ray task can build its own (the
    backends pickle ``functools.partial(EpisodePlayer, ...)``).

    Args:
        spec_text: the agent spec (:mod:`verigym.leaderboards.agent_spec`).
        device: torch device for learned agents.
        env_url: play on the envs served at this URL (``verigym serve-env``); None: local envs.
        env_token: with ``env_url``, the server's token (None: ``$VERIGYM_TOKEN``).
    """

    def __init__(
        self,
        spec_text: str,
        device: str = "cpu",
        env_url: str | None = None,
        env_token: str | None = None,
    ):
        self.spec = parse_agent_spec(spec_text)
        self.device, self.env_url, self.env_token = device, env_url, env_token
        self.key: tuple | None = None
        self.env: Any = None
        self.agent: Any = None
        self.resources = contextlib.ExitStack()
        """``shared_resources()`` of the env classes played (``held``), kept until :meth:`close`."""
        self.held: set[type] = set()

    def __call__(self, job: Job) -> dict[str, Any]:
        """Play one episode and return its result fields with ``time_s`` (wall-clock seconds),
        its ``trajectory`` and ``frames`` (see :func:`run_episode`); never raises for a failing
        env or agent (the result says ``error``)."""
        start = time.perf_counter()
        try:
            agent, env = self._env_and_agent(job)
        except Exception as exc:
            result = failed_result(f"could not build the env or agent: {type(exc).__name__}: {exc}")
        else:
            recorder = Recorder(
                env,
                agent,
                env_id=job.env_id,
                env_kwargs=job.env_kwargs,
                seed=job.seed,
                text_view=self.spec.text_view,
                frames_every=job.frames_every,
            )
            result = run_episode(agent, env, job.seed, recorder=recorder)
            try:
                result["trajectory"], result["frames"] = recorder.finish()
            except Exception:  # noqa: BLE001 - the row is kept even when its trajectory cannot be encoded
                logger.exception(
                    "%s seed %d: the trajectory could not be encoded", job.env_id, job.seed
                )
        result["time_s"] = time.perf_counter() - start
        return result

    def _env_and_agent(self, job: Job) -> tuple[Any, Any]:
        key = (job.env_id, json.dumps(job.env_kwargs, sort_keys=True), job.frames_every > 0)
        if key != self.key:
            if self.env is not None:
                self.env.close()
            self.env = make_env(
                job.env_id,
                job.env_kwargs,
                self.spec.text_view,
                render=job.frames_every > 0,
                env_url=self.env_url,
                env_token=self.env_token,
            )
            kind = type(self.env.unwrapped)  # one Chromium for all GUI envs of this worker
            if callable(getattr(kind, "shared_resources", None)) and kind not in self.held:
                self.held.add(kind)
                self.resources.enter_context(kind.shared_resources())
            self.agent = self.spec.build(self.env, device=self.device)
            self.key = key
        return self.agent, self.env

    def close(self) -> None:
        """Close the env and stop what envs left running in this process
        (:func:`end_env_processes`)."""
        if self.env is not None:
            self.env.close()
            self.env = None
        self.resources.close()
        end_env_processes()


def end_env_processes(keep: set[int] | frozenset[int] = frozenset()) -> None:
    """Stop what envs left running in this process: verifier workers, the shared Chromium.

    Forked Python workers go first: one forked while Chromium ran holds the Playwright driver's
    pipe open, and interpreter exit would then wait for the driver forever. Then the browser is
    shut down gracefully and anything left is killed.

    Args:
        keep: descendants to leave alone (those that ran before the envs were made).
    """
    from verigym.envs.gui.browser import close_shared_browser  # light: no Playwright

    python = os.path.realpath(sys.executable)
    for pid in descendants(os.getpid()):
        if pid in keep:
            continue
        if process_executable(pid) == python:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    close_shared_browser()  # a no-op where no GUI env ran
    for pid in descendants(os.getpid()):
        if pid not in keep:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
