"""``verigym check``'s per-check progress: one line per check as it finishes, on stderr."""

from __future__ import annotations

import re

from tests import broken_envs
from verigym.checker import check_env, print_progress


def test_progress_is_told_each_check_as_it_finishes():
    told = []
    report = check_env(
        broken_envs.CountdownTextEnv,
        steps=10,
        checks=["family", "pickle_deepcopy", "close_twice"],
        progress=lambda *args: told.append(args),
    )
    assert [t[1] for t in told] == ["make"] + [r.name for r in report.results]
    assert [t[2] for t in told[1:]] == [r.status for r in report.results]
    assert all(t[0] == report.env_id and t[3] >= 0 for t in told)
    # the report is the same as without progress
    quiet = check_env(
        broken_envs.CountdownTextEnv, steps=10, checks=["family", "pickle_deepcopy", "close_twice"]
    )
    assert quiet.format() == report.format()


def test_print_progress_writes_one_line_to_stderr(capsys):
    print_progress("verigym/X-v0", "determinism", "pass", 12.345)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "verigym/X-v0 determinism: pass (12.3 s)\n"


def test_cli_prints_progress_to_stderr_and_keeps_stdout(capsys, monkeypatch):
    from verigym import checker
    from verigym.cli import main

    full = checker.check_env  # two cheap checks through the CLI's own wiring
    monkeypatch.setattr(
        checker, "check_env", lambda *a, **k: full(*a, checks=["family", "close_twice"], **k)
    )
    code = main(["check", "verigym/GuessNumber-v0", "--steps", "5"])
    captured = capsys.readouterr()
    assert re.fullmatch(
        r"verigym/GuessNumber-v0 make: pass \(\d+\.\d s\)\n"
        r"verigym/GuessNumber-v0 family: pass \(\d+\.\d s\)\n"
        r"verigym/GuessNumber-v0 close_twice: pass \(\d+\.\d s\)\n",
        captured.err,
    )
    assert captured.out.startswith("verigym/GuessNumber-v0: PASS\n") and code == 0
