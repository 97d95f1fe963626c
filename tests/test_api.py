"""The Python API does what it looks like: ``verigym.<subpackage>`` attributes, ``agents.make`` on
an env or an id for every agent, the oracle's and ``evaluate``'s refusals, ``import verigym`` from
any folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import verigym
import verigym.agents as agents
from verigym.agents.common.callbacks import evaluate


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_subpackages_are_attributes_and_stay_lazy(tmp_path: Path) -> None:
    done = _run(
        "import sys, verigym; "
        "assert 'verigym.leaderboards' not in sys.modules; "
        "print(verigym.agents.make.__module__, verigym.wrappers.LanguageWrapper.__name__, verigym.leaderboards.__name__); "
        "heavy = [m for m in ('torch', 'mujoco', 'playwright') if m in sys.modules]; "
        "assert not heavy, heavy",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["verigym.agents.base", "LanguageWrapper", "verigym.leaderboards"]
    assert {"agents", "wrappers", "leaderboards", "envs"} <= set(dir(verigym))
    with pytest.raises(AttributeError, match="no attribute 'agent'"):
        verigym.agent  # noqa: B018


def test_import_from_a_folder_that_holds_a_verigym_folder(tmp_path: Path) -> None:
    """A ``verigym/`` folder without ``__init__.py`` in the working directory (the parent of a
    clone, an output folder) must not shadow the installed package as a namespace package."""
    (tmp_path / "verigym").mkdir()
    (tmp_path / "verigym" / "notes.txt").write_text("not a package")
    done = _run(
        "import gymnasium as gym, verigym; "
        "assert verigym.__file__ is not None, verigym.__path__; "
        "env = gym.make('verigym/GuessNumber-v0'); env.reset(seed=0); print('ok')",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("name", ["random", "oracle", "qlearning"])
def test_make_accepts_an_env_id_for_every_kind_of_agent(name: str) -> None:
    agent = agents.make(name, "verigym/DoorKey-5x5-v0")
    result = evaluate(agent, "verigym/DoorKey-5x5-v0", episodes=2)
    assert len(result["returns"]) == 2
    if name == "oracle":
        assert result["success_rate"] == 1.0


def test_oracle_refuses_an_env_that_was_never_reset() -> None:
    env = gym.make("verigym/GuessNumber-v0")
    oracle = agents.make("oracle", env)
    with pytest.raises(RuntimeError, match="never reset"):
        oracle.act(None, {})
    obs, info = env.reset(seed=0)
    assert env.action_space.contains(oracle.act(obs, info))


def test_evaluate_refuses_an_oracle_bound_to_another_env() -> None:
    env = gym.make("verigym/GuessNumber-v0")
    oracle = agents.make("oracle", env)
    with pytest.raises(ValueError, match="one env instance"):
        evaluate(oracle, gym.make("verigym/GuessNumber-v0"), episodes=1)
    with pytest.raises(ValueError, match="one env instance"):
        evaluate(oracle, "verigym/GuessNumber-Hard-v0", episodes=1)
    with pytest.raises(ValueError, match="one env instance"):  # same id, another task
        evaluate(
            agents.make("oracle", gym.make("verigym/GuessNumber-v0", max_number=10)),
            "verigym/GuessNumber-v0",
            episodes=1,
        )
    assert evaluate(oracle, env, episodes=2)["success_rate"] == 1.0  # its own env
    assert (
        evaluate(oracle, "verigym/GuessNumber-v0", episodes=2)["success_rate"] == 1.0
    )  # its own env is that task
