"""Leaderboard suites: data files in ``leaderboards/suites/`` naming what an agent is evaluated on.

A suite file (JSON) looks like::

    {
      "name": "starter",
      "description": "A few tasks from every family.",
      "metric": "score",
      "tasks": [
        {"env_id": "verigym/GuessNumber-v0", "episodes": 20, "time_limit_s": 60},
        {"env_id": "verigym/Treasure-7x7-v0", "episodes": 20, "seed_start": 1000000}
      ]
    }

Seeds. Evaluation uses held-out seeds: ``[EVAL_SEED_START, EVAL_SEED_START + 10**6)``. Training
(``verigym train``) and examples use seeds below ``TRAIN_SEED_END``; tests use their own small
seeds. A task's seeds are ``seed_start + i`` for ``i < episodes``; ``seed_start`` defaults to
``EVAL_SEED_START`` and must lie in the evaluation range.

Metrics: ``"score"`` (``info["score"]``, in [0, 1]), ``"success"`` (rate) or ``"return"``.
Optional: ``"summary"`` (suite-level metrics from the stored episodes,
:mod:`verigym.leaderboards.achievements`) and ``"reference"`` (published per-task numbers shown
beside the standings, never ranked, :mod:`verigym.leaderboards.reference`).

Competitive suites (``"kind": "competitive"``, metric ``"rating"``) name two-player PettingZoo
games; ``verigym eval --agent A --agent B ...`` plays every pair of entrants ``episodes`` matches
per game (seats alternating) and the standings rank entrants by an openskill (Plackett-Luce,
a TrueSkill-like Bayesian rating) ordinal ``mu - 3 sigma``. See :mod:`verigym.leaderboards.arena`.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EVAL_SEED_START",
    "TRAIN_SEED_END",
    "METRICS",
    "Suite",
    "Task",
    "list_suites",
    "load_suite",
]

TRAIN_SEED_END = 1_000_000
"""Seeds ``[0, TRAIN_SEED_END)`` are for training and examples."""
EVAL_SEED_START = 1_000_000
"""Seeds ``[EVAL_SEED_START, EVAL_SEED_START + 10**6)`` are held out for evaluation."""
EVAL_SEED_END = 2_000_000
METRICS = ("score", "success", "return", "rating")
KINDS = ("single", "competitive")
SUITES_DIR = pathlib.Path(__file__).resolve().parent / "suites"
_VERSION = re.compile(r"-v(\d+)$")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A suite's name: it names files (``leaderboard-<name>.html``), so a short plain word."""
MAX_TIME_LIMIT_S = 7 * 86400.0
"""Longest ``time_limit_s`` of a task (seconds): one week, scaled limits included."""
MAX_EPISODES = 100_000
"""Most episodes of one task."""
MAX_TASKS = 1_000
"""Most tasks of one suite."""
MAX_SUITE_BYTES = 1 << 20
"""A suite file larger than this is refused before it is parsed."""
MAX_ID_CHARS = 200
MAX_DESCRIPTION_CHARS = 4096


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class Task:
    """One env of a suite.

    Attributes:
        env_id: a registered id with its version, e.g. ``verigym/Treasure-7x7-v0``.
        episodes: number of episodes (one per seed).
        seed_start: first evaluation seed (in the held-out range).
        time_limit_s: wall-clock limit of one episode, seconds; past it the episode is recorded
            with status ``timeout`` and the run goes on.
        env_kwargs: constructor overrides (JSON-serializable); a suite file may set only what the
            env declares settable from outside (:func:`verigym.registration.untrusted_kwargs`).
    """

    env_id: str
    episodes: int = 20
    seed_start: int = EVAL_SEED_START
    time_limit_s: float = 60.0
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not 0 < len(self.env_id) <= MAX_ID_CHARS:
            raise ValueError(
                f"suite task env_id must be an id of 1 to {MAX_ID_CHARS} characters, got {str(self.env_id)[:80]!r}"
            )
        if not _VERSION.search(self.env_id):
            raise ValueError(
                f"suite task {self.env_id!r} must name a version (…-vN): scores are never compared across versions"
            )
        if not _positive_int(self.episodes) or self.episodes > MAX_EPISODES:
            raise ValueError(
                f"{self.env_id}: episodes must be an int in [1, {MAX_EPISODES}], got {self.episodes!r}"
            )
        if not (isinstance(self.seed_start, int) and not isinstance(self.seed_start, bool)):
            raise ValueError(f"{self.env_id}: seed_start must be an int, got {self.seed_start!r}")
        if not (
            EVAL_SEED_START <= self.seed_start and self.seed_start + self.episodes <= EVAL_SEED_END
        ):
            raise ValueError(
                f"{self.env_id}: seeds {self.seed_start}..{self.seed_start + self.episodes - 1} leave the held-out range [{EVAL_SEED_START}, {EVAL_SEED_END})"
            )
        if (
            isinstance(self.time_limit_s, bool)
            or not isinstance(self.time_limit_s, (int, float))
            or not 0 < self.time_limit_s <= MAX_TIME_LIMIT_S
        ):
            raise ValueError(
                f"{self.env_id}: time_limit_s must be a number of seconds in (0, {MAX_TIME_LIMIT_S:g}], got {self.time_limit_s!r}"
            )
        if not isinstance(self.env_kwargs, dict):
            raise ValueError(
                f"{self.env_id}: env_kwargs must be an object, got {type(self.env_kwargs).__name__}"
            )

    @property
    def seeds(self) -> range:
        return range(self.seed_start, self.seed_start + self.episodes)

    @property
    def version(self) -> int:
        return int(_VERSION.search(self.env_id).group(1))


