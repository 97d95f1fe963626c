"""The mujoco family: oracles, success predicates on hand-built states, rewards, views, rendering."""

from __future__ import annotations

import os

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.core import ActionParseError
from verigym.envs.mujoco.point_maze import generate_maze

pytestmark = pytest.mark.mujoco

ORACLE_IDS = [
    "verigym/Reach-2Link-v0",
    "verigym/Reach-3Link-v0",
    "verigym/PointMaze-Medium-v0",
    "verigym/Push-v0",
    "verigym/Swingup-v0",
]
ALL_IDS = [r.id for r in verigym.rows("mujoco")]


def oracle_success_rate(env_id: str, seeds: range) -> float:
    env = gym.make(env_id).unwrapped
    wins = 0
    for seed in seeds:
        env.reset(seed=seed)
        while True:
            _, _, terminated, truncated, info = env.step(env.oracle_action())
            if terminated or truncated:
                wins += info["success"]
                break
    env.close()
    return wins / len(seeds)


@pytest.mark.parametrize("env_id", ORACLE_IDS)
def test_oracle_solves_most_seeds(env_id):
    assert oracle_success_rate(env_id, range(1000, 1030)) >= 0.95


@pytest.mark.slow
@pytest.mark.parametrize(
    "env_id", [*ORACLE_IDS, "verigym/PointMaze-Small-v0", "verigym/PointMaze-Large-v0"]
)
def test_oracle_solves_95_percent_of_200_seeds(env_id):
    assert oracle_success_rate(env_id, range(200)) >= 0.95


def step_zero(env):
    return env.step(np.zeros(env.action_space.shape, np.float32))


def test_reach_success_predicate_on_a_hand_built_state():
    env = gym.make("verigym/Reach-2Link-v0").unwrapped
    env.reset(seed=3)
    env.data.qpos[:] = env._solve_ik()
    env.data.qvel[:] = 0.0
    mujoco.mj_forward(env.model, env.data)
    _, reward, terminated, truncated, info = step_zero(env)
    assert terminated and not truncated and info["success"] is True and info["score"] == 1.0
    assert info["distance"] < env.distance_threshold and reward == pytest.approx(-info["distance"])
    # a fingertip 2 thresholds away is not a success
    env.reset(seed=3)
    env.data.qpos[:] = env._solve_ik() + np.array([0.0, 0.3])
    mujoco.mj_forward(env.model, env.data)
    _, _, terminated, _, info = step_zero(env)
    assert not terminated and info["is_success"] == 0.0


def test_push_success_needs_the_block_in_the_zone():
    env = gym.make("verigym/Push-v0").unwrapped
    env.reset(seed=0)
    env.data.qpos[2:4] = env._target + np.array([0.02, 0.0])
    env.data.qpos[:2] = env._target + np.array([0.2, 0.0]) * np.sign(-env._target[0] or 1.0)
    mujoco.mj_forward(env.model, env.data)
    _, _, terminated, _, info = step_zero(env)
    assert terminated and info["success"]
    env.reset(seed=0)
    env.data.qpos[2:4] = env._target + np.array([0.0, 0.06])
    mujoco.mj_forward(env.model, env.data)
    _, _, terminated, _, info = step_zero(env)
    assert not terminated and info["distance"] > env.distance_threshold


def test_point_maze_success_and_maze_is_perfect():
    env = gym.make("verigym/PointMaze-Small-v0").unwrapped
    env.reset(seed=5)
    env.data.qpos[:] = env._goal + 0.1
    mujoco.mj_forward(env.model, env.data)
    _, _, terminated, _, info = step_zero(env)
    assert terminated and info["success"]
    for size in (2, 5, 9):
        grid = generate_maze(size, np.random.default_rng(size))
        passages = int((~grid).sum()) - size * size
        assert passages == size * size - 1  # a spanning tree of the cells
        env.size, env.grid = size, grid
        assert np.all(env.path_distances((0, 0)) >= 0)  # every cell reachable


