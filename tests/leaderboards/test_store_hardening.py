"""Issue 43 section 6: the stores say only what they can prove.

One test (or a parametrized group) per red-team finding on the leaderboards and the export:
timeout/error rows carry no score, rows of other kwargs are shown apart, ``leaderboard --suite``
views only the suite's episodes, absurd numbers are refused on write and flagged on read, every path
that reads a stored trajectory uses the row's own kwargs (through ``untrusted_kwargs`` where an env
is built), and suite files give one-line errors and bounded values.
"""

from __future__ import annotations

import json
import pathlib
import re
import sqlite3
import zlib

import pytest

from tests.leaderboards.rows import episode_row
from verigym.cli import main
from verigym.leaderboards.demonstrations import stored_demonstrations
from verigym.leaderboards.episode import EpisodePlayer, Job
from verigym.leaderboards.runner import provenance
from verigym.leaderboards.standings import compute_standings, render_markdown, task_label
from verigym.leaderboards.store import (
    MAX_ABS_RETURN,
    EpisodeRow,
    MatchRow,
    ResultsStore,
    StoreError,
    canonical_kwargs,
)
from verigym.leaderboards.suite import EVAL_SEED_START, Suite, Task, load_suite
from verigym.leaderboards.trajectories import decode, encode_value
from verigym.leaderboards.viewer import episode_filename, write_viewer

GUESS = "verigym/GuessNumber-v0"
MATH = "verigym/PythonMath-v0"
SEED = EVAL_SEED_START


def _row(**overrides) -> EpisodeRow:
    return episode_row(**overrides)


def _played(agent: str, seed: int, kwargs: dict | None = None) -> tuple[EpisodeRow, bytes]:
    """One GuessNumber episode played in this process, as the runner records it."""
    kwargs = kwargs or {}
    player = EpisodePlayer(agent)
    try:
        result = player(Job(GUESS, kwargs, seed, 60.0))
    finally:
        player.env.close()
    blob = result.pop("trajectory")
    result.pop("frames", None)
    return _row(agent_spec=agent, seed=seed, env_kwargs=canonical_kwargs(kwargs), **result), blob


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _forged(blob: bytes, **header) -> bytes:
    doc = decode(blob)
    doc.update(header)
    return zlib.compress(json.dumps(doc).encode())


# ---- timeout and error rows carry no score ---------------------------------------------------


@pytest.mark.parametrize("status", ["timeout", "error"])
def test_a_timeout_or_error_row_with_a_score_is_refused_on_write(tmp_path, status):
    with ResultsStore(tmp_path) as store, pytest.raises(ValueError, match="carries no score"):
        store.add(_row(status=status, success=False, score=1.0, error="late"))


@pytest.mark.parametrize("status", ["timeout", "error"])
def test_a_forged_score_on_a_timeout_row_is_flagged_by_leaderboard_and_reverify(
    tmp_path, capsys, status
):
    row, blob = _played("random", SEED)
    with ResultsStore(tmp_path) as store:
        store.add(row, blob)
    with sqlite3.connect(tmp_path / "results.sqlite") as db:  # what a forger with write access does
        db.execute(
            "UPDATE episodes SET status = ?, score = 1.0, success = 0, error = 'x'", (status,)
        )
    code, text = _cli(capsys, "leaderboard", "--out", str(tmp_path))
    assert code != 0 and "carries no score" in text, text
    code, text = _cli(capsys, "reverify", "--out", str(tmp_path))
    assert code == 1 and "UNVERIFIABLE" in text and "carries no score" in text, text


def test_timeout_and_error_rows_get_no_credit_in_the_standings(tmp_path):
    suite = Suite("ret", (Task(GUESS, episodes=3),), metric="return")
    with ResultsStore(tmp_path) as store:
        store.add(_row(seed=SEED, episode_return=1.0))
        store.add(
            _row(seed=SEED + 1, status="timeout", score=0.0, success=False, episode_return=50.0)
        )
        store.add(_row(seed=SEED + 2, status="error", score=0.0, success=False, episode_return=9.0))
        cell = compute_standings(store, suite).entries[0].cells[GUESS]
    assert cell.mean == pytest.approx(1.0 / 3)  # 1 + 0 + 0: the partial returns earn nothing
    assert cell.mean_return == pytest.approx(1.0 / 3) and cell.success_rate == pytest.approx(1 / 3)


