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
