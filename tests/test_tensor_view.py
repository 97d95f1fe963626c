from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np

from verigym.core import UnicodeText, episode_end
from verigym.wrappers import CandidateActionWrapper, HashedNGramObservation, hashed_ngrams


class PickColorEnv(gym.Env):
    """Name the colour shown; offers its answer set as candidates."""

    metadata = {"family": "text"}
    COLORS = ["red", "green", "blue"]

    def __init__(self):
        self.observation_space = UnicodeText(64)
        self.action_space = UnicodeText(64)
        self._color = "red"

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._color = self.COLORS[int(self.np_random.integers(3))]
        return f"the sky is {self._color}", {"action_candidates": list(self.COLORS)}

    def step(self, action):
        ok = action == self._color
        return "done", float(ok), True, False, episode_end({}, success=ok, score=float(ok))


def test_candidate_wrapper_maps_indices_to_answers():
    env = CandidateActionWrapper(PickColorEnv(), max_candidates=5)
    _, info = env.reset(seed=0)
    assert info["action_mask"].tolist() == [1, 1, 1, 0, 0]
    answer = env.unwrapped._color
    _, reward, terminated, _, info = env.step(env.candidates.index(answer))
    assert reward == 1.0 and terminated and info["success"]


def test_candidate_wrapper_penalizes_empty_slot():
    env = CandidateActionWrapper(PickColorEnv(), max_candidates=5, invalid_action_reward=-0.5)
    obs, _ = env.reset(seed=0)
    same, reward, terminated, _, info = env.step(4)
    assert same == obs and reward == -0.5 and not terminated and "no candidate" in info["action_error"]


def test_hashed_ngrams_shape_and_norm():
    env = HashedNGramObservation(PickColorEnv(), dim=64)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (64,) and obs.dtype == np.float32
    assert np.isclose(np.linalg.norm(obs), 1.0)
    assert env.observation_space.contains(obs)
    assert not np.any(hashed_ngrams("", 8))


def test_hashed_ngrams_independent_of_hash_seed():
    code = "import json; from verigym.wrappers import hashed_ngrams; print(json.dumps(hashed_ngrams('the red ball', 32).tolist()))"
    outs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": s, "PATH": ""}).stdout
        for s in ("1", "2")
    ]
    assert json.loads(outs[0]) == json.loads(outs[1]) == hashed_ngrams("the red ball", 32).tolist()
