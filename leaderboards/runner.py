"""The evaluation runner: an agent on a suite, one row per episode, resumable.

Every episode ``(env_id, seed)`` is independent: the env is reset with the seed and the agent with
``agent.reset(seed=seed)``, so results do not depend on which worker ran an episode or in what
order -- the local and the Ray backends (:mod:`verigym.leaderboards.backends`) give the same rows.

Read top to bottom: :func:`evaluate` rescales the suite (:func:`rescale_suite`), plans the jobs
that are not recorded yet (:func:`plan_jobs`), hands them to a backend, and writes each result to
the store as it arrives (:class:`ResultWriter`). One episode -- its
:class:`~verigym.leaderboards.episode.Job`, env and
:class:`~verigym.leaderboards.episode.EpisodePlayer` -- is :mod:`verigym.leaderboards.episode`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import json
import logging
import math
import os
import pathlib
import platform
import time
from dataclasses import dataclass, field
from typing import Any

import verigym
from verigym.leaderboards.agent_spec import AgentSpec, parse_agent_spec
from verigym.leaderboards.backends import run_local, run_ray
from verigym.leaderboards.episode import EpisodePlayer, Job, failed_result
from verigym.leaderboards.store import (
    DEFAULT_DIR,
    MAX_LENGTH,
    MAX_TIME_S,
    EpisodeRow,
    ResultsStore,
    canonical_kwargs,
)
from verigym.leaderboards.suite import Suite, load_suite
from verigym.progress import counter_bar
from verigym.provenance import git_sha

__all__ = [
    "EvalSummary",
    "JobPlan",
    "ResultWriter",
    "ResultsExistError",
    "evaluate",
    "plan_jobs",
    "provenance",
    "rescale_suite",
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
            the last (0: none), within the store's frame bounds (``store.MAX_FRAMES`` and its
            byte caps: past them frames are dropped, the last kept). Every episode's trajectory is
            stored in any case.
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
        ValueError: a bad spec, backend, ``record_frames`` or ``time_limit_scale``, or a suite
            naming unregistered ids or kwargs that are not JSON.
        ResultsExistError: every episode asked for is recorded already for this agent (the same
            run again) and ``resume`` is False (:func:`plan_jobs`). Episodes recorded by another
            suite or a shorter run are reused without it: only the others are played.
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    if record_frames < 0:
        raise ValueError(f"record_frames must be >= 0, got {record_frames}")
    spec = parse_agent_spec(agent)
    suite = rescale_suite(
        suite if isinstance(suite, Suite) else load_suite(suite),
        episodes=episodes,
        time_limit_scale=time_limit_scale,
    )
    _refuse_unplayable(suite)
    config_hash = spec.config_hash()
    with ResultsStore(out) as store:
        plan = plan_jobs(
            spec, suite, store, config_hash=config_hash, resume=resume, record_frames=record_frames
        )
        summary = EvalSummary(
            spec.text,
            config_hash,
            suite.name,
            store.path,
            planned=plan.planned,
            skipped=plan.skipped,
            not_covered=plan.not_covered,
        )
        bar = _Progress(len(plan.jobs), f"{spec.text} on {suite.name}", enabled=progress)
        write = ResultWriter(store, summary, bar)
        player = functools.partial(EpisodePlayer, spec.text, device, env_url, env_token)
        run = run_ray if backend == "ray" else run_local
        with bar:
            if plan.jobs:
                run(plan.jobs, player, workers or os.cpu_count() or 1, write)
    return summary


def rescale_suite(
    suite: Suite, *, episodes: int | None = None, time_limit_scale: float = 1.0
) -> Suite:
    """``suite`` with every task's episode count set to ``episodes`` (None: kept; the seeds start
    where they did) and its ``time_limit_s`` multiplied by ``time_limit_scale``.

    Returns:
        ``suite`` itself when nothing changes, else a copy (same name, metric, description, kind).

    Raises:
        ValueError: ``time_limit_scale`` is not a positive finite number, or a rescaled task
            leaves the suite's bounds (:class:`~verigym.leaderboards.suite.Task`).
    """
    if (
        isinstance(time_limit_scale, bool)
        or not isinstance(time_limit_scale, (int, float))
        or not 0 < time_limit_scale < float("inf")
    ):
        raise ValueError(f"time_limit_scale must be a positive number, got {time_limit_scale!r}")
    if episodes is None and time_limit_scale == 1.0:
        return suite
    tasks = tuple(
        dataclasses.replace(
            task,
            episodes=task.episodes if episodes is None else episodes,
            time_limit_s=task.time_limit_s * time_limit_scale,
        )
        for task in suite
    )
    return dataclasses.replace(suite, tasks=tasks)


def _refuse_unplayable(suite: Suite) -> None:
    """Refuse, before any episode runs, a suite naming ids that are not registered here or env
    kwargs that are not JSON (rows name their kwargs as JSON); raises ``ValueError``."""
    missing = suite.missing_ids()
    if missing:
        raise ValueError(
            f"suite {suite.name} names ids that are not registered here: {missing} (is an optional part missing? run verigym doctor)"
        )
    for task in suite:
        canonical_kwargs(task.env_kwargs)


@dataclass(frozen=True)
class JobPlan:
    """What :func:`plan_jobs` found to play."""

    jobs: list[Job]
    """The episodes to play, task by task in suite order, seeds ascending."""
    planned: int
    """Episodes of the tasks the agent covers (played or skipped)."""
    skipped: int
    """Episodes not played because their result is recorded already."""
    not_covered: list[str]
    """Tasks the agent cannot play (saved agents of other envs); not planned."""


def plan_jobs(
    spec: AgentSpec,
    suite: Suite,
    store: ResultsStore,
    *,
    config_hash: str,
    resume: bool = False,
    record_frames: int = 0,
) -> JobPlan:
    """The episodes of ``suite`` that ``spec`` still has to play into ``store``.

    An episode whose key ``(agent spec, config hash, env id, seed)`` has a row is skipped, however
    that row got there (another suite, a shorter run, a killed run); with ``resume``, episodes whose
    row is an ``error`` are played again. Tasks the agent does not cover are left out.

    Args:
        spec: the parsed agent spec.
        suite: the suite (rescaled already: :func:`rescale_suite`).
        store: the open results store that is read for what is recorded.
        config_hash: ``spec.config_hash()`` (passed in: it hashes a checkpoint's files).
        resume: also replay ``error`` rows, and never refuse the run.
        record_frames: the jobs' ``frames_every`` (0: no frames).

    Returns:
        A :class:`JobPlan`: the jobs, the counts of planned and skipped episodes, and the tasks
        not covered.

    Raises:
        ResultsExistError: without ``resume``, nothing is left to play and some episodes are
            recorded (the same run again: it could only duplicate what is recorded).
    """
    jobs: list[Job] = []
    not_covered: list[str] = []
    planned = skipped = existing = 0
    for task in suite:
        if not spec.covers(task.env_id):
            not_covered.append(task.env_id)
            continue
        seeds = set(task.seeds)
        recorded = store.recorded_seeds(spec.text, config_hash, task.env_id) & seeds
        done = store.done_seeds(spec.text, config_hash, task.env_id) & seeds if resume else recorded
        existing += len(recorded)
        skipped += len(done)
        planned += task.episodes
        jobs += [
            Job(task.env_id, dict(task.env_kwargs), seed, task.time_limit_s, record_frames)
            for seed in task.seeds
            if seed not in done
        ]
    if existing and not jobs and not resume:
        what = (
            f"env {suite.name}"
            if [t.env_id for t in suite] == [suite.name]
            else f"suite {suite.name}"
        )
        raise ResultsExistError(
            f"all {existing} episodes of {spec.text} on {what} are already in {store.path}; "
            "add --resume to retry the errors, or --out DIR to start a new results folder"
        )
    return JobPlan(jobs, planned, skipped, not_covered)


class ResultWriter:
    """Writes each finished episode to the store as it arrives: the backends' ``on_result``.

    A result is stored as an :class:`~verigym.leaderboards.store.EpisodeRow` keyed by the summary's
    suite, agent spec and config hash, with the job's env and seed and this process's
    :func:`provenance`. A result that fails validation (a NaN return, a score out of range ...)
    is never dropped: it is stored as an ``error`` row that says why (a resume plays it again).
    A row whose key another run recorded first is not written. Every call counts into the
    summary (``ran``, ``statuses``, ``rejected``, ``recorded_elsewhere``) and advances the bar.

    Args:
        store: the open results store.
        summary: the run's summary (names the suite, agent spec and config hash).
        bar: the run's progress bar.
    """

    def __init__(self, store: ResultsStore, summary: EvalSummary, bar: _Progress):
        self.store, self.summary, self.bar = store, summary, bar
        self.fields = dict(
            suite=summary.suite,
            agent_spec=summary.agent_spec,
            config_hash=summary.config_hash,
            **provenance(),
        )

    def __call__(self, job: Job, result: dict[str, Any]) -> None:
        """Store one episode's result fields (:meth:`EpisodePlayer.__call__`'s, with its
        ``trajectory`` and ``frames``, or a backend's ``timeout``/``error`` result)."""
        trajectory, frames = result.pop("trajectory", None), result.pop("frames", ())
        key = dict(
            env_id=job.env_id,
            env_version=int(job.env_id.rsplit("-v", 1)[1]),
            seed=job.seed,
            env_kwargs=canonical_kwargs(job.env_kwargs),
            **self.fields,
        )
        row = EpisodeRow(**key, **result)
        try:
            row.validate()
        except ValueError as exc:
            logger.warning(
                "%s seed %d: the result was refused (%s); recorded as an error",
                job.env_id,
                job.seed,
                exc,
            )
            self.summary.rejected += 1
            row = EpisodeRow(**key, **_refused_result(result, exc))
        if self.store.add(row, trajectory, frames):
            self.summary.ran += 1
            self.summary.statuses[row.status] = self.summary.statuses.get(row.status, 0) + 1
        else:
            self.summary.recorded_elsewhere += 1
        self.bar.advance(row)


def _refused_result(result: dict[str, Any], error: ValueError) -> dict[str, Any]:
    """The ``error`` result that replaces a refused one, keeping its length and time where they
    are valid numbers (clamped to the store's bounds) and 0 where not."""
    length = result.get("length")
    return failed_result(
        f"the episode's result was refused: {error}",
        length=min(max(length, 0), MAX_LENGTH)
        if isinstance(length, int) and not isinstance(length, bool)
        else 0,
        time_s=min(float(result["time_s"]), MAX_TIME_S) if _finite(result.get("time_s")) else 0.0,
    )


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
