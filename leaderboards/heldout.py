"""Held-out tasks: the content hashes of every evaluation task, and the filter training data goes through.

An evaluation task is what an env poses at a suite's evaluation seed (:func:`verigym.task_split.task_hash`).
Every training-data path (``verigym export --format sft``, :mod:`verigym.leaderboards.demonstrations`,
``verigym train sft`` and ``train grpo``) asks :class:`HeldOutTasks` whether a training episode's
task is one of them, and drops it if so, whatever its seed.

Which evaluation tasks count for an env id: every task of every shipped suite (and of any suite
given by path) whose env has the same entry point (class), at that task's seeds and
``env_kwargs``. Competitive suites are left out (their games are played between entrants, not
exported as demonstrations).

The hash sets are cached in ``$VERIGYM_CACHE/heldout/`` (one JSON file per suite task), keyed by
:data:`~verigym.task_split.TASK_HASH_VERSION`, the task (id, kwargs, seeds) and the SHA-256 of the
source files of the env's class and its bases, so an edit to an env's generator recomputes them.
Computing one costs a reset per evaluation seed (``verigym/GuessNumber-v0``: 60 seeds, well under a
second; the first RG id about 3 s for reasoning-gym's import).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import pathlib
import tempfile
from collections.abc import Iterable, Sequence
from typing import Any

from verigym.task_split import TASK_HASH_VERSION, task_hash

__all__ = [
    "HeldOutTasks",
    "drop_evaluation_records",
    "evaluation_tasks",
    "reset_task_hash",
    "task_hashes",
]


def reset_task_hash(env: Any, seed: int) -> str:
    """Reset ``env``'s unwrapped env at ``seed`` and return the task's hash.

    Both sides of the split (evaluation and training) hash through this function, on the unwrapped
    env, so a text view, a tensor view or ``gymnasium.make``'s wrappers change nothing. The caller
    resets its own (wrapped) env afterwards before playing.
    """
    inner = getattr(env, "unwrapped", env)
    observation, info = inner.reset(seed=int(seed))
    return task_hash(inner, observation, info)


def _source_key(env_id: str) -> str:
    """SHA-256 of the source files of the env's class and of its bases (outside site-packages)."""
    from verigym.registration import entry_point_class, row

    entry = row(env_id).entry_point
    digest = hashlib.sha256(f"{TASK_HASH_VERSION}\0{entry}".encode())
    cls = entry_point_class(entry)
    files = set()
    for base in cls.__mro__ if cls is not None else ():
        try:
            path = inspect.getsourcefile(base)
        except TypeError:
            continue
        if path and "site-packages" not in path:
            files.add(path)
    import verigym.task_split

    files.add(verigym.task_split.__file__)
    for path in sorted(files):
        try:
            digest.update(pathlib.Path(path).read_bytes())
        except OSError:
            digest.update(path.encode())
    return digest.hexdigest()


def evaluation_tasks(env_id: str, suites: Sequence[Any] | None = None) -> list[Any]:
    """The suite tasks whose evaluation tasks count against training on ``env_id``.

    Args:
        env_id: a registered id.
        suites: the suites (default: every shipped suite); competitive ones are skipped.

    Returns:
        :class:`~verigym.leaderboards.suite.Task` objects whose env has ``env_id``'s entry point.
    """
    from verigym.leaderboards.suite import list_suites, load_suite
    from verigym.registration import rows

    if suites is None:
        suites = [load_suite(name) for name in list_suites()]
    known = {r.id: str(r.entry_point) for r in rows()}
    entry = known.get(env_id)
    out, seen = [], set()
    for suite in suites:
        if getattr(suite, "kind", "single") != "single":
            continue
        for task in suite:
            if task.env_id not in known or known[task.env_id] != entry:
                continue
            key = (task.env_id, json.dumps(task.env_kwargs, sort_keys=True), task.seeds)
            if key not in seen:
                seen.add(key)
                out.append(task)
    return out


