"""Third-party vector APIs on verigym ids, unmodified (issue 41 item 5): SB3's ``make_vec_env``
(an unsupported render mode is accepted as Gymnasium's envs accept it), Gymnasium's async
vectorization of text ids, and the batched grid engine's ``SyncVectorEnv`` info layout."""

from __future__ import annotations

import copy
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

import verigym
from verigym.core import UnicodeText
from verigym.render_modes import accept_render_mode

# one id per family (the seat ids are the multi-agent family's Gymnasium ids; the world family's
# ids are in the slow registry sweeps: Crafter's first world takes ~1.7 s to build)
ONE_PER_FAMILY = [
    "verigym/GuessNumber-v0",
    "verigym/Calculator-v0",
    "verigym/DoorKey-5x5-v0",
    "verigym/TicTacToe-Random-v0",
    "verigym/Reach-2Link-v0",
    "verigym/ClickButton-v0",
]


def _gym_rows():
    return [r for r in verigym.rows() if r.api == "gymnasium"]


def test_accept_render_mode():
    assert accept_render_mode(None, ["ansi"]) is None
    assert accept_render_mode("ansi", ["ansi"]) == "ansi"
    with pytest.warns(UserWarning, match="render_modes"):
        assert accept_render_mode("rgb_array", ["ansi"]) is None
    for bad in (3, b"ansi", "x" * 65, ["ansi"]):
        with pytest.raises(ValueError, match="render_mode"):
            accept_render_mode(bad, ["ansi"])


@pytest.mark.parametrize("env_id", ONE_PER_FAMILY)
def test_unsupported_render_mode_is_accepted_and_renders_nothing(env_id):
    """Gymnasium's envs take any render mode (``make`` warns); so does each family's base."""
    with pytest.warns(UserWarning, match="render_mode"):
        env = gym.make(env_id, render_mode="depth_array")
    try:
        assert env.unwrapped.render_mode is None
    finally:
        env.close()


@pytest.mark.slow
def test_every_gymnasium_id_accepts_sb3s_render_mode():
    """SB3's ``make_vec_env`` makes each copy with ``render_mode="rgb_array"`` (retrying without it
    only on a ``TypeError``): one id of every entry point of the registry takes it (construction
    only; 2-5 s on the shared machine, importing every family's modules and building Crafter's
    first world, so slow; the default run checks one id per family above). The full sweep over
    every id is the slow test below, which also covers the reasoning-gym ids, left out here."""
    seen = {}
    for row in _gym_rows():
        if not row.entry_point.endswith(":ReasoningGymEnv"):
            seen.setdefault(row.entry_point, row.id)
    assert len(seen) > 20
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for env_id in seen.values():
            gym.make(env_id, render_mode="rgb_array").close()


@pytest.mark.parametrize(
    "env_id", ["verigym/DoorKey-5x5-v0", "verigym/TicTacToe-Random-v0", "verigym/GuessNumber-v0"]
)
def test_sb3_make_vec_env(env_id):
    from stable_baselines3.common.env_util import make_vec_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        venv = make_vec_env(env_id, n_envs=2, seed=0)
    try:
        obs = venv.reset()
        assert obs.shape == (2, *venv.observation_space.shape)
        actions = [venv.action_space.sample() for _ in range(2)]
        obs = venv.step(np.array(actions, dtype=venv.action_space.dtype))[0]
        if isinstance(venv.observation_space, gym.spaces.Text):
            # DummyVecEnv's buffer holds whole strings (UnicodeText's object dtype), not ''
            alone = gym.make(env_id)
            alone.reset(seed=0)
            assert obs[0] == alone.step(actions[0])[0] and len(obs[1]) > 20
            alone.close()
    finally:
        venv.close()


@pytest.mark.slow
def test_sb3_make_vec_env_factory_on_every_id():
    """Every Gymnasium id but the browser ones through SB3's ``make_vec_env`` itself: its
    ``DummyVecEnv`` preallocates numpy buffers from each observation space's shape and dtype,
    which verigym's text spaces give (one string an element); the browser ids are built only
    (a Chromium per copy)."""
    from stable_baselines3.common.env_util import make_vec_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for row in _gym_rows():
            if row.family == "gui":
                gym.make(row.id, render_mode="rgb_array").close()
            else:
                venv = make_vec_env(row.id, n_envs=1, seed=0)
                venv.reset()
                venv.close()