def test_point_maze_layout_follows_the_seed():
    env = gym.make("verigym/PointMaze-Medium-v0").unwrapped
    first = env.reset(seed=1)[0]["observation"][4:]
    assert not np.array_equal(first, env.reset(seed=2)[0]["observation"][4:])
    assert np.array_equal(first, env.reset(seed=1)[0]["observation"][4:])


def test_swingup_success_requires_holding_upright():
    env = gym.make("verigym/Swingup-v0", hold_seconds=0.5).unwrapped
    env.reset(seed=0)
    env.data.qpos[:] = [0.0, 0.01]
    env.data.qvel[:] = 0.0
    mujoco.mj_forward(env.model, env.data)
    needed = int(round(0.5 / env.dt))
    for step in range(1, needed + 1):
        _, _, terminated, _, info = env.step(env.oracle_action())
        assert terminated == (step == needed)
    assert info["success"] and info["score"] == 1.0
    # hanging down never counts, however long
    env.reset(seed=0)
    for _ in range(needed + 5):
        _, reward, terminated, _, info = step_zero(env)
        assert not terminated and info["is_success"] == 0.0


def test_locomotion_goal_and_fall():
    env = gym.make("verigym/LocomotionTarget-Hopper-v0").unwrapped
    env.reset(seed=0)
    env.data.qpos[0] += env.distance + 0.01
    mujoco.mj_forward(env.model, env.data)
    _, _, terminated, _, info = step_zero(env)
    assert terminated and info["success"]
    env.reset(seed=0)
    env.data.qpos[1] = 0.5  # torso below Gymnasium's healthy height (0.7 m)
    mujoco.mj_forward(env.model, env.data)
    _, _, terminated, _, info = step_zero(env)
    assert terminated and info["success"] is False and 0.0 <= info["score"] < 0.5
    assert env.max_steps == int(round(8.0 / env.dt))


@pytest.mark.parametrize(
    "env_id",
    [
        "verigym/Reach-3Link-v0",
        "verigym/PointMaze-Small-v0",
        "verigym/Swingup-v0",
        "verigym/LocomotionTarget-Ant-v0",
    ],
)
@pytest.mark.parametrize("reward_type", ["dense", "sparse"])
def test_compute_reward_is_vectorized_and_matches_step(env_id, reward_type):
    env = gym.make(env_id, reward_type=reward_type).unwrapped
    env.reset(seed=0)
    achieved, desired, rewards = [], [], []
    for _ in range(6):
        observation, reward, terminated, truncated, info = env.step(env.action_space.sample())
        achieved.append(observation["achieved_goal"])
        desired.append(observation["desired_goal"])
        rewards.append(reward)
        if terminated or truncated:
            break
    batch = env.compute_reward(np.stack(achieved), np.stack(desired), [{}] * len(achieved))
    assert batch.shape == (len(achieved),)
    np.testing.assert_allclose(batch, rewards)
    # hindsight relabelling: the achieved goal as the desired goal is always a success
    relabelled = env.compute_reward(np.stack(achieved), np.stack(achieved), None)
    assert np.all(relabelled == 0.0)
    if reward_type == "sparse":
        assert set(np.unique(batch)) <= {0.0, -1.0}


def test_malformed_action_costs_one_and_applies_no_force():
    env = gym.make("verigym/Push-v0").unwrapped
    env.reset(seed=0)
    _, good, *_ = step_zero(env)
    env.reset(seed=0)
    observation, bad, _, _, info = env.step(np.array([np.nan, 0.0]))
    assert "NaN" in info["action_error"] and bad == pytest.approx(good - 1.0)
    assert env.observation_space.contains(observation)


def test_text_view_has_units_and_parses_actions():
    env = gym.make("verigym/PointMaze-Small-v0").unwrapped
    observation, _ = env.reset(seed=0)
    text = env.observation_text(observation)
    assert "ball x, y (m)" in text and "#" in text and "B" in text and "G" in text
    assert "5 N" in env.instructions() and "[-1, 1]" in env.instructions()
    action = np.array([0.25, -1.0], np.float32)
    assert np.array_equal(env.parse_action("I push: " + env.action_text(action)), action)
    with pytest.raises(ActionParseError):
        env.parse_action("[2.0, 0.0]")
    with pytest.raises(ActionParseError):
        env.parse_action("go north")


