"""NetHack through nle's core (issue 39). Skipped where nle is not installed (it is never a default
dependency: ``pip install --no-deps 'nle>=1.3,<1.4'``)."""

from __future__ import annotations

import copy
import pickle
import sys

import gymnasium as gym
import numpy as np
import pytest

import verigym
from verigym.core import ActionParseError
from verigym.registration import KwargsRefused, untrusted_kwargs

pytest.importorskip("nle", reason="nle is not installed (an optional extra, NetHack GPL)")


def _play(env, seed, names):
    env.reset(seed=seed)
    for name in names:
        result = env.step(env.unwrapped.parse_action(name))
    return result


def test_ids_exist_with_nle_and_run_under_this_gymnasium():
    assert gym.__version__.startswith("1.4")
    assert {"verigym/NetHack-v0", "verigym/NetHack-Score-v0"} <= {r.id for r in verigym.rows()}
    obs, info = gym.make("verigym/NetHack-v0").reset(seed=0)
    assert obs.shape == (24, 80) and obs.dtype == np.uint8 and info["max_depth"] == 1


def test_seeded_games_replay_and_pickles_replay_the_keys():
    names = ["far east", "more", "far south", "search", "far west", "more"] * 3
    a = gym.make("verigym/NetHack-v0")
    b = gym.make("verigym/NetHack-v0")
    assert (_play(a, 3, names)[0] == _play(b, 3, names)[0]).all()
    clone = pickle.loads(pickle.dumps(a.unwrapped))
    twin = copy.deepcopy(a.unwrapped)
    for env in (a.unwrapped, clone, twin):
        env.step(env.parse_action("far north"))
    assert (clone._screen == a.unwrapped._screen).all() and (twin._screen == clone._screen).all()
    assert (_play(b, 4, names)[0] != _play(a, 3, names)[0]).any()


def test_step_limit_ends_with_the_progression_score_and_the_text_view_is_the_screen():
    env = gym.make("verigym/NetHack-v0", max_steps=3, goal_depth=1)
    _, reward, terminated, truncated, info = _play(env, 0, ["search"] * 3)
    assert truncated and not terminated and info["success"] and info["score"] == reward == 0.0
    text = env.unwrapped.observation_text(env.unwrapped._screen)
    assert "Dlvl:1" in text and len(text.splitlines()) <= 24
    unwrapped = env.unwrapped
    unwrapped._max_depth, unwrapped._max_level = 11, 1
    assert unwrapped.score() == pytest.approx(0.161268)  # BALROG's Dlvl:11
    game = gym.make("verigym/NetHack-Score-v0").unwrapped
    game._stats[:] = 0
    assert game.score() == 0.0


def test_replies_name_one_action_and_malformed_actions_wait():
    env = gym.make("verigym/NetHack-v0")
    env.reset(seed=1)
    unwrapped = env.unwrapped
    assert (
        unwrapped.action_text(unwrapped.parse_action("<answer>Far_North</answer>")) == "far north"
    )
    for bad in ("", "north or south", "fly"):
        with pytest.raises(ActionParseError):
            unwrapped.parse_action(bad)
    info = env.step(999)[4]
    assert "action_error" in info


def test_kwargs_policy_and_the_missing_package_error(monkeypatch):
    assert untrusted_kwargs("verigym/NetHack-v0", {"goal_depth": 3, "score_by": "game"})
    for bad in ({"goal_depth": 0}, {"max_steps": 5}, {"score_by": "gold"}):
        with pytest.raises(KwargsRefused):
            untrusted_kwargs("verigym/NetHack-v0", bad)
    monkeypatch.setitem(sys.modules, "nle", None)
    with pytest.raises(ImportError, match=r"--no-deps 'nle"):
        gym.make("verigym/NetHack-v0")


def test_progression_is_balrogs_table_of_depth_and_experience_level():
    from verigym.envs.world.nethack import DEPTH_PROGRESSION, LEVEL_PROGRESSION, progression

    assert len(DEPTH_PROGRESSION) == 50 and len(LEVEL_PROGRESSION) == 30
    # both tables rise with the level (a deeper game never scores less) and start at 0
    for table in (DEPTH_PROGRESSION, LEVEL_PROGRESSION):
        assert table[0] == 0.0 and all(a < b for a, b in zip(table, table[1:]))
    # BALROG's numbers (balrog/environments/nle/achievements.json): Dlvl:2, Dlvl:10, Dlvl:50,
    # Xp:2, Xp:10, Xp:30
    assert progression(2, 1) == pytest.approx(0.015392269, abs=1e-6)
    assert progression(10, 1) == pytest.approx(0.125585970, abs=1e-6)
    assert progression(50, 1) == pytest.approx(0.806796444, abs=1e-6)
    assert progression(1, 2) == pytest.approx(0.018478405, abs=1e-6)
    assert progression(1, 10) == pytest.approx(0.179099538, abs=1e-6)
    assert progression(1, 30) == pytest.approx(0.780456195, abs=1e-6)
    # the larger of the two, not a sum or a linear scale; out-of-table values clip
    assert progression(5, 10) == progression(1, 10) and progression(14, 10) == progression(14, 1)
    assert progression(0, 0) == 0.0 and progression(60, 99) == progression(50, 1)
    with pytest.raises(TypeError):
        progression(2.5, 1)
