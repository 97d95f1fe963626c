from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest

from verigym.cli import main


def test_list_filters_by_family(capsys):
    assert main(["list", "--family", "grid", "--ids"]) == 0
    out = capsys.readouterr().out.split()
    assert "verigym/Treasure-7x7-v0" in out and "verigym/GuessNumber-v0" not in out


def test_check_one_id_passes(capsys):
    assert main(["check", "verigym/GuessNumber-v0", "--steps", "60"]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out


def test_doctor_reports_every_part(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for part in ("verigym core", "PyTorch", "MuJoCo", "Chromium", "sandbox", "Ray"):
        assert part in out


def test_play_through_text_view():
    done = subprocess.run(
        [sys.executable, "-m", "verigym", "play", "verigym/Treasure-7x7-v0", "--seed", "1"],
        input="up\nbogus\nquit\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Walk to the treasure" in done.stdout
    assert "invalid action: no move found" in done.stdout


# ---- issue 21: every verb fails the same clear way ---------------------------------------------


def _usage_error(capsys, argv: list[str], expected: str) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert expected in captured.err, captured
    assert "Traceback" not in captured.err + captured.out
    return captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ["play", "verigym/Tresure-7x7-v0"],
        ["check", "verigym/Tresure-7x7-v0"],
        ["train", "ppo", "--env", "verigym/Tresure-7x7-v0", "--steps", "10", "--out", "unused"],
        ["eval", "--agent", "random", "--env", "verigym/Tresure-7x7-v0"],
    ],
    ids=["play", "check", "train", "eval"],
)
def test_misspelled_id_is_a_did_you_mean_usage_error(capsys, argv):
    err = _usage_error(capsys, argv, "did you mean verigym/Treasure-7x7-v0")
    assert err.startswith(f"verigym {argv[0]}")


def test_misspelled_gymnasium_id_suggests_the_gymnasium_id(capsys):
    _usage_error(capsys, ["play", "CartPol-v1"], "did you mean CartPole-v1")


def test_option_prefixes_are_refused(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "train",
                "ppo",
                "--env",
                "CartPole-v1",
                "--steps",
                "10",
                "--out",
                str(tmp_path),
                "--learning-rat",
                "1e-3",
            ]
        )
    assert exc.value.code == 2
    assert "unrecognized arguments: --learning-rat" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["list", "--fam", "grid"])
    assert exc.value.code == 2
    assert not list(tmp_path.iterdir())  # nothing was trained


def test_eval_fails_fast_when_the_factory_cannot_be_imported(capsys, tmp_path, monkeypatch):
    (tmp_path / "broken_agent_module.py").write_text("import a_module_that_does_not_exist_21\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    err = _usage_error(
        capsys,
        [
            "eval",
            "--agent",
            "broken_agent_module:make",
            "--suite",
            "starter",
            "--out",
            str(tmp_path / "res"),
            "--no-progress",
        ],
        "No module named 'a_module_that_does_not_exist_21'",
    )
    assert "cannot import 'broken_agent_module'" in err
    assert not (tmp_path / "res" / "results.sqlite").exists()  # no episode ran, no error row
    (tmp_path / "no_factory_module.py").write_text("VALUE = 1\n")
    _usage_error(
        capsys,
        [
            "eval",
            "--agent",
            "no_factory_module:make",
            "--env",
            "verigym/GuessNumber-v0",
            "--out",
            str(tmp_path / "res"),
        ],
        "has no attribute 'make'",
    )


def test_eval_on_one_env_without_a_suite(capsys, tmp_path):
    argv = [
        "eval",
        "--agent",
        "random",
        "--env",
        "verigym/GuessNumber-v0",
        "--episodes",
        "2",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
    assert main(argv) == 0
    assert "ran 2 episodes (2 ok)" in capsys.readouterr().out
    from verigym.leaderboards.store import ResultsStore

    with ResultsStore(tmp_path) as store:
        rows = store.rows()
    assert sorted(r.seed for r in rows) == [1_000_000, 1_000_001] and {r.env_id for r in rows} == {
        "verigym/GuessNumber-v0"
    }
    with pytest.raises(SystemExit):  # --env and --suite exclude each other
        main(["eval", "--agent", "random", "--env", "verigym/GuessNumber-v0", "--suite", "starter"])


def test_doctor_detail_is_not_a_wrapper_scripts_stderr(tmp_path, monkeypatch):
    pytest.importorskip("playwright")
    from verigym.doctor import probe_chromium

    wrapper = tmp_path / "chromium"
    wrapper.write_text(
        "#!/bin/sh\necho '/usr/bin/chromium: 9: [: 25276514304: unexpected operator' >&2\necho 'Chromium 1.2.3'\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    probe = probe_chromium()
    assert probe.ok and "Chromium 1.2.3" in probe.detail
    assert "unexpected operator" not in probe.detail


def test_list_explains_its_columns_on_a_terminal_only(capsys, monkeypatch):
    assert main(["list", "--family", "grid"]) == 0
    captured = capsys.readouterr()  # piped: plain rows on stdout, and no legend anywhere
    assert (
        captured.out.startswith("id\tfamily\tapi\tstep limit\tdescription\n") and captured.err == ""
    )
    assert "step limit: steps" not in captured.out
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["list", "--family", "grid"]) == 0
    out = " ".join(
        re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out).split()
    )  # without the terminal's styles
    assert (
        "step limit: steps (moves of each agent in a game) before the episode is truncated" in out
        and "api gymnasium" in out
    )


