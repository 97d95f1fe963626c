"""The results store: SQLite (WAL), one row per episode, with provenance on every row.

Crash safety: each episode is committed in its own transaction as soon as it finishes, and the
table has a uniqueness key ``(agent_spec, config_hash, env_id, seed)``, so a run killed at any
point (``kill -9``) resumes by running only the missing episodes: nothing is lost, nothing is
duplicated.

Provenance: a row is refused (``ValueError``) unless it names the env id and version, the seed,
the agent spec and its config hash, the verigym version, the package versions and the git SHA.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import pathlib
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["DEFAULT_DIR", "EpisodeRow", "MatchRow", "ResultsStore"]

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
        """Raise ``ValueError`` if the row lacks provenance or has out-of-range values."""
        for name in self.PROVENANCE:
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"refusing a result row without provenance: {name} is {value!r}")
        if not self.env_id.endswith(f"-v{self.env_version}"):
            raise ValueError(f"env_version {self.env_version} does not match {self.env_id}")
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if not 0.0 <= float(self.score) <= 1.0:
            raise ValueError(f"score {self.score!r} is outside [0, 1]")
        try:
            packages = json.loads(self.packages)
        except json.JSONDecodeError:
            packages = None
        if not isinstance(packages, dict) or not packages:
            raise ValueError("packages must be a non-empty JSON object of package versions")


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
        """Raise ``ValueError`` if the row lacks provenance."""
        for name in ("env_id", "first_spec", "first_hash", "second_spec", "second_hash", "verigym_version", "packages", "git_sha", "python"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"refusing a match row without provenance: {name} is {value!r}")


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


class ResultsStore:
    """SQLite results of ``verigym eval`` in ``<directory>/results.sqlite``.

    Args:
        directory: folder of the store (created); default ``./verigym-results``.
    """

    def __init__(self, directory: str | pathlib.Path = DEFAULT_DIR):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / DB_NAME
        self._db = sqlite3.connect(self.path, timeout=60.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add(self, row: EpisodeRow) -> bool:
        """Write one row in its own transaction.

        Returns:
            True if written, False if a row with the same key already existed (nothing changes).

        Raises:
            ValueError: the row lacks provenance or has invalid values.
        """
        row.validate()
        values = asdict(row)
        values["created_at"] = values["created_at"] or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        values["success"] = int(bool(values["success"]))
        with self._db:
            cursor = self._db.execute(
                f"INSERT OR IGNORE INTO episodes ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})",
                [values[c] for c in _COLUMNS],
            )
        return cursor.rowcount == 1

    def add_match(self, row: MatchRow) -> bool:
        """Write one match in its own transaction; False if it was already recorded.

        Raises:
            ValueError: the row lacks provenance.
        """
        row.validate()
        values = asdict(row)
        values["created_at"] = values["created_at"] or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        with self._db:
            cursor = self._db.execute(
                f"INSERT OR IGNORE INTO matches ({', '.join(_MATCH_COLUMNS)}) VALUES ({', '.join('?' for _ in _MATCH_COLUMNS)})",
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
        """Seeds of ``env_id`` already recorded for this agent and config."""
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


def summarize(rows: Iterable[EpisodeRow]) -> dict[tuple[str, str, str], Mapping[str, float]]:
    """Per (agent_spec, config_hash, env_id): episodes, mean score, success rate, mean return,
    mean length, timeouts and errors."""
    groups: dict[tuple[str, str, str], list[EpisodeRow]] = {}
    for row in rows:
        groups.setdefault((row.agent_spec, row.config_hash, row.env_id), []).append(row)
    out = {}
    for key, members in sorted(groups.items()):
        n = len(members)
        out[key] = {
            "episodes": n,
            "score": sum(r.score for r in members) / n,
            "success": sum(r.success for r in members) / n,
            "return": sum(r.episode_return for r in members) / n,
            "length": sum(r.length for r in members) / n,
            "timeouts": sum(r.status == "timeout" for r in members),
            "errors": sum(r.status == "error" for r in members),
        }
    return out
