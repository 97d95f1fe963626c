"""Third-party clients on verigym's envs, unmodified: SB3's check_env on the goal-conditioned MuJoCo
ids, sb3-contrib's MaskablePPO on envs and wrappers with action masks (no ActionMasker)."""

from __future__ import annotations

import copy
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest

import verigym
from verigym.core import ACTION_MASK
from verigym.wrappers import CandidateActionWrapper, HashedNGramObservation

MUJOCO_IDS = sorted(r.id for r in verigym.rows() if r.family == "mujoco" and r.api == "gymnasium")
# the gymnasium ids of the families whose envs put info["action_mask"] on a Discrete action
MASKED_FAMILY_IDS = sorted(
    r.id for r in verigym.rows() if r.family in ("grid", "multiagent") and r.api == "gymnasium"
)


@pytest.mark.mujoco
@pytest.mark.parametrize("env_id", MUJOCO_IDS)
def test_sb3_check_env_passes_on_gym_make(env_id: str) -> None:
    from stable_baselines3.common.env_checker import check_env

    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env)  # calls env.compute_reward on the outermost wrapper
    obs, _ = env.reset(seed=3)
    obs, reward, *_, info = env.step(env.action_space.sample())
    assert env.compute_reward(obs["achieved_goal"], obs["desired_goal"], info) == reward
    env.close()


@pytest.mark.mujoco
def test_goal_wrapper_keeps_spec_round_trip_and_pickling() -> None:
    env = gym.make("verigym/Reach-2Link-v0")
    again = gym.make(env.spec)  # the wrapper is recorded once in the spec, applied once again
    assert str(again) == str(env)
    assert [w.name for w in env.spec.additional_wrappers] == ["GoalEnvApi"]
    assert gym.make(gym.envs.registration.EnvSpec.from_json(env.spec.to_json())).spec == env.spec
    env.reset(seed=0)
    for clone in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env)):
        assert callable(clone.compute_reward)


def test_non_goal_envs_have_no_compute_reward() -> None:
    """SB3 takes an env with compute_reward for a goal env: only Dict(achieved/desired goal) ones have it."""
    for env_id in (
        "verigym/DoorKey-5x5-v0",
        "verigym/TicTacToe-Random-v0",
        "verigym/GuessNumber-v0",
    ):
        env = gym.make(env_id)
        assert not hasattr(env.unwrapped, "compute_reward"), env_id
        assert not hasattr(env, "compute_reward"), env_id


@pytest.mark.parametrize("env_id", MASKED_FAMILY_IDS)
def test_action_masks_method_matches_info_mask(env_id: str) -> None:
    """Every env that reports info["action_mask"] answers action_masks() with the same moves,
    through the wrappers of gym.make (sb3-contrib's get_action_masks)."""
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    env = gym.make(env_id)
    _, info = env.reset(seed=1)
    if ACTION_MASK not in info:
        pytest.skip(f"{env_id} reports no action mask")
    assert is_masking_supported(env)
    rng = np.random.default_rng(0)
    for _ in range(5):
        masks = get_action_masks(env)
        assert masks.dtype == bool
        np.testing.assert_array_equal(masks, np.asarray(info[ACTION_MASK], dtype=bool))
        legal = np.flatnonzero(masks)
        if not legal.size:
            break
        _, _, terminated, truncated, info = env.step(int(rng.choice(legal)))
        if terminated or truncated:
            break
    env.close()


def _hangman() -> gym.Env:
    return HashedNGramObservation(
        CandidateActionWrapper(gym.make("verigym/Hangman-Easy-v0")), dim=64
    )


def test_candidate_wrapper_action_masks_follow_the_game() -> None:
    env = _hangman()
    _, info = env.reset(seed=0)
    masks = env.get_wrapper_attr("action_masks")()
    np.testing.assert_array_equal(masks, info[ACTION_MASK].astype(bool))
    letter = int(np.flatnonzero(masks)[0])
    _, _, _, _, info = env.step(letter)
    masks = env.get_wrapper_attr("action_masks")()
    assert not masks[letter]  # a tried letter is masked out
    np.testing.assert_array_equal(masks, info[ACTION_MASK].astype(bool))


@pytest.mark.parametrize(
    "make_env",
    [_hangman, lambda: gym.make("verigym/TicTacToe-Random-v0")],
    ids=["Hangman-candidates", "TicTacToe"],
)
def test_maskable_ppo_learns_without_action_masker(make_env) -> None:
    from sb3_contrib import MaskablePPO

    env = make_env()
    model = MaskablePPO(
        "MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu"
    )
    model.learn(192)  # collect_rollouts asks env.action_masks() before every step
    obs, info = env.reset(seed=5)
    for _ in range(6):
        masks = env.get_wrapper_attr("action_masks")()
        action, _ = model.predict(obs, action_masks=masks, deterministic=True)
        assert masks[int(action)]
        obs, _, terminated, truncated, info = env.step(int(action))
        if terminated or truncated:
            break