def test_the_viewer_shows_no_score_for_a_timeout_row(tmp_path):
    row = _row(status="timeout", score=0.0, success=False, error="the worker was killed")
    with ResultsStore(tmp_path) as store:
        store.add(row)
        index = write_viewer(store, tmp_path)
    page = (index.parent / episode_filename(row)).read_text(encoding="utf-8")
    assert "no score" in page and "score 0.000" not in page
    assert ">0.000</a>" not in index.read_text(encoding="utf-8")


# ---- rows of other kwargs are another task ----------------------------------------------------


def test_rows_with_other_kwargs_do_not_share_a_cell_with_default_rows(tmp_path):
    easy = canonical_kwargs({"max_number": 2})
    with ResultsStore(tmp_path) as store:
        store.add(_row(seed=SEED, score=0.0, success=False, episode_return=0.0))
        store.add(_row(seed=SEED + 1, env_kwargs=easy))
        standings = compute_standings(store)
    (entry,) = standings.entries
    assert standings.env_ids == sorted([GUESS, task_label(GUESS, easy)])
    assert entry.cells[GUESS].mean == 0.0 and entry.cells[task_label(GUESS, easy)].mean == 1.0
    assert task_label(GUESS, easy) == f'{GUESS} {{"max_number":2}}'
    assert '| GuessNumber-v0 {"max_number":2} |' in render_markdown(standings)
    assert task_label(GUESS, "") != GUESS  # a row that predates kwargs is not a default row either


# ---- leaderboard --suite views only the suite's episodes --------------------------------------


def test_leaderboard_suite_writes_a_viewer_of_the_suites_episodes_only(tmp_path, capsys):
    suite = Suite("only", (Task(GUESS, episodes=2),))
    (tmp_path / "only.json").write_text(
        json.dumps({"name": "only", "tasks": [{"env_id": GUESS, "episodes": 2}]})
    )
    inside = [_row(seed=SEED), _row(seed=SEED + 1)]
    outside = [
        _row(agent_spec="oracle", seed=SEED, env_kwargs=canonical_kwargs({"max_number": 2})),
        _row(seed=SEED + 5),  # another seed
        _row(env_id="verigym/Treasure-7x7-v0", seed=SEED),  # another task
    ]
    with ResultsStore(tmp_path / "out") as store:
        for row in inside + outside:
            store.add(row)
        assert [(r.agent_spec, r.seed) for r in store.suite_rows(suite)] == [
            ("random", SEED),
            ("random", SEED + 1),
        ]
    code, text = _cli(
        capsys,
        "leaderboard",
        "--suite",
        str(tmp_path / "only.json"),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 0, text
    index = pathlib.Path(re.search(r"episodes in (\S+index\.html)", text).group(1))
    listed = set(re.findall(r'<a href="([0-9a-f]{20}\.html)">', index.read_text(encoding="utf-8")))
    assert listed == {episode_filename(r) for r in inside}


# ---- absurd numbers are refused on write and flagged on read ----------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("episode_return", 1e300),
        ("episode_return", -1e300),
        ("episode_return", MAX_ABS_RETURN * 2),
        ("length", 10**12),
        ("time_s", 1e300),
        ("seed", -1),
        ("env_version", 10**9),
    ],
)
def test_absurd_values_are_refused_on_write(tmp_path, field, value):
    overrides = {field: value}
    if field == "env_version":
        overrides["env_id"] = f"verigym/GuessNumber-v{value}"
    with ResultsStore(tmp_path) as store, pytest.raises(ValueError, match=field):
        store.add(_row(**overrides))
    with ResultsStore(tmp_path) as store:
        assert store.rows() == []


@pytest.mark.parametrize("payoff", [1e300, float("inf")])
def test_absurd_match_payoffs_are_refused(payoff):
    match = MatchRow(
        suite="arena",
        env_id="verigym/TicTacToe-v0",
        seed=SEED,
        first_spec="random",
        first_hash="a",
        second_spec="oracle",
        second_hash="b",
        first_payoff=payoff,
        second_payoff=0.0,
        length=3,
        error="",
        **provenance(),
    )
    with pytest.raises(ValueError, match="first_payoff"):
        match.validate()