@pytest.mark.slow
def test_sb3_subproc_vec_env_on_a_text_id():
    """A text id through SB3's make_vec_env with SubprocVecEnv (DummyVecEnv cannot buffer Text)."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = make_vec_env(  # fork: SB3's default forkserver would outlive the test session
        "verigym:verigym/GuessNumber-v0",
        n_envs=2,
        vec_env_cls=SubprocVecEnv,
        vec_env_kwargs={"start_method": "fork"},
        seed=0,
    )
    try:
        obs = venv.reset()
        assert obs.shape == (2,) and "integer" in str(obs[0])
        obs, _, _, _ = venv.step(["50", "no number"])
        assert "50" in str(obs[0]) and obs[0] != obs[1]
    finally:
        venv.close()


def test_a_remote_text_space_is_verigyms_unicode_text_and_its_description_is_bounded():
    """The client rebuilds a served text space as ``UnicodeText`` (shape ``()``, object dtype,
    what SB3's ``DummyVecEnv`` buffers need), not Gymnasium's plain ``Text``; a server's
    description is untrusted: lengths must be ints in bounds."""
    import json

    from verigym.envs.text.base import ReplySpace
    from verigym.serve.wire import MAX_TEXT_LENGTH, WireError, space_from_json, space_to_json

    for space in (UnicodeText(100, min_length=2), ReplySpace(300)):
        back = space_from_json(json.loads(json.dumps(space_to_json(space))))
        assert type(back) is type(space) and back == space
        assert back.shape == () and back.dtype == np.dtype(object)
        assert back.contains("é ✓ any unicode") and not back.contains("x" * 301)
    good = space_to_json(UnicodeText(100))
    for bad in (
        {"max_length": MAX_TEXT_LENGTH + 1},
        {"max_length": 1 << 62},
        {"max_length": 100.0},
        {"max_length": True},
        {"min_length": -1},
        {"min_length": 101},
    ):
        for description in ({**good, **bad}, {**good, **bad, "class": None}):
            with pytest.raises(WireError):
                space_from_json(description)
    for charset in ("", None, ["a"], "a" * (MAX_TEXT_LENGTH + 1)):
        with pytest.raises(WireError):
            space_from_json({**good, "class": None, "charset": charset})


@pytest.mark.slow
def test_sb3_make_vec_env_over_a_remote_text_env():
    """SB3's ``make_vec_env`` (its ``DummyVecEnv``) over ``verigym.remote.make`` of a text id
    gives the strings the env gives in process (a served env in a thread; a server, so slow)."""
    from stable_baselines3.common.env_util import make_vec_env

    import verigym.remote
    import verigym.serve

    env_id = "verigym/GuessNumber-v0"
    with verigym.serve.start(env_id) as server:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            venv = make_vec_env(lambda: verigym.remote.make(env_id, url=server.url), n_envs=2)
        try:
            assert venv.observation_space.shape == () and venv.observation_space.dtype == object
            venv.seed(0)
            obs = venv.reset()
            local = [gym.make(env_id) for _ in range(2)]
            assert obs.shape == (2,) and list(obs) == [
                e.reset(seed=s)[0] for s, e in enumerate(local)
            ]
            obs = venv.step(np.array(["50", "no number"], dtype=object))[0]
            assert list(obs) == [e.step(a)[0] for e, a in zip(local, ("50", "no number"))]
            assert obs[0] != obs[1]
        finally:
            venv.close()


def test_unicode_text_shared_memory_round_trip():
    space = UnicodeText(16)
    shared = create_shared_memory(space, n=2)
    view = read_from_shared_memory(space, shared, n=2)
    write_to_shared_memory(space, 0, "héllo ✓ 𝄞", shared)
    write_to_shared_memory(space, 1, "", shared)
    assert copy.deepcopy(view) == ("héllo ✓ 𝄞", "")
    write_to_shared_memory(space, 0, "second", shared)  # the view reads the current slots
    assert tuple(view) == ("second", "") and view[0] == "second" and len(view) == 2
    write_to_shared_memory(space, 1, "a\ud800b", shared)  # a lone surrogate travels as is
    assert view[1] == "a\ud800b" and view[-1] == view[1]


def test_text_ids_under_async_vectorization_give_real_strings():
    envs = gym.make_vec("verigym/GuessNumber-v0", 2, vectorization_mode="async")
    sync = gym.make_vec("verigym/GuessNumber-v0", 2, vectorization_mode="sync")
    try:
        obs, _ = envs.reset(seed=3)
        expected, _ = sync.reset(seed=3)
        assert isinstance(obs, tuple) and obs == tuple(expected) and "integer" in obs[0]
        obs, *_ = envs.step(("50", "no number"))
        expected, *_ = sync.step(("50", "no number"))
        assert obs == tuple(expected) and obs[0] != obs[1]
    finally:
        envs.close()
        sync.close()


def _info_layout(vectorization_mode: str, autoreset_mode: AutoresetMode):
    if vectorization_mode == "sync":
        envs = gym.make_vec(
            "verigym/DoorKey-5x5-v0",
            3,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": autoreset_mode},
            max_steps=8,
        )
    else:
        envs = gym.make_vec("verigym/DoorKey-5x5-v0", 3, autoreset_mode=autoreset_mode, max_steps=8)
    _, info = envs.reset(seed=0)
    layout = [sorted(info)]
    rng = np.random.default_rng(0)
    for _ in range(40):
        *_, info = envs.step(rng.integers(0, 7, 3))
        layout.append({k: np.asarray(v).tolist() for k, v in info.items() if k.startswith("_")})
    envs.close()
    return layout


@pytest.mark.parametrize("autoreset_mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_batched_engine_infos_match_sync_vector_env(autoreset_mode):
    """Every info key of the batched engine carries ``SyncVectorEnv``'s ``_key`` mask, with the
    same values (``_action_mask``, ``_mission`` on autoreset steps, ...)."""
    batched = _info_layout("vector_entry_point", autoreset_mode)
    assert "_action_mask" in batched[0] and "_mission" in batched[0]
    assert any(step.get("_mission") for step in batched[1:])  # some copy was autoreset
    assert batched == _info_layout("sync", autoreset_mode)
