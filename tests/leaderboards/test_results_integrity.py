"""Issue 16 section 5: results are never lost, silently changed or unclear."""

from __future__ import annotations

import json
import math
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from tests.leaderboards.rows import episode_row
from verigym.cli import main
from verigym.leaderboards.runner import evaluate
from verigym.leaderboards.store import EpisodeRow, ResultsStore, StoreError
from verigym.leaderboards.suite import EVAL_SEED_START, Suite, Task
from verigym.workers import descendants

ROOT = pathlib.Path(__file__).resolve().parents[2]
ONE = Suite("one", (Task("verigym/GuessNumber-v0", episodes=4),))


def _row(**overrides) -> EpisodeRow:
    return episode_row(**overrides)


def _fill(folder: pathlib.Path, rows: int = 200) -> pathlib.Path:
    with ResultsStore(folder) as store:
        for i in range(rows):
            store.add(_row(seed=EVAL_SEED_START + i, error="x" * 200))
    return folder / "results.sqlite"


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _both_commands(capsys, out: pathlib.Path) -> list[tuple[str, int, str]]:
    runs = []
    for command, argv in (
        (
            "eval",
            [
                "eval",
                "--agent",
                "random",
                "--suite",
                "starter",
                "--resume",
                "--no-progress",
                "--out",
                str(out),
            ],
        ),
        ("leaderboard", ["leaderboard", "--out", str(out)]),
    ):
        code, text = _cli(capsys, *argv)
        runs.append((command, code, text))
    return runs


# ---- the store is checked before it is trusted ------------------------------------------------------


def test_a_damaged_store_stops_eval_and_leaderboard_with_a_message(tmp_path, capsys):
    database = _fill(tmp_path)
    with sqlite3.connect(database) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        pages = db.execute("PRAGMA page_count").fetchone()[0]
    assert pages > 4
    with open(database, "r+b") as handle:  # scribble over an inner page of the table's b-tree
        handle.seek(page_size * (pages // 2) + 8)
        handle.write(os.urandom(page_size - 16))
    with pytest.raises(StoreError, match="damaged"):
        ResultsStore(tmp_path)
    for command, code, text in _both_commands(capsys, tmp_path):
        assert code == 2, (command, text)
        assert f"verigym {command}:" in text and str(database) in text and "damaged" in text, text
        assert "mv " in text and "Traceback" not in text


def test_a_file_that_is_not_a_database_is_refused(tmp_path, capsys):
    (tmp_path / "results.sqlite").write_bytes(b"this is not SQLite" * 100)
    for command, code, text in _both_commands(capsys, tmp_path):
        assert (
            code == 2
            and f"verigym {command}:" in text
            and "results.sqlite" in text
            and "Traceback" not in text
        ), text


def test_misplaced_stores_are_refused(tmp_path, capsys):
    database = _fill(tmp_path / "good", rows=2)
    for command, code, text in _both_commands(
        capsys, database
    ):  # --out names the file, not its folder
        assert code == 2 and f"--out {database.parent}" in text, (command, text)
    other = tmp_path / "other"
    other.mkdir()
    with sqlite3.connect(other / "results.sqlite") as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    for command, code, text in _both_commands(capsys, other):
        assert code == 2 and "something else" in text and "notes" in text, (command, text)
    (tmp_path / "folder-db" / "results.sqlite").mkdir(parents=True)
    with pytest.raises(StoreError, match="not a file"):
        ResultsStore(tmp_path / "folder-db")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_an_unwritable_store_is_refused(tmp_path, capsys):
    _fill(tmp_path, rows=2)
    os.chmod(tmp_path / "results.sqlite", 0o444)
    try:
        for command, code, text in _both_commands(capsys, tmp_path):
            assert code == 2 and "not writable" in text, (command, text)
    finally:
        os.chmod(tmp_path / "results.sqlite", 0o644)


# ---- strict rows ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("episode_return", math.nan, "finite"),
        ("episode_return", math.inf, "finite"),
        ("time_s", math.nan, "finite"),
        ("score", math.nan, "finite"),
        ("score", 1.5, r"\[0, 1\]"),
        ("score", -0.1, r"\[0, 1\]"),
        ("score", "1", "number"),
        ("success", 1, "bool"),
        ("success", "yes", "bool"),
        ("seed", True, "int"),
        ("seed", "1000000", "int"),
        ("length", -1, ">= 0"),
        ("time_s", -2.0, ">= 0"),
        ("length", 3.0, "int"),
        ("created_at", "yesterday", "ISO 8601"),
        ("created_at", "2026-01-31T12:00:00", "time zone"),
        ("status", "fine", "status"),
        ("packages", '{"numpy": 2}', "packages"),
        ("suite", None, "str"),
        ("status", "error", "cannot be a success"),
    ],
)
def test_every_field_is_validated_and_nothing_is_written(tmp_path, field, value, message):
    with ResultsStore(tmp_path) as store:
        with pytest.raises(ValueError, match=message):
            store.add(_row(**{field: value}))
        assert store.rows() == []
        assert store.add(_row(created_at="2026-01-31T12:00:00+00:00")) is True