def test_an_absurd_return_edited_into_the_store_is_flagged_on_read(tmp_path, capsys):
    with ResultsStore(tmp_path) as store:
        store.add(_row())
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        db.execute("UPDATE episodes SET episode_return = 1e300")
    with ResultsStore(tmp_path) as store:
        refused: list = []
        assert store.rows(refused=refused) == [] and "episode_return" in refused[0].reason
        with pytest.raises(StoreError, match="episode_return"):
            compute_standings(store)
    code, text = _cli(capsys, "leaderboard", "--out", str(tmp_path))
    assert code != 0 and "episode_return" in text and "Traceback" not in text


# ---- stored trajectories are read with the row's own kwargs -----------------------------------


def _math_row(kwargs: dict, header_kwargs: dict) -> tuple[EpisodeRow, bytes]:
    """A stored PythonMath success on a training seed whose trajectory header says ``header_kwargs``."""
    doc = {
        "format": 1,
        "env_id": MATH,
        "env_kwargs": encode_value(header_kwargs),
        "seed": 5,
        "text_view": False,
        "instructions": "",
        "reset": {"digest": "0" * 16, "info": {}},
        "steps": [
            {
                "action": "<answer>1</answer>",
                "reward": 1.0,
                "digest": "1" * 16,
                "terminated": True,
                "truncated": False,
                "info": {},
            }
        ],
    }
    row = _row(env_id=MATH, seed=5, agent_spec="oracle", env_kwargs=canonical_kwargs(kwargs))
    return row, zlib.compress(json.dumps(doc).encode())


@pytest.mark.parametrize(
    "kwargs, header, why",
    [
        ({}, {"unsafe": True}, "recorded for another episode: kwargs"),
        ({"unsafe": True}, {"unsafe": True}, "kwargs are refused"),
    ],
)
def test_sft_export_never_builds_an_env_from_a_trajectorys_own_kwargs(
    tmp_path, kwargs, header, why
):
    built: list = []

    def spy(env_id, env_kwargs):
        built.append(env_kwargs)
        raise ValueError("the spy builds nothing")

    row, blob = _math_row(kwargs, header)
    with ResultsStore(tmp_path) as store:
        store.add(row, blob)  # the digest is recomputed: only the header says unsafe
        refused: list = []
        assert list(stored_demonstrations(store, store.rows(), refused, make_env=spy)) == []
    assert built == [] and len(refused) == 1 and why in refused[0][1], refused


def test_sft_export_builds_an_honest_row_from_the_rows_kwargs(tmp_path):
    row, blob = _played("oracle", 7, {"max_number": 20})
    assert row.success
    built: list = []

    def make(env_id, env_kwargs):
        from verigym.leaderboards.episode import make_env

        built.append(env_kwargs)
        return make_env(env_id, env_kwargs, True)

    with ResultsStore(tmp_path) as store:
        store.add(row, blob)
        refused: list = []
        records = list(stored_demonstrations(store, store.rows(), refused, make_env=make))
    assert not refused and len(records) == 1 and built == [{"max_number": 20}]


def test_the_viewer_and_the_dataset_export_refuse_a_trajectory_of_other_kwargs(tmp_path, capsys):
    row, blob = _played("oracle", SEED, {"max_number": 1000})
    forged = _forged(blob, env_kwargs=encode_value({"max_number": 2}))
    with ResultsStore(tmp_path) as store:
        store.add(row, forged)
        index = write_viewer(store, tmp_path)
    page = (index.parent / episode_filename(row)).read_text(encoding="utf-8")
    assert 'id="unbound"' in page and "kwargs" in page and 'id="transcript"' not in page
    code, text = _cli(capsys, "export", "--out", str(tmp_path), "--path", str(tmp_path / "d.jsonl"))
    assert code == 1 and "recorded for another episode: kwargs" in text, text
    assert (tmp_path / "d.jsonl").read_text() == ""


