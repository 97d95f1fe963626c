"""Issue 28 section 2: reverify checks the row, not just the blob; rows are validated on read;
export is bounded; text UTF-8 cannot hold is stored and shown escaped (section 6)."""

from __future__ import annotations

import json
import pathlib
import shutil
import sqlite3
import tracemalloc
import zlib

import pytest

from tests.leaderboards.rows import episode_row
from verigym.cli import main
from verigym.leaderboards.runner import evaluate, provenance
from verigym.leaderboards.store import EpisodeRow, ResultsStore, StoreError, trajectory_digest
from verigym.leaderboards.suite import EVAL_SEED_START, Suite, Task
from verigym.leaderboards.trajectories import MAX_DOCUMENT_BYTES, decode, decode_value, encode_value

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUESS = "verigym/GuessNumber-v0"
HARD = {"max_number": 1000, "slack_turns": 0}
EASY = {"max_number": 2, "slack_turns": 10}
SEED_A, SEED_B = EVAL_SEED_START, EVAL_SEED_START + 1


def _suite(kwargs):
    return Suite("guess", (Task(GUESS, episodes=2, env_kwargs=kwargs),))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """random and oracle on the hard task (random fails), and oracle on an easier task, in two folders."""
    root = tmp_path_factory.mktemp("recorded")
    for agent in ("random", "oracle"):
        evaluate(agent, _suite(HARD), out=root / "hard", workers=1, progress=False)
    evaluate("oracle", _suite(EASY), out=root / "easy", workers=1, progress=False)
    with ResultsStore(root / "hard") as store:
        rows = {(r.agent_spec, r.seed): r for r in store.rows()}
    assert all(r.status == "ok" for r in rows.values()) and not any(
        rows["random", s].success for s in (SEED_A, SEED_B)
    )
    assert all(rows["oracle", s].success for s in (SEED_A, SEED_B))
    return root


@pytest.fixture
def store_dir(recorded, tmp_path):
    shutil.copytree(recorded / "hard", tmp_path / "hard")
    return tmp_path / "hard"


def _cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _blob(folder, agent, seed):
    with sqlite3.connect(folder / "results.sqlite") as db:
        return bytes(
            db.execute(
                "SELECT data FROM trajectories WHERE agent_spec = ? AND seed = ?", (agent, seed)
            ).fetchone()[0]
        )


def _forge_success(folder, seed, blob, *, digest):
    """What a forger with write access does: random's failed row at ``seed`` becomes a success carrying ``blob``."""
    with sqlite3.connect(folder / "results.sqlite") as db:
        db.execute(
            "UPDATE episodes SET success = 1, score = 1.0 WHERE agent_spec = 'random' AND seed = ?",
            (seed,),
        )
        db.execute(
            "UPDATE trajectories SET data = ? WHERE agent_spec = 'random' AND seed = ?",
            (blob, seed),
        )
    if digest:
        with ResultsStore(folder) as store:
            row = next(r for r in store.rows(agent_spec="random") if r.seed == seed)
        with sqlite3.connect(folder / "results.sqlite") as db:
            db.execute(
                "UPDATE episodes SET trajectory_digest = ? WHERE agent_spec = 'random' AND seed = ?",
                (trajectory_digest(row, blob), seed),
            )


def _rewrite_header(blob, **header):
    doc = decode(blob)
    doc.update(header)
    return zlib.compress(json.dumps(doc).encode())


def test_an_honest_store_reverifies_with_exit_0(store_dir, capsys):
    code, text = _cli(capsys, "reverify", "--out", str(store_dir))
    assert code == 0 and text.strip().endswith("4 episodes re-verified, 0 changed"), text


@pytest.mark.parametrize(
    "forger", ["copies the blob", "also fixes the digest", "also rewrites the header"]
)
@pytest.mark.parametrize("source", ["another seed", "easier kwargs"])
def test_a_forged_success_is_reported_with_exit_1(recorded, store_dir, capsys, forger, source):
    if (
        source == "another seed"
    ):  # the oracle's winning trajectory of seed A, put on random's row of seed B
        blob, header, expected = (
            _blob(store_dir, "oracle", SEED_A),
            {"seed": SEED_B},
            "recorded for another episode: seed",
        )
    else:  # the oracle re-recorded on an easier task, put on random's row of the hard one
        blob, header, expected = (
            _blob(recorded / "easy", "oracle", SEED_B),
            {"env_kwargs": encode_value(HARD)},
            "recorded for another episode: kwargs",
        )
    if forger == "also rewrites the header":
        blob = _rewrite_header(blob, **header)
    _forge_success(store_dir, SEED_B, blob, digest=forger != "copies the blob")
    code, text = _cli(capsys, "reverify", "--out", str(store_dir))
    assert code == 1, text
    where = f"random {GUESS} seed {SEED_B}"
    if forger == "copies the blob":
        assert (
            f"UNVERIFIABLE {where}: the stored trajectory is not the one written with this row"
            in text
        ), text
    elif forger == "also fixes the digest":
        assert f"UNVERIFIABLE {where}: the trajectory was {expected}" in text, text
    else:  # bound and consistent: the replay from the row's own seed and kwargs gives the truth
        assert f"CHANGED {where}:" in text and (
            "success True -> False" in text or "the replay gave no verdict" in text
        ), text
    assert text.count("UNVERIFIABLE") + text.count("CHANGED") == 1, text


