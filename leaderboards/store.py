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
Rows are checked the same way when they are read back (:meth:`ResultsStore.rows`): a row that was
edited into the file after it was written (a NaN or out-of-range score, a ``success`` of 5, a NUL
or a newline in an identifier, an oversized ``packages`` or ``error``) is refused with its rowid, never trusted.
Numbers are bounded as well as finite (an ``episode_return`` of ``1e300`` is refused, see
:data:`MAX_ABS_RETURN`), and a ``timeout`` or ``error`` row carries no score: it was never replayed,
so its ``score`` must be 0 and a row that says otherwise is refused on write and on read.

Binding: a row names the constructor kwargs of its episode (``env_kwargs``, canonical JSON) and the
SHA-256 of its trajectory bound to the row's env id, version, seed, kwargs, agent spec and config
hash (``trajectory_digest``, :func:`trajectory_digest`), so ``verigym reverify`` replays an episode
from the row's own values and knows the trajectory is the one written with the row. Stores written
before rows were bound are migrated on open: their rows get ``env_kwargs = ""`` and no digest, which
``reverify`` reports as unbound (re-run such episodes into a new folder to verify them).
The digest proves that a trajectory belongs to its row, not who wrote either: anyone who can call
:meth:`ResultsStore.add` (or write the file) can store a real winning trajectory under any agent's
name, and ``reverify`` will confirm its verdict (docs/leaderboards.md, "What the stores prove").
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import hashlib
import json
import math
import os
import pathlib
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = [
    "DEFAULT_DIR",
    "EpisodeRow",
    "MatchRow",
    "RefusedRow",
    "ResultsStore",
    "StoreError",
    "canonical_kwargs",
    "safe_text",
    "trajectory_digest",
]

DEFAULT_DIR = pathlib.Path("verigym-results")
"""Where ``verigym eval`` writes and ``verigym leaderboard`` reads, relative to the working directory."""
DB_NAME = "results.sqlite"

STATUSES = ("ok", "timeout", "error")

MAX_IDENTIFIER_CHARS = 4096
"""Identifiers (suite, env id, agent spec, hashes, versions) longer than this are refused."""
MAX_PACKAGES_CHARS = 16 * 1024
"""``packages`` (a JSON object of versions) longer than this is refused."""
MAX_PACKAGES = 256
"""``packages`` naming more packages than this is refused."""
MAX_KWARGS_CHARS = 16 * 1024
"""``env_kwargs`` (canonical JSON) longer than this is refused."""
MAX_ERROR_CHARS = 16 * 1024
"""``error`` (what went wrong in an episode or match) longer than this is refused; the runner and the
arena cut theirs to 2,000 and 1,000 characters."""
MAX_TRAJECTORY_BYTES = 64 << 20
"""A stored (compressed) trajectory larger than this is not read."""
MAX_FRAMES = 4096
"""An episode with more stored frames than this has none read (counted in SQL, before any is loaded)."""
MAX_FRAME_BYTES = 4 << 20
"""A stored PNG frame larger than this (compressed) is not read; nor are its episode's other frames."""
MAX_FRAMES_BYTES = MAX_TRAJECTORY_BYTES
"""An episode's stored frames together larger than this are not read."""
MAX_FRAME_PIXEL_BYTES = 16 << 20
"""A frame whose PNG header (IHDR) declares more decoded bytes than this (width x height x bytes a
pixel) is not read: a few hundred bytes of PNG may declare gigapixels, which the viewer's page would
hand a browser to decode (as ``trajectories.MAX_DECODED_ARRAY_BYTES`` bounds a stored array)."""
MAX_FRAMES_PIXEL_BYTES = 1 << 30
"""An episode's frames may declare at most this many decoded bytes together."""
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
"""Channels a pixel has, by PNG colour type (grey, RGB, palette, grey + alpha, RGBA)."""
MAX_ABS_RETURN = 1e9
"""An ``episode_return`` (or a match payoff) beyond ``±MAX_ABS_RETURN`` is refused: no verigym env sums
rewards anywhere near it, so such a value is damage or a forgery, never a result."""
MAX_LENGTH = 10_000_000
"""Most steps a row may say an episode (or a match) took."""
MAX_TIME_S = 10_000_000.0
"""Most wall-clock seconds a row may say an episode took (about 116 days)."""
MAX_SEED = 2**63 - 1
"""Seeds are in ``[0, MAX_SEED]`` (NumPy seeds are non-negative; SQLite integers are 64-bit)."""
MAX_VERSION = 1_000_000
"""An ``env_version`` above this is refused."""


