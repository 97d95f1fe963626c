"""The Crafter envs (issue 39): fidelity to upstream, the verdict, the text view, the parser, the
kwargs policy, the missing-extra error and the scripted reference agent."""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.core import ActionParseError
from verigym.registration import KwargsRefused, untrusted_kwargs

crafter = pytest.importorskip("crafter", reason="the crafter extra is not installed")

from verigym.envs.world import crafter as vc  # noqa: E402


def _scripted_episode(env, seed):
    env.reset(seed=seed)
    while True:
        result = env.step(env.unwrapped.oracle_action())
        if result[2] or result[3]:
            return result


def test_world_is_upstreams_and_memoized_resets_replay_it():
    """The reset frame, map and creatures are crafter.Env's for the drawn world seed, frame by
    frame up to the first creature balancing (step 10: upstream's pick there depends on memory
    addresses); a memoized reset replays the whole episode exactly."""
    env = gym.make("verigym/Crafter-v0")
    obs, _ = env.reset(seed=3)
    world_seed = env.unwrapped.world_seed
    upstream = crafter.Env(seed=world_seed, length=0)
    assert (upstream.reset() == obs).all()
    assert (upstream._world._mat_map == env.unwrapped._game._world._mat_map).all()
    creatures = lambda game: [(type(o).__name__, tuple(o.pos)) for o in game._world.objects]  # noqa: E731
    assert creatures(upstream) == creatures(env.unwrapped._game)
    actions = [1, 1, 3, 5, 5, 2, 4, 4, 5]
    frames = []
    for action in actions:
        frames.append(env.step(action)[0])
        assert (upstream.step(action)[0] == frames[-1]).all()
    vc._WORLDS.clear()
    rng = np.random.default_rng(0)
    long = actions + [int(a) for a in rng.integers(17, size=60)]
    replays = []
    for _ in range(2):  # a fresh generation, then the memoized world
        env.reset(seed=3)
        replays.append([env.step(a)[0].tobytes() for a in long])
    assert replays[0] == replays[1] and replays[0][: len(actions)] == [f.tobytes() for f in frames]


def test_scripted_agent_reaches_the_goal_and_the_verdict_follows_the_achievements():
    env = gym.make("verigym/Crafter-v0")
    _, reward, terminated, truncated, info = _scripted_episode(env, 0)
    assert terminated and not truncated and info["success"]
    assert "make_wood_pickaxe" in info["achievements"]
    assert info["score"] == pytest.approx(len(info["achievements"]) / 22)
    assert info["inventory"]["wood_pickaxe"] == 1 and reward >= 1.0


def test_survive_succeeds_alive_at_the_limit_and_diamond_fails_unreached():
    survive = gym.make("verigym/Crafter-Survive-v0", max_steps=5)
    survive.reset(seed=1)
    for _ in range(5):
        result = survive.step(0)
    assert result[3] and not result[2] and result[4]["success"] and result[4]["score"] == 0.0
    diamond = gym.make("verigym/Crafter-Diamond-v0", max_steps=30)
    result = _scripted_episode(diamond, 1)
    assert result[3] and not result[4]["success"]
    assert result[4]["score"] == len(result[4]["achievements"]) / 22 > 0


def test_text_view_shows_what_is_in_view_with_direction_and_distance():
    env = gym.make("verigym/Crafter-Text-v0")
    text, info = env.reset(seed=0)
    game = env.unwrapped._game
    px, py = game._player.pos
    world = game._world
    world[(px - 2, py - 1)] = "diamond"  # 1 north, 2 west
    text = env.unwrapped.text()
    assert "- diamond 3 steps away (1 north, 2 west)" in text
    assert "Vitals: health 9/9, food 9/9, drink 9/9, energy 9/9" in text
    assert "Inventory: empty" in text and "Step 0 of 10000." in text
    assert (
        "make_wood_pickaxe" in info["instructions"] and "after 10000 steps" in info["instructions"]
    )


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        ("do", "do"),
        ("Move_Left", "move_left"),
        ("move north", "move_up"),
        ("<think>maybe sleep</think> I will <answer>place table</answer>", "place_table"),
        ("`make-wood-pickaxe`.", "make_wood_pickaxe"),
    ],
)
def test_parser_reads_one_action_name(reply, action):
    assert vc.ACTIONS[vc.parse_crafter_action(reply)] == action