def test_a_trajectory_added_to_a_row_recorded_without_one_is_not_read(tmp_path, capsys):
    row, blob = _played("oracle", SEED)
    with ResultsStore(tmp_path) as store:
        store.add(row)  # no trajectory: the row's digest is empty
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        db.execute(
            "INSERT INTO trajectories VALUES (?, ?, ?, ?, ?, ?)",
            (row.agent_spec, row.config_hash, row.env_id, row.seed, 1, blob),
        )
    code, text = _cli(capsys, "export", "--out", str(tmp_path), "--path", str(tmp_path / "d.jsonl"))
    assert code == 1 and "not the one written with this row" in text, text


# ---- suite files: one-line errors, bounded values ---------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"name": "x", "tasks": [{"env_id": "%s", "time_limit_s": Infinity}]}', "Infinity"),
        ('{"name": "x", "tasks": [{"env_id": "%s", "time_limit_s": NaN}]}', "NaN"),
        ('{"name": "x", "tasks": [{"env_id": "%s", "time_limit_s": 1e300}]}', "time_limit_s"),
        ('{"name": "x", "tasks": [{"env_id": "%s", "time_limit_s": true}]}', "time_limit_s"),
        ('{"name": "x", "tasks": [{"env_id": "%s", "episodes": 1e9}]}', "episodes"),
        ('{"name": "x", "tasks": [{"env_id": "%s", "episodes": 10000000}]}', "episodes"),
        ('{"name": "x", "tasks": [{"env_id": "%s", "seed_start": "1000000"}]}', "seed_start"),
        ('{"name": "x", "tasks": [{"env_id": "%s", "speed": 2}]}', "task 1"),
        ('{"name": "x", "tasks": ["%s"]}', "task 1"),
        ('{"name": "../../x", "tasks": [{"env_id": "%s"}]}', "name"),
        ('{"name": "x", "tasks": {"env_id": "%s"}}', "tasks"),
        ('["%s"]', "JSON object"),
    ],
)
def test_a_bad_suite_file_is_one_line_naming_the_field(tmp_path, capsys, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text % GUESS)
    with pytest.raises(ValueError, match=message) as caught:
        load_suite(path)
    assert "\n" not in str(caught.value)
    code, out = _cli(capsys, "leaderboard", "--suite", str(path), "--out", str(tmp_path / "no"))
    assert code == 2 and "Traceback" not in out and len(out.strip().splitlines()) == 1, out


def test_a_suite_naming_an_unknown_version_is_one_line_in_every_command(tmp_path, capsys):
    path = tmp_path / "v9.json"
    path.write_text(
        json.dumps({"name": "v9", "tasks": [{"env_id": "verigym/GuessNumber-v9", "episodes": 2}]})
    )
    code, out = _cli(
        capsys,
        "export",
        "--format",
        "sft",
        "--play",
        "oracle",
        "--suite",
        str(path),
        "--path",
        str(tmp_path / "d.jsonl"),
    )
    assert code == 2 and "GuessNumber-v9 not found" in out and "Traceback" not in out, out
    code, out = _cli(
        capsys, "eval", "--agent", "random", "--suite", str(path), "--out", str(tmp_path)
    )
    assert code != 0 and "not registered" in out and "Traceback" not in out, out


# ---- what reverify proves, said plainly --------------------------------------------------------


def test_an_oracle_trajectory_under_another_name_passes_reverify_and_the_docs_say_so(
    tmp_path, capsys
):
    """Inherent: the digest binds a trajectory to its row, not to whoever played it. The docs and
    ``reverify --help`` must say that reverify proves the verdict, not who produced it."""
    row, blob = _played("oracle", SEED)
    with ResultsStore(tmp_path) as store:  # re-added through the store's API under random's name
        store.add(EpisodeRow(**{**row.__dict__, "agent_spec": "random"}), blob)
    code, text = _cli(capsys, "reverify", "--out", str(tmp_path))
    assert code == 0 and "1 episodes re-verified, 0 changed" in text, text
    docs = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "leaderboards.md").read_text()
    section = docs[docs.index("## What the stores prove") :]
    assert "What `reverify` proves: the verdict of the stored trajectory" in section
    assert "cannot prove **who**" in section
    with pytest.raises(SystemExit):
        main(["reverify", "--help"])
    assert "not who produced the trajectory" in " ".join(capsys.readouterr().out.split())