_BUILD_PROVENANCE = ("verigym_version", "packages", "git_sha", "python")
"""The build a row was written by, which every kind of row carries and must not leave blank."""
_BUILD_IDENTIFIERS = ("verigym_version", "git_sha", "python", "created_at")
"""The provenance fields every kind of row holds as clean identifiers (:func:`_require_identifier`)."""


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
        score: ``info["score"]`` at episode end; always 0 on a ``timeout``/``error`` row (such a row
            was not replayed: it carries no score, and the standings give it no credit).
        success: ``info["success"]`` at episode end.
        episode_return: sum of rewards.
        length: steps taken.
        time_s: wall-clock seconds of the episode.
        error: what went wrong, for ``timeout``/``error`` rows ("" otherwise).
        verigym_version, packages (JSON object of versions), git_sha, python: provenance.
        created_at: ISO-8601 UTC time the row was written.
        env_kwargs: the env's constructor kwargs as canonical JSON (:func:`canonical_kwargs`);
            ``""`` on rows migrated from a store written before rows named them (unbound rows).
        trajectory_digest: hex SHA-256 binding the row's trajectory to the row
            (:func:`trajectory_digest`); filled in by :meth:`ResultsStore.add`, ``""`` when no
            trajectory was recorded.
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
    env_kwargs: str = "{}"
    trajectory_digest: str = ""

    IDENTIFIERS = (
        "suite",
        "env_id",
        "agent_spec",
        "config_hash",
        "status",
        *_BUILD_IDENTIFIERS,
    )
    PROVENANCE = (
        "env_id",
        "agent_spec",
        "config_hash",
        *_BUILD_PROVENANCE,
    )

    def validate(self) -> None:
        """Check every field strictly.

        Raises:
            ValueError: a field has the wrong type (``bool`` is not an ``int`` and an ``int`` is not
                a ``bool``), the row lacks provenance, or a value is out of range (``score`` outside
                [0, 1], a NaN or infinite number, a ``created_at`` that is not ISO 8601, an unknown
                ``status``, a ``timeout``/``error`` row whose score is not 0, an ``episode_return``
                beyond ``±``:data:`MAX_ABS_RETURN`, a ``length``, ``time_s``, ``seed`` or
                ``env_version`` outside ``[0, MAX_...]``), an identifier holds a
                control character (NUL, newline) or text that is not UTF-8 or is over
                :data:`MAX_IDENTIFIER_CHARS`, ``error`` is over :data:`MAX_ERROR_CHARS`,
                ``packages`` or ``env_kwargs`` is over its bound or
                not a JSON object, or ``trajectory_digest`` is not ``""`` or 64 hex digits.
        """
        _require_text_fields(self, self.IDENTIFIERS)
        for name in ("env_version", "seed", "length"):
            _require_type(self, name, int)
        _require_type(self, "success", bool)
        for name in ("score", "episode_return", "time_s"):
            _require_finite(self, name)
        _require_provenance(self, self.PROVENANCE, "result")
        if not self.env_id.endswith(f"-v{self.env_version}"):
            raise ValueError(f"env_version {self.env_version} does not match {self.env_id}")
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score {self.score!r} is outside [0, 1]")
        if self.length < 0 or self.time_s < 0:
            raise ValueError(f"length ({self.length}) and time_s ({self.time_s}) must be >= 0")
        _require_bounds(self, "seed", 0, MAX_SEED)
        _require_bounds(self, "env_version", 0, MAX_VERSION)
        _require_bounds(self, "length", 0, MAX_LENGTH)
        _require_bounds(self, "time_s", 0.0, MAX_TIME_S)
        _require_bounds(self, "episode_return", -MAX_ABS_RETURN, MAX_ABS_RETURN)
        if self.success and self.status != "ok":
            raise ValueError(f"a {self.status} row cannot be a success")
        if self.status != "ok" and self.score != 0.0:
            raise ValueError(
                f"a {self.status} row was not replayed and carries no score, got score {self.score!r} (it must be 0)"
            )
        _require_packages(self.packages)
        _require_iso_date(self.created_at)
        _require_error_text(self)
        if (
            self.env_kwargs
        ):  # "": a row migrated from a store written before rows named their kwargs
            _require_kwargs(self.env_kwargs)
        if self.trajectory_digest and not _HEX64.fullmatch(self.trajectory_digest):
            raise ValueError(
                f"trajectory_digest must be 64 hex digits or empty, got {self.trajectory_digest[:80]!r}"
            )