@dataclass(frozen=True)
class Suite:
    """A named list of tasks and the metric that ranks agents on it."""

    name: str
    tasks: tuple[Task, ...]
    metric: str = "score"
    description: str = ""
    kind: str = "single"
    summary: tuple[str, ...] = ()
    """Suite-level metrics computed from the stored episodes besides ``metric``
    (:data:`verigym.leaderboards.achievements.SUMMARIES`: ``"crafter_score"``)."""
    reference: tuple[str, ...] = ()
    """Reference columns: published per-task numbers shown beside the standings, never ranked
    (:data:`verigym.leaderboards.reference.REFERENCES`: ``"miniwob_human"``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not 0 < len(self.name) <= MAX_ID_CHARS:
            raise ValueError(
                f"a suite's name must be text of 1 to {MAX_ID_CHARS} characters, got {str(self.name)[:80]!r}"
            )
        if not isinstance(self.description, str) or len(self.description) > MAX_DESCRIPTION_CHARS:
            raise ValueError(
                f"suite {self.name}: description must be text of at most {MAX_DESCRIPTION_CHARS} characters"
            )
        if len(self.tasks) > MAX_TASKS:
            raise ValueError(f"suite {self.name}: {len(self.tasks)} tasks (at most {MAX_TASKS})")
        if self.kind not in KINDS:
            raise ValueError(f"suite {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.metric not in METRICS or (self.metric == "rating") != (self.kind == "competitive"):
            raise ValueError(
                f"suite {self.name}: metric {self.metric!r} does not fit kind {self.kind!r} (competitive suites use 'rating')"
            )
        ids = [t.env_id for t in self.tasks]
        if len(set(ids)) != len(ids):
            raise ValueError(f"suite {self.name}: an env id appears twice")
        if not self.tasks:
            raise ValueError(f"suite {self.name} has no tasks")
        from verigym.leaderboards.achievements import SUMMARIES

        if not isinstance(self.summary, (tuple, list)) or not all(
            isinstance(s, str) and s in SUMMARIES for s in self.summary
        ):
            raise ValueError(f"suite {self.name}: summary must list names among {SUMMARIES}")
        object.__setattr__(self, "summary", tuple(self.summary))
        from verigym.leaderboards.reference import REFERENCES

        if not isinstance(self.reference, (tuple, list)) or not all(
            isinstance(r, str) and r in REFERENCES for r in self.reference
        ):
            raise ValueError(f"suite {self.name}: reference must list names among {REFERENCES}")
        object.__setattr__(self, "reference", tuple(dict.fromkeys(self.reference)))

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    @property
    def episodes(self) -> int:
        return sum(t.episodes for t in self.tasks)

    def missing_ids(self) -> list[str]:
        """Task ids that are not registered here (an optional part may be missing)."""
        import verigym

        known = {r.id for r in verigym.rows()}
        return [t.env_id for t in self.tasks if t.env_id not in known]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Suite:
        """A suite from its file's JSON object.

        Raises:
            ValueError: the object is not a valid suite; the message is one line naming the field.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a suite must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - {
            "name",
            "tasks",
            "metric",
            "description",
            "kind",
            "summary",
            "reference",
        }
        if unknown:
            raise ValueError(
                f"suite {str(data.get('name'))[:80]}: unknown fields {sorted(map(str, unknown))[:10]}"
            )
        for required in ("name", "tasks"):
            if required not in data:
                raise ValueError(f"a suite needs {required!r}")
        if not isinstance(data["name"], str) or not _NAME.fullmatch(data["name"]):
            raise ValueError(
                f"a suite file's name must be 1 to 64 letters, digits, '.', '_' or '-' (it names files), got {str(data['name'])[:80]!r}"
            )
        if not isinstance(data["tasks"], list) or len(data["tasks"]) > MAX_TASKS:
            raise ValueError(
                f"suite {str(data['name'])[:80]}: tasks must be a list of at most {MAX_TASKS} objects"
            )
        fields_ = {"env_id", "episodes", "seed_start", "time_limit_s", "env_kwargs"}
        for index, task in enumerate(data["tasks"], 1):
            if not isinstance(task, dict) or not set(task) <= fields_ or "env_id" not in task:
                raise ValueError(
                    f"suite {str(data['name'])[:80]}: task {index} must be an object with env_id and only {sorted(fields_)}"
                )
        tasks = tuple(Task(**t) for t in data["tasks"])
        for task in tasks:
            _check_env_kwargs(data.get("name"), task)
        kind = data.get("kind", "single")
        metric = data.get("metric", "rating" if kind == "competitive" else "score")
        return cls(
            name=data["name"],
            tasks=tasks,
            metric=metric,
            description=data.get("description", ""),
            kind=kind,
            summary=data.get("summary", ()),
            reference=data.get("reference", ()),
        )


