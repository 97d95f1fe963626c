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
    import gymnasium

    from verigym import registration

    item = EnvRow(
        "verigym/RegTest-v0", "verigym.envs.text.guess_number:GuessNumberEnv", family="text"
    )
    try:
        register_rows([item])
        register_rows([item])  # same row again: no-op
        assert row("verigym/RegTest-v0") == item
        other = EnvRow(
            "verigym/RegTest-v0", "verigym.envs.grid.treasure:TreasureEnv", family="grid"
        )
        with pytest.raises(ValueError, match="already registered"):
            register_rows([other])
    finally:  # the id is this test's own: no later test in this worker sees an id no table lists
        registration._TABLE.pop(item.id, None)
        gymnasium.registry.pop(item.id, None)


@pytest.mark.parametrize(
    "bad_id",
    [
        "GuessNumber-v0",
        "verigym/guess-v0",
        "verigym/Guess",
        "verigym/Guess-v",
        "Acme/Coin-v0",
        "acme/coin-v0",
    ],
)
def test_bad_ids_are_refused(bad_id):
    with pytest.raises(ValueError, match="must look like"):
        EnvRow(bad_id, "m:a", family="text")


def test_bad_family_is_refused():
    with pytest.raises(ValueError, match="family"):
        EnvRow("verigym/Foo-v0", "m:a", family="cooking")


def test_variants_expand_rows():
    rows = variants(
        "verigym/Foo-{}-v0", "m:A", family="grid", rows={"5x5": {"size": 5}, "8x8": {"size": 8}}
    )
    assert [(r.id, r.kwargs) for r in rows] == [
        ("verigym/Foo-5x5-v0", {"size": 5}),
        ("verigym/Foo-8x8-v0", {"size": 8}),
    ]


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
    out = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    assert out["heavy"] == []
    assert out["ok"] and out["n"] >= 2


def test_spec_rebuilds_env():
    env = gym.make("verigym/Treasure-12x12-v0")
    rebuilt = gym.make(gym.envs.registration.EnvSpec.from_json(env.spec.to_json()))
    a, _ = env.reset(seed=5)
    b, _ = rebuilt.reset(seed=5)
    assert (a == b).all()


def test_plugin_namespaces_are_accepted():
    """A plugin's ids live in its own lowercase namespace (docs/design.md, Plugins)."""
    assert EnvRow("acme/Coin-v0", "m:a", family="text").id == "acme/Coin-v0"
    assert EnvRow("acme_labs/Coin-Hard-v2", "m:a", family="grid").id == "acme_labs/Coin-Hard-v2"


def test_own_tables_come_from_entry_points():
    """verigym's families register through the verigym.envs entry points, like a plugin's."""
    from verigym.registration import ENV_GROUP, entry_points, plugin_errors

    own = {
        p.name
        for p in entry_points(ENV_GROUP)
        if p.dist is not None and p.dist.metadata["Name"] == "verigym"
    }
    assert own == set(verigym.FAMILIES)
    assert {r.family for r in verigym.rows()} == set(verigym.FAMILIES)
    assert not [e for e in plugin_errors() if e.distribution == "verigym"]


def test_parallel_games_are_in_the_aec_registry_too():
    """pettingzoo.make("aec", id) works on a parallel game (through parallel_to_aec)."""
    import pickle

    import pettingzoo
    from pettingzoo.test import api_test

    parallel_ids = [r.id for r in verigym.rows("multiagent") if r.api == "parallel"]
    assert "verigym/Pursuit-v0" in parallel_ids
    for env_id in parallel_ids:
        assert env_id in pettingzoo.aec_registry and env_id in pettingzoo.parallel_registry
    env = pettingzoo.make("aec", "verigym/Pursuit-v0")
    assert isinstance(env, pettingzoo.AECEnv)  # .unwrapped reaches through to the parallel game
    api_test(env, num_cycles=20)
    env.reset(seed=5)
    first = env.observe(env.agent_selection)
    again = pettingzoo.make("aec", "verigym/Pursuit-v0")
    again.reset(seed=5)
    assert (again.observe(again.agent_selection) == first).all()
    assert pickle.loads(
        pickle.dumps(pettingzoo.aec_registry["verigym/Pursuit-v0"].entry_point)
    ).entry_point.endswith(":PursuitEnv")


def test_a_broken_table_is_skipped_and_reported(caplog):
    """A table entry point that fails is recorded with its name and error, never raised."""
    import importlib.metadata

    from verigym import registration

    point = importlib.metadata.EntryPoint(
        name="ghost", value="verigym_no_such_module_xyz", group=registration.ENV_GROUP
    )
    with pytest.raises(ModuleNotFoundError):
        registration._register_table(point)
    before = len(registration.plugin_errors())
    with caplog.at_level("WARNING", logger="verigym.registration"):
        error = registration.record_plugin_error(
            registration.ENV_GROUP, point, ModuleNotFoundError("no module")
        )
    try:
        assert "plugin 'ghost'" in str(error) and "ModuleNotFoundError: no module" in str(error)
        assert "ghost" in caplog.text and len(registration.plugin_errors()) == before + 1
    finally:
        registration._PLUGIN_ERRORS.remove(error)


def test_list_piped_prints_whole_ids(capsys):
    """Not a terminal: a header and one tab-separated line per id, nothing wrapped or cut."""
    from verigym.cli import main

    assert main(["list", "--family", "grid"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t") == ["id", "family", "api", "step limit", "description"]
    ids = [line.split("\t")[0] for line in lines[1:]]
    assert ids == [r.id for r in verigym.rows("grid")]
    assert all(len(line.split("\t")) == 5 for line in lines)
