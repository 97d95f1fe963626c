"""The evaluation runner: an agent on a suite, in parallel processes or on Ray, resumable.

Every episode ``(env_id, seed)`` is independent: the env is reset with the seed and the agent with
``agent.reset(seed=seed)``, so results do not depend on which worker ran an episode or in what
order -- the local and the Ray backends give the same rows.

Local backend: long-lived worker processes (``spawn``), each caching its env and agent per task.
The parent hands out episodes, writes each finished episode to the store at once, and kills a
worker whose episode passes the task's ``time_limit_s`` (the episode is recorded with status
``timeout``, a new worker takes its place, the run goes on).

Ray backend: one Ray task per episode (``ray.init()`` joins ``RAY_ADDRESS`` or starts a local
instance); an episode past its time limit is cancelled with ``ray.cancel(force=True)``.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import json
import logging
import math
import multiprocessing
import numbers
import os
import pathlib
import platform
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any

import numpy as np

from verigym.leaderboards.agent_spec import AgentSpec, parse_agent_spec
from verigym.leaderboards.store import DEFAULT_DIR, EpisodeRow, ResultsStore, canonical_kwargs
from verigym.leaderboards.suite import Suite, Task, load_suite
from verigym.leaderboards.trajectories import Recorder
from verigym.provenance import git_sha

__all__ = [
    "EvalSummary",
    "Job",
    "end_env_processes",
    "evaluate",
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


def _make_env(
    spec: AgentSpec, env_id: str, env_kwargs: dict[str, Any], render: bool = False
) -> Any:
    return make_env(env_id, env_kwargs, spec.text_view, render=render)


def make_env(
    env_id: str, env_kwargs: dict[str, Any], text_view: bool, *, render: bool = False
) -> Any:
    """The env of an episode as the runner builds it (``reverify`` rebuilds it the same way).

    Args:
        env_id, env_kwargs: the task.
        text_view: wrap it in :class:`~verigym.wrappers.LanguageWrapper` (agents that read text).
        render: ask for ``render_mode="rgb_array"`` (recorded frames) when the env offers it.
    """
    import gymnasium as gym

    import verigym  # noqa: F401  (registers the ids)

    url = os.environ.get(
        "VERIGYM_ENV_URL"
    )  # verigym eval --env-url: the env runs on a serve-env server
    if url:
        from verigym.remote import make as remote_make

        env = remote_make(env_id, url=url, **env_kwargs)
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

    entry = gym.spec(env_id).entry_point
    try:
        if isinstance(entry, str):
            module, _, name = entry.partition(":")
            entry = getattr(importlib.import_module(module), name)
        return list(getattr(entry, "metadata", {}).get("render_modes", []))
    except (ImportError, AttributeError):
        return []


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
        return _failed_result(
            f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}",
            episode_return=total,
            length=length,
        )
    if "score" not in info or "success" not in info:
        return _failed_result(
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


def _failed_result(
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


class _Cache:
    """A worker's env and agent, rebuilt when the task changes."""

    def __init__(self, spec: AgentSpec, device: str):
        self.spec, self.device = spec, device
        self.key: tuple | None = None
        self.env: Any = None
        self.agent: Any = None

    def get(self, job: Job) -> tuple[Any, Any]:
        key = (job.env_id, json.dumps(job.env_kwargs, sort_keys=True), job.frames_every > 0)
        if key != self.key:
            if self.env is not None:
                self.env.close()
            self.env = _make_env(self.spec, job.env_id, job.env_kwargs, render=job.frames_every > 0)
            self.agent = self.spec.build(self.env, device=self.device)
            self.key = key
        return self.agent, self.env


def _timed_episode(cache: _Cache, job: Job) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        agent, env = cache.get(job)
    except Exception as exc:
        result = _failed_result(f"could not build the env or agent: {type(exc).__name__}: {exc}")
    else:
        recorder = Recorder(
            env,
            agent,
            env_id=job.env_id,
            env_kwargs=job.env_kwargs,
            seed=job.seed,
            text_view=cache.spec.text_view,
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


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first), read from ``/proc``; [] where there is none."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            out.append(child)
            stack.append(child)
    return out