def _check_env_kwargs(suite: Any, task: Task) -> None:
    """Refuse a suite file's ``env_kwargs`` that its env does not declare settable from outside
    (:func:`verigym.registration.untrusted_kwargs`): a suite file is data, not operator code.

    A task whose id is not registered here is left to :meth:`Suite.missing_ids` (it is skipped).

    Raises:
        ValueError: a kwarg is refused; the message names the suite, the task and the parameter.
    """
    if not task.env_kwargs:
        return
    from verigym.registration import KwargsRefused, require_id, untrusted_kwargs

    try:
        require_id(task.env_id)
    except Exception:  # noqa: BLE001 - an unknown id or version is left to Suite.missing_ids
        return
    try:
        untrusted_kwargs(task.env_id, task.env_kwargs)
    except KwargsRefused as exc:
        raise ValueError(f"suite {suite}: env_kwargs of {task.env_id}: {exc}") from None


def list_suites() -> list[str]:
    """Names of the suites shipped with verigym."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.json"))


def load_suite(name_or_path: str | pathlib.Path) -> Suite:
    """Load a shipped suite by name, or a suite file by path.

    Raises:
        FileNotFoundError: no such suite (the message lists the shipped ones).
        ValueError: the file is not a valid suite (one line saying why: not JSON, ``NaN`` or
            ``Infinity``, over :data:`MAX_SUITE_BYTES`, a field of the wrong type or out of bounds).
    """
    path = pathlib.Path(name_or_path)
    if not path.suffix:
        path = SUITES_DIR / f"{name_or_path}.json"
    if not path.exists():
        raise FileNotFoundError(
            f"no suite {name_or_path!r}; shipped suites: {', '.join(list_suites())} (or give a path to a .json file)"
        )
    with json_file_errors(path):
        return Suite.from_dict(read_json(path, MAX_SUITE_BYTES, "a suite file"))


def read_json(path: pathlib.Path, max_bytes: int, what: str) -> Any:
    """The JSON value in ``path``, refused (``ValueError``) over ``max_bytes`` or holding ``NaN`` or
    ``Infinity``; ``what`` names the file in the message."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{what} is at most {max_bytes} bytes, this one {size}")
    return json.loads(path.read_bytes().decode("utf-8"), parse_constant=_no_constant)


@contextlib.contextmanager
def json_file_errors(path: pathlib.Path) -> Iterator[None]:
    """Reading and checking the JSON file ``path``: any failure leaves as one ``ValueError`` line
    that names the file (invalid JSON, a refused value, a file that cannot be read)."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError included
        raise ValueError(f"{path}: {' '.join(str(exc).split())[:500]}") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number this file may hold (give a finite number)")