def test_refused_results_are_recorded_as_errors_that_say_why(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    summary = evaluate(
        "tests.leaderboards.agents:bad_results", ONE, out=tmp_path, workers=1, progress=False
    )
    rows = ResultsStore(tmp_path).rows()
    assert len(rows) == ONE.episodes, "a row was dropped"
    for row in rows:
        if row.seed % 3 == 1:
            assert (
                row.status == "error"
                and "episode_return is nan" in row.error
                and "finite" in row.error
            ), row
        elif row.seed % 3 == 2:
            assert row.status == "error" and "success must be a bool, got int" in row.error, row
        else:
            assert row.status == "ok" and math.isfinite(row.episode_return)
    assert summary.rejected == sum(s % 3 != 0 for s in ONE.tasks[0].seeds) == 3


# ---- resume retries errors; two runs each report their own ----------------------------------------


def test_resume_retries_error_rows(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    spec = "tests.leaderboards.agents:fails_while_asked"
    monkeypatch.setenv("VERIGYM_TEST_FAIL", "1")
    first = evaluate(spec, ONE, out=tmp_path, workers=1, progress=False)
    assert first.statuses == {"error": ONE.episodes}
    monkeypatch.setenv("VERIGYM_TEST_FAIL", "0")
    with pytest.raises(RuntimeError, match="--resume"):
        evaluate(spec, ONE, out=tmp_path, workers=1, progress=False)
    again = evaluate(spec, ONE, out=tmp_path, workers=1, progress=False, resume=True)
    assert again.ran == ONE.episodes and again.statuses == {"ok": ONE.episodes}
    rows = ResultsStore(tmp_path).rows()
    assert len(rows) == ONE.episodes and all(r.status == "ok" for r in rows)
    assert evaluate(spec, ONE, out=tmp_path, workers=1, progress=False, resume=True).ran == 0


def test_two_evaluations_on_one_store_each_report_their_own(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    suite = Suite("shared", (Task("verigym/GuessNumber-v0", episodes=6),))
    summaries = []

    def run():  # both plan all six episodes before either has written one (the workers take seconds to start)
        summaries.append(
            evaluate("random", suite, out=tmp_path, workers=1, progress=False, resume=True)
        )

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert len(summaries) == 2
    assert sum(s.ran for s in summaries) == suite.episodes == len(ResultsStore(tmp_path).rows())
    for summary in summaries:
        assert summary.ran + summary.recorded_elsewhere + summary.skipped == suite.episodes


# ---- a killed parent takes its workers (and what they started) with it -----------------------------


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"
)
def test_sigkill_of_the_eval_parent_ends_workers_and_their_children_within_2_s(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    suite_file = tmp_path / "suite.json"
    suite_file.write_text(
        json.dumps(
            {
                "name": "hang",
                "tasks": [{"env_id": "verigym/GuessNumber-v0", "episodes": 2, "time_limit_s": 600}],
            }
        )
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "verigym",
            "eval",
            "--agent",
            "tests.leaderboards.agents:spawns_and_hangs",
            "--suite",
            str(suite_file),
            "--workers",
            "2",
            "--no-progress",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        start_new_session=True,
        env={**os.environ, "VERIGYM_TEST_PIDS": str(pids)},
    )
    survivors: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(list(pids.glob("*.pid"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)
        watched = [int(p) for f in pids.glob("*.pid") for p in f.read_text().split()]
        assert len(watched) == 4, "the workers did not start their episodes"
        assert set(watched[::2]) <= set(descendants(process.pid))
        os.kill(process.pid, signal.SIGKILL)  # the parent only
        process.wait()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not all(map(_ended, watched)):
            time.sleep(0.05)
        survivors = [pid for pid in watched if not _ended(pid)]
        assert survivors == [], f"still running 2 s after the parent was killed: {survivors}"
    finally:
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass


def test_a_write_that_fails_mid_run_is_a_store_error_not_a_traceback(tmp_path):
    with ResultsStore(tmp_path) as store:
        assert store.add(_row())
        store._db.execute(
            "PRAGMA query_only = 1"
        )  # what a disk that turned read-only looks like to SQLite
        with pytest.raises(StoreError, match="could not write to .*results.sqlite.*--resume"):
            store.add(_row(seed=EVAL_SEED_START + 1))
        store._db.execute("PRAGMA query_only = 0")
        assert len(store.rows()) == 1


def test_envs_that_start_their_own_processes_run_in_eval_workers(tmp_path):
    """Eval workers are not daemonic: the SQL verifier runs each query in a child process."""
    summary = evaluate(
        "oracle",
        Suite("sql", (Task("verigym/SQL-v0", episodes=1),)),
        out=tmp_path,
        workers=1,
        progress=False,
    )
    rows = ResultsStore(tmp_path).rows()
    assert summary.statuses == {"ok": 1} and rows[0].success, rows[0].error