def task_hashes(
    env_id: str,
    seeds: Iterable[int],
    env_kwargs: dict[str, Any] | None = None,
    *,
    cache: bool = True,
) -> list[str]:
    """The task hash of each seed of ``env_id`` (made with ``env_kwargs``), cached on disk.

    Raises:
        gymnasium.error.Error: ``env_id`` is not registered.
    """
    from verigym.agents.llm.models import cache_root
    from verigym.registration import make

    seeds = [int(s) for s in seeds]
    kwargs = dict(env_kwargs or {})
    key = hashlib.sha256(
        json.dumps([env_id, kwargs, seeds, _source_key(env_id)], sort_keys=True).encode()
    ).hexdigest()[:32]
    path = cache_root() / "heldout" / f"{key}.json"
    if cache:
        try:
            stored = json.loads(path.read_text())
            if (
                isinstance(stored, list)
                and len(stored) == len(seeds)
                and all(isinstance(h, str) and len(h) == 64 for h in stored)
            ):
                return stored
        except (OSError, ValueError):
            pass
    env = make(env_id, **kwargs)
    try:
        hashes = [reset_task_hash(env, seed) for seed in seeds]
    finally:
        env.close()
    if cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                "w", dir=path.parent, delete=False, suffix=".tmp"
            ) as file:
                json.dump(hashes, file)
            os.replace(file.name, path)
        except OSError:  # a read-only cache: computed again next time
            pass
    return hashes


class HeldOutTasks:
    """The evaluation tasks training must not see, per env id, computed on first use.

    Args:
        suites: suites whose evaluation tasks are held out (default: every shipped suite); a
            suite given by path on the command line is added to them by the caller.
        cache: keep the hash sets on disk (see the module docstring).

    Use :meth:`is_evaluation_task` on a training episode's env and seed, or :meth:`hashes`.
    """

    def __init__(self, suites: Sequence[Any] | None = None, *, cache: bool = True):
        self._suites = suites
        self._cache = cache
        self._sets: dict[str, frozenset[str]] = {}
        self.dropped: dict[str, int] = {}
        """Training episodes dropped so far, per env id."""

    def hashes(self, env_id: str) -> frozenset[str]:
        """The hashes of every evaluation task that counts against training on ``env_id``."""
        found = self._sets.get(env_id)
        if found is None:
            out: set[str] = set()
            for task in evaluation_tasks(env_id, self._suites):
                out.update(task_hashes(task.env_id, task.seeds, task.env_kwargs, cache=self._cache))
            found = self._sets[env_id] = frozenset(out)
        return found

    def is_evaluation_task(self, env_id: str, env: Any, seed: int) -> bool:
        """Whether ``env`` (of ``env_id``) reset at ``seed`` poses an evaluation task.

        Resets ``env``'s unwrapped env (:func:`reset_task_hash`); the caller resets it again
        before playing. Counts a hit in :attr:`dropped`.
        """
        held = self.hashes(env_id)
        if not held:
            return False
        hit = reset_task_hash(env, seed) in held
        if hit:
            self.dropped[env_id] = self.dropped.get(env_id, 0) + 1
        return hit


def drop_evaluation_records(
    records: Iterable[dict[str, Any]], held_out: HeldOutTasks | None = None
) -> tuple[list[dict[str, Any]], dict[str, int], int]:
    """Leave out the SFT records (``verigym export --format sft`` rows) whose task is an evaluation task.

    A record names its ``env_id`` and ``seed``; its task is that env (default kwargs) reset at that
    seed. Records made before the split was by content (the shipped adapter's data) can hold them.

    Args:
        records: dicts with ``env_id`` (a registered id) and ``seed`` (an int in ``[0, 2**32)``).
        held_out: the evaluation tasks (default: every shipped suite's).

    Returns:
        ``(kept, dropped per env id, unchecked)``: ``unchecked`` counts records kept without a
        check (no registered ``env_id`` or no integer ``seed``: data from elsewhere).
    """
    from verigym.registration import make, rows

    held_out = held_out if held_out is not None else HeldOutTasks()
    known = {r.id for r in rows() if r.api == "gymnasium"}
    envs: dict[str, Any] = {}
    kept: list[dict[str, Any]] = []
    unchecked = 0
    try:
        for record in records:
            env_id, seed = record.get("env_id"), record.get("seed")
            if (
                not isinstance(env_id, str)
                or env_id not in known
                or not isinstance(seed, int)
                or isinstance(seed, bool)
                or not 0 <= seed < 2**32
            ):
                unchecked += 1
                kept.append(record)
                continue
            if not held_out.hashes(env_id):
                kept.append(record)
                continue
            if env_id not in envs:
                envs[env_id] = make(env_id)
            if not held_out.is_evaluation_task(env_id, envs[env_id], seed):
                kept.append(record)
    finally:
        for env in envs.values():
            env.close()
    return kept, dict(held_out.dropped), unchecked