# ---- issue 21: the fresh-interpreter check does not depend on the working directory --------------


def test_fresh_interpreter_is_not_shadowed_by_a_verigym_folder_in_the_cwd(tmp_path, monkeypatch):
    from verigym.checker import _fresh_trajectories

    (tmp_path / "verigym").mkdir()  # e.g. the parent folder of a clone
    (tmp_path / "gymnasium.py").write_text("raise ImportError('the cwd shadowed gymnasium')\n")
    monkeypatch.chdir(tmp_path)
    result = _fresh_trajectories({"k": ("verigym/GuessNumber-v0", {}, 0, 5, False)}, timeout=120)
    status, payload = result["k"]
    assert status == "ok", payload


# ---- issue 21: terminal play ---------------------------------------------------------------------


def _play(monkeypatch, capsys, env_id: str, lines: str, *extra: str) -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    assert main(["play", env_id, "--seed", "1", *extra]) == 0
    return capsys.readouterr().out


def test_play_arrow_keys_move_in_grid_envs(monkeypatch, capsys):
    out = _play(monkeypatch, capsys, "verigym/Treasure-7x7-v0", "\x1b[A\x1b[D\nquit\n")
    assert "invalid action" not in out
    assert out.count("(reward ") == 2  # two arrows on one line: two moves
    out = _play(
        monkeypatch, capsys, "verigym/DoorKey-5x5-v0", "\x1b[C\x1bOA\nquit\n"
    )  # turn right, forward
    assert "invalid action" not in out and out.count("(reward ") == 2
    out = _play(
        monkeypatch, capsys, "verigym/DoorKey-5x5-v0", "\x1b[B\nquit\n"
    )  # MiniGrid has no "down"
    assert "no move for that arrow key" in out and "(reward " not in out


def test_play_empty_line_costs_no_turn_and_rules_are_printed_once(monkeypatch, capsys):
    out = _play(monkeypatch, capsys, "verigym/GuessNumber-v0", "\n   \n50\nquit\n")
    assert out.count("an empty line is not a turn") == 2
    assert "Turn 1/9." in out and "Turn 2/9." not in out  # the guess was the first turn
    assert out.count("After each guess I say whether") == 1
    out = _play(
        monkeypatch, capsys, "verigym/Treasure-7x7-v0", "up\n" * 3 + "quit\n", "--episodes", "2"
    )
    assert out.count("Walk to the treasure") == 1


def test_play_multiagent_id_points_to_single_agent_views(capsys):
    _usage_error(capsys, ["play", "verigym/TicTacToe-v0"], "single-agent views")


def test_train_unknown_or_non_learning_agent_is_a_usage_error(capsys):
    _usage_error(
        capsys, ["train", "ppoo", "--env", "CartPole-v1"], "verigym train: unknown agent 'ppoo'"
    )
    _usage_error(capsys, ["train", "random", "--env", "CartPole-v1"], "does not learn")


def _read_until(
    fd: int, marker: bytes, seen: bytearray, count: int = 1, timeout: float = 120.0
) -> None:
    """Read the child's terminal into ``seen`` until ``marker`` occurs ``count`` times."""
    import select
    import time

    end = time.monotonic() + timeout
    while seen.count(marker) < count and time.monotonic() < end:
        if select.select([fd], [], [], 0.5)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
    assert seen.count(marker) >= count, seen.decode(errors="replace")[-2000:]


def test_play_on_a_terminal_an_arrow_key_plays_at_once():
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "verigym", "play", "verigym/Treasure-7x7-v0", "--seed", "1"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    seen = bytearray()
    try:
        _read_until(master, b"> ", seen)
        os.write(master, b"\x1b[A")  # no Enter: the move is played at once
        _read_until(master, b"(reward ", seen)
        os.write(master, b"lefx\x7ft\r")  # a typed line, corrected with backspace
        _read_until(master, b"(reward ", seen, count=2)
        os.write(master, b"quit\r")
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _read_until(master, b"never printed", seen, timeout=1.0)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\n--- terminal:\n{seen.decode(errors='replace')[-3000:]!r}"
        ) from None
    finally:
        if child.poll() is None:
            child.kill()
        os.close(master)
    text = seen.decode(errors="replace")
    assert child.returncode == 0, text
    assert "\u2191" in text and text.count("(reward ") == 2 and "invalid action" not in text