def test_a_success_row_without_its_trajectory_is_unverifiable(store_dir, capsys):
    with sqlite3.connect(store_dir / "results.sqlite") as db:
        db.execute("DELETE FROM trajectories WHERE agent_spec = 'oracle' AND seed = ?", (SEED_A,))
    code, text = _cli(capsys, "reverify", "--out", str(store_dir))
    assert (
        code == 1
        and f"UNVERIFIABLE oracle {GUESS} seed {SEED_A}: no trajectory was recorded" in text
    ), text
    assert text.strip().endswith("3 episodes re-verified, 0 changed, 1 unverifiable"), text


def test_a_dropped_trajectories_table_is_an_error_and_stays_missing(store_dir, capsys):
    with sqlite3.connect(store_dir / "results.sqlite") as db:
        db.execute("DROP TABLE trajectories")
    for _ in range(2):  # reading does not paper over the hole with an empty table
        code, text = _cli(capsys, "reverify", "--out", str(store_dir))
        assert code == 2 and "no trajectories table" in text and "Traceback" not in text, text
    code, text = _cli(
        capsys, "export", "--out", str(store_dir), "--path", str(store_dir / "x.jsonl")
    )
    assert code == 2 and "no trajectories table" in text, text


def test_kwargs_the_registry_refuses_are_never_replayed(store_dir, capsys):
    with sqlite3.connect(store_dir / "results.sqlite") as db:
        db.execute(
            """UPDATE episodes SET env_kwargs = '{"max_number":100000000,"slack_turns":0}' WHERE agent_spec = 'oracle' AND seed = ?""",
            (SEED_A,),
        )
    code, text = _cli(capsys, "reverify", "--out", str(store_dir))
    assert (
        code == 1
        and f"UNVERIFIABLE oracle {GUESS} seed {SEED_A}: its kwargs are refused" in text
        and "max_number" in text
    ), text


def test_a_store_written_before_rows_were_bound_is_read_and_reported_unbound(store_dir, capsys):
    with sqlite3.connect(
        store_dir / "results.sqlite"
    ) as db:  # the layout of earlier verigym versions
        db.execute("ALTER TABLE episodes DROP COLUMN env_kwargs")
        db.execute("ALTER TABLE episodes DROP COLUMN trajectory_digest")
    with ResultsStore(store_dir, create=False) as store:
        rows = store.rows()
    assert len(rows) == 4 and {(r.env_kwargs, r.trajectory_digest) for r in rows} == {("", "")}
    assert len(ResultsStore(store_dir).suite_rows(_suite(HARD))) == 4, (
        "old rows still count for the leaderboard"
    )
    code, text = _cli(capsys, "reverify", "--out", str(store_dir))
    assert code == 1 and text.count("unbound: recorded before rows named their kwargs") == 4, text
    code, text = _cli(capsys, "leaderboard", "--out", str(store_dir))
    assert code == 0, text


def test_rows_of_other_kwargs_are_not_results_of_the_suite(recorded, tmp_path):
    shutil.copytree(recorded / "easy", tmp_path / "easy")
    with ResultsStore(tmp_path / "easy") as store:
        assert len(store.suite_rows(_suite(EASY))) == 2 and store.suite_rows(_suite(HARD)) == []


# ---- rows are validated when read --------------------------------------------------------------------


