"""Where the runner's episodes run: local worker processes or a Ray cluster.

Both backends take the same arguments: the :class:`~verigym.leaderboards.episode.Job` s, a
zero-argument ``new_player`` that builds an
:class:`~verigym.leaderboards.episode.EpisodePlayer` in the worker (a picklable
``functools.partial``: spawned processes and Ray tasks see none of the parent's objects), the
number of parallel episodes and ``on_result(job, result)``, called in the parent as each episode
ends, in the order they end.

Local backend (:func:`run_local`): long-lived worker processes (``spawn``), each keeping its env and
agent while the task stays the same. The parent hands out episodes and kills a worker whose episode
passes the task's ``time_limit_s`` (the episode is reported with status ``timeout``, a new worker
takes its place, the run goes on). Workers end with the parent, even when it is killed
(:func:`verigym.workers.set_parent_death_signal`), and take their env processes with them.

Ray backend (:func:`run_ray`): one Ray task per episode (``ray.init()`` joins ``RAY_ADDRESS`` or
starts a local instance); an episode past its time limit is cancelled with
``ray.cancel(force=True)``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import Any

from verigym.leaderboards.episode import EpisodePlayer, Job, failed_result
from verigym.workers import kill_tree, reap, set_parent_death_signal

__all__ = ["OnResult", "PlayerFactory", "run_local", "run_ray"]

PlayerFactory = Callable[[], EpisodePlayer]
"""Builds a worker's player; must pickle (``functools.partial(EpisodePlayer, spec, ...)``)."""
OnResult = Callable[[Job, dict[str, Any]], None]
"""Called in the parent with each finished job and its result fields."""


def _timeout_result(job: Job) -> dict[str, Any]:
    return failed_result(
        f"the episode did not finish within {job.time_limit_s:g} s; the worker was killed",
        status="timeout",
        time_s=job.time_limit_s,
    )


# ---------------------------------------------------------------------------------------------
# Local worker processes
# ---------------------------------------------------------------------------------------------


def _end_worker(*_: Any) -> None:
    kill_tree(os.getpid())
    os._exit(1)


def _bind_to_parent(parent_pid: int) -> None:
    """End this worker and everything it started (browsers included) as soon as the eval parent dies.

    The parent-death signal delivers SIGTERM when the parent dies, even by SIGKILL; the handler
    kills this worker's descendants and exits. The same handler serves ``Process.terminate()``.
    """
    signal.signal(signal.SIGTERM, _end_worker)
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        _end_worker()


def _worker_main(connection: Any, new_player: PlayerFactory, parent_pid: int) -> None:
    _bind_to_parent(parent_pid)
    os.environ.setdefault(
        "OMP_NUM_THREADS", "1"
    )  # one thread per worker: workers are the parallelism
    player = new_player()
    while True:
        job = connection.recv()
        if job is None:
            break
        connection.send(player(job))
    player.close()


class _Worker:
    """One worker process, the job it plays and that job's deadline (``time.monotonic``)."""

    def __init__(self, context: Any, new_player: PlayerFactory):
        self.connection, child = context.Pipe()
        # not a daemon: envs may start their own worker processes (the SQL verifier does), which
        # daemonic processes may not; the parent-death signal ends a worker when the parent dies
        self.process = context.Process(
            target=_worker_main, args=(child, new_player, os.getpid()), daemon=False
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
        reap(self.process, timeout=5, tree=True)  # its browsers and subprocesses too
        self.connection.close()

    def stop(self) -> None:
        try:
            self.connection.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.kill()


def run_local(
    jobs: list[Job], new_player: PlayerFactory, workers: int, on_result: OnResult
) -> None:
    """Play ``jobs`` in ``workers`` spawned processes (at most one per job).

    Args:
        jobs: the episodes, handed out in order.
        new_player: builds each worker's player (pickled into the worker).
        workers: parallel worker processes (>= 1).
        on_result: called with each job and its result; a worker that dies gives an ``error``
            result, one past the job's ``time_limit_s`` a ``timeout`` result.

    Raises:
        BaseException: whatever ``on_result`` raises, or ``KeyboardInterrupt``; every worker is
            killed first, without waiting for running episodes.
    """
    context = multiprocessing.get_context("spawn")
    pending = list(reversed(jobs))
    pool = [_Worker(context, new_player) for _ in range(min(workers, len(jobs)))]
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
                        worker.process.join(1.0)  # reaped, so its exit code is known
                        result = failed_result(
                            f"the worker process died (exit code {worker.process.exitcode})",
                            time_s=0.0,
                        )
                        worker.kill()
                        worker = pool[index] = _Worker(context, new_player)
                elif now >= worker.deadline:
                    result = _timeout_result(job)
                    worker.kill()
                    worker = pool[index] = _Worker(context, new_player)
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


# ---------------------------------------------------------------------------------------------
# Ray
# ---------------------------------------------------------------------------------------------


def _ray_episode(new_player: PlayerFactory, job: Job) -> dict[str, Any]:
    return new_player()(job)


def run_ray(jobs: list[Job], new_player: PlayerFactory, workers: int, on_result: OnResult) -> None:
    """Play ``jobs`` as Ray tasks, ``workers`` at a time (one CPU each).

    Joins the cluster at ``RAY_ADDRESS`` or starts a local Ray instance of ``workers`` CPUs (shut
    down at the end); a running cluster (``ray.is_initialized()``) is used as it is.

    Args:
        jobs, new_player, workers, on_result: as for :func:`run_local`; a task that fails gives an
            ``error`` result, one past the job's ``time_limit_s`` is cancelled and gives a
            ``timeout`` result.

    Raises:
        RuntimeError: Ray is not installed.
    """
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
                running[remote.remote(new_player, job)] = (
                    job,
                    time.monotonic() + job.time_limit_s,
                )
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in ready:
                job, _ = running.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:
                    result = failed_result(f"Ray task failed: {exc}", time_s=0.0)
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
