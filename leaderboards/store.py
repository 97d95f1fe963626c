"""The results store: SQLite (WAL), one row per episode, with provenance on every row.

Crash safety: each episode is committed in its own transaction as soon as it finishes, and the
table has a uniqueness key ``(agent_spec, config_hash, env_id, seed)``, so a run killed at any
point (``kill -9``) resumes by running only the missing episodes: nothing is lost, nothing is
duplicated. An ``error`` row is not a result: a resumed run plays that episode again and replaces it.
Each episode's trajectory (and its frames, on request) is written in the same transaction as its row.

Integrity: opening a store runs SQLite's ``PRAGMA quick_check`` and checks the tables, so a damaged,
unwritable or misplaced store stops with a :class:`StoreError` that names the file and says what to do.

Validation: a row is refused (``ValueError``) unless every field has its exact type and range, and
unless it names the env id and version, the seed,
the agent spec and its config hash, the verigym version, the package versions and the git SHA.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import json
import math
import os
import pathlib
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["DEFAULT_DIR", "EpisodeRow", "MatchRow", "ResultsStore", "StoreError"]

DEFAULT_DIR = pathlib.Path("verigym-results")
"""Where ``verigym eval`` writes and ``verigym leaderboard`` reads, relative to the working directory."""
DB_NAME = "results.sqlite"

STATUSES = ("ok", "timeout", "error")


@dataclass(frozen=True)
class EpisodeRow:
    """One evaluated episode.

    Attributes:
        suite: suite name (informational; results are keyed by agent, env and seed).
        env_id: the full id, with version.
        env_version: the ``N`` of ``-vN``.
        seed: the reset seed.
        agent_spec: the agent spec string (``random``, ``ppo:runs/ppo``, ...).
        config_hash: SHA-256 prefix of the agent's configuration (spec + checkpoint config).
        status: ``ok``, ``timeout`` or ``error``.
        score: ``info["score"]`` at episode end (0 when the episode did not finish).
        success: ``info["success"]`` at episode end.
        episode_return: sum of rewards.
        length: steps taken.
        time_s: wall-clock seconds of the episode.
        error: what went wrong, for ``timeout``/``error`` rows ("" otherwise).
        verigym_version, packages (JSON object of versions), git_sha, python: provenance.
        created_at: ISO-8601 UTC time the row was written.
    """

    suite: str
    env_id: str
    env_version: int
    seed: int
    agent_spec: str
    config_hash: str
    status: str
    score: float
    success: bool
    episode_return: float
    length: int
    time_s: float
    error: str
    verigym_version: str
    packages: str
    git_sha: str
    python: str
    created_at: str = ""

    PROVENANCE = ("env_id", "agent_spec", "config_hash", "verigym_version", "packages", "git_sha", "python")

    def validate(self) -> None:
        """Check every field strictly.

        Raises:
            ValueError: a field has the wrong type (``bool`` is not an ``int`` and an ``int`` is not
                a ``bool``), the row lacks provenance, or a value is out of range (``score`` outside
                [0, 1], a negative ``length`` or ``time_s``, a NaN or infinite number, a
                ``created_at`` that is not ISO 8601, an unknown ``status``).
        """
        for name in ("suite", "env_id", "agent_spec", "config_hash", "status", "error", "verigym_version", "packages", "git_sha", "python", "created_at"):
            _require_type(self, name, str)
        for name in ("env_version", "seed", "length"):
            _require_type(self, name, int)
        _require_type(self, "success", bool)
        for name in ("score", "episode_return", "time_s"):
            _require_finite(self, name)
        for name in self.PROVENANCE:
            if not getattr(self, name).strip():
                raise ValueError(f"refusing a result row without provenance: {name} is {getattr(self, name)!r}")
        if not self.env_id.endswith(f"-v{self.env_version}"):
            raise ValueError(f"env_version {self.env_version} does not match {self.env_id}")
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score {self.score!r} is outside [0, 1]")
        if self.length < 0 or self.time_s < 0:
            raise ValueError(f"length ({self.length}) and time_s ({self.time_s}) must be >= 0")
        if self.success and self.status != "ok":
            raise ValueError(f"a {self.status} row cannot be a success")
        _require_packages(self.packages)
        _require_iso_date(self.created_at)


def _require_type(row: Any, name: str, kind: type) -> None:
    value = getattr(row, name)
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ValueError(f"{name} must be a {kind.__name__}, got {type(value).__name__} {value!r}")


def _require_finite(row: Any, name: str) -> None:
    value = getattr(row, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} is {value!r}; a result must be a finite number (did the env return a NaN or infinite reward?)")


def _require_packages(text: str) -> None:
    try:
        packages = json.loads(text)
    except json.JSONDecodeError:
        packages = None
    if not isinstance(packages, dict) or not packages or not all(isinstance(v, str) for v in packages.values()):
        raise ValueError("packages must be a non-empty JSON object of package versions")


def _require_iso_date(text: str) -> None:
    if not text:
        return  # filled in when the row is written
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"created_at {text!r} is not an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        raise ValueError(f"created_at {text!r} has no time zone (write UTC, e.g. 2026-01-31T12:00:00+00:00)")


@dataclass(frozen=True)
class MatchRow:
    """One match of a competitive suite: ``first`` moved first (seat 0), ``second`` second.

    Payoffs are the game's (``info["payoff"]``, else the summed rewards). Provenance as in
    :class:`EpisodeRow`.
    """

    suite: str
    env_id: str
    seed: int
    first_spec: str
    first_hash: str
    second_spec: str
    second_hash: str
    first_payoff: float
    second_payoff: float
    length: int
    error: str
    verigym_version: str
    packages: str
    git_sha: str
    python: str
    created_at: str = ""

    def validate(self) -> None:
        """Check every field strictly.

        Raises:
            ValueError: a wrong type, missing provenance, a NaN or infinite payoff, a negative
                length or a ``created_at`` that is not ISO 8601.
        """
        for name in ("suite", "env_id", "first_spec", "first_hash", "second_spec", "second_hash", "error", "verigym_version", "packages", "git_sha", "python", "created_at"):
            _require_type(self, name, str)
        for name in ("seed", "length"):
            _require_type(self, name, int)
        for name in ("first_payoff", "second_payoff"):
            _require_finite(self, name)
        for name in ("env_id", "first_spec", "first_hash", "second_spec", "second_hash", "verigym_version", "packages", "git_sha", "python"):
            value = getattr(self, name)
            if not value.strip():
                raise ValueError(f"refusing a match row without provenance: {name} is {value!r}")
        if self.length < 0:
            raise ValueError(f"length must be >= 0, got {self.length}")
        _require_packages(self.packages)
        _require_iso_date(self.created_at)


_COLUMNS = [f.name for f in fields(EpisodeRow)]
_MATCH_COLUMNS = [f.name for f in fields(MatchRow)]
_SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    suite TEXT NOT NULL, env_id TEXT NOT NULL, env_version INTEGER NOT NULL, seed INTEGER NOT NULL,
    agent_spec TEXT NOT NULL, config_hash TEXT NOT NULL, status TEXT NOT NULL,
    score REAL NOT NULL, success INTEGER NOT NULL, episode_return REAL NOT NULL,
    length INTEGER NOT NULL, time_s REAL NOT NULL, error TEXT NOT NULL,
    verigym_version TEXT NOT NULL, packages TEXT NOT NULL, git_sha TEXT NOT NULL,
    python TEXT NOT NULL, created_at TEXT NOT NULL,
    UNIQUE (agent_spec, config_hash, env_id, seed)
);
CREATE INDEX IF NOT EXISTS episodes_by_agent ON episodes (agent_spec, config_hash);
CREATE TABLE IF NOT EXISTS matches (
    suite TEXT NOT NULL, env_id TEXT NOT NULL, seed INTEGER NOT NULL,
    first_spec TEXT NOT NULL, first_hash TEXT NOT NULL, second_spec TEXT NOT NULL, second_hash TEXT NOT NULL,
    first_payoff REAL NOT NULL, second_payoff REAL NOT NULL, length INTEGER NOT NULL, error TEXT NOT NULL,
    verigym_version TEXT NOT NULL, packages TEXT NOT NULL, git_sha TEXT NOT NULL, python TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (env_id, seed, first_spec, first_hash, second_spec, second_hash)
);
"""


