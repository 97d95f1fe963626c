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


def _before_the_last_command(env, seed):
    """Play the walkthrough up to its last command; that command (the one that wins)."""
    env.reset(seed=seed)
    inner = env.unwrapped
    while True:
        command = inner.oracle_action()
        clone = pickle.loads(pickle.dumps(inner))
        if clone.step(command)[2]:
            clone.close()
            return command
        clone.close()
        env.step(command)


@pytest.mark.slow
def test_served_and_language_wrapped_games_play_like_the_local_one():
    """serve-env: same seed, same text, the walkthrough wins over the wire; LanguageWrapper: the
    walkthrough's commands win through the text view, a malformed reply is charged, not crashed."""
    import verigym.remote
    import verigym.serve
    from verigym.wrappers import LanguageWrapper

    local = gym.make(IDS[1])
    local_text, _ = local.reset(seed=4)
    with verigym.serve.start(IDS[1]) as server:
        env = verigym.remote.make(IDS[1], url=server.url)
        text, info = env.reset(seed=4)
        assert text == local_text and "TextWorld" in info["instructions"]
        while True:
            command = local.unwrapped.oracle_action()
            local_result = local.step(command)
            result = env.step(command)
            assert result[0] == local_result[0]
            if result[2] or result[3]:
                break
        assert result[4]["success"] and result[4]["score"] == 1.0
        env.close()
    text_env = LanguageWrapper(gym.make(IDS[0]))
    text, info = text_env.reset(seed=2)
    assert text and "one command per turn" in info["instructions"]
    assert "action_error" in text_env.step("\\quit")[4]
    inner = text_env.unwrapped
    while True:
        result = text_env.step(inner.oracle_action())
        if result[2] or result[3]:
            break
    assert result[4]["success"]


@pytest.mark.slow
def test_adversarial_replies_do_not_win_the_game():
    """One command from the win, every cheating reply of the shared corpus is refused or plays a
    command that does not win; the plain winning command does (the control)."""
    from tests.envs.text.adversarial import CASES, CHEATS, wrong_answer

    env = gym.make(IDS[0], max_steps=200)
    right = _before_the_last_command(env, seed=3)
    inner = env.unwrapped
    for case in sorted(CHEATS):
        _, _, terminated, _, info = env.step(CASES[case](right, wrong_answer(right), ""))
        assert not terminated and not inner._state.won, case
    assert env.step(CASES["right_bare"](right, wrong_answer(right), ""))[4]["success"]


def test_missing_textworld_is_one_line_naming_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "textworld", None)
    with pytest.raises(ImportError, match=r"verigym\[textworld\]"):
        gym.make(IDS[0]).reset(seed=0)
