"""The pinned adversarial answer corpus (issue item 5): every reply scores as pinned, in time."""

from __future__ import annotations

import json
import os
import pathlib
import time

import gymnasium as gym
import pytest

import verigym  # noqa: F401  (registers the ids)
from tests.envs.text.adversarial import CASES, ENVS, SEED, wrong_answer

TABLE = json.loads((pathlib.Path(__file__).parent / "data" / "adversarial.json").read_text())
SCORE_TIMEOUT_S = 3.0
TIME_BOUND_S = 15.0  # SCORE_TIMEOUT_S plus start-up of the verifier worker on a loaded machine


def test_table_covers_every_case_and_env():
    assert {(row["env"], row["case"]) for row in TABLE} == {(e, c) for e in ENVS for c in CASES}


@pytest.mark.parametrize("env_id", ENVS)
def test_replies_score_as_pinned(env_id):
    env = gym.make(env_id, score_timeout=SCORE_TIMEOUT_S)
    pinned = {row["case"]: row for row in TABLE if row["env"] == env_id}
    for case, build in CASES.items():
        env.reset(seed=SEED)
        answer = env.unwrapped._entry["answer"]
        reply = build(answer, wrong_answer(answer))
        start = time.perf_counter()
        _, reward, terminated, _, info = env.step(reply)
        elapsed = time.perf_counter() - start
        assert terminated
        assert info["score"] == pytest.approx(pinned[case]["score"]), case
        assert reward == pytest.approx(info["score"]), case
        assert ("action_error" in info) == pinned[case]["action_error"], case
        assert elapsed < TIME_BOUND_S, f"{case} took {elapsed:.1f} s"
    assert not os.path.exists("/tmp/verigym_pwned"), "agent text was executed"