def _kill_tree(pid: int) -> None:
    """SIGKILL every descendant of ``pid`` (collected first, so none is reparented away in between)."""
    for child in _descendants(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass


def end_env_processes(keep: set[int] | frozenset[int] = frozenset()) -> None:
    """Stop what envs left running in this process: verifier workers, the shared Chromium.

    Forked Python workers go first: one forked while Chromium ran holds the Playwright driver's
    pipe open, and interpreter exit would then wait for the driver forever. Then the browser is
    shut down gracefully and anything left is killed.

    Args:
        keep: descendants to leave alone (those that ran before the envs were made).
    """
    python = os.path.realpath(sys.executable)
    for pid in _descendants(os.getpid()):
        if pid in keep:
            continue
        try:
            if os.path.realpath(f"/proc/{pid}/exe") == python:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    browser = sys.modules.get("verigym.envs.gui.browser")
    if browser is not None:
        browser.shutdown()
    for pid in _descendants(os.getpid()):
        if pid not in keep:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _end_worker(*_: Any) -> None:
    _kill_tree(os.getpid())
    os._exit(1)


def _bind_to_parent(parent_pid: int) -> None:
    """End this worker and everything it started (browsers included) as soon as the eval parent dies.

    Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) delivers SIGTERM when the parent
    dies, even by SIGKILL; the handler kills this worker's descendants and exits. The same
    handler serves ``Process.terminate()``.
    """
    signal.signal(signal.SIGTERM, _end_worker)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):
            logger.warning(
                "could not set the parent-death signal; workers may outlive a killed eval"
            )
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        _end_worker()


_PR_SET_PDEATHSIG = 1


def _worker_main(
    connection: Any, spec_text: str, device: str, parent_pid: int | None = None
) -> None:
    if parent_pid is not None:
        _bind_to_parent(parent_pid)
    os.environ.setdefault(
        "OMP_NUM_THREADS", "1"
    )  # one thread per worker: workers are the parallelism
    cache = _Cache(parse_agent_spec(spec_text), device)
    while True:
        message = connection.recv()
        if message is None:
            break
        connection.send(_timed_episode(cache, message))
    if cache.env is not None:
        cache.env.close()
    end_env_processes()


# ---------------------------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------------------------


class _Worker:
    def __init__(self, context: Any, spec_text: str, device: str):
        self.connection, child = context.Pipe()
        # not a daemon: envs may start their own worker processes (the SQL verifier does), which
        # daemonic processes may not; the parent-death signal ends a worker when the parent dies
        self.process = context.Process(
            target=_worker_main, args=(child, spec_text, device, os.getpid()), daemon=False
        )
        self.process.start()
        child.close()
        self.job: Job | None = None
        self.deadline = 0.0

    def submit(self, job: Job) -> None:
        self.job = job
        self.deadline = time.monotonic() + job.time_limit_s
        self.connection.send(job)

    def kill(self) -> None:
        if self.process.pid is not None:
            _kill_tree(self.process.pid)  # its browsers and subprocesses too
        self.process.kill()
        self.process.join(5)
        self.connection.close()

    def stop(self) -> None:
        try:
            self.connection.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.kill()


def _timeout_result(job: Job) -> dict[str, Any]:
    return _failed_result(
        f"the episode did not finish within {job.time_limit_s:g} s; the worker was killed",
        status="timeout",
        time_s=job.time_limit_s,
    )


