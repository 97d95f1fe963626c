"""The tensor view of GUI envs (ScreenshotClickWrapper): pixels in, Discrete clicks out, usable by SB3."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.wrappers import ScreenshotClickWrapper

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module", autouse=True)
def _browser_held():
    """This module makes and closes many GUI envs in a row: their shared Chromium is held (launched
    once, stopped at the end of the module) instead of relaunched after each test."""
    from verigym.envs.gui.browser import held

    with held():
        yield


class VerdictLog(gym.Wrapper):
    """Records (reward, terminated or truncated, info) of every step under the tensor view."""

    def __init__(self, env):
        super().__init__(env)
        self.log = []

    def step(self, action):
        result = self.env.step(action)
        self.log.append((float(result[1]), bool(result[2] or result[3]), dict(result[4])))
        return result


def _oracle_button_centre(env: ScreenshotClickWrapper) -> tuple[int, int]:
    """The viewport pixel at the centre of the button the env's scripted solver would click."""
    game = env.unwrapped
    element = game._elements[int(game.oracle_action()["element"])]
    left, top, right, bottom = element["box"]
    return (left + right) // 2, (top + bottom) // 2


def test_grid_view_spaces_and_a_click_on_the_target_succeeds():
    env = ScreenshotClickWrapper(gym.make("verigym/ClickButton-v0"), grid=(64, 64), size=(64, 64))
    observation, info = env.reset(seed=5)
    assert env.observation_space == gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)
    assert env.observation_space.contains(observation) and observation.std() > 0  # a real picture
    assert env.action_space == gym.spaces.Discrete(64 * 64) and info["action_mask"].all()
    x, y = _oracle_button_centre(env)
    cell = (y * 64 // 256) * 64 + x * 64 // 256
    _, reward, terminated, _, info = env.step(cell)
    assert terminated and info["success"] is True and reward == 1.0


def test_elements_view_clicks_by_id_and_masks_the_page_ids():
    env = ScreenshotClickWrapper(gym.make("verigym/ClickButton-v0"), actions="elements", size=None)
    observation, info = env.reset(seed=2)
    assert observation.shape == (256, 256, 3)
    ids = int(info["action_mask"].sum())
    assert 1 <= ids < env.action_space.n
    _, reward, _, _, info = env.step(ids)  # the first id not on the page: the env flags it
    assert reward == 0.0 and "no element" in info["action_error"]
    target = int(env.unwrapped.oracle_action()["element"])
    _, reward, terminated, _, info = env.step(target)
    assert terminated and reward == 1.0 and info["success"] is True


def test_both_views_click_on_miniwob_pages():
    """A MiniWoB env's action has a drag target too: every click was refused for missing it."""
    pytest.importorskip("miniwob")
    inner = gym.make("verigym/MiniWoB-ClickButton-v0")
    try:
        for actions in ("grid", "elements"):
            env = ScreenshotClickWrapper(inner, actions=actions, grid=(64, 64))
            env.reset(seed=3)
            game = env.unwrapped
            target = game.oracle_action()["element"]
            if actions == "grid":
                left, top, right, bottom = game._elements[int(target)]["box"]
                x, y = (left + right) // 2, (top + bottom) // 2
                target = (y * 64 // game.height) * 64 + x * 64 // game.width
            _, reward, terminated, _, info = env.step(int(target))
            assert "action_error" not in info
            assert terminated and reward == 1.0 and info["success"] is True
    finally:
        inner.close()


def test_same_seed_same_pixels_and_malformed_index_is_flagged():
    a = ScreenshotClickWrapper(gym.make("verigym/ClickButton-v0"))
    b = ScreenshotClickWrapper(gym.make("verigym/ClickButton-v0"))
    assert np.array_equal(a.reset(seed=9)[0], b.reset(seed=9)[0])
    observation, reward, terminated, _, info = a.step(10_000)
    assert (
        "action_error" in info
        and reward == 0.0
        and not terminated
        and a.observation_space.contains(observation)
    )
    # a malformed index spends no step of the env: the third in a row ends the episode
    assert not a.step(-1)[3]
    *_, truncated, info = a.step(float("nan"))
    assert truncated and info["success"] is False and info["score"] == 0.0
    with pytest.raises(ValueError, match="grid"):
        ScreenshotClickWrapper(gym.make("verigym/ClickButton-v0"), grid=(0, 8))


def test_sb3_cnn_policy_trains_on_click_button_with_the_verifier_reward():
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_checker import check_env

    check_env(ScreenshotClickWrapper(gym.make("verigym/ClickButton-v0")))
    log = VerdictLog(gym.make("verigym/ClickButton-v0"))
    env = ScreenshotClickWrapper(log)  # 64x64 pixels, an 8x8 click grid
    model = PPO("CnnPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert len(log.log) >= 256
    ends = [(reward, info) for reward, done, info in log.log if done]
    assert ends, "no episode ended in 256 steps"
    for reward, done, info in log.log:
        if done:  # the reward is the page verifier's verdict
            assert reward == (1.0 if info["success"] else 0.0) == info["score"]
        else:
            assert reward == 0.0 and "success" not in info
    action, _ = model.predict(env.reset(seed=0)[0], deterministic=True)
    assert env.action_space.contains(int(action))
