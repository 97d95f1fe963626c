"""Reference columns: MiniWoB++'s published human success rates beside the miniwob standings,
cited, never ranked (issue 38)."""

from __future__ import annotations

import json
import re

import pytest

from tests.leaderboards.rows import scored_row
from verigym.envs.gui.miniwob.catalog import TASKS, env_name
from verigym.leaderboards.reference import REFERENCES_DIR, load_reference
from verigym.leaderboards.standings import (
    compute_standings,
    render_html,
    render_markdown,
    render_table,
)
from verigym.leaderboards.store import ResultsStore
from verigym.leaderboards.suite import Suite, Task, load_suite

HUMAN = REFERENCES_DIR / "miniwob_human.json"
CLICK_BUTTON = "verigym/MiniWoB-ClickButton-v0"
NODELAY = "verigym/MiniWoB-BookFlightNodelay-v0"  # not in the published table


def test_every_task_of_the_human_table_is_a_miniwob_task_with_a_cited_number():
    data = json.loads(HUMAN.read_text())
    scores = data["scores"]
    assert len(scores) == 100 and set(scores) <= set(TASKS)
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in scores.values())
    # what the table holds and miniwob does not register is named, not silently dropped
    assert set(data["source"]["omitted"]).isdisjoint(TASKS) and len(data["source"]["omitted"]) == 4
    # spot checks against the paper's Table 3 ("Human" column)
    assert (scores["click-checkboxes-soft"], scores["tic-tac-toe"], scores["focus-text"]) == (
        0.73,
        0.71,
        1.0,
    )
    assert "Table 3" in data["source"]["table"] and "Synapse" in data["source"]["paper"]
    assert "Humphreys" in data["source"]["origin"]
    column = load_reference("miniwob_human")
    assert column.values[CLICK_BUTTON] == 0.98 and NODELAY not in column.values
    assert set(column.values) == {f"verigym/{env_name(t)}-v0" for t in scores}
    # the miniwob suite names the column and every id it carries is one of the suite's tasks
    suite = load_suite("miniwob")
    assert suite.reference == ("miniwob_human",)
    assert set(column.values) <= {t.env_id for t in suite}


def test_a_reference_file_naming_an_unknown_task_or_a_bad_number_is_refused(tmp_path):
    data = json.loads(HUMAN.read_text())
    for scores, message in (
        ({"simon-says": 0.62}, "not a task the miniwob package registers"),
        ({"click-button": 1.5}, "must be a number in [0, 1]"),
        ({"click-button": True}, "must be a number in [0, 1]"),
    ):
        path = tmp_path / "ref.json"
        path.write_text(json.dumps({**data, "scores": scores}))
        with pytest.raises(ValueError, match=re.escape(message)):
            load_reference("miniwob_human", path)
    path.write_text(json.dumps({**data, "extra": 1}))
    with pytest.raises(ValueError, match="exactly"):
        load_reference("miniwob_human", path)
    with pytest.raises(ValueError, match="reference must list names"):
        Suite("s", (Task(CLICK_BUTTON),), reference=("made_up",))
    with pytest.raises(ValueError, match="no reference column"):
        load_reference("made_up")


def test_the_human_column_renders_beside_the_entries_and_is_never_ranked(tmp_path, capsys):
    suite = Suite(
        "mw",
        (Task(CLICK_BUTTON, episodes=2), Task(NODELAY, episodes=2)),
        reference=("miniwob_human",),
    )
    with ResultsStore(tmp_path) as store:
        for task in suite:
            for seed in task.seeds:
                assert store.add(scored_row("random", task.env_id, seed, 0.0, suite="mw"))
        standings = compute_standings(store, suite)
    assert [e.agent_spec for e in standings.ranked] == ["random"]  # the column is no entry
    (note,) = [n for n in standings.notes if n.startswith("human column")]
    assert "1 of the 2 tasks" in note and "Table 3" in note and "Humphreys" in note

    markdown = render_markdown(standings)
    per_task = markdown.split("## Per task")[1].split("## Success rate")[0]
    assert "| task | `random` | human (success rate, published) |" in per_task
    assert "| MiniWoB-ClickButton-v0 | 0.000 ± 0.000 | 0.98 |" in per_task
    assert "| MiniWoB-BookFlightNodelay-v0 | 0.000 ± 0.000 | — |" in per_task
    assert "| MiniWoB-ClickButton-v0 | 0% | 0.98 |" in markdown.split("## Success rate")[1]

    page = render_html(standings)
    table = re.search(r'<table id="per-task">.*?</table>', page, re.S).group(0)
    assert 'class="reference" title="Longtao Zheng' in table
    assert '<td class="reference">0.98</td>' in table and '<td class="reference">—</td>' in table
    ranking = re.search(r'<table id="standings">.*?</table>', page, re.S).group(0)
    assert "human" not in ranking

    render_table(standings)
    out = " ".join(capsys.readouterr().out.split())
    assert "human (success rate, published)" in out and "0.98" in out
