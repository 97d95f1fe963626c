"""A task without a scripted solver says so (issue 38, item 6): ``"oracle": false`` in ``verigym
list --json`` (the registration row's ``oracle`` field), its reason in docs/environments.md, and
"no oracle" in the standings' oracle cell, never a 0. No browser: rows are built in memory."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from tests.leaderboards.rows import scored_row
from verigym.cli import main
from verigym.envs.gui.miniwob import catalog
from verigym.leaderboards.standings import (
    NO_ORACLE,
    compute_standings,
    render_html,
    render_markdown,
    render_table,
)
from verigym.leaderboards.store import ResultsStore
from verigym.leaderboards.suite import Suite, Task
from verigym.registration import EnvRow, rows

NO_ORACLE_ID = f"verigym/{catalog.env_name('tic-tac-toe')}-v0"
"""A MiniWoB++ id without a scripted solver."""


def _list_json(capsys, monkeypatch, family: str) -> dict[str, dict]:
    # the step limits that only a made env knows are not what this test is about: make nothing
    monkeypatch.setattr("verigym.commands.list.made_limits", lambda selected: {})
    assert main(["list", "--family", family, "--json"]) == 0
    return {r["id"]: r for r in json.loads(capsys.readouterr().out)}


def test_list_json_says_which_ids_have_no_oracle(capsys, monkeypatch):
    gui = _list_json(capsys, monkeypatch, "gui")
    assert "tic-tac-toe" not in catalog.ORACLE_TASKS
    assert gui[NO_ORACLE_ID]["oracle"] is False
    assert gui["verigym/MiniWoB-ClickButton-v0"]["oracle"] is True
    assert gui["verigym/ClickButton-v0"]["oracle"] is True  # the in-house tasks all have one
    miniwob = [r for i, r in gui.items() if i.startswith("verigym/MiniWoB-")]
    assert sum(not r["oracle"] for r in miniwob) == len(catalog.TASKS) - len(catalog.ORACLE_TASKS)
    text = _list_json(capsys, monkeypatch, "text")
    assert text["verigym/GuessNumber-v0"]["oracle"] is True


def test_only_miniwob_ids_lack_an_oracle():
    without = {r.id for r in rows() if not r.oracle}
    assert without == {
        f"verigym/{catalog.env_name(t)}-v0" for t in catalog.TASKS if t not in catalog.ORACLE_TASKS
    }


@pytest.mark.parametrize("value", ["no", 0, 1, None])
def test_a_rows_oracle_flag_must_be_a_bool(value):
    with pytest.raises(ValueError, match="oracle"):
        EnvRow(id="acme/Coin-v0", entry_point="acme.coin:Coin", family="text", oracle=value)
    assert EnvRow(id="acme/Coin-v0", entry_point="acme.coin:Coin", family="text").oracle is True


def test_docs_give_each_missing_oracle_and_its_reason():
    doc = (pathlib.Path(__file__).parents[1] / "docs" / "environments.md").read_text()
    section = doc.split("### MiniWoB++", 1)[1].split("\n## ", 1)[0]
    timed = re.search(r"- Timing-dependent, no solver written yet[^:]*:(.*?)\.\n", section, re.S)
    unwritten = re.search(r"- No scripted solver written yet[^:]*:(.*?)\.\n", section, re.S)
    listed = {
        "timed": set(re.findall(r"`([^`]+)`", timed.group(1))),
        "unwritten": set(re.findall(r"`([^`]+)`", unwritten.group(1))),
    }
    reasons = {t: catalog.no_oracle_reason(t) for t in catalog.TASKS}
    assert listed["timed"] == {t for t, r in reasons.items() if r and r.startswith("timing")}
    assert listed["unwritten"] == {
        t for t, r in reasons.items() if r and not r.startswith("timing")
    }
    assert all(reasons[t] is None for t in catalog.ORACLE_TASKS)


SUITE = Suite("mw", (Task(NO_ORACLE_ID, episodes=2), Task("verigym/GuessNumber-v0", episodes=2)))


def _error_row(agent: str, env_id: str, seed: int):
    row = scored_row(agent, env_id, seed, 0.0, suite="mw")
    return type(row)(
        **{**row.__dict__, "status": "error", "error": "no oracle_action", "length": 0}
    )


@pytest.mark.parametrize("oracle_rows_there", ["errors", "missing"])
def test_standings_show_no_oracle_never_a_zero(tmp_path, capsys, oracle_rows_there):
    with ResultsStore(tmp_path) as store:
        for task in SUITE:
            for seed in task.seeds:
                assert store.add(scored_row("random", task.env_id, seed, 0.0, suite="mw"))
                if task.env_id != NO_ORACLE_ID:
                    assert store.add(scored_row("oracle", task.env_id, seed, 1.0, suite="mw"))
                elif oracle_rows_there == "errors":
                    assert store.add(_error_row("oracle", task.env_id, seed))
        standings = compute_standings(store, SUITE)
    assert standings.no_oracle == {NO_ORACLE_ID}
    oracle = next(e for e in standings.entries if e.agent_spec == "oracle")
    random_entry = next(e for e in standings.entries if e.agent_spec == "random")
    # the oracle is partial (never ranked), its mean is over the task it has (no 0 mixed in)
    assert not oracle.complete and oracle.covered_mean == 1.0 and NO_ORACLE_ID not in oracle.covers
    assert random_entry.complete  # a real 0 of another agent stays a 0

    short = NO_ORACLE_ID.removeprefix("verigym/")
    markdown = render_markdown(standings)
    per_task = markdown.split("## Per task")[1]
    task_line = next(line for line in per_task.splitlines() if line.startswith(f"| {short} |"))
    # columns follow the entries' order (random ranked first, the partial oracle after)
    cells = [c.strip() for c in task_line.strip("|").split("|")][1:]
    by_agent = dict(zip((e.agent_spec for e in standings.entries), cells))
    assert by_agent["oracle"] == NO_ORACLE and by_agent["random"].startswith("0.000")
    success = markdown.split("## Success rate")[1]
    assert f"| {short} | 0% | {NO_ORACLE} |" in success

    page = render_html(standings, episodes_href="episodes/index.html")
    row = re.search(rf"<tr><td>{re.escape(short)}</td>.*?</tr>", page).group(0)
    assert f"<td>{NO_ORACLE}</td>" in row  # plain text, not a link to an empty filter

    render_table(standings)
    out = capsys.readouterr().out
    assert NO_ORACLE in out


def test_without_a_suite_the_oracle_cell_says_no_oracle(tmp_path):
    seed = SUITE.tasks[0].seeds[0]
    with ResultsStore(tmp_path) as store:
        assert store.add(scored_row("oracle", "verigym/GuessNumber-v0", seed, 1.0))
        assert store.add(_error_row("oracle", NO_ORACLE_ID, seed))
        assert store.add(scored_row("random", NO_ORACLE_ID, seed, 0.0))
        standings = compute_standings(store)
    assert NO_ORACLE in render_markdown(standings).split("## Per task")[1]


def test_the_oracle_agent_does_not_cover_a_task_without_a_solver(tmp_path, capsys):
    from verigym.leaderboards.agent_spec import parse_agent_spec

    assert not parse_agent_spec("oracle").covers(NO_ORACLE_ID)
    assert not parse_agent_spec("oracle?name=Scripted").covers(NO_ORACLE_ID)
    assert parse_agent_spec("oracle").covers("verigym/MiniWoB-ClickButton-v0")
    assert parse_agent_spec("random").covers(NO_ORACLE_ID)
    # verigym eval plays nothing there (no error rows, exit 0): the standings say "no oracle"
    suite = tmp_path / "mw.json"
    suite.write_text(json.dumps({"name": "mw", "tasks": [{"env_id": NO_ORACLE_ID, "episodes": 1}]}))
    assert main(["eval", "--agent", "oracle", "--suite", str(suite), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ran 0 episodes" in out and NO_ORACLE_ID in out
