from __future__ import annotations

import subprocess
import sys

from verigym.cli import main


def test_list_filters_by_family(capsys):
    assert main(["list", "--family", "grid", "--ids"]) == 0
    out = capsys.readouterr().out.split()
    assert "verigym/Treasure-7x7-v0" in out and "verigym/GuessNumber-v0" not in out


def test_check_one_id_passes(capsys):
    assert main(["check", "verigym/GuessNumber-v0", "--steps", "60"]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out


def test_check_unknown_id_fails_with_hint(capsys):
    assert main(["check", "verigym/Tresure-7x7-v0"]) == 1
    assert "did you mean verigym/Treasure-7x7-v0" in capsys.readouterr().out


def test_doctor_reports_every_part(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for part in ("verigym core", "PyTorch", "MuJoCo", "Chromium", "sandbox", "Ray"):
        assert part in out


def test_play_through_text_view():
    done = subprocess.run(
        [sys.executable, "-m", "verigym", "play", "verigym/Treasure-7x7-v0", "--seed", "1"],
        input="up\nbogus\nquit\n", capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Walk to the treasure" in done.stdout
    assert "invalid action: no move found" in done.stdout
