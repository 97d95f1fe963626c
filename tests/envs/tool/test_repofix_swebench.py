"""RepoFix-Real as SWE-bench rows: ``verigym export --format swebench`` and ``verigym eval --instances``."""

from __future__ import annotations

import json

import pytest

import verigym  # noqa: F401  (registers the ids)
from tests.sandbox.support import needs_sandbox
from verigym.cli import main
from verigym.envs.tool.repofix import real, swebench
from verigym.envs.tool.repofix.real_env import _pool, load_real_data
from verigym.envs.tool.repofix.swebench import instance_rows, read_rows
from verigym.leaderboards.instances import instance_suites

SCHEMA = {
    "instance_id": str,
    "repo": str,
    "version": str,
    "base_commit": str,
    "patch": str,
    "test_patch": str,
    "problem_statement": str,
    "hints_text": str,
    "FAIL_TO_PASS": list,
    "PASS_TO_PASS": list,
    "split": str,
    "test_files": list,
    "env_id": str,
}


def _count(split: str) -> int:
    return sum(
        1
        for library in load_real_data().values()
        for i in library["instances"]
        if split == "all" or i["split"] == split
    )


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def all_rows() -> list[dict]:
    return list(instance_rows(split="all"))


def test_export_writes_training_rows_in_the_swebench_schema(tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    assert main(["export", "--format", "swebench", "--path", str(out)]) == 0
    assert "SWE-bench rows" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == _count("train") > 0
    for row in rows:  # the schema, read as JSON Lines
        assert set(row) == set(SCHEMA), row["instance_id"]
        assert all(isinstance(row[k], t) for k, t in SCHEMA.items()), row["instance_id"]
        assert row["FAIL_TO_PASS"] and row["PASS_TO_PASS"], row["instance_id"]
        assert row["split"] == "train" and row["test_patch"] == ""
        pin = real._manifest()["libraries"][row["repo"]]
        assert (row["version"], row["base_commit"]) == (pin["version"], pin["sha256"])
        assert row["patch"].startswith("--- a/") and "\n+" in row["patch"]
        assert "---" not in row["problem_statement"] and "@@" not in row["problem_statement"]


@pytest.mark.slow  # importing datasets costs ~10 s of the default run
def test_the_export_loads_with_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")  # the trl extra; installed by scripts/setup.sh
    out = tmp_path / "rows.jsonl"
    assert main(["export", "--format", "swebench", "--split", "all", "--path", str(out)]) == 0
    rows = out.read_text().splitlines()
    table = datasets.load_dataset(
        "json", data_files=str(out), split="train", cache_dir=str(tmp_path / "cache")
    )
    assert len(table) == len(rows) and set(SCHEMA) <= set(table.column_names)
    assert all(len(f2p) > 0 for f2p in table["FAIL_TO_PASS"])


def test_export_writes_evaluation_rows_only_when_asked(tmp_path):
    for split in ("eval", "all"):
        out = tmp_path / f"{split}.jsonl"
        args = ["export", "--format", "swebench", "--split", split, "--path", str(out)]
        assert main(args) == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == _count(split)
        assert {r["split"] for r in rows} == ({"eval"} if split == "eval" else {"train", "eval"})
    one = tmp_path / "one.jsonl"
    args = ["export", "--format", "swebench", "--env", "verigym/RepoFix-Tabulate-v0"]
    assert main([*args, "--split", "all", "--path", str(one)]) == 0
    assert {json.loads(line)["repo"] for line in one.read_text().splitlines()} == {"tabulate"}


def test_export_refuses_ids_that_are_not_repofix_real(tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    args = ["export", "--format", "swebench", "--env", "verigym/RepoFix-v0", "--path", str(out)]
    assert main(args) == 2
    assert "not a RepoFix-Real id" in capsys.readouterr().err and not out.exists()


def test_every_exported_row_reads_back_as_its_instance(tmp_path, all_rows):
    selected, refused = read_rows(_write(tmp_path / "all.jsonl", all_rows))
    assert refused == [] and [s.instance_id for s in selected] == [
        r["instance_id"] for r in all_rows
    ]
    # the suites pose exactly these instances: seed % count indexes the library's pool
    posed = []
    for suite in instance_suites(selected):
        for task in suite:
            library = verigym.registration.row(task.env_id).kwargs["library"]
            pool = _pool(library, "all")
            posed += [pool[seed % len(pool)][1]["id"] for seed in task.seeds]
    assert sorted(posed) == sorted(r["instance_id"] for r in all_rows)
    # SWE-bench's own files keep the lists as JSON text: accepted too
    text = dict(all_rows[0], FAIL_TO_PASS=json.dumps(all_rows[0]["FAIL_TO_PASS"]))
    assert read_rows(_write(tmp_path / "text.jsonl", [text]))[1] == []


def test_scattered_instances_split_into_suites_of_contiguous_seeds(all_rows):
    rows = [r for r in all_rows if r["repo"] == "tabulate"][::2]
    selected = [
        swebench.SelectedInstance("tabulate", 2 * k, r["instance_id"]) for k, r in enumerate(rows)
    ]
    suites = instance_suites(selected)
    assert len(suites) == len(rows) and all(t.episodes == 1 for s in suites for t in s)


def _bad_rows(row: dict, other_patch: str) -> list[tuple[object, str]]:
    """(row, the words its refusal must hold); ``other_patch``: another instance's fix, same repo."""
    other = dict(row, patch=other_patch)
    tests_patch = "--- a/tests/x.py\n+++ b/tests/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    nested: object = []
    for _ in range(100_000):
        nested = [nested]
    return [
        ([1, 2], "must be a JSON object"),
        ("text", "must be a JSON object"),
        (dict(row, evil=1), "unknown fields ['evil']"),
        ({k: v for k, v in row.items() if k != "patch"}, "missing fields ['patch']"),
        (dict(row, repo="requests"), "not a vendored RepoFix-Real library"),
        (dict(row, repo="../../etc"), "not a vendored RepoFix-Real library"),
        (dict(row, repo=["cachetools"]), "repo must be text"),
        (dict(row, version="0.0.1"), "not the pinned"),
        (dict(row, base_commit="0" * 40), "base_commit is not the SHA-256"),
        (dict(row, test_patch=tests_patch), "test_patch must be empty"),
        (dict(row, FAIL_TO_PASS=[]), "FAIL_TO_PASS is empty"),
        (dict(row, FAIL_TO_PASS="[oops"), "not a JSON list"),
        (dict(row, FAIL_TO_PASS=[1]), "must hold test ids"),
        (dict(row, PASS_TO_PASS=row["PASS_TO_PASS"][1:]), "differ from instance"),
        (dict(row, FAIL_TO_PASS=["x" * 5000]), "must hold test ids"),
        (dict(row, patch="not a diff"), "patch is not a unified diff"),
        (dict(row, patch="x" * (swebench.MAX_PATCH_CHARS + 1)), "patch must be text of at most"),
        (dict(row, patch=tests_patch), "not a module of"),
        (dict(row, patch=row["patch"].replace("\n ", "\n #", 1)), "does not apply to"),
        (other, "instance"),  # a fix of the same library, not this instance's
        (dict(row, instance_id=row["repo"] + "-0000000000"), "is not a validated"),
        (dict(row, instance_id="../x"), "is not a validated"),
        (dict(row, problem_statement="x" * (swebench.MAX_TEXT_CHARS + 1)), "at most"),
        (nested, "JSON"),
    ]


def test_bad_rows_are_refused_by_name_and_the_good_ones_kept(tmp_path, all_rows):
    row = all_rows[0]
    other = next(r for r in all_rows[1:] if r["repo"] == row["repo"] and r["patch"] != row["patch"])
    bad = _bad_rows(row, other["patch"])
    lines = [json.dumps(row)]
    for value, _ in bad:
        try:
            lines.append(json.dumps(value))
        except RecursionError:
            lines.append("[" * 100_000 + "]" * 100_000)
    lines.append("{not json")
    lines.append("x" * (swebench.MAX_ROW_BYTES + 1))
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    selected, refused = read_rows(path)
    assert [s.instance_id for s in selected] == [row["instance_id"]]
    assert len(refused) == len(bad) + 2
    for number, ((_, words), why) in enumerate(zip(bad, refused), 2):
        assert why.startswith(f"row {number}") and words in why, (words, why)
    assert refused[-2].startswith(f"row {len(bad) + 2}: not a JSON")
    assert "over" in refused[-1]


def test_an_unreadable_file_is_one_clear_error(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="No such file"):
        read_rows(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match="no rows"):
        read_rows(tmp_path / "empty.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="UTF-8"):
        read_rows(tmp_path / "bin.jsonl")
    (tmp_path / "big.jsonl").write_text("{}\n" * 20)
    monkeypatch.setattr(swebench, "MAX_FILE_BYTES", 10)
    with pytest.raises(ValueError, match="over 10"):
        read_rows(tmp_path / "big.jsonl")
    monkeypatch.setattr(swebench, "MAX_FILE_BYTES", 1 << 20)
    monkeypatch.setattr(swebench, "MAX_ROWS", 5)
    with pytest.raises(ValueError, match="more than 5 rows"):
        read_rows(tmp_path / "big.jsonl")


def test_eval_instances_refuses_a_file_of_bad_rows_before_any_episode(tmp_path, capsys, all_rows):
    path = _write(tmp_path / "bad.jsonl", [dict(all_rows[0], repo="numpy"), [1]])
    out = tmp_path / "results"
    assert main(["eval", "--agent", "random", "--instances", path, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "refused row 1 (" in err and "numpy" in err and "refused row 2" in err
    assert "no valid row (2 refused)" in err and not (out / "results.sqlite").exists()
    good = _write(tmp_path / "good.jsonl", all_rows[:1])
    args = ["eval", "--agent", "random", "--instances", good, "--episodes", "3"]
    assert main(args) == 2 and "drop --episodes" in capsys.readouterr().err


@pytest.mark.slow  # plays two instances in the sandbox (~20 s)
@needs_sandbox
def test_eval_instances_plays_the_named_instances(tmp_path, capsys, all_rows):
    rows = [r for r in all_rows if r["repo"] == "tabulate"][:2]
    path = _write(tmp_path / "two.jsonl", [*rows, dict(rows[0], repo="x")])
    out = tmp_path / "results"
    args = ["eval", "--agent", "oracle", "--instances", path, "--out", str(out), "--workers", "1"]
    assert main([*args, "--no-progress"]) == 1  # a row was refused: exit 1, the rest played
    assert "refused row 3" in capsys.readouterr().err
    from verigym.leaderboards.store import ResultsStore

    with ResultsStore(out) as store:
        played = store.rows()
    assert len(played) == 2 and all(r.score == 1.0 for r in played)
    pool = _pool("tabulate", "all")
    assert sorted(pool[r.seed % len(pool)][1]["id"] for r in played) == sorted(
        r["instance_id"] for r in rows
    )
