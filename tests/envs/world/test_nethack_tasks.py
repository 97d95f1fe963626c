"""The MiniHack-like NetHack tasks (issue 39): levels compiled from des-files by nle's own tools.
Skipped where nle is not installed (never a default dependency)."""

from __future__ import annotations

import copy
import os
import pickle

import gymnasium as gym
import numpy as np
import pytest

import verigym
from verigym.registration import KwargsRefused, untrusted_kwargs

pytest.importorskip("nle", reason="nle is not installed (an optional extra, NetHack GPL)")

from verigym.envs.world.nethack_tasks import _DIRECTIONS, TASKS, hackdir  # noqa: E402

IDS = {
    "room": "verigym/NetHack-Room-v0",
    "corridor": "verigym/NetHack-Corridor-v0",
    "monster": "verigym/NetHack-Monster-v0",
    "pickup": "verigym/NetHack-PickUp-v0",
}


def _oracle_episode(env, seed):
    env.reset(seed=seed)
    steps = 0
    while True:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        steps += 1
        if terminated or truncated:
            return info, reward, terminated, steps


def test_ids_are_registered_with_nle_and_build_their_level_from_its_des_file():
    assert set(IDS.values()) <= {r.id for r in verigym.rows("world")}
    assert set(TASKS) == set(IDS)
    path = hackdir("room")
    assert os.path.getsize(os.path.join(path, "nhdat")) > 100_000
    assert hackdir("room") == path  # built once per process
    env = gym.make(IDS["room"])
    obs, _ = env.reset(seed=0)
    screen = env.unwrapped.screen_text(obs)
    # the game starts on the des-file's level: its 15x7 lit room, the stairs in its east part
    assert "|" + "." * 15 + "|" in screen and ">" in screen and "Dlvl:1" in screen
    again, _ = gym.make(IDS["room"]).reset(seed=0)
    other, _ = env.reset(seed=1)
    assert (again == obs).all() and (other != obs).any()


@pytest.mark.parametrize("task", sorted(IDS))
def test_oracle_solves_each_task(task):
    env = gym.make(IDS[task])
    for seed in range(2):
        info, reward, terminated, steps = _oracle_episode(env, seed)
        assert info["success"] and info["score"] == reward == 1.0 and terminated, (seed, info)
        assert steps < 60
        if task != "pickup":
            assert info["max_depth"] == 2  # the game itself went down the stairs


def test_attacking_a_gas_spore_fails_the_monster_task():
    env = gym.make(IDS["monster"])
    env.reset(seed=1)
    unwrapped = env.unwrapped
    names = unwrapped.action_names()
    for _ in range(60):
        x, y = unwrapped._position()
        spores = [(int(c), int(r)) for r, c in zip(*np.nonzero(unwrapped._chars == ord("e")))]
        tx, ty = min(spores, key=lambda p: max(abs(p[0] - x), abs(p[1] - y)))
        action = names.index(_DIRECTIONS[(int(np.sign(tx - x)), int(np.sign(ty - y)))])
        if "--More--" in unwrapped.screen_text(unwrapped._screen):
            action = names.index("more")
        _, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert terminated and not info["success"] and reward == 0.0
    assert "explosion" in unwrapped.screen_text(unwrapped._screen)


def test_standing_on_the_wand_is_not_picking_it_up():
    env = gym.make(IDS["pickup"], max_steps=40)
    env.reset(seed=2)
    unwrapped = env.unwrapped
    names = unwrapped.action_names()
    info, truncated = {}, False
    while not truncated:
        action = int(unwrapped.oracle_action())
        if names[action] == "pickup":
            action = names.index("search")  # stand on the wand, never pick it up
        _, reward, terminated, truncated, info = env.step(action)
        assert not terminated
    assert not info["success"] and reward == 0.0 and info["score"] == 0.0


def test_copies_replay_the_task_and_kwargs_are_allow_listed():
    env = gym.make(IDS["corridor"])
    env.reset(seed=4)
    for _ in range(5):
        env.step(env.unwrapped.oracle_action())
    clone = pickle.loads(pickle.dumps(env.unwrapped))
    twin = copy.deepcopy(env.unwrapped)
    assert (clone._screen == env.unwrapped._screen).all()
    assert (twin._screen == env.unwrapped._screen).all() and twin.task == "corridor"
    assert untrusted_kwargs(IDS["room"], {"task": "monster"})
    for bad in ({"task": "../../etc"}, {"max_steps": 5000}, {"hackdir": "/tmp"}):
        with pytest.raises(KwargsRefused):
            untrusted_kwargs(IDS["room"], bad)
    text = env.unwrapped.instructions()
    assert "corridor" in text and "far east" in text


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(IDS))
def test_oracle_success_on_100_seeds(task):
    env = gym.make(IDS[task])
    wins = sum(_oracle_episode(env, seed)[0]["success"] for seed in range(100))
    assert wins >= 99, wins


@pytest.mark.slow
def test_served_and_language_wrapped_tasks_play_like_the_local_one():
    """serve-env: same seed, same screen, the oracle's keys win over the wire; LanguageWrapper:
    the action names win through the text view, a malformed reply is charged, not crashed."""
    import verigym.remote
    import verigym.serve
    from verigym.wrappers import LanguageWrapper

    local = gym.make(IDS["monster"])
    local_obs, _ = local.reset(seed=5)
    with verigym.serve.start(IDS["monster"]) as server:
        env = verigym.remote.make(IDS["monster"], url=server.url)
        obs, _ = env.reset(seed=5)
        assert (obs == local_obs).all()
        while True:
            action = local.unwrapped.oracle_action()
            local.step(action)
            result = env.step(action)
            if result[2] or result[3]:
                break
        assert result[4]["success"] and result[1] == 1.0
        env.close()
    text_env = LanguageWrapper(gym.make(IDS["pickup"]))
    text, info = text_env.reset(seed=3)
    assert "Dlvl:1" in text and "wand" in info["instructions"]
    assert "action_error" in text_env.step("pick up the wand please")[4]
    inner = text_env.unwrapped
    while True:
        result = text_env.step(inner.action_text(inner.oracle_action()))
        if result[2] or result[3]:
            break
    assert result[4]["success"]


def test_adversarial_replies_pick_nothing_up_through_the_text_view():
    """On the wand, every cheating reply of the shared corpus is refused or does not pick it up;
    the plain right reply does (the control)."""
    from tests.envs.text.adversarial import CASES, CHEATS
    from verigym.wrappers import LanguageWrapper

    env = LanguageWrapper(gym.make(IDS["pickup"], max_steps=200), max_invalid_actions=None)
    env.reset(seed=6)
    inner = env.unwrapped
    while inner.action_text(inner.oracle_action()) != "pickup":
        env.step(inner.action_text(inner.oracle_action()))
    for case in sorted(CHEATS):
        _, _, terminated, truncated, info = env.step(CASES[case]("pickup", "pickupx", ""))
        assert not terminated and not truncated and not inner._succeeded(), case
    assert env.step(CASES["right"]("pickup", "pickupx", ""))[4]["success"]