_HEX64 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def safe_text(text: str) -> str:
    """``text`` with what UTF-8 cannot hold (lone surrogates such as ``"\\ud800"``) escaped as ``\\udXXX``.

    Text from outside (an agent's reply, an env's error message, a damaged row) may hold lone
    surrogates; SQLite, JSON files and terminals need UTF-8, so such text is stored and shown escaped.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def png_decoded_bytes(png: bytes, step: int) -> int:
    """The bytes a stored frame declares it decodes to, read from its PNG header alone (ValueError
    unless it is a PNG whose header declares at most :data:`MAX_FRAME_PIXEL_BYTES`)."""
    if len(png) < 33 or png[:8] != _PNG_SIGNATURE or png[12:16] != b"IHDR":
        raise ValueError(f"the stored frame at step {step} is not a PNG")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    depth, colour = png[24], png[25]
    if colour not in _PNG_CHANNELS or depth not in (1, 2, 4, 8, 16):
        raise ValueError(
            f"the stored frame at step {step} has PNG colour type {colour}, depth {depth}"
        )
    size = width * height * _PNG_CHANNELS[colour] * max(depth, 8) // 8
    if size > MAX_FRAME_PIXEL_BYTES:
        raise ValueError(
            f"the stored frame at step {step} declares {width}x{height} pixels, {size} bytes decoded"
            f" (at most {MAX_FRAME_PIXEL_BYTES})"
        )
    return size


def canonical_kwargs(kwargs: Any) -> str:
    """The canonical JSON text of an env's constructor kwargs (sorted keys, no spaces), as rows store it.

    Raises:
        ValueError: ``kwargs`` is not a mapping of JSON values (a NaN included).
    """
    try:
        text = json.dumps(dict(kwargs), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"env kwargs must be a JSON object (a suite's env_kwargs), got {kwargs!r}: {exc}"
        ) from None
    _require_kwargs(text)
    return text


def trajectory_digest(row: EpisodeRow, blob: bytes) -> str:
    """Hex SHA-256 of a trajectory bound to its row's env id, version, seed, kwargs, agent spec and config hash.

    Args:
        row: the episode's row.
        blob: the encoded trajectory.

    Returns:
        64 hex digits; another row (another seed, kwargs or agent) gives another digest for the same blob.
    """
    header = json.dumps(
        [row.env_id, row.env_version, row.seed, row.env_kwargs, row.agent_spec, row.config_hash],
        ensure_ascii=True,
    )
    return hashlib.sha256(header.encode() + b"\0" + bytes(blob)).hexdigest()


def _require_text_fields(row: Any, identifiers: Iterable[str]) -> None:
    """Every field annotated ``str`` holds a ``str``; each of ``identifiers`` is clean text
    (:func:`_require_identifier`). Raises ``ValueError``."""
    for f in fields(row):
        if f.type == "str":
            _require_type(row, f.name, str)
    for name in identifiers:
        _require_identifier(row, name)


def _require_provenance(row: Any, names: Iterable[str], kind: str) -> None:
    """Each of ``names`` is a non-blank string, else ``ValueError`` naming the ``kind`` of row."""
    for name in names:
        value = getattr(row, name)
        if not value.strip():
            raise ValueError(f"refusing a {kind} row without provenance: {name} is {value!r}")


def _require_identifier(row: Any, name: str) -> None:
    value = getattr(row, name)
    if len(value) > MAX_IDENTIFIER_CHARS:
        raise ValueError(f"{name} is {len(value)} characters long (at most {MAX_IDENTIFIER_CHARS})")
    if _CONTROL.search(value):
        raise ValueError(f"{name} {value[:200]!r} holds a control character (NUL, newline, ...)")
    if safe_text(value) != value:
        raise ValueError(f"{name} {value[:200]!r} is not valid UTF-8 text")


def _json_object(name: str, text: str, max_chars: int) -> dict | None:
    """``text`` parsed as JSON when it is an object, else ``None``; longer than ``max_chars``
    characters raises ``ValueError`` before it is parsed."""
    if len(text) > max_chars:
        raise ValueError(f"{name} is {len(text)} characters long (at most {max_chars})")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _require_kwargs(text: str) -> None:
    if _json_object("env_kwargs", text, MAX_KWARGS_CHARS) is None:
        raise ValueError(f"env_kwargs must be a JSON object, got {text[:200]!r}")


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
        raise ValueError(
            f"{name} is {value!r}; a result must be a finite number (did the env return a NaN or infinite reward?)"
        )


def _require_bounds(row: Any, name: str, low: float, high: float) -> None:
    value = getattr(row, name)
    if not low <= value <= high:
        raise ValueError(f"{name} {value!r} is outside [{low:g}, {high:g}]")


def _require_packages(text: str) -> None:
    packages = _json_object("packages", text, MAX_PACKAGES_CHARS)
    if packages is None or not packages or not all(isinstance(v, str) for v in packages.values()):
        raise ValueError("packages must be a non-empty JSON object of package versions")
    if len(packages) > MAX_PACKAGES:
        raise ValueError(f"packages names {len(packages)} packages (at most {MAX_PACKAGES})")
    for name, version in packages.items():
        for text_ in (name, version):
            if len(text_) > 200 or _CONTROL.search(text_) or safe_text(text_) != text_:
                raise ValueError(
                    f"packages holds a name or version that is not a short line of text: {text_[:200]!r}"
                )


def _require_error_text(row: Any) -> None:
    if len(row.error) > MAX_ERROR_CHARS:
        raise ValueError(f"error is {len(row.error)} characters long (at most {MAX_ERROR_CHARS})")


def _require_iso_date(text: str) -> None:
    if not text:
        return  # filled in when the row is written
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"created_at {text!r} is not an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        raise ValueError(
            f"created_at {text!r} has no time zone (write UTC, e.g. 2026-01-31T12:00:00+00:00)"
        )


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

    IDENTIFIERS = (
        "suite",
        "env_id",
        "first_spec",
        "first_hash",
        "second_spec",
        "second_hash",
        *_BUILD_IDENTIFIERS,
    )
    PROVENANCE = (
        "env_id",
        "first_spec",
        "first_hash",
        "second_spec",
        "second_hash",
        *_BUILD_PROVENANCE,
    )

    def validate(self) -> None:
        """Check every field strictly.

        Raises:
            ValueError: a wrong type, missing provenance, a NaN, infinite or absurd payoff (beyond
                ``±``:data:`MAX_ABS_RETURN`), a negative or huge length or seed, a ``created_at`` that is not ISO 8601, or an identifier that holds a control
                character or text that is not UTF-8.
        """
        _require_text_fields(self, self.IDENTIFIERS)
        for name in ("seed", "length"):
            _require_type(self, name, int)
        for name in ("first_payoff", "second_payoff"):
            _require_finite(self, name)
        _require_provenance(self, self.PROVENANCE, "match")
        _require_bounds(self, "seed", 0, MAX_SEED)
        _require_bounds(self, "length", 0, MAX_LENGTH)
        for name in ("first_payoff", "second_payoff"):
            _require_bounds(self, name, -MAX_ABS_RETURN, MAX_ABS_RETURN)
        _require_packages(self.packages)
        _require_iso_date(self.created_at)
        _require_error_text(self)


_COLUMNS = [f.name for f in fields(EpisodeRow)]
_MATCH_COLUMNS = [f.name for f in fields(MatchRow)]
_SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    suite TEXT NOT NULL, env_id TEXT NOT NULL, env_version INTEGER NOT NULL, seed INTEGER NOT NULL,
    agent_spec TEXT NOT NULL, config_hash TEXT NOT NULL, status TEXT NOT NULL,
    score REAL NOT NULL, success INTEGER NOT NULL, episode_return REAL NOT NULL,
    length INTEGER NOT NULL, time_s REAL NOT NULL, error TEXT NOT NULL,
    verigym_version TEXT NOT NULL, packages TEXT NOT NULL, git_sha TEXT NOT NULL,
    python TEXT NOT NULL, created_at TEXT NOT NULL, env_kwargs TEXT NOT NULL, trajectory_digest TEXT NOT NULL,
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


_BOUND_COLUMNS = ("env_kwargs", "trajectory_digest")
"""Columns added when rows were bound to their trajectories; older stores are migrated on open."""
_LEGACY_COLUMNS = [c for c in _COLUMNS if c not in _BOUND_COLUMNS]
_EVIDENCE_TABLES = ("trajectories", "frames")
"""Tables a store opened only to read is never given: their absence is reported, not papered over."""


def _text(raw: bytes) -> str:
    """SQLite text as ``str``; bytes that are not UTF-8 come back as lone surrogates, which validation refuses."""
    return raw.decode("utf-8", "surrogateescape")


def _open_checked(
    directory: pathlib.Path, create: bool
) -> tuple[sqlite3.Connection, frozenset[str]]:
    """Open ``<directory>/results.sqlite`` after checking that it is a sound, writable verigym store.

    Returns:
        The connection and the evidence tables (trajectories, frames) that an existing store lacks:
        created empty when ``create`` is True, left missing when the store is only read.
    """
    if directory.is_file():
        hint = (
            f"give the folder that holds it: --out {directory.parent}"
            if directory.name == DB_NAME
            else "give a folder (it is created) with --out DIR"
        )
        raise StoreError(f"{directory} is a file, not a results folder; {hint}")
    if not directory.exists():
        if not create:
            raise StoreError(f"no results in {directory}; run verigym eval first (or give --out)")
        try:
            directory.mkdir(parents=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the results folder {directory} ({exc.strerror}); give a writable folder with --out DIR"
            ) from None
    path = directory / DB_NAME
    if path.exists() and not path.is_file():
        raise StoreError(
            f"{path} is not a file (a folder where the results database should be); move it aside or give another --out DIR"
        )
    for target in (directory, path):
        if target.exists() and not os.access(target, os.W_OK):
            raise StoreError(
                f"{target} is not writable; fix its permissions (chmod u+w {target}) or give another --out DIR"
            )
    existed = path.exists() and path.stat().st_size > 0
    try:
        db = sqlite3.connect(path, timeout=60.0)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path} ({exc}); give another --out DIR") from None
    db.text_factory = _text
    missing: frozenset[str] = frozenset()
    try:
        if existed:
            verdict = [r[0] for r in db.execute("PRAGMA quick_check")]
            if verdict != ["ok"]:
                raise StoreError(
                    f"{path} is damaged (SQLite integrity check: {'; '.join(verdict[:3])}); its rows cannot be trusted. "
                    f"Move it aside (mv {path} {path}.damaged), salvage what it held with `sqlite3 {path}.damaged .recover`, "
                    "and run again into an empty folder"
                )
            tables = {
                name: [c[1] for c in db.execute(f"PRAGMA table_info({name})")]
                for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if tables and "episodes" not in tables:
                raise StoreError(
                    f"{path} is an SQLite database of something else (tables: {', '.join(sorted(tables))}), not verigym results; give another --out DIR"
                )
            if (
                "episodes" in tables and tables["episodes"] == _LEGACY_COLUMNS
            ):  # written before rows were bound: migrate
                with db:
                    for column in _BOUND_COLUMNS:
                        db.execute(
                            f"ALTER TABLE episodes ADD COLUMN {column} TEXT NOT NULL DEFAULT ''"
                        )
            elif "episodes" in tables and tables["episodes"] != _COLUMNS:
                raise StoreError(
                    f"{path} holds results of an incompatible layout (columns {tables['episodes']}); give another --out DIR"
                )
            if "episodes" in tables:
                missing = frozenset(t for t in _EVIDENCE_TABLES if t not in tables)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        if create or not missing:
            db.executescript(_TRAJECTORY_SCHEMA)
        db.commit()
    except StoreError:
        db.close()
        raise
    except sqlite3.DatabaseError as exc:
        db.close()
        raise StoreError(
            f"{path} is damaged or not an SQLite database ({exc}). Move it aside (mv {path} {path}.damaged) "
            "and run again into an empty folder"
        ) from None
    return db, missing


@dataclass(frozen=True)
class RefusedRow:
    """A stored row that failed validation when it was read: it is reported, never trusted.

    Attributes:
        rowid: SQLite's rowid of the row (``DELETE FROM episodes WHERE rowid = N`` removes it).
        key: the row's agent spec, env id and seed as printable text (escaped with ``repr``).
        reason: why it was refused.
    """

    rowid: int
    key: str
    reason: str

    def __str__(self) -> str:
        return f"row {self.rowid} ({self.key}): {self.reason}"


def _episode_from_db(record: dict[str, Any]) -> EpisodeRow:
    """Rebuild a row read back from SQLite and validate it as a new row is.

    Raises:
        ValueError: the stored values are not a valid row (what was edited into the file is named).
    """
    success = record["success"]
    if type(success) is int and success in (0, 1):
        record["success"] = bool(success)
    elif not isinstance(success, bool):
        raise ValueError(f"success must be 0 or 1 in the store, got {success!r}")
    if isinstance(record.get("error"), str):
        record["error"] = safe_text(record["error"])
    row = EpisodeRow(**record)
    row.validate()
    return row


def _refused(
    rowid: int, record: dict[str, Any], exc: Exception, spec: str = "agent_spec"
) -> RefusedRow:
    key = f"{record.get(spec)!r} {record.get('env_id')!r} seed {record.get('seed')!r}"
    return RefusedRow(int(rowid), safe_text(key), safe_text(str(exc)))


class ResultsStore:
    """SQLite results of ``verigym eval`` in ``<directory>/results.sqlite``.

    Opening checks the store before anything trusts it: an existing file must pass SQLite's
    ``PRAGMA quick_check`` and hold verigym's tables; the folder and the file must be writable.
    A store written before rows were bound to their trajectories is migrated (see the module
    docstring). Reading checks every row again (:meth:`rows`).

    Args:
        directory: folder of the store; default ``./verigym-results``.
        create: create the folder when it does not exist (``False``: raise instead). A store
            opened with ``create=False`` is only read: a trajectories or frames table it lacks is
            not created but named in :attr:`missing_tables`.

    Raises:
        StoreError: the store is damaged, unwritable, or ``directory`` is not a results folder.
    """

    def __init__(self, directory: str | pathlib.Path = DEFAULT_DIR, *, create: bool = True):
        self.directory = pathlib.Path(directory)
        self.path = self.directory / DB_NAME
        self._db, self.missing_tables = _open_checked(self.directory, create)

    def require_trajectories(self) -> None:
        """Raise unless the store has its trajectories table (reverify and export read it).

        Raises:
            StoreError: the table is missing (dropped, or the store predates trajectories).
        """
        if "trajectories" in self.missing_tables:
            raise StoreError(
                f"{self.path} has no trajectories table (it was dropped, or the store was written before verigym "
                "recorded trajectories): none of its episodes can be re-verified or exported. "
                "Run the evaluation again into a new folder (--out DIR)"
            )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add(
        self,
        row: EpisodeRow,
        trajectory: bytes | None = None,
        frames: Iterable[tuple[int, bytes]] = (),
    ) -> bool:
        """Write one row, its trajectory and its frames in one transaction.

        A row whose key is already recorded is left as it is (nothing changes), unless the recorded
        row is an ``error`` (an error is not a result): then the new row and trajectory replace it.
        The row is written with the digest that binds the trajectory to it (:func:`trajectory_digest`;
        any digest the row carries is replaced) and with its ``error`` text made UTF-8
        (:func:`safe_text`).

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
        values["created_at"] = values["created_at"] or _dt.datetime.now(_dt.timezone.utc).isoformat(
            timespec="seconds"
        )
        values["success"] = int(values["success"])
        values["error"] = safe_text(values["error"])
        values["trajectory_digest"] = (
            "" if trajectory is None else trajectory_digest(row, trajectory)
        )
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
                    self._db.execute(
                        "INSERT INTO trajectories VALUES (?, ?, ?, ?, ?, ?)", [*key, 1, trajectory]
                    )
                self._db.executemany(
                    "INSERT INTO frames VALUES (?, ?, ?, ?, ?, ?)",
                    [(*key, int(step), png) for step, png in frames],
                )
        return written

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Turn an SQLite failure while writing (disk full, file gone read-only) into a :class:`StoreError`."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(
                f"could not write to {self.path} ({exc}); the rows written so far are kept. "
                "Free disk space or fix permissions, then run again with --resume"
            ) from None

    def trajectory(self, row: EpisodeRow) -> bytes | None:
        """The encoded trajectory of a row (None when it was not recorded or the table is missing).

        Raises:
            ValueError: the stored trajectory is not a blob or is over :data:`MAX_TRAJECTORY_BYTES`
                (it is not read into memory).
        """
        if "trajectories" in self.missing_tables:
            return None
        where = "agent_spec = ? AND config_hash = ? AND env_id = ? AND seed = ?"
        key = (row.agent_spec, row.config_hash, row.env_id, row.seed)
        found = self._db.execute(
            f"SELECT typeof(data), length(data) FROM trajectories WHERE {where}", key
        ).fetchone()
        if found is None:
            return None
        kind, size = found
        if kind != "blob" or size > MAX_TRAJECTORY_BYTES:
            raise ValueError(
                f"the stored trajectory is a {kind} of {size} bytes (a trajectory is a blob of at most {MAX_TRAJECTORY_BYTES})"
            )
        return bytes(
            self._db.execute(f"SELECT data FROM trajectories WHERE {where}", key).fetchone()[0]
        )

    def frames(self, row: EpisodeRow) -> list[tuple[int, bytes]]:
        """The recorded frames of a row: ``(step, PNG bytes)`` in step order (none when the table is missing).

        Raises:
            ValueError: the stored frames are more than :data:`MAX_FRAMES`, one is not a blob of at
                most :data:`MAX_FRAME_BYTES` with an integer step, they are over
                :data:`MAX_FRAMES_BYTES` together (all counted in SQL, nothing loaded), or one is
                not a PNG whose header declares at most :data:`MAX_FRAME_PIXEL_BYTES` decoded
                (:data:`MAX_FRAMES_PIXEL_BYTES` together; checked before any is decoded).
        """
        if "frames" in self.missing_tables:
            return []
        where = "agent_spec = ? AND config_hash = ? AND env_id = ? AND seed = ?"
        key = (row.agent_spec, row.config_hash, row.env_id, row.seed)
        count, odd, largest, total = self._db.execute(
            "SELECT count(*), total(typeof(png) != 'blob' OR typeof(step) != 'integer'), "
            f"max(length(png)), total(length(png)) FROM frames WHERE {where}",
            key,
        ).fetchone()
        if (
            count > MAX_FRAMES
            or odd
            or (largest or 0) > MAX_FRAME_BYTES
            or total > MAX_FRAMES_BYTES
        ):
            raise ValueError(
                f"the stored frames are {count}, the largest {largest} bytes, {int(total)} together"
                f"{', not all PNG blobs at integer steps' if odd else ''} (at most {MAX_FRAMES} blobs"
                f" of at most {MAX_FRAME_BYTES} bytes, {MAX_FRAMES_BYTES} together, are read)"
            )
        frames, declared = [], 0
        for step, png in self._db.execute(
            f"SELECT step, png FROM frames WHERE {where} ORDER BY step", key
        ):
            png = bytes(png)
            declared += png_decoded_bytes(png, step)
            if declared > MAX_FRAMES_PIXEL_BYTES:
                raise ValueError(
                    f"the stored frames declare more than {MAX_FRAMES_PIXEL_BYTES} decoded bytes together"
                )
            frames.append((int(step), png))
        return frames

    def add_match(self, row: MatchRow) -> bool:
        """Write one match in its own transaction; False if it was already recorded. Its
        ``error`` is written as UTF-8 (:func:`safe_text`), as :meth:`add` writes a row's.

        Raises:
            ValueError: the row lacks provenance or has invalid values.
        """
        row.validate()
        values = asdict(row)
        values["created_at"] = values["created_at"] or _dt.datetime.now(_dt.timezone.utc).isoformat(
            timespec="seconds"
        )
        values["error"] = safe_text(values["error"])  # an agent's message may hold lone surrogates
        with self._writing(), self._db:
            cursor = self._db.execute(
                f"INSERT INTO matches ({', '.join(_MATCH_COLUMNS)}) VALUES ({', '.join('?' for _ in _MATCH_COLUMNS)}) ON CONFLICT DO NOTHING",
                [values[c] for c in _MATCH_COLUMNS],
            )
        return cursor.rowcount == 1

    def matches(
        self, *, env_ids: Iterable[str] | None = None, refused: list[RefusedRow] | None = None
    ) -> list[MatchRow]:
        """Match rows, optionally of some env ids, ordered by env, seed and players; each is validated as it is read.

        Args:
            env_ids: only these env ids.
            refused: when given, invalid rows are appended here and left out; else they raise.

        Raises:
            StoreError: a stored match is invalid and ``refused`` is None (the message names its rowid).
        """
        query = f"SELECT rowid, {', '.join(_MATCH_COLUMNS)} FROM matches"
        params: list[Any] = []
        if env_ids is not None:
            ids = list(env_ids)
            query += f" WHERE env_id IN ({', '.join('?' for _ in ids)})"
            params = ids
        query += " ORDER BY env_id, seed, first_spec, first_hash, second_spec, second_hash"
        out, bad = [], []
        for rowid, *values in self._db.execute(query, params):
            record = dict(zip(_MATCH_COLUMNS, values))
            if isinstance(record.get("error"), str):
                record["error"] = safe_text(record["error"])
            try:
                match = MatchRow(**record)
                match.validate()
            except ValueError as exc:
                bad.append(_refused(rowid, record, exc, spec="first_spec"))
                continue
            out.append(match)
        self._report(bad, refused, "matches")
        return out

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

    def rows(
        self,
        *,
        env_ids: Iterable[str] | None = None,
        agent_spec: str | None = None,
        refused: list[RefusedRow] | None = None,
    ) -> list[EpisodeRow]:
        """Rows, optionally restricted to some env ids and/or one agent spec, in a stable order.

        Every row is validated as it is read (:meth:`EpisodeRow.validate`, and ``success`` must be
        stored as 0 or 1): a row edited into the file is never trusted.

        Args:
            env_ids: only these env ids.
            agent_spec: only this agent spec.
            refused: when given, invalid rows are appended here (:class:`RefusedRow`) and left out;
                when None, an invalid row raises.

        Raises:
            StoreError: a stored row is invalid and ``refused`` is None; the message names the rows
                (rowid, agent, env, seed) and why.
        """
        query = f"SELECT rowid, {', '.join(_COLUMNS)} FROM episodes"
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
        out, bad = [], []
        for rowid, *values in self._db.execute(query, params):
            record = dict(zip(_COLUMNS, values))
            try:
                out.append(_episode_from_db(record))
            except (ValueError, TypeError) as exc:
                bad.append(_refused(rowid, record, exc))
        self._report(bad, refused, "episodes")
        return out

    def _report(self, bad: list[RefusedRow], refused: list[RefusedRow] | None, table: str) -> None:
        if refused is not None:
            refused.extend(bad)
        elif bad:
            shown = "; ".join(map(str, bad[:5])) + (
                f"; and {len(bad) - 5} more" if len(bad) > 5 else ""
            )
            raise StoreError(
                f"{self.path}: {len(bad)} stored {table} row(s) are invalid and are not trusted: {shown}. They were changed after they "
                f"were written; delete them (sqlite3 {self.path} 'DELETE FROM {table} WHERE rowid IN "
                f"({', '.join(str(r.rowid) for r in bad[:5])})') and run the episodes again with --resume"
            )

    def suite_rows(
        self,
        suite: Iterable[Any] | None,
        *,
        agent_spec: str | None = None,
        refused: list[RefusedRow] | None = None,
    ) -> list[EpisodeRow]:
        """Rows of a suite's tasks on the suite's own seeds and kwargs (every row when ``suite`` is None).

        A row recorded under other constructor kwargs than the suite's task is not a result of the
        suite and is left out; rows migrated from a store written before rows named their kwargs
        (``env_kwargs == ""``) are kept (``verigym reverify`` reports them as unbound).

        Args:
            suite: a :class:`verigym.leaderboards.suite.Suite` (its tasks have ``env_id``, ``seeds``
                and ``env_kwargs``) or None.
            agent_spec: only this agent's rows.
            refused: as in :meth:`rows`.

        Raises:
            StoreError: as in :meth:`rows`.
        """
        if suite is None:
            return self.rows(agent_spec=agent_spec, refused=refused)
        tasks = {
            task.env_id: (set(task.seeds), canonical_kwargs(getattr(task, "env_kwargs", {})))
            for task in suite
        }
        return [
            row
            for row in self.rows(env_ids=tasks, agent_spec=agent_spec, refused=refused)
            if row.seed in tasks[row.env_id][0] and row.env_kwargs in ("", tasks[row.env_id][1])
        ]

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
