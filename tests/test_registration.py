from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import pytest

import verigym
from verigym.registration import EnvRow, register_rows, row, variants


def test_ids_are_in_gymnasium_registry_with_family():
    for r in verigym.rows():
        if r.api == "gymnasium":
            assert r.id in gym.registry
            assert r.family in verigym.FAMILIES


def test_family_filter_and_unknown_family():
    assert all(r.family == "text" for r in verigym.rows("text"))
    with pytest.raises(ValueError, match="unknown family"):
        verigym.rows("cooking")


def test_register_is_idempotent_and_refuses_conflicts():
    item = EnvRow("verigym/RegTest-v0", "verigym.envs.text.guess_number:GuessNumberEnv", family="text")
    register_rows([item])
    register_rows([item])  # same row again: no-op
    assert row("verigym/RegTest-v0") == item
    other = EnvRow("verigym/RegTest-v0", "verigym.envs.grid.treasure:TreasureEnv", family="grid")
    with pytest.raises(ValueError, match="already registered"):
        register_rows([other])


@pytest.mark.parametrize("bad_id", ["GuessNumber-v0", "verigym/guess-v0", "verigym/Guess", "verigym/Guess-v"])
def test_bad_ids_are_refused(bad_id):
    with pytest.raises(ValueError, match="must look like"):
        EnvRow(bad_id, "m:a", family="text")


def test_bad_family_is_refused():
    with pytest.raises(ValueError, match="family"):
        EnvRow("verigym/Foo-v0", "m:a", family="cooking")


def test_variants_expand_rows():
    rows = variants("verigym/Foo-{}-v0", "m:A", family="grid", rows={"5x5": {"size": 5}, "8x8": {"size": 8}})
    assert [(r.id, r.kwargs) for r in rows] == [("verigym/Foo-5x5-v0", {"size": 5}), ("verigym/Foo-8x8-v0", {"size": 8})]


def test_unknown_id_message_suggests():
    with pytest.raises(KeyError, match="did you mean verigym/GuessNumber-v0"):
        row("verigym/GuesNumber-v0")


def test_import_is_light():
    """``import verigym`` registers everything without importing torch, MuJoCo or a browser."""
    code = (
        "import sys, json, gymnasium; import verigym; "
        "heavy = [m for m in ('torch', 'mujoco', 'playwright', 'transformers', 'ray', 'reasoning_gym') if m in sys.modules]; "
        "print(json.dumps({'heavy': heavy, 'n': len(verigym.rows()), 'ok': 'verigym/GuessNumber-v0' in gymnasium.registry}))"
    )
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out["heavy"] == []
    assert out["ok"] and out["n"] >= 2


def test_spec_rebuilds_env():
    env = gym.make("verigym/Treasure-12x12-v0")
    rebuilt = gym.make(gym.envs.registration.EnvSpec.from_json(env.spec.to_json()))
    a, _ = env.reset(seed=5)
    b, _ = rebuilt.reset(seed=5)
    assert (a == b).all()