def _run_local(
    spec_text: str,
    jobs: list[Job],
    workers: int,
    device: str,
    on_result: Callable[[Job, dict], None],
) -> None:
    context = multiprocessing.get_context("spawn")
    pending = list(reversed(jobs))
    pool = [_Worker(context, spec_text, device) for _ in range(min(workers, len(jobs)))]
    try:
        for worker in pool:
            if pending:
                worker.submit(pending.pop())
        while any(w.job is not None for w in pool):
            busy = [w for w in pool if w.job is not None]
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = wait([w.connection for w in busy], timeout=min(timeout, 1.0) + 0.01)
            now = time.monotonic()
            for index, worker in enumerate(pool):
                if worker.job is None:
                    continue
                job = worker.job
                if worker.connection in ready:
                    try:
                        result = worker.connection.recv()
                    except (EOFError, OSError):  # the worker died (crash, OOM kill)
                        result = _failed_result(
                            f"the worker process died (exit code {worker.process.exitcode})",
                            time_s=0.0,
                        )
                        worker.kill()
                        worker = pool[index] = _Worker(context, spec_text, device)
                elif now >= worker.deadline:
                    result = _timeout_result(job)
                    worker.kill()
                    worker = pool[index] = _Worker(context, spec_text, device)
                else:
                    continue
                worker.job = None
                on_result(job, result)
                if pending:
                    worker.submit(pending.pop())
    except BaseException:  # Ctrl-C or a store error: do not wait for running episodes
        for worker in pool:
            worker.kill()
        raise
    for worker in pool:
        worker.stop()


def _ray_episode(spec_text: str, job: Job, device: str) -> dict[str, Any]:
    return _timed_episode(_Cache(parse_agent_spec(spec_text), device), job)


def _run_ray(
    spec_text: str,
    jobs: list[Job],
    workers: int,
    device: str,
    on_result: Callable[[Job, dict], None],
) -> None:
    try:
        import ray
    except ImportError:
        raise RuntimeError('the Ray backend needs ray: pip install "verigym[ray]"') from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            num_cpus=None if os.environ.get("RAY_ADDRESS") else workers,
            include_dashboard=False,
            log_to_driver=False,
        )
    remote = ray.remote(num_cpus=1)(_ray_episode)
    try:
        pending = list(reversed(jobs))
        running: dict[Any, tuple[Job, float]] = {}
        while pending or running:
            while pending and len(running) < workers:
                job = pending.pop()
                running[remote.remote(spec_text, job, device)] = (
                    job,
                    time.monotonic() + job.time_limit_s,
                )
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in ready:
                job, _ = running.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:
                    result = _failed_result(f"Ray task failed: {exc}", time_s=0.0)
                on_result(job, result)
            now = time.monotonic()
            for ref, (job, deadline) in list(running.items()):
                if now >= deadline:
                    ray.cancel(ref, force=True)
                    running.pop(ref)
                    on_result(job, _timeout_result(job))
    finally:
        if started_here:
            ray.shutdown()


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
) -> EvalSummary:
    """Evaluate an agent spec on a suite and record one row per episode.

    Args:
        agent: an agent spec (:mod:`verigym.leaderboards.agent_spec`).
        suite: a suite name, a path to a suite file, or a :class:`Suite`.
        out: the results folder (``results.sqlite`` inside).
        workers: parallel episodes (default: the number of CPU cores).
        backend: ``"local"`` (processes) or ``"ray"``.
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
                    **_failed_result(
                        f"the episode's result was refused: {exc}",
                        length=max(length, 0)
                        if isinstance(length, int) and not isinstance(length, bool)
                        else 0,
                        time_s=float(result["time_s"]) if _finite(result.get("time_s")) else 0.0,
                    ),
                )
            if not store.add(row, trajectory, frames):
                summary.recorded_elsewhere += 1
                bar.advance(row)
                return
            summary.ran += 1
            summary.statuses[row.status] = summary.statuses.get(row.status, 0) + 1
            bar.advance(row)

        with bar:
            if jobs:
                (_run_ray if backend == "ray" else _run_local)(
                    spec.text, jobs, workers, device, record
                )
    return summary


def _finite(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


class _Progress:
    """A rich progress bar: episodes done, episodes/s, running success rate and mean score, ETA."""

    def __init__(self, total: int, title: str, enabled: bool):
        self.enabled = enabled and total > 0
        self.scores: list[float] = []
        self.successes = 0
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            from verigym.progress import Progress  # prints whole lines, not a live bar, in a log

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(
                    "{task.fields[rate]} ep/s  success {task.fields[success]}  mean score {task.fields[score]}"
                ),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
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