class StoreError(RuntimeError):
    """The results store cannot be used: damaged, unwritable, or not where a store should be.

    The message names the file and says what to do; the CLI prints it without a traceback.
    """


_TRAJECTORY_SCHEMA = """
CREATE TABLE IF NOT EXISTS trajectories (
    agent_spec TEXT NOT NULL, config_hash TEXT NOT NULL, env_id TEXT NOT NULL, seed INTEGER NOT NULL,
    format INTEGER NOT NULL, data BLOB NOT NULL,
    UNIQUE (agent_spec, config_hash, env_id, seed)
);
CREATE TABLE IF NOT EXISTS frames (
    agent_spec TEXT NOT NULL, config_hash TEXT NOT NULL, env_id TEXT NOT NULL, seed INTEGER NOT NULL,
    step INTEGER NOT NULL, png BLOB NOT NULL,
    UNIQUE (agent_spec, config_hash, env_id, seed, step)
);
"""
_KEY = ("agent_spec", "config_hash", "env_id", "seed")


def _open_checked(directory: pathlib.Path, create: bool) -> sqlite3.Connection:
    """Open ``<directory>/results.sqlite`` after checking that it is a sound, writable verigym store."""
    if directory.is_file():
        hint = f"give the folder that holds it: --out {directory.parent}" if directory.name == DB_NAME else "give a folder (it is created) with --out DIR"
        raise StoreError(f"{directory} is a file, not a results folder; {hint}")
    if not directory.exists():
        if not create:
            raise StoreError(f"no results in {directory}; run verigym eval first (or give --out)")
        try:
            directory.mkdir(parents=True)
        except OSError as exc:
            raise StoreError(f"cannot create the results folder {directory} ({exc.strerror}); give a writable folder with --out DIR") from None
    path = directory / DB_NAME
    if path.exists() and not path.is_file():
        raise StoreError(f"{path} is not a file (a folder where the results database should be); move it aside or give another --out DIR")
    for target in (directory, path):
        if target.exists() and not os.access(target, os.W_OK):
            raise StoreError(f"{target} is not writable; fix its permissions (chmod u+w {target}) or give another --out DIR")
    existed = path.exists() and path.stat().st_size > 0
    try:
        db = sqlite3.connect(path, timeout=60.0)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path} ({exc}); give another --out DIR") from None
    try:
        if existed:
            verdict = [r[0] for r in db.execute("PRAGMA quick_check")]
            if verdict != ["ok"]:
                raise StoreError(
                    f"{path} is damaged (SQLite integrity check: {'; '.join(verdict[:3])}); its rows cannot be trusted. "
                    f"Move it aside (mv {path} {path}.damaged), salvage what it held with `sqlite3 {path}.damaged .recover`, "
                    "and run again into an empty folder")
            tables = {name: [c[1] for c in db.execute(f"PRAGMA table_info({name})")]
                      for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "episodes" not in tables:
                raise StoreError(f"{path} is an SQLite database of something else (tables: {', '.join(sorted(tables))}), not verigym results; give another --out DIR")
            if "episodes" in tables and tables["episodes"] != _COLUMNS:
                raise StoreError(f"{path} holds results of an incompatible layout (columns {tables['episodes']}); give another --out DIR")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA + _TRAJECTORY_SCHEMA)
        db.commit()
    except StoreError:
        db.close()
        raise
    except sqlite3.DatabaseError as exc:
        db.close()
        raise StoreError(
            f"{path} is damaged or not an SQLite database ({exc}). Move it aside (mv {path} {path}.damaged) "
            "and run again into an empty folder") from None
    return db