@pytest.mark.parametrize(
    "column, sql, message",
    [
        ("score", "'nan'", "score must be a number"),
        ("score", "2.0", r"outside \[0, 1\]"),
        ("score", "9e999", "finite"),
        ("success", "5", "success must be 0 or 1"),
        ("agent_spec", "'ora' || char(0) || 'cle'", "control character"),
        ("env_id", f"'{GUESS}' || char(10)", "control character"),
        ("packages", "'{' || substr(hex(zeroblob(20000)), 1, 20000) || '}'", "packages is"),
        ("agent_spec", "CAST(x'6f72ff' AS TEXT)", "not valid UTF-8"),
        ("env_kwargs", "'[1]'", "env_kwargs must be a JSON object"),
    ],
)
def test_a_row_edited_into_the_file_is_reported_not_trusted(
    store_dir, capsys, column, sql, message
):
    with sqlite3.connect(store_dir / "results.sqlite") as db:
        db.execute(
            f"UPDATE episodes SET {column} = {sql} WHERE agent_spec = 'oracle' AND seed = ?",
            (SEED_A,),
        )
        (rowid,) = db.execute(
            "SELECT rowid FROM episodes WHERE seed = ? AND agent_spec LIKE 'or%'", (SEED_A,)
        ).fetchone()
    with ResultsStore(store_dir, create=False) as store:
        with pytest.raises(StoreError, match=f"row {rowid} .*{message}"):
            store.rows()
        refused = []
        assert len(store.rows(refused=refused)) == 3 and [r.rowid for r in refused] == [rowid]
    code, text = _cli(capsys, "leaderboard", "--out", str(store_dir))
    assert (
        code == 2 and f"row {rowid}" in text and "not trusted" in text and "Traceback" not in text
    ), text
    code, text = _cli(capsys, "reverify", "--out", str(store_dir))
    assert (
        code == 1
        and f"UNVERIFIABLE row {rowid} (" in text
        and "3 episodes re-verified, 0 changed, 1 unverifiable" in text
    ), text
    path = store_dir / "out.jsonl"
    code, text = _cli(capsys, "export", "--out", str(store_dir), "--path", str(path))
    assert (
        code == 1 and f"refused row {rowid}" in text and len(path.read_text().splitlines()) == 3
    ), text


def test_writes_are_held_to_the_same_rules(tmp_path):
    with ResultsStore(tmp_path) as store:
        for bad, message in (
            (dict(agent_spec="ran\x00dom"), "control character"),
            (dict(suite="a\nb"), "control character"),
            (dict(env_kwargs="[]"), "JSON object"),
            (dict(trajectory_digest="zz"), "64 hex"),
            (dict(packages=json.dumps({f"p{i}": "1" for i in range(300)})), "packages names 300"),
        ):
            with pytest.raises(ValueError, match=message):
                store.add(episode_row(env_id=GUESS, seed=SEED_A, **bad))
        assert store.rows() == []


# ---- export is bounded ------------------------------------------------------------------------------


