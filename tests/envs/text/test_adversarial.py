"""The pinned adversarial answer corpus, for every text and tool id: every reply scores as pinned,
in time, and no reply that does not give the answer alone succeeds (issue 16, section 3)."""

from __future__ import annotations

import os

import pytest

import verigym  # noqa: F401  (registers the ids)
from tests.envs.text.adversarial import CASES, CHEATS, TABLE_PATH, env_ids, play
from tests.envs.tool.support import WORKSPACE_VARIANT_IDS

TABLE = __import__("json").loads(TABLE_PATH.read_text())
SCORE_TIMEOUT_S = 3.0
TIME_BOUND_S = (
    15.0  # the sandbox deadline of the code envs (10 s) plus start-up on a loaded machine
)


def test_table_covers_every_case_and_every_text_and_tool_id():
    ids = env_ids()
    assert len(ids) >= 130
    assert {(row["env"], row["case"]) for row in TABLE} == {(e, c) for e in ids for c in CASES}


@pytest.mark.parametrize(
    "env_id",
    # the RepoFix and Terminal variants replay RepoFix-v0's and Terminal-v0's code (2-4 s each): in
    # the slow run
    [
        pytest.param(e, marks=pytest.mark.slow) if e in WORKSPACE_VARIANT_IDS else e
        for e in env_ids()
    ],
)
def test_replies_score_as_pinned(env_id):
    pinned = {row["case"]: row for row in TABLE if row["env"] == env_id}
    results = play(env_id, score_timeout=SCORE_TIMEOUT_S)
    anything_goes = results["wrong"][2]  # this item accepts any text: cheats cannot be told apart
    for case, (score, action_error, success, elapsed, reward) in results.items():
        assert score == pytest.approx(pinned[case]["score"]), case
        assert action_error == pinned[case]["action_error"], case
        assert elapsed < TIME_BOUND_S, f"{case} took {elapsed:.1f} s"
        if case in CHEATS and not anything_goes:
            assert not success, f"{case} succeeded without giving the answer alone"
        if env_id.startswith("verigym/RG-"):
            assert reward == pytest.approx(score), case
    assert not os.path.exists("/tmp/verigym_pwned"), "agent text was executed"