@pytest.mark.parametrize("reply", ["", "<answer>do, noop</answer>", "x" * 9000])
def test_unreadable_reply_is_a_noop_with_the_penalty(reply):
    for unreadable in (reply, "do or sleep", "jump", "<think>do"):
        with pytest.raises(ActionParseError):
            vc.parse_crafter_action(unreadable)
    env = gym.make("verigym/Crafter-Text-v0")
    env.reset(seed=2)
    noop = gym.make("verigym/Crafter-Text-v0")
    noop.reset(seed=2)
    text, reward, _, _, info = env.step(reply)
    text_noop, reward_noop, _, _, info_noop = noop.step("noop")
    assert "action_error" in info and "action_error" not in info_noop
    assert text == text_noop and reward == pytest.approx(reward_noop - 0.1)


def test_adversarial_replies_unlock_nothing():
    from tests.envs.text.adversarial import CASES

    env = gym.make("verigym/Crafter-Text-v0", max_steps=len(CASES))
    env.reset(seed=4)
    for case, build in CASES.items():
        _, _, terminated, truncated, info = env.step(build("make_wood_pickaxe", "make_woodx", ""))
        assert not terminated and info["achievements"] == [], case
    assert truncated and not info["success"] and info["score"] == 0.0


def test_goal_kwargs_are_checked_and_bounded_for_remote_callers():
    with pytest.raises(ValueError, match="not a Crafter achievement"):
        gym.make("verigym/Crafter-v0", goal=["fly"])
    with pytest.raises(ValueError, match="survive=True"):
        gym.make("verigym/Crafter-v0", goal=[])
    assert untrusted_kwargs("verigym/Crafter-v0", {"goal": ["collect_coal", "eat_cow"]})
    for bad in ({"goal": ["fly"]}, {"goal": "collect_coal"}, {"max_steps": 10}, {"area": 9}):
        with pytest.raises(KwargsRefused):
            untrusted_kwargs("verigym/Crafter-v0", bad)
    with pytest.raises(KwargsRefused):
        untrusted_kwargs("verigym/Crafter-Text-v0", {"invalid_action_reward": 5.0})


def test_missing_crafter_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "crafter", None)
    with pytest.raises(ImportError, match=r"pip install 'verigym\[crafter\]'") as caught:
        gym.make("verigym/Crafter-v0")
    assert "\n" not in str(caught.value)


def test_constants_match_upstream():
    assert vc.ACTIONS == tuple(crafter.constants.actions)
    assert vc.ACHIEVEMENTS == tuple(crafter.constants.achievements)


@pytest.mark.slow
def test_scripted_agent_makes_a_wood_pickaxe_on_90_percent_of_100_seeds():
    env = gym.make("verigym/Crafter-v0")
    wins = sum(bool(_scripted_episode(env, seed)[4]["success"]) for seed in range(100))
    assert wins >= 90, f"{wins}/100"


def test_served_crafter_plays_like_the_local_one():
    """serve-env: same seed, same frame; the achievements and the verdict cross the wire; a
    client's goal kwarg is allowed, an operator-only one refused."""
    import verigym.remote
    import verigym.serve
    from verigym.serve.client import RemoteEnvError

    local = gym.make("verigym/Crafter-v0")
    local_obs, _ = local.reset(seed=0)
    with verigym.serve.start("verigym/Crafter-v0", "verigym/Crafter-Text-v0") as server:
        env = verigym.remote.make("verigym/Crafter-v0", url=server.url)
        obs, _ = env.reset(seed=0)
        assert obs.dtype == np.uint8 and (obs == local_obs).all()
        while True:
            result = env.step(local.unwrapped.oracle_action())
            local.step(local.unwrapped.oracle_action())
            if result[2] or result[3]:
                break
        assert result[4]["success"] and "make_wood_pickaxe" in result[4]["achievements"]
        env.close()
        text_env = verigym.remote.make(
            "verigym/Crafter-Text-v0", url=server.url, goal=["collect_wood"]
        )
        text, info = text_env.reset(seed=0)
        assert "Vitals:" in text and "collect_wood" in info["instructions"]
        assert "action_error" in text_env.step("fly away")[4]
        text_env.close()
        with pytest.raises((RemoteEnvError, KwargsRefused, ValueError)):
            verigym.remote.make("verigym/Crafter-v0", url=server.url, max_steps=5).reset(seed=0)
