"""The evaluation runner: an agent on a suite, one row per episode, resumable.

Every episode ``(env_id, seed)`` is independent: the env is reset with the seed and the agent with
``agent.reset(seed=seed)``, so results do not depend on which worker ran an episode or in what
order -- the local and the Ray backends (:mod:`verigym.leaderboards.backends`) give the same rows.

Read top to bottom: the :class:`Job` of one episode, how its env is made (:func:`make_env`) and
played (:func:`run_episode`), the :class:`EpisodePlayer` a worker runs jobs with, then
:func:`evaluate`, which plans the jobs, hands them to a backend and writes each result to the
store as it arrives.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import logging
import math
import numbers
import os
import pathlib
import platform
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verigym.leaderboards.agent_spec import parse_agent_spec
from verigym.leaderboards.store import (
    DEFAULT_DIR,
    MAX_LENGTH,
    MAX_TIME_S,
    EpisodeRow,
    ResultsStore,
    canonical_kwargs,
)
from verigym.leaderboards.suite import Suite, Task, load_suite
from verigym.leaderboards.trajectories import Recorder
from verigym.progress import counter_bar
from verigym.provenance import git_sha
from verigym.workers import descendants, process_executable

__all__ = [
    "EpisodePlayer",
    "EvalSummary",
    "Job",
    "ResultsExistError",
    "end_env_processes",
    "evaluate",
    "failed_result",
    "make_env",
    "provenance",
    "run_episode",
]

logger = logging.getLogger(__name__)

_PACKAGES = (
    "gymnasium",
    "numpy",
    "pettingzoo",
    "torch",
    "mujoco",
    "transformers",
    "reasoning_gym",
    "playwright",
)


@functools.lru_cache(maxsize=1)
def provenance() -> dict[str, str]:
    """verigym version, package versions (JSON), git SHA (:func:`verigym.provenance.git_sha`), Python."""
    import verigym

    packages = {}
    for name in _PACKAGES:
        try:
            packages[name] = importlib.metadata.version(name.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            continue
    return {
        "verigym_version": verigym.__version__,
        "packages": json.dumps(packages, sort_keys=True),
        "git_sha": git_sha() or "not-a-git-checkout",
        "python": platform.python_version(),
    }


@dataclass(frozen=True)
class Job:
    """One episode to run."""

    env_id: str
    env_kwargs: dict[str, Any]
    seed: int
    time_limit_s: float
    frames_every: int = 0
    """Record a rendered frame every this many steps (0: none)."""


# ---------------------------------------------------------------------------------------------
# One episode (runs in a worker)
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# The public entry point
# ---------------------------------------------------------------------------------------------


@dataclass
class EvalSummary:
    """What :func:`evaluate` did."""

    agent_spec: str
    config_hash: str
    suite: str
    store_path: pathlib.Path
    planned: int = 0
    skipped: int = 0
    ran: int = 0
    """Episodes this run played and recorded (never those another run recorded meanwhile)."""
    statuses: dict[str, int] = field(default_factory=dict)
    recorded_elsewhere: int = 0
    """Episodes this run played whose key another run on the same store recorded first (not written)."""
    rejected: int = 0
    """Episodes whose result failed validation (a NaN return, a score out of range ...); recorded as ``error`` rows."""
    not_covered: list[str] = field(default_factory=list)
    """Tasks the agent cannot play (saved agents of other envs); not run."""


class ResultsExistError(RuntimeError):
    """Results for this agent and suite exist already and ``resume`` was not asked for."""


def evaluate(
    agent: str,
    suite: str | Suite,
    *,
    out: str | pathlib.Path = DEFAULT_DIR,
    workers: int | None = None,
    backend: str = "local",
    resume: bool = False,
    device: str = "cpu",
    episodes: int | None = None,
    progress: bool = True,
    record_frames: int = 0,
    time_limit_scale: float = 1.0,
    env_url: str | None = None,
    env_token: str | None = None,
) -> EvalSummary:
    """Evaluate an agent spec on a suite and record one row per episode.

    Args:
        agent: an agent spec (:mod:`verigym.leaderboards.agent_spec`).
        suite: a suite name, a path to a suite file, or a :class:`Suite`.
        out: the results folder (``results.sqlite`` inside).
        workers: parallel episodes (default: the number of CPU cores).
        backend: ``"local"`` (processes) or ``"ray"`` (:mod:`verigym.leaderboards.backends`).
        resume: continue a run whose rows are partly recorded (runs only what is missing, and
            plays ``error`` rows again).
        device: torch device for learned agents.
        episodes: override every task's episode count (keeps the seeds' start).
        progress: show a progress bar.
        record_frames: also store a rendered frame (PNG) every this many steps, with the first and
            the last (0: none). Every episode's trajectory is stored in any case.
        time_limit_scale: multiplies every task's ``time_limit_s`` (> 0), for an agent slower
            than the suite's limits assume (an LLM served on a CPU, many episodes sharing one
            model server). Only which episodes time out can change: an episode that finishes is
            scored the same.
        env_url: play on the envs served by ``verigym serve-env`` at this URL
            (:func:`verigym.remote.make`) instead of local ones; every worker gets it (and
            ``env_token``) as an argument.
        env_token: with ``env_url``, the server's token (None: ``$VERIGYM_TOKEN``, read by
            :func:`verigym.remote.make`).

    Raises:
        ValueError: a bad spec, backend, or a suite naming unregistered ids.
        ResultsExistError: every episode asked for is recorded already for this agent (the same
            run again) and ``resume`` is False. Episodes recorded by another suite or a shorter run
            are reused without it: only the others are played.
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    spec = parse_agent_spec(agent)
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    if (
        isinstance(time_limit_scale, bool)
        or not isinstance(time_limit_scale, (int, float))
        or not 0 < time_limit_scale < float("inf")
    ):
        raise ValueError(f"time_limit_scale must be a positive number, got {time_limit_scale!r}")
    if episodes is not None or time_limit_scale != 1.0:
        suite = Suite(
            suite.name,
            tuple(
                Task(
                    t.env_id,
                    t.episodes if episodes is None else episodes,
                    t.seed_start,
                    t.time_limit_s * time_limit_scale,
                    t.env_kwargs,
                )
                for t in suite
            ),
            suite.metric,
            suite.description,
        )
    missing = suite.missing_ids()
    if missing:
        raise ValueError(
            f"suite {suite.name} names ids that are not registered here: {missing} (is an optional part missing? run verigym doctor)"
        )
    for task in suite:  # rows name their kwargs as JSON: a task whose kwargs are not JSON is refused before any episode runs
        canonical_kwargs(task.env_kwargs)
    config_hash = spec.config_hash()
    meta = provenance()
    workers = workers or os.cpu_count() or 1
    with ResultsStore(out) as store:
        summary = EvalSummary(spec.text, config_hash, suite.name, store.path)
        jobs: list[Job] = []
        existing = 0
        for task in suite:
            if not spec.covers(task.env_id):
                summary.not_covered.append(task.env_id)
                continue
            recorded = store.recorded_seeds(spec.text, config_hash, task.env_id) & set(task.seeds)
            # without resume, recorded episodes (another suite's or a shorter run's) are reused, errors included;
            # --resume also plays the error rows again
            done = store.done_seeds(spec.text, config_hash, task.env_id) if resume else recorded
            existing += len(recorded)
            summary.skipped += len(done & set(task.seeds))
            jobs += [
                Job(task.env_id, dict(task.env_kwargs), seed, task.time_limit_s, record_frames)
                for seed in task.seeds
                if seed not in done
            ]
        summary.planned = sum(t.episodes for t in suite if t.env_id not in summary.not_covered)
        if (
            existing and not jobs and not resume
        ):  # the same run again: it would only duplicate what is recorded
            what = (
                f"env {suite.name}"
                if [t.env_id for t in suite] == [suite.name]
                else f"suite {suite.name}"
            )
            raise ResultsExistError(
                f"all {existing} episodes of {spec.text} on {what} are already in {store.path}; "
                "add --resume to retry the errors, or --out DIR to start a new results folder"
            )
        bar = _Progress(len(jobs), f"{spec.text} on {suite.name}", enabled=progress)

        if record_frames < 0:
            raise ValueError(f"record_frames must be >= 0, got {record_frames}")

        def record(job: Job, result: dict[str, Any]) -> None:
            trajectory, frames = result.pop("trajectory", None), result.pop("frames", ())
            key = dict(
                suite=suite.name,
                env_id=job.env_id,
                env_version=int(job.env_id.rsplit("-v", 1)[1]),
                seed=job.seed,
                agent_spec=spec.text,
                config_hash=config_hash,
                env_kwargs=canonical_kwargs(job.env_kwargs),
                **meta,
            )
            row = EpisodeRow(**key, **result)
            try:
                row.validate()
            except (
                ValueError
            ) as exc:  # never dropped: recorded as an error that says why (a resume retries it)
                logger.warning(
                    "%s seed %d: the result was refused (%s); recorded as an error",
                    job.env_id,
                    job.seed,
                    exc,
                )
                summary.rejected += 1
                length = result.get("length")
                row = EpisodeRow(
                    **key,
                    **failed_result(
                        f"the episode's result was refused: {exc}",
                        length=min(max(length, 0), MAX_LENGTH)
                        if isinstance(length, int) and not isinstance(length, bool)
                        else 0,
                        time_s=min(float(result["time_s"]), MAX_TIME_S)
                        if _finite(result.get("time_s"))
                        else 0.0,
                    ),
                )
            if not store.add(row, trajectory, frames):
                summary.recorded_elsewhere += 1
                bar.advance(row)
                return
            summary.ran += 1
            summary.statuses[row.status] = summary.statuses.get(row.status, 0) + 1
            bar.advance(row)

        # the backends import this module (Job, EpisodePlayer): imported here, not at the top
        from verigym.leaderboards.backends import run_local, run_ray

        player = functools.partial(EpisodePlayer, spec.text, device, env_url, env_token)
        with bar:
            if jobs:
                (run_ray if backend == "ray" else run_local)(jobs, player, workers, record)
    return summary


def _finite(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


class _Progress:
    """The run's progress bar (:func:`verigym.progress.counter_bar`): episodes done, episodes/s,
    running success rate and mean score, ETA."""

    def __init__(self, total: int, title: str, enabled: bool):
        self.enabled = enabled and total > 0
        self.scores: list[float] = []
        self.successes = 0
        if self.enabled:
            self.progress = counter_bar(
                "{task.fields[rate]} ep/s  success {task.fields[success]}  mean score {task.fields[score]}"
            )
            self.task = self.progress.add_task(title, total=total, rate="-", score="-", success="-")
            self.start = time.perf_counter()

    def __enter__(self) -> _Progress:
        if self.enabled:
            self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self.progress.stop()

    def advance(self, row: EpisodeRow) -> None:
        self.scores.append(row.score)
        self.successes += bool(row.success)
        if self.enabled:
            done = len(self.scores)
            rate = done / max(time.perf_counter() - self.start, 1e-9)
            self.progress.update(
                self.task,
                advance=1,
                rate=f"{rate:.1f}",
                success=f"{self.successes / done:.0%}",
                score=f"{sum(self.scores) / done:.3f}",
            )
