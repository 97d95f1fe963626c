from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from verigym.core import EpisodeEndedError, UnicodeText, episode_end
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
    assert (
        same == obs and reward == -0.5 and not terminated and "no candidate" in info["action_error"]
    )


def test_candidate_wrapper_truncates_after_max_invalid_actions_in_a_row():
    """An index with no candidate spends no step of the env, so without a limit an agent sending
    only such indices kept an episode going for ever."""
    env = CandidateActionWrapper(PickColorEnv(), max_candidates=5)
    env.reset(seed=0)
    wrong = next(i for i, c in enumerate(env.candidates) if c != env.unwrapped._color)
    results = [env.step(4) for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    info = results[-1][4]
    assert info["success"] is False and info["score"] == 0.0 and "action_error" in info
    with pytest.raises(EpisodeEndedError):
        env.step(wrong)
    unlimited = CandidateActionWrapper(PickColorEnv(), max_candidates=5, max_invalid_actions=None)
    unlimited.reset(seed=0)
    assert not any(unlimited.step(4)[3] for _ in range(10))
    with pytest.raises(ValueError, match="max_invalid_actions"):
        CandidateActionWrapper(PickColorEnv(), max_candidates=5, max_invalid_actions=0)


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
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": s, "PATH": ""},
        ).stdout
        for s in ("1", "2")
    ]
    assert json.loads(outs[0]) == json.loads(outs[1]) == hashed_ngrams("the red ball", 32).tolist()


def test_hangman_mask_is_the_letters_legal_now():
    env = CandidateActionWrapper(gym.make("verigym/Hangman-Medium-v0"))
    assert env.action_space.n == 26
    _, info = env.reset(seed=3)
    assert info["action_mask"].tolist() == [1] * 26
    e = env.candidates.index("e")
    _, _, _, _, info = env.step(e)
    assert (
        "action_error" not in info
        and info["action_mask"][e] == 0
        and info["action_mask"].sum() == 25
    )
    # the mask comes from the game's own legality: the env penalises exactly the masked-out move
    _, reward, _, _, info = env.step(e)
    assert "already tried" in info["action_error"] and reward == env.unwrapped.invalid_action_reward


def test_wordle_candidates_are_never_cut():
    from verigym.envs.text.words import FIVE_LETTER_WORDS

    env = CandidateActionWrapper(gym.make("verigym/Wordle-Medium-v0"))
    assert env.action_space.n == len(FIVE_LETTER_WORDS) == 529
    reachable = 0
    for seed in range(200):
        _, info = env.reset(seed=seed)
        index = env.candidates.index(FIVE_LETTER_WORDS[env.unwrapped._secret])  # raises if cut
        reachable += int(info["action_mask"][index])
    assert reachable == 200
    small = CandidateActionWrapper(gym.make("verigym/Wordle-Medium-v0"), max_candidates=64)
    with pytest.raises(ValueError, match="529 action candidates"):
        small.reset(seed=0)


def test_candidate_wrapper_without_candidates_needs_a_size():
    with pytest.raises(ValueError, match="no action candidates"):
        CandidateActionWrapper(gym.make("verigym/GuessNumber-v0"))
