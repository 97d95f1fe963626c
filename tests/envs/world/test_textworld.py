"""TextWorld challenges generated per seed (issue 39). Skipped where textworld is not installed;
slow: a new game takes seconds to generate (then it is cached)."""

from __future__ import annotations

import os
import pickle

import gymnasium as gym
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.registration import KwargsRefused, untrusted_kwargs

pytest.importorskip("textworld", reason="textworld is not installed (the textworld extra)")
pytest.importorskip("jericho", reason="jericho is not installed (the textworld extra)")

IDS = [f"verigym/TextWorld-{c}-v0" for c in ("CoinCollector", "TreasureHunter", "Simple")]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    """Generated games go to ``$VERIGYM_CACHE`` when it is set, else to the run's temporary
    folder (never the user's home)."""
    if not os.environ.get("VERIGYM_CACHE"):
        monkeypatch.setenv("VERIGYM_CACHE", str(tmp_path_factory.getbasetemp() / "verigym-cache"))


def _walkthrough(env, seed):
    env.reset(seed=seed)
    while True:
        result = env.step(env.unwrapped.oracle_action())
        if result[2] or result[3]:
            return result


@pytest.mark.slow
def test_malformed_replies_pickles_and_kwargs():
    env = gym.make(IDS[0])
    env.reset(seed=1)
    text, reward, _, _, info = env.step("")
    assert "action_error" in info and reward == pytest.approx(-0.1)
    for command in ("\\help", "\\q", "look; \\s", "go <north>"):  # the interpreter's commands
        _, _, terminated, truncated, info = env.step(command)
        assert "action_error" in info and not (terminated or truncated), command
    env.step(env.unwrapped.oracle_action())
    clone = pickle.loads(pickle.dumps(env.unwrapped))
    assert clone._commands == env.unwrapped._commands and clone._last == env.unwrapped._last
    for bad in ({"level": 30}, {"max_steps": 5}, {"challenge": "cooking"}):
        with pytest.raises(KwargsRefused):
            untrusted_kwargs(IDS[0], bad)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", IDS)
def test_the_walkthrough_wins_every_game(env_id):
    env = gym.make(env_id)
    results = [_walkthrough(env, seed) for seed in range(10)]
    assert all(r[4]["success"] and r[4]["score"] == 1.0 for r in results)
