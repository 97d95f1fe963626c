"""Issue 29 §2 and §4: a command that cannot do its work says so in one line and exits non-zero.

Each CLI case runs ``python -m verigym ...`` in a fresh interpreter and checks the exit status and
that stderr is one ``verigym <verb>: ...`` line (no usage block, no traceback).
"""

from __future__ import annotations

import http.server
import io
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

BOOM_AGENT = """
class Boom:
    def reset(self, *, seed=None):
        pass

    def act(self, obs, info=None, *, deterministic=False):
        raise RuntimeError("the agent broke")


def make(env):
    return Boom()
"""


def cli(
    *args: str, cwd: Path, stdin: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    env = {**os.environ, "VERIGYM_CACHE": str(cwd / "cache"), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "verigym", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


def one_line_error(
    done: subprocess.CompletedProcess, verb: str, expected: str, status: int = 2
) -> str:
    """The single stderr line of a failed command, after checking its form."""
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"verigym {verb}: "), lines[0]
    assert expected in lines[0], lines[0]
    assert "Traceback" not in done.stdout + done.stderr
    return lines[0]


# ---- verigym eval ------------------------------------------------------------------------------


def test_eval_exits_non_zero_when_every_episode_is_an_error(tmp_path):
    (tmp_path / "boom_agent.py").write_text(BOOM_AGENT)
    done = cli(
        "eval",
        "--agent",
        "boom_agent:make",
        "--env",
        "verigym/GuessNumber-v0",
        "--episodes",
        "2",
        "--workers",
        "1",
        "--out",
        "res",
        "--no-progress",
        cwd=tmp_path,
    )
    line = one_line_error(
        done,
        "eval",
        "every episode of boom_agent:make on verigym/GuessNumber-v0 is an error (2 of 2)",
        status=1,
    )
    assert "the agent broke" in line
    assert "ran 2 episodes (2 error)" in done.stdout  # the rows are recorded all the same


def test_eval_checks_the_model_folder_before_any_episode(tmp_path):
    (tmp_path / "empty").mkdir()
    done = cli(
        "eval",
        "--agent",
        "llm:empty",
        "--env",
        "verigym/GuessNumber-v0",
        "--out",
        "res",
        cwd=tmp_path,
    )
    one_line_error(done, "eval", "empty is not a model directory")
    assert not (tmp_path / "res" / "results.sqlite").exists()


class _Models(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible server that lists one model and answers nothing else."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps(
            {"object": "list", "data": [{"id": "served-model", "object": "model"}]}
        ).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_eval_checks_the_openai_endpoint_serves_the_model(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        done = cli(
            "eval",
            "--agent",
            f"openai:{url}#no-such-model",
            "--env",
            "verigym/GuessNumber-v0",
            "--out",
            "res",
            cwd=tmp_path,
        )
        one_line_error(
            done, "eval", "does not serve model 'no-such-model'; it serves: served-model"
        )
    finally:
        server.shutdown()
        server.server_close()
    done = cli(
        "eval",
        "--agent",
        f"openai:{url}#served-model",
        "--env",
        "verigym/GuessNumber-v0",
        "--out",
        "res",
        cwd=tmp_path,
    )
    one_line_error(done, "eval", "cannot reach")  # the server is gone now
    assert not (tmp_path / "res" / "results.sqlite").exists()


def test_eval_checks_the_env_server_and_that_the_agent_can_play_there(tmp_path):
    pytest.importorskip("uvicorn")
    import verigym.serve

    with verigym.serve.start("verigym/GuessNumber-v0") as server:
        done = cli(
            "eval",
            "--agent",
            "random",
            "--env",
            "verigym/Hangman-Easy-v0",
            "--env-url",
            server.url,
            "--out",
            "res",
            cwd=tmp_path,
        )
        one_line_error(done, "eval", "cannot play verigym/Hangman-Easy-v0 there")  # not served
        done = cli(
            "eval",
            "--agent",
            "oracle",
            "--env",
            "verigym/GuessNumber-v0",
            "--env-url",
            server.url,
            "--out",
            "res",
            cwd=tmp_path,
        )
        one_line_error(done, "eval", "a remote env has no oracle_action()")
    done = cli(
        "eval",
        "--agent",
        "random",
        "--env",
        "verigym/GuessNumber-v0",
        "--env-url",
        server.url,
        "--out",
        "res",
        cwd=tmp_path,
    )
    one_line_error(done, "eval", "cannot reach")  # the server is gone
    done = cli("eval", "--agent", "oracle", "--env", "CartPole-v1", "--out", "res", cwd=tmp_path)
    one_line_error(done, "eval", "oracle cannot play CartPole-v1")
    assert not (tmp_path / "res" / "results.sqlite").exists()


def test_a_second_eval_reuses_what_is_recorded_and_refuses_only_a_duplicate(tmp_path):
    common = (
        "--agent",
        "oracle",
        "--env",
        "verigym/GuessNumber-v0",
        "--workers",
        "1",
        "--out",
        "res",
        "--no-progress",
    )
    assert cli("eval", *common, "--episodes", "2", cwd=tmp_path).returncode == 0
    more = cli(
        "eval", *common, "--episodes", "3", cwd=tmp_path
    )  # docs/leaderboards.md's order: a longer run after a shorter one
    assert more.returncode == 0, more.stderr
    assert "ran 1 episodes (1 ok), 2 already recorded" in more.stdout
    again = cli("eval", *common, "--episodes", "3", cwd=tmp_path)
    one_line_error(
        again, "eval", "all 3 episodes of oracle on env verigym/GuessNumber-v0 are already in"
    )


# ---- verigym serve-model / train ------------------------------------------------------------------


def test_serve_model_and_train_grpo_on_a_folder_without_a_model_say_so_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    expected = "no model in empty: expected config.json and weights, a .gguf file, or a short name such as smollm2"
    one_line_error(cli("serve-model", "empty", cwd=tmp_path), "serve-model", expected)
    one_line_error(
        cli("train", "grpo", "--env", "verigym/GuessNumber-v0", "--model", "empty", cwd=tmp_path),
        "train grpo",
        expected,
    )
    one_line_error(
        cli("train", "grpo", "--env", "verigym/TicTacToe-v0", "--model", "empty", cwd=tmp_path),
        "train grpo",
        "is a multi-agent env",
    )


def test_train_grpo_env_kwargs_are_checked_before_the_model_loads(tmp_path):
    (tmp_path / "empty").mkdir()  # no model: reaching the model load would say so instead
    arith = "verigym/RG-BasicArithmetic-v0"
    for query, expected in [
        ("level", "expected KEY=VALUE pairs"),
        ("level=1&level=2", "each key once"),
        ("level=x", "kwarg 'level' refused: must be an int"),
        ("level=9", "level must be None or an int in [0, 4]"),
        ("colour=1", "unexpected keyword argument 'colour'"),
    ]:
        done = cli("train", "grpo", "--env", f"{arith}?{query}", "--model", "empty", cwd=tmp_path)
        one_line_error(done, "train grpo", expected)


def test_train_grpo_env_with_kwargs_is_a_named_factory():
    from verigym.commands.train_llm import _env_task

    assert _env_task("verigym/GuessNumber-v0", "") == "verigym/GuessNumber-v0"
    task = _env_task("verigym/RG-BasicArithmetic-v0", "level=0")
    assert task.__name__ == "verigym/RG-BasicArithmetic-v0?level=0"
    env = task()
    assert env.unwrapped.level == 0
    env.close()


def test_train_option_errors_are_one_line_with_did_you_mean(tmp_path):
    done = cli(
        "train",
        "ppo",
        "--env",
        "CartPole-v1",
        "--steps",
        "10",
        "--out",
        "run",
        "--learning-rat",
        "1e-3",
        cwd=tmp_path,
    )
    one_line_error(
        done,
        "train ppo",
        "unrecognized arguments: --learning-rat 1e-3; did you mean --learning-rate?",
    )
    one_line_error(
        cli("train", "ppo", "--env", "CartPole-v1", cwd=tmp_path),
        "train ppo",
        "required: --steps, --out",
    )
    one_line_error(cli("list", "--fam", "grid", cwd=tmp_path), "list", "did you mean --family?")
    one_line_error(
        cli("train", cwd=tmp_path), "train", "the following arguments are required: agent ("
    )
    assert not (tmp_path / "run").exists()


def test_train_ppo_on_a_text_env_says_what_fits(tmp_path):
    done = cli(
        "train",
        "ppo",
        "--env",
        "verigym/GuessNumber-v0",
        "--steps",
        "10",
        "--out",
        "run",
        cwd=tmp_path,
    )
    one_line_error(done, "train ppo", "verigym train grpo --env verigym/GuessNumber-v0")
    assert "CandidateActionWrapper" in done.stderr and not (tmp_path / "run").exists()


def test_train_reports_no_success_rate_for_an_env_without_success():
    from verigym.commands.train import _evaluation_line

    line = _evaluation_line(
        {"mean_return": 20.0, "std_return": 1.5, "success_rate": math.nan, "mean_score": math.nan}
    )
    assert line == "mean return 20.00 +- 1.50" and "nan" not in line
    assert _evaluation_line({"mean_return": 1.0, "std_return": 0.0, "success_rate": 0.5}).endswith(
        "success rate 0.50"
    )


# ---- verigym play / list -------------------------------------------------------------------------


def test_play_at_the_end_of_input_says_how_the_episode_stood(tmp_path):
    done = cli(
        "play", "verigym/GuessNumber-v0", "--seed", "1", cwd=tmp_path
    )  # stdin closed at once
    assert done.returncode == 0, done.stderr
    assert "Episode 1 of 1 left unfinished after 0 steps: return=+0.000" in done.stdout
    done = cli(
        "play", "verigym/GuessNumber-v0", "--seed", "1", cwd=tmp_path, stdin="50\n"
    )  # Ctrl-D after a turn
    assert (
        done.returncode == 0
        and "(end of input) Episode 1 of 1 left unfinished after 1 steps" in done.stdout
    )


def test_list_piped_has_real_step_limits_and_no_legend(tmp_path):
    done = cli("list", "--family", "grid", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert rows[0][3] == "step limit" and len(rows) > 10
    limits = {row[0]: row[3] for row in rows[1:]}
    assert "own" not in limits.values() and all(v.isdigit() for v in limits.values()), limits
    import gymnasium as gym

    import verigym  # noqa: F401

    env = gym.make("verigym/DoorKey-5x5-v0")
    assert limits["verigym/DoorKey-5x5-v0"] == str(
        env.unwrapped.max_steps
    )  # the made env's own limit
    env.close()
    again = cli("list", "--family", "grid", cwd=tmp_path)  # answered from the cache, the same
    assert again.stdout == done.stdout and (tmp_path / "cache" / "list-step-limits.json").is_file()


def test_list_marks_games_without_a_limit():
    from verigym.commands.list import NO_LIMIT, made_limits, step_limit
    from verigym.registration import EnvRow, row

    tictactoe = row("verigym/TicTacToe-v0")
    assert step_limit(tictactoe, made_limits([tictactoe])) == NO_LIMIT  # ends by its rules
    base = {"id": "verigym/Sample-v0", "entry_point": "m:C", "family": "grid"}
    assert step_limit(EnvRow(**base, max_episode_steps=50)) == "50"
    assert step_limit(EnvRow(**base, kwargs={"max_steps": 30})) == "30"


# ---- progress bars in logs -----------------------------------------------------------------------


def test_progress_in_a_log_prints_whole_lines():
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn

    from verigym.progress import Progress

    log = io.StringIO()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("return {task.fields[ret]}"),
        console=Console(file=log, force_terminal=False),
        interval_s=0.0,
    ) as progress:
        task = progress.add_task("ppo on CartPole-v1", total=3, ret="-")
        for step in range(3):
            progress.update(task, advance=1, ret=f"{step:.1f}")
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text and "━" not in text
    assert text.splitlines() == [
        f"ppo on CartPole-v1 {n}/3 return {n - 1:.1f}" for n in (1, 2, 3)
    ]  # the stop repeats none
    log = io.StringIO()
    with Progress(
        TextColumn("{task.description}"),
        MofNCompleteColumn(),
        console=Console(file=log, force_terminal=False),
        interval_s=3600,
    ) as progress:
        task = progress.add_task("grpo", total=2)
        progress.update(task, advance=2)
    assert log.getvalue() == "grpo 2/2\n"  # between two intervals: the last state once, at the stop


def test_a_folder_without_config_and_weights_is_no_model(tmp_path):
    from verigym.agents.llm.models import check_model, is_model_reference, resolve_model

    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text("{}")  # a config alone is not a model
    assert not is_model_reference(folder)
    for check in (check_model, resolve_model):
        with pytest.raises(
            FileNotFoundError, match=r"^no model in .*checkpoint: expected config.json and weights"
        ):
            check(folder)
    (folder / "model.safetensors").write_bytes(b"")
    assert is_model_reference(folder) and resolve_model(folder) == folder


def test_library_bars_are_off_in_a_log_only():
    from transformers.utils import logging as transformers_logging

    from verigym.progress import quiet_library_bars

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    transformers_logging.enable_progress_bar()  # an earlier test's quiet run may have turned it off
    try:
        assert not quiet_library_bars(Terminal()) and transformers_logging.is_progress_bar_enabled()
        assert (
            quiet_library_bars(io.StringIO()) and not transformers_logging.is_progress_bar_enabled()
        )
    finally:
        transformers_logging.enable_progress_bar()


def test_serve_model_with_a_folder_that_is_no_adapter_says_so_in_one_line(tmp_path):
    from verigym.agents.llm.tiny import build_tiny_model

    build_tiny_model(tmp_path / "tiny")
    one_line_error(
        cli("serve-model", "tiny", "--adapter", "missing", "--port", "0", cwd=tmp_path),
        "serve-model",
        "adapter 'missing' is not a directory",
    )