def test_constructor_validation():
    from verigym.envs.mujoco.reach import ReachEnv

    with pytest.raises(ValueError, match="num_links"):
        ReachEnv(num_links=4)
    with pytest.raises(ValueError, match="reward_type"):
        ReachEnv(reward_type="shaped")
    with pytest.raises(ValueError, match="size"):
        gym.make("verigym/PointMaze-Small-v0", size=1)


@pytest.mark.parametrize("env_id", ["verigym/Reach-2Link-v0", "verigym/PointMaze-Small-v0"])
def test_rgb_array_rendering_is_not_blank(env_id):
    env = gym.make(env_id, render_mode="rgb_array", width=160, height=120)
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (120, 160, 3) and frame.dtype == np.uint8
    assert frame.std() > 10 and len(np.unique(frame.reshape(-1, 3), axis=0)) > 20
    env.step(env.action_space.sample())
    assert env.render().shape == (120, 160, 3)
    env.reset(seed=1)  # PointMaze rebuilds its model: the renderer follows
    assert env.render().std() > 10
    env.close()
    env.close()


def test_info_has_the_goal_conventions_and_nothing_private():
    env = gym.make("verigym/Reach-2Link-v0")
    _, info = env.reset(seed=0)
    assert set(info) == {"distance", "is_success", "time"}
    _, reward, _, _, info = env.step(env.action_space.sample())
    assert set(info) == {"distance", "is_success", "time"} and info["time"] == pytest.approx(0.02)
    assert reward == pytest.approx(-info["distance"])


def test_blown_up_simulation_ends_the_episode_as_a_failure():
    env = gym.make("verigym/Reach-2Link-v0").unwrapped
    env.reset(seed=0)
    env.data.qvel[:] = np.nan  # MuJoCo resets the data when it meets this; the env must notice
    observation, _, terminated, truncated, info = env.step(np.zeros(2, np.float32))
    assert terminated and not truncated and info["success"] is False
    assert all(np.isfinite(v).all() for v in observation.values())
    env.reset(seed=0)
    _, _, terminated, _, _ = env.step(np.zeros(2, np.float32))
    assert not terminated  # the counters were re-read: the next episode is not failed


@pytest.mark.parametrize(
    "env_id", ["verigym/Reach-3Link-v0", "verigym/PointMaze-Small-v0", "verigym/Push-v0"]
)
def test_copies_step_their_own_data_and_the_fast_path_matches_the_slow_one(env_id):
    import copy
    import pickle

    env = gym.make(env_id).unwrapped
    env.reset(seed=3)
    env.step(np.full(env.action_space.shape, 0.5, np.float32))
    copies = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    action = np.linspace(-1, 1, env.action_space.shape[0]).astype(np.float32)
    ours = env.step(action)  # float32 array: the fast path
    for twin in copies:
        theirs = twin.step([float(a) for a in action])  # a list: the validating path
        for key in ours[0]:
            assert np.array_equal(ours[0][key], theirs[0][key]), key
        assert ours[1:4] == theirs[1:4] and ours[4] == theirs[4]
    before = {k: v.copy() for k, v in env._observation().items()}
    copies[0].step(-action)
    assert all(np.array_equal(before[k], v) for k, v in env._observation().items())


def test_headless_backend_is_chosen_before_any_env_module_imports_mujoco():
    """reach.py imports mujoco before base.py: the EGL default must already be set by the package."""
    import subprocess
    import sys

    env = {
        k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY")
    }
    code = (
        "import verigym.envs.mujoco.reach, mujoco\n"
        "model = mujoco.MjModel.from_xml_string('<mujoco/>')\n"
        "print(mujoco.Renderer(model, 16, 16).render().shape)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[
        -2000:
    ]  # a renderer on no OpenGL platform raises FatalError
    assert out.stdout.strip() == "(16, 16, 3)"


