"""``verigym train``: options from the config dataclass, outputs in --out, errors."""

from __future__ import annotations

import json

import pytest

import verigym.agents as agents
from verigym.cli import main


def test_train_writes_agent_metrics_plot_and_eval(tmp_path):
    out = tmp_path / "run"
    status = main(
        [
            "train",
            "ppo",
            "--env",
            "CartPole-v1",
            "--steps",
            "512",
            "--out",
            str(out),
            "--no-progress",
            "--eval-episodes",
            "2",
            "--num-envs",
            "2",
            "--num-steps",
            "64",
            "--hidden-sizes",
            "16",
            "16",
            "--no-norm-adv",
            "--target-kl",
            "none",
            "--seed",
            "3",
        ]
    )
    assert status == 0
    names = {p.name for p in out.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "meta.json",
        "metrics.jsonl",
        "eval.json",
        "learning_curve.png",
    } <= names
    config = json.loads((out / "config.json").read_text())
    assert (
        config["hidden_sizes"] == [16, 16]
        and config["norm_adv"] is False
        and config["target_kl"] is None
        and config["seed"] == 3
    )
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["global_step"] == 512
    assert agents.load("ppo", out).config.num_steps == 64


def test_train_help_lists_config_fields(capsys):
    with pytest.raises(SystemExit):
        main(["train", "dqn", "--help"])
    text = capsys.readouterr().out
    assert "--target-update-interval" in text and "double-DQN" in text


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "no-such-agent", "--env", "CartPole-v1", "--steps", "1", "--out", "x"],
        ["train", "random", "--env", "CartPole-v1", "--steps", "1", "--out", "x"],
    ],
)
def test_train_refuses_unknown_or_non_learning_agents(argv, capsys):
    assert main(argv) == 2
    assert "ppo" in capsys.readouterr().err


def test_train_bad_option_value_is_a_usage_error(tmp_path, capsys):
    assert (
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
                "--gamma",
                "2.0",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("verigym train ppo:") and "gamma" in err[0]


_BAD_ARGUMENTS = """
import contextlib, io, sys
from verigym.cli import main
common = ["--env", "CartPole-v1", "--steps", "10", "--out", sys.argv[1]]
cases = [
    ["ppo", *common, "--lerning-rate", "1e-3"],
    ["ppo", *common, "--gamma", "2.0"],
    ["dqn", *common, "--batch-size", "1.5"],
    ["sac", *common, "--tau", "0"],
    ["qlearning", "--steps", "10"],
    ["option-critic", *common, "--num-options", "0"],
    ["ippo", *common, "--agent-indicator", "--no-share-parameters"],
    ["ppo", "--env", "CartPol-v1", "--steps", "10", "--out", sys.argv[1]],
    ["grpo", "--env", "verigym/GuessNumber-v0", "--model", "m", "--lerning-rate", "1e-6"],
    ["grpo", "--env", "verigym/GuessNumber-v0", "--model", "m", "--num-generations", "1"],
    ["grpo", "--env", "verigym/GuessNumber-v0", "--model", "m", "--top-p", "x"],
    ["grpo", "--env", "verigym/GuesNumber-v0", "--model", "m"],
    ["grpo", "--env", "verigym/GuessNumber-v0", "--model", "m", "--lora-r", "-1"],
    ["sft", "--model", "m", "--data", "d.jsonl", "--epochs", "0"],
    ["sft", "--model", "m", "--data", "d.jsonl", "--lerning-rate", "1e-4"],
    ["sft", "--model", "m", "--data", "d.jsonl", "--lora-r", "-1"],
]
for argv in cases:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = main(["train", *argv])
        except SystemExit as exc:
            status = exc.code
    assert status == 2 and err.getvalue().startswith("verigym train"), (argv, status, err.getvalue())
print("torch" in sys.modules)
"""


def test_a_bad_train_argument_fails_before_torch_is_imported(tmp_path):
    """A mistyped or out-of-range option of every classic agent and of the LLM trainers (grpo,
    sft), and a misspelled env id, are usage errors before the agent's module (and torch, seconds
    of import) is loaded: the options are parsed and validated with the torch-free configs of
    verigym.agents.configs and verigym.agents.llm.configs."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _BAD_ARGUMENTS, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert not (tmp_path / "out").exists()


def test_each_trainable_agent_takes_its_config_from_the_torch_free_table():
    from verigym.agents.configs import CONFIGS

    assert set(CONFIGS) == {"ppo", "sac", "dqn", "qlearning", "option-critic", "ippo"}
    for name, config_class in CONFIGS.items():
        assert agents.agent_class(name).config_class is config_class


def test_train_unknown_env_is_a_usage_error_with_suggestions(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "ppo",
                "--env",
                "verigym/DoorKy-5x5-v0",
                "--steps",
                "10",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "did you mean verigym/DoorKey-5x5-v0" in capsys.readouterr().err


def test_train_ippo_on_a_parallel_game(tmp_path):
    out = tmp_path / "ippo"
    assert (
        main(
            [
                "train",
                "ippo",
                "--env",
                "verigym/Spread-v0",
                "--steps",
                "200",
                "--out",
                str(out),
                "--num-envs",
                "1",
                "--num-steps",
                "32",
                "--no-share-parameters",
                "--eval-episodes",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    assert (out / "model.safetensors").exists() and (out / "eval.json").exists()