class ResultsStore:
    """SQLite results of ``verigym eval`` in ``<directory>/results.sqlite``.

    Opening checks the store before anything trusts it: an existing file must pass SQLite's
    ``PRAGMA quick_check`` and hold verigym's tables; the folder and the file must be writable.

    Args:
        directory: folder of the store; default ``./verigym-results``.
        create: create the folder when it does not exist (``False``: raise instead).

    Raises:
        StoreError: the store is damaged, unwritable, or ``directory`` is not a results folder.
    """

    def __init__(self, directory: str | pathlib.Path = DEFAULT_DIR, *, create: bool = True):
        self.directory = pathlib.Path(directory)
        self.path = self.directory / DB_NAME
        self._db = _open_checked(self.directory, create)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add(self, row: EpisodeRow, trajectory: bytes | None = None, frames: Iterable[tuple[int, bytes]] = ()) -> bool:
        """Write one row, its trajectory and its frames in one transaction.

        A row whose key is already recorded is left as it is (nothing changes), unless the recorded
        row is an ``error`` (an error is not a result): then the new row and trajectory replace it.

        Args:
            row: the episode.
            trajectory: the encoded trajectory (:func:`verigym.leaderboards.trajectories.encode`).
            frames: ``(step, PNG bytes)`` pairs.

        Returns:
            True if written, False if the key was already recorded with a result.

        Raises:
            ValueError: the row lacks provenance or has invalid values (nothing is written).
        """
        row.validate()
        values = asdict(row)
        values["created_at"] = values["created_at"] or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        values["success"] = int(values["success"])
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c not in _KEY)
        key = [values[c] for c in _KEY]
        with self._writing(), self._db:
            cursor = self._db.execute(
                f"INSERT INTO episodes ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)}) "
                f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET {updates} WHERE episodes.status = 'error'",
                [values[c] for c in _COLUMNS],
            )
            written = cursor.rowcount == 1
            if written:
                where = " AND ".join(f"{c} = ?" for c in _KEY)
                self._db.execute(f"DELETE FROM trajectories WHERE {where}", key)
                self._db.execute(f"DELETE FROM frames WHERE {where}", key)
                if trajectory is not None:
                    self._db.execute("INSERT INTO trajectories VALUES (?, ?, ?, ?, ?, ?)", [*key, 1, trajectory])
                self._db.executemany("INSERT INTO frames VALUES (?, ?, ?, ?, ?, ?)", [(*key, int(step), png) for step, png in frames])
        return written

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Turn an SQLite failure while writing (disk full, file gone read-only) into a :class:`StoreError`."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"could not write to {self.path} ({exc}); the rows written so far are kept. "
                             "Free disk space or fix permissions, then run again with --resume") from None

    def trajectory(self, row: EpisodeRow) -> bytes | None:
        """The encoded trajectory of a row (None when it was not recorded)."""
        found = self._db.execute(
            "SELECT data FROM trajectories WHERE agent_spec = ? AND config_hash = ? AND env_id = ? AND seed = ?",
            (row.agent_spec, row.config_hash, row.env_id, row.seed)).fetchone()
        return None if found is None else bytes(found[0])

    def frames(self, row: EpisodeRow) -> list[tuple[int, bytes]]:
        """The recorded frames of a row: ``(step, PNG bytes)`` in step order."""
        return [(int(step), bytes(png)) for step, png in self._db.execute(
            "SELECT step, png FROM frames WHERE agent_spec = ? AND config_hash = ? AND env_id = ? AND seed = ? ORDER BY step",
            (row.agent_spec, row.config_hash, row.env_id, row.seed))]

    def add_match(self, row: MatchRow) -> bool:
        """Write one match in its own transaction; False if it was already recorded.

        Raises:
            ValueError: the row lacks provenance.
        """
        row.validate()
        values = asdict(row)
        values["created_at"] = values["created_at"] or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        with self._writing(), self._db:
            cursor = self._db.execute(
                f"INSERT INTO matches ({', '.join(_MATCH_COLUMNS)}) VALUES ({', '.join('?' for _ in _MATCH_COLUMNS)}) ON CONFLICT DO NOTHING",
                [values[c] for c in _MATCH_COLUMNS],
            )
        return cursor.rowcount == 1

    def matches(self, *, env_ids: Iterable[str] | None = None) -> list[MatchRow]:
        """Match rows, optionally of some env ids, ordered by env, seed and players."""
        query = f"SELECT {', '.join(_MATCH_COLUMNS)} FROM matches"
        params: list[Any] = []
        if env_ids is not None:
            ids = list(env_ids)
            query += f" WHERE env_id IN ({', '.join('?' for _ in ids)})"
            params = ids
        query += " ORDER BY env_id, seed, first_spec, first_hash, second_spec, second_hash"
        return [MatchRow(**dict(zip(_MATCH_COLUMNS, values))) for values in self._db.execute(query, params)]

    def done_seeds(self, agent_spec: str, config_hash: str, env_id: str) -> set[int]:
        """Seeds of ``env_id`` with a result for this agent and config (``error`` rows excluded: they are rerun)."""
        cursor = self._db.execute(
            "SELECT seed FROM episodes WHERE agent_spec = ? AND config_hash = ? AND env_id = ? AND status != 'error'",
            (agent_spec, config_hash, env_id),
        )
        return {int(seed) for (seed,) in cursor}

    def recorded_seeds(self, agent_spec: str, config_hash: str, env_id: str) -> set[int]:
        """Seeds of ``env_id`` with any row (``error`` rows included) for this agent and config."""
        cursor = self._db.execute(
            "SELECT seed FROM episodes WHERE agent_spec = ? AND config_hash = ? AND env_id = ?",
            (agent_spec, config_hash, env_id),
        )
        return {int(seed) for (seed,) in cursor}

    def rows(self, *, env_ids: Iterable[str] | None = None, agent_spec: str | None = None) -> list[EpisodeRow]:
        """Rows, optionally restricted to some env ids and/or one agent spec, in a stable order."""
        query = f"SELECT {', '.join(_COLUMNS)} FROM episodes"
        clauses, params = [], []
        if env_ids is not None:
            ids = list(env_ids)
            clauses.append(f"env_id IN ({', '.join('?' for _ in ids)})")
            params += ids
        if agent_spec is not None:
            clauses.append("agent_spec = ?")
            params.append(agent_spec)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        query += " ORDER BY agent_spec, config_hash, env_id, seed"
        out = []
        for values in self._db.execute(query, params):
            record = dict(zip(_COLUMNS, values))
            record["success"] = bool(record["success"])
            out.append(EpisodeRow(**record))
        return out

    def suite_rows(self, suite: Iterable[Any] | None, *, agent_spec: str | None = None) -> list[EpisodeRow]:
        """Rows of a suite's tasks on the suite's own seeds (every row when ``suite`` is None).

        Args:
            suite: a :class:`verigym.leaderboards.suite.Suite` (its tasks have ``env_id`` and ``seeds``)
                or None.
            agent_spec: only this agent's rows.
        """
        if suite is None:
            return self.rows(agent_spec=agent_spec)
        seeds = {task.env_id: set(task.seeds) for task in suite}
        return [row for row in self.rows(env_ids=seeds, agent_spec=agent_spec) if row.seed in seeds[row.env_id]]

    def export(self, path: str | pathlib.Path) -> pathlib.Path:
        """Write every row to ``path`` as JSON (``.json``) or CSV (``.csv``).

        Raises:
            ValueError: another file extension.
        """
        path = pathlib.Path(path)
        records = [asdict(r) for r in self.rows()]
        if path.suffix == ".json":
            path.write_text(json.dumps(records, indent=1))
        elif path.suffix == ".csv":
            with path.open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=_COLUMNS)
                writer.writeheader()
                writer.writerows(records)
        else:
            raise ValueError(f"export to .json or .csv, got {path.suffix!r}")
        return path

