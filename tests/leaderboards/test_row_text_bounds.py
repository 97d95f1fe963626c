"""Red-team round 5: a row's free ``error`` text is bounded and stored as UTF-8 for every kind of row.

Before, a competitive match whose agent raised with a lone surrogate in its message
(``"\\ud800"``: an LLM agent's text) ended ``verigym eval`` with ``UnicodeEncodeError`` when the
match was written, and an ``error`` of any length edited into the store was trusted and shown.
"""

from __future__ import annotations

import sqlite3

import pytest

from tests.leaderboards.rows import episode_row
from verigym.leaderboards.runner import provenance
from verigym.leaderboards.store import MAX_ERROR_CHARS, MatchRow, ResultsStore


def _match(**overrides) -> MatchRow:
    values = dict(
        suite="duel",
        env_id="verigym/TicTacToe-v0",
        seed=1_000_000,
        first_spec="random",
        first_hash="a",
        second_spec="oracle",
        second_hash="b",
        first_payoff=1.0,
        second_payoff=-1.0,
        length=3,
        error="",
        **provenance(),
    )
    values.update(overrides)
    return MatchRow(**values)


def test_a_match_error_with_a_lone_surrogate_is_written_escaped(tmp_path):
    with ResultsStore(tmp_path) as store:
        assert store.add_match(_match(error="random raised ValueError: bad \ud800 reply"))
        (match,) = store.matches()
    assert match.error == "random raised ValueError: bad \\ud800 reply"


@pytest.mark.parametrize("make", [episode_row, _match])
def test_an_error_over_the_bound_is_refused_on_write(tmp_path, make):
    long = "x" * (MAX_ERROR_CHARS + 1)
    with ResultsStore(tmp_path) as store, pytest.raises(ValueError, match="error is"):
        if make is episode_row:
            store.add(make(status="error", score=0.0, success=False, error=long))
        else:
            store.add_match(make(error=long))


def test_an_error_over_the_bound_edited_into_the_store_is_not_trusted(tmp_path):
    with ResultsStore(tmp_path) as store:
        store.add(episode_row(status="error", score=0.0, success=False, error="it broke"))
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        db.execute("UPDATE episodes SET error = ?", ("y" * (MAX_ERROR_CHARS + 1),))
    refused: list = []
    with ResultsStore(tmp_path, create=False) as store:
        assert store.rows(refused=refused) == []
    assert len(refused) == 1 and "error is" in refused[0].reason
