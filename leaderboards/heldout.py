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
:data:`~verigym.task_split.TASK_HASH_VERSION`, the task (id, kwargs, seeds), the SHA-256 of the
source files of the env's class and its bases and the installed distributions' versions, so an
edit to an env's generator (or a new reasoning-gym) recomputes them.
Computing one costs a reset per evaluation seed (``verigym/GuessNumber-v0``: 60 seeds, well under a
second; the first RG id about 3 s for reasoning-gym's import).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import os
import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

from verigym.task_split import TASK_HASH_VERSION, task_hash

__all__ = [
    "HeldOutTasks",
    "count_tasks",
    "drop_evaluation_records",
    "evaluation_tasks",
    "reset_task_hash",
    "small_task_space_notes",
    "task_hashes",
    "task_spaces",
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


@functools.lru_cache(maxsize=1)
def _installed_key() -> str:
    """SHA-256 of the installed distributions' names and versions (the ``*.dist-info`` folders on
    ``sys.path``): a generator from a library, such as reasoning-gym's, changes with its version."""
    import sys

    names: list[str] = []
    for folder in sys.path:
        try:
            names += [n for n in os.listdir(folder or ".") if n.endswith(".dist-info")]
        except OSError:
            continue
    return hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()


def _source_key(env_id: str) -> str:
    """SHA-256 of the source files of the env's class and of its bases (outside site-packages)
    and of the installed distributions' versions."""
    from verigym.registration import entry_point_class, row

    entry = row(env_id).entry_point
    digest = hashlib.sha256(f"{TASK_HASH_VERSION}\0{entry}\0{_installed_key()}".encode())
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
    from verigym.agents.llm.models import cache_root, write_cache_json
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
        write_cache_json(path, hashes)
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


TASK_SPACES = pathlib.Path(__file__).resolve().parent / "task_spaces.json"
"""Shipped per-id counts of distinct tasks (:func:`count_tasks` over training seeds), read by
``verigym list --json`` and the standings; regenerate with ``python -m verigym.leaderboards.heldout``."""

SMALL_TASK_SPACE = 10_000
"""An id with fewer distinct tasks than this (estimated) has evaluation tasks that any training run
of that many seeds draws: they cannot be kept out of training data made elsewhere."""


def _estimate(distinct: int, sampled: int) -> float:
    """The size ``N`` of a uniform space in which ``sampled`` draws give ``distinct`` values on average."""
    if distinct >= sampled:
        return math.inf
    low, high = float(distinct), float(distinct)
    while high * (1 - (1 - 1 / high) ** sampled) < distinct:
        high *= 2
    while high * (1 - (1 - 1 / high) ** sampled) - distinct > 0.01 and high - low > 0.5:
        middle = (low + high) / 2
        if middle * (1 - (1 - 1 / middle) ** sampled) < distinct:
            low = middle
        else:
            high = middle
    return high


def count_tasks(env_id: str, sampled: int = 1000) -> dict[str, Any]:
    """How many distinct tasks ``env_id`` (default kwargs) draws, from its first training seeds.

    Args:
        env_id: a registered gymnasium id.
        sampled: training seeds ``0 .. sampled - 1`` reset and hashed.

    Returns:
        ``{"distinct_tasks": str, "sampled_seeds": int, "distinct_in_sample": int}``:
        ``distinct_tasks`` is exact (``"100"``) when the sample covers the space (the estimate of
        its size is within one of what was seen), ``"~N"`` when repeats were seen (the size of a
        uniform space that gives as many), ``">= sampled"`` when no task repeated.
    """
    from verigym.registration import make

    env = make(env_id)
    try:
        distinct = len({reset_task_hash(env, seed) for seed in range(sampled)})
    finally:
        env.close()
    size = _estimate(distinct, sampled)
    if math.isinf(size):
        text = f">= {sampled}"
    elif size - distinct < 1:
        text = str(distinct)
    else:
        text = f"~{round(size)}"
    return {"distinct_tasks": text, "sampled_seeds": sampled, "distinct_in_sample": distinct}


def task_spaces() -> dict[str, dict[str, Any]]:
    """The shipped table (:data:`TASK_SPACES`): ``{env_id: count_tasks(env_id)}``; ``{}`` when unreadable."""
    try:
        table = json.loads(TASK_SPACES.read_text())
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def small_task_space(entry: dict[str, Any] | None) -> bool:
    """Whether a :func:`count_tasks` entry says fewer than :data:`SMALL_TASK_SPACE` distinct tasks."""
    if not isinstance(entry, dict) or not isinstance(entry.get("distinct_tasks"), str):
        return False
    text = entry["distinct_tasks"]
    if text.startswith(">="):
        return False
    try:
        return float(text.lstrip("~")) < SMALL_TASK_SPACE
    except ValueError:
        return False


def small_task_space_notes(env_ids: Iterable[str]) -> list[str]:
    """One standings note naming the tasks whose evaluation tasks cannot be kept out of training
    (a small task space: :func:`small_task_space`); ``[]`` when there are none."""
    table = task_spaces()
    small = [
        f"{env_id.removeprefix('verigym/')} ({table[env_id]['distinct_tasks']})"
        for env_id in env_ids
        if small_task_space(table.get(env_id))
    ]
    if not small:
        return []
    return [
        "† Small task spaces (distinct tasks): "
        + ", ".join(small)
        + ". Their evaluation tasks are drawn by training seeds too: verigym's exports and trainers "
        "leave them out, but training data made elsewhere can hold them, so a score there may be "
        "memorised."
    ]


def _main() -> None:
    """Regenerate :data:`TASK_SPACES` for the ids of the shipped single-agent suites."""
    import sys

    from verigym.leaderboards.suite import list_suites, load_suite

    table = task_spaces()
    ids = sys.argv[1:] or sorted(
        {t.env_id for n in list_suites() for t in load_suite(n) if load_suite(n).kind == "single"}
    )
    for env_id in ids:
        slow = row_family(env_id) == "gui" or "RepoFix" in env_id or "Terminal" in env_id
        table[env_id] = count_tasks(env_id, 100 if slow else 1000)
        print(env_id, table[env_id], flush=True)
        TASK_SPACES.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


def row_family(env_id: str) -> str:
    from verigym.registration import row

    return row(env_id).family


if __name__ == "__main__":
    _main()