def _zlib_bomb(mebibytes: int) -> bytes:
    """A valid zlib stream of ``mebibytes`` MiB of zeros, about 1 KiB per MiB, built without compressing them."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(bytes(1 << 20)) + deflate.flush(
        zlib.Z_FULL_FLUSH
    )  # byte-aligned, history reset: repeatable
    adler = ((mebibytes << 20) % 65521) << 16 | 1  # Adler-32 of n zero bytes
    return b"\x78\xda" + block * mebibytes + deflate.flush() + adler.to_bytes(4, "big")


def test_a_decompression_bomb_is_refused_by_export_without_inflating(store_dir, capsys):
    bomb = _zlib_bomb(2048)  # 2 MiB stored, 2 GiB inflated
    assert len(bomb) < 3 << 20
    assert len(zlib.decompressobj().decompress(_zlib_bomb(3), 10 << 20)) == 3 << 20, (
        "the bomb is a sound zlib stream"
    )
    with sqlite3.connect(store_dir / "results.sqlite") as db:
        db.execute(
            "UPDATE trajectories SET data = ? WHERE agent_spec = 'oracle' AND seed = ?",
            (bomb, SEED_A),
        )
    path = store_dir / "out.jsonl"
    tracemalloc.start()
    try:
        code, text = _cli(capsys, "export", "--out", str(store_dir), "--path", str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 1 and f"refused the trajectory of oracle {GUESS} seed {SEED_A}" in text, text
    assert peak < MAX_DOCUMENT_BYTES + (32 << 20), f"{peak} bytes held"
    assert len(path.read_text().splitlines()) == 3


def test_an_array_inside_a_trajectory_cannot_inflate_past_its_declared_size():
    payload = __import__("base64").b64encode(_zlib_bomb(64)).decode()
    with pytest.raises(ValueError, match="inflates to more than 4 bytes"):
        decode_value({"__array__": {"dtype": "<u1", "shape": [4], "zlib": payload}})
    with pytest.raises(ValueError, match="declares"):
        decode_value({"__array__": {"dtype": "<f8", "shape": [1 << 20, 1 << 20], "zlib": payload}})
    with pytest.raises(ValueError, match="dtype"):
        decode_value({"__array__": {"dtype": "|O", "shape": [1], "zlib": payload}})


def test_export_streams_and_writes_nothing_when_it_fails(store_dir, capsys):
    path = store_dir / "out.jsonl"
    path.write_text("earlier\n")
    code, text = _cli(
        capsys, "export", "--out", str(store_dir), "--path", str(path), "--format", "jsonl"
    )
    assert code == 0 and len(path.read_text().splitlines()) == 4
    from verigym.leaderboards.trajectories import export_dataset

    def failing():
        yield {"messages": []}
        raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError, match="went away"):
        export_dataset(failing(), path, "jsonl")
    assert len(path.read_text().splitlines()) == 4 and not list(store_dir.glob(".*.partial"))


# ---- text UTF-8 cannot hold (section 6) ----------------------------------------------------------------


class _SurrogateReplies:
    def act(self, observation, info, deterministic=True):
        return "\ud800 50"  # a reply with a lone surrogate (what a broken tokenizer can decode to)


def surrogate_replies(env):
    return _SurrogateReplies()


def surrogate_env_error(env):
    """An agent on an env whose step raises an error message holding a lone surrogate."""

    def broken_step(action):
        raise RuntimeError("the env broke on \udc80")

    env.step = broken_step
    return _SurrogateReplies()


def test_lone_surrogates_are_recorded_replayed_and_shown_escaped(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    suite = Suite("guess", (Task(GUESS, episodes=1),))
    here = "tests.leaderboards.test_reverify_binding"
    assert evaluate(
        f"{here}:surrogate_replies", suite, out=tmp_path, workers=1, progress=False
    ).statuses == {"ok": 1}
    assert evaluate(
        f"{here}:surrogate_env_error", suite, out=tmp_path, workers=1, progress=False
    ).statuses == {"error": 1}
    with ResultsStore(tmp_path) as store:
        rows = {r.agent_spec.rsplit(":", 1)[1]: r for r in store.rows()}
        doc = decode(store.trajectory(rows["surrogate_replies"]))
    assert doc["steps"][0]["action"] == "\ud800 50", (
        "the reply is recorded exactly, so a replay feeds it back"
    )
    assert "RuntimeError: the env broke on \\udc80" in rows["surrogate_env_error"].error, (
        "stored escaped"
    )
    code, text = _cli(capsys, "reverify", "--out", str(tmp_path))
    assert code == 0 and "1 episodes re-verified, 0 changed (1 not replayed)" in text, text
    path = tmp_path / "all.jsonl"
    code, text = _cli(
        capsys, "export", "--out", str(tmp_path), "--path", str(path), "--include-errors"
    )
    assert code == 0, text
    records = {
        r["agent"].rsplit(":", 1)[1]: r
        for r in map(json.loads, path.read_bytes().decode("utf-8").splitlines())
    }
    assert [
        m["content"] for m in records["surrogate_replies"]["messages"] if m["role"] == "assistant"
    ][0] == "\\ud800 50"
    code, text = _cli(capsys, "leaderboard", "--out", str(tmp_path))
    assert code == 0 and "Traceback" not in text, text
    pages = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "episodes").glob("*.html"))
    assert "\\ud800 50" in pages and "\\udc80" in pages


def test_the_episode_viewer_shows_any_recorded_text_escaped(tmp_path):
    from verigym.leaderboards.viewer import write_viewer

    step = {
        "action": "\ud800",
        "observation": "saw \udc80",
        "digest": "0",
        "reward": 0.0,
        "terminated": True,
        "truncated": False,
        "info": {"action_error": "cannot read \ud800"},
    }
    doc = {
        "format": 1,
        "env_id": GUESS,
        "env_kwargs": {},
        "seed": SEED_A,
        "text_view": False,
        "instructions": "go \udfff",
        "reset": {"observation": "start", "digest": "0", "info": {}},
        "steps": [step],
        "messages": [{"role": "user", "content": "\ud800"}],
    }
    blob = zlib.compress(json.dumps(doc).encode())
    assert decode(blob)["steps"][0]["info"]["action_error"] == "cannot read \ud800"
    row = EpisodeRow(
        suite="s",
        env_id=GUESS,
        env_version=0,
        seed=SEED_A,
        agent_spec="random",
        config_hash="abc",
        status="ok",
        score=0.0,
        success=False,
        episode_return=0.0,
        length=1,
        time_s=0.1,
        error="",
        **provenance(),
    )
    with ResultsStore(tmp_path) as store:
        store.add(row, blob)
        index = write_viewer(store, tmp_path)
    page = "".join(p.read_text(encoding="utf-8") for p in index.parent.glob("*.html") if p != index)
    assert "cannot read \\ud800" in page and "go \\udfff" in page