@pytest.mark.parametrize("bad", [[np.nan, 0.0], [0.0, 1.0000001], [-np.inf, 0.5], [0.0, -1.5]])
def test_float32_fast_path_refuses_what_the_validating_path_refuses(bad):
    """A float32 array of the right shape takes the step's fast path only when every entry is in
    [-1, 1]; NaN, inf and out-of-range entries get the penalty and zero force, as any malformed
    action does."""
    env = gym.make("verigym/Reach-2Link-v0").unwrapped
    env.reset(seed=1)
    zero = env.step(np.zeros(2, np.float32))
    env.reset(seed=1)
    observation, reward, _, _, info = env.step(np.array(bad, np.float32))
    assert "action_error" in info and reward == pytest.approx(zero[1] - 1.0)
    assert all(np.array_equal(observation[k], zero[0][k]) for k in observation)
    env.reset(seed=1)
    _, _, _, _, info = env.step(
        np.array([1.0, -1.0], np.float32)
    )  # the bounds themselves are legal
    assert "action_error" not in info


def test_reach_observation_and_reward_match_their_formulas():
    """The step path computes on Python floats; the values must be the documented formulas'."""
    env = gym.make("verigym/Reach-3Link-v0").unwrapped
    env.reset(seed=2)
    for action in np.random.default_rng(0).uniform(-1, 1, size=(20, 3)).astype(np.float32):
        observation, reward, *_ = env.step(action)
        q = env.data.qpos
        tip = env.data.site_xpos[env.model.site("fingertip").id, :2]
        expected = np.concatenate((np.cos(q), np.sin(q), env.data.qvel, tip))
        np.testing.assert_allclose(observation["observation"], expected, rtol=0, atol=1e-15)
        assert observation["observation"].dtype == np.float64
        np.testing.assert_allclose(
            reward, -np.linalg.norm(tip - observation["desired_goal"]), rtol=1e-15
        )


def test_step_reward_equals_compute_reward_bit_for_bit():
    """HER relabelling (and SB3's check_env) need ``compute_reward`` to give exactly the reward that
    ``step`` paid, not one ulp off, on every goal-conditioned id."""
    from verigym.registration import rows

    goal_ids = []
    for row in rows("mujoco"):
        env = gym.make(row.id).unwrapped
        if callable(getattr(env, "compute_reward", None)) and isinstance(
            env.observation_space, gym.spaces.Dict
        ):
            goal_ids.append(row.id)
            env.action_space.seed(0)
            observation, info = env.reset(seed=0)
            for _ in range(150):
                observation, reward, terminated, truncated, info = env.step(
                    env.action_space.sample()
                )
                relabelled = env.compute_reward(
                    observation["achieved_goal"], observation["desired_goal"], info
                )
                assert float(reward) == float(relabelled), row.id
                if terminated or truncated:
                    observation, info = env.reset()
        env.close()
    assert goal_ids


def test_locomotion_step_goal_values_match_the_vectorized_definitions_at_the_edges():
    """Locomotion's step info and reward at the goal line (``-0.0`` and ``0.0`` gaps) and for a NaN
    position are those of ``goal_distance``, ``within_tolerance`` and ``compute_reward``, so that a
    broken state never counts as a success."""
    for reward_type in ("dense", "sparse"):
        env = gym.make("verigym/LocomotionTarget-HalfCheetah-v0", reward_type=reward_type).unwrapped
        env.reset(seed=0)
        for achieved in (
            env.distance,
            env.distance + 0.0,
            np.nextafter(env.distance, 0.0),
            env.distance + 1.0,
            0.0,
            np.nan,
        ):
            observation = {
                "achieved_goal": np.array([achieved]),
                "desired_goal": np.array([env.distance]),
            }
            info, reward, _ = env._goal_info(observation)
            distance = env.goal_distance(observation["achieved_goal"], observation["desired_goal"])
            np.testing.assert_equal(info["distance"], float(distance))
            assert info["is_success"] == float(env.within_tolerance(distance))
            np.testing.assert_equal(
                reward,
                float(
                    env.compute_reward(
                        observation["achieved_goal"], observation["desired_goal"], None
                    )
                ),
            )
        assert (
            env._goal_info(
                {"achieved_goal": np.array([np.nan]), "desired_goal": np.array([env.distance])}
            )[0]["is_success"]
            == 0.0
        )
        env.close()
