"""Terminal (issue 30 s2): the template catalogue, its checkers on pure snapshots, and the oracle
through the env (one seed per template by default; 100 seeds per template under ``slow``)."""

from __future__ import annotations

import copy
import gzip
import io
import pickle
import tarfile
import time
import tracemalloc

import numpy as np
import pytest

from verigym.core import ActionParseError
from verigym.envs.tool.base import tool_call_text
from verigym.envs.tool.terminal.core import (
    Entry,
    Snapshot,
    is_mode,
    normalize_files,
    snapshot_from_wire,
    tree_command,
    tree_payload,
)
from verigym.envs.tool.terminal.files import make_tar_gz, tar_members, zip_members
from verigym.envs.tool.terminal.git import GIT_CONFIG, git_files
from verigym.envs.tool.terminal.templates import GROUPS, TEMPLATES, available, pool

NAMES = sorted(TEMPLATES)


class NoRunner:
    """A checker runner that cannot run anything (every run fails)."""

    timeout_s = 1.0
    calls = 0

    def shell(self, *args, **kwargs):
        self.calls += 1
        return -1, "", None


def _snapshot_of(files) -> Snapshot:
    snap = Snapshot()
    for path, (data, mode) in normalize_files(files).items():
        parts = path.split("/")
        for i in range(1, len(parts)):
            snap.entries.setdefault("/".join(parts[:i]), Entry("d", 0o755))
        snap.entries[path] = Entry("f", mode, data)
    return snap


def test_catalogue_has_25_templates_in_every_group():
    assert len(TEMPLATES) >= 25
    assert {t.group for t in TEMPLATES.values()} == set(GROUPS)
    assert all(t.name.islower() and " " not in t.name for t in TEMPLATES.values())


def test_one_id_per_template_with_the_table_literals_in_step():
    import gymnasium as gym

    import verigym
    from verigym.envs.tool.table import TERMINAL_TEMPLATES, terminal_id_name

    assert {n: g for n, (g, _) in TERMINAL_TEMPLATES.items()} == {
        n: t.group for n, t in TEMPLATES.items()
    }
    ids = {r.kwargs["template"]: r.id for r in verigym.rows("tool") if "template" in r.kwargs}
    assert sorted(ids) == NAMES
    groups = {f"verigym/Terminal-{g.capitalize()}-v0" for g in GROUPS}
    for name, env_id in ids.items():
        assert env_id == f"verigym/Terminal-{terminal_id_name(name)}-v0"
        assert env_id not in groups
        assert gym.spec(env_id).kwargs == {"template": name}
    assert terminal_id_name("csv_join") == "CsvJoin"


@pytest.mark.parametrize("name", NAMES)
def test_generate_is_seeded_and_the_untouched_workspace_scores_zero(name):
    template = TEMPLATES[name]
    first = template.generate(np.random.default_rng(5))
    again = template.generate(np.random.default_rng(5))
    other = template.generate(np.random.default_rng(6))
    assert first == again
    assert first != other
    instruction, files, expect = first
    assert isinstance(instruction, str) and len(instruction) > 40
    if template.setup is None:  # git templates build their repository by commands
        success, score, detail = template.check(expect, _snapshot_of(files), NoRunner())
        assert (success, score) == (False, 0.0), detail
    # what the agent never sees: the expectation is not copied into the files
    assert "expect" not in " ".join(files)


def test_snapshot_from_wire_refuses_malformed_values():
    assert snapshot_from_wire(None).error
    assert snapshot_from_wire({"entries": [1]}).error
    snap = snapshot_from_wire(
        {
            "error": "",
            "entries": {
                "a.txt": ["f", 0o644, "aGk=", ""],
                "bad": ["f", "644", "aGk=", ""],
                "l": ["l", 0, "", "/etc/passwd"],
                "junk": ["f", 0o644, "***", ""],
            },
        }
    )
    assert snap.text("a.txt") == "hi"
    assert "bad" not in snap.entries and snap.error
    assert snap.text("l") is None and snap.entries["l"].target == "/etc/passwd"
    assert snap.data("junk") is None


def test_tree_writers_refuse_paths_outside_the_workspace():
    for write in (tree_payload, lambda files: tree_command("/tmp/work", files)):
        with pytest.raises(ValueError):
            write({"../escape": "x"})
        with pytest.raises(ValueError):
            write({"/etc/passwd": "x"})


def test_archive_readers_cap_sizes_and_refuse_garbage():
    blob = make_tar_gz({"a/b.txt": b"hello"})
    assert tar_members(blob) == {"a/b.txt": b"hello"}
    assert tar_members(b"not a tar") is None
    assert zip_members(b"PK\x03\x04garbage") is None
    bomb = make_tar_gz({"zeros": bytes(4 << 20)})  # one member over the 1 MiB cap
    assert tar_members(bomb) is None


def _long_name_bomb(declared: int, kind: bytes = tarfile.GNUTYPE_LONGNAME) -> bytes:
    """A .tar.gz whose first header (a GNU long name, or a pax header) declares ``declared`` bytes
    of zeros; gzip members concatenate, so 1 GiB takes ~1 MB."""
    head = tarfile.TarInfo("././@LongLink")
    head.type, head.size = kind, declared
    zeros = gzip.compress(bytes(1 << 20), 9)
    return gzip.compress(head.tobuf(format=tarfile.GNU_FORMAT)) + zeros * (declared >> 20)


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE])
def test_a_long_name_tar_bomb_costs_under_64_mib_and_a_second(kind):
    """Issue 43: a GNU long-name header declaring 1 GiB (a ~1 MB .tar.gz) was read whole by
    tarfile in the env's process (1 GiB). It is refused at the read cap, the gzip stream is cut at
    MAX_TAR_BYTES: peak allocation < 64 MiB (measured 28 MiB, 0.2 s)."""
    bomb = _long_name_bomb(1 << 30, kind)
    assert len(bomb) < 2 << 20
    tracemalloc.start()
    try:
        start = time.perf_counter()
        assert tar_members(bomb) is None
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"
    assert elapsed < 2.0, f"{elapsed:.2f} s"


def test_tar_reader_keeps_long_names_and_refuses_other_compressions():
    name = "data/" + "deep/" * 40 + "notes.txt"  # 200+ characters: a pax or GNU long name
    blob = make_tar_gz({name: b"x", "b.txt": b"y" * 100_000})
    assert tar_members(blob) == {name: b"x", "b.txt": b"y" * 100_000}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as archive:
        info = tarfile.TarInfo(name)
        info.size = 1
        archive.addfile(info, io.BytesIO(b"z"))
    assert tar_members(raw.getvalue()) == {name: b"z"}  # plain tar, GNU long name
    for mode in ("w:bz2", "w:xz"):  # not bounded by the gzip stream cap: refused
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode=mode) as archive:
            info = tarfile.TarInfo("a.txt")
            info.size = 1
            archive.addfile(info, io.BytesIO(b"a"))
        assert tar_members(packed.getvalue()) is None


def test_mode_checks_compare_all_twelve_bits():
    """Issue 43: the mask was 0o777, so setuid, setgid and sticky bits passed as 755 or 700."""
    assert is_mode(Entry("f", 0o755), 0o755)
    for extra in (0o4000, 0o2000, 0o1000):
        assert not is_mode(Entry("f", 0o755 | extra), 0o755)
        assert not is_mode(Entry("d", 0o700 | extra), 0o700)
    template = TEMPLATES["chmod_scripts"]
    _, files, expect = template.generate(np.random.default_rng(4))
    done = {p: (data, expect["modes"].get(p, mode)) for p, (data, mode) in files.items()}
    assert template.check(expect, _snapshot_of(done), NoRunner())[1] == 1.0
    script = next(p for p in expect["todo"] if p.endswith(".sh"))
    done[script] = (done[script][0], 0o4755)  # setuid, otherwise right
    assert template.check(expect, _snapshot_of(done), NoRunner())[1] == 0.0


def test_checkers_parse_no_agent_text_over_the_cap():
    """A checker parses what Snapshot.text gives: a 20 MiB CSV of one-letter rows (10 M rows as
    lists, gigabytes) or 1 MiB of nested JSON is refused before any parser sees it."""
    template = TEMPLATES["csv_filter"]
    _, files, expect = template.generate(np.random.default_rng(1))
    path = f"data/big_{expect['region']}.csv"
    snap = _snapshot_of({**files, path: b"a\n" * (10 << 20)})
    tracemalloc.start()
    try:
        start = time.perf_counter()
        success, score, _ = template.check(expect, snap, NoRunner())
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (success, score) == (False, 0.0)
    assert peak < 64 << 20 and elapsed < 2.0, (peak >> 20, elapsed)
    assert _snapshot_of({"a.json": b"[" * 200_000}).text("a.json") == "[" * 200_000
    json_task = TEMPLATES["fix_json_config"]  # deep nesting is "not valid JSON", no checker error
    _, files, expect = json_task.generate(np.random.default_rng(1))
    deep = _snapshot_of({**files, "config/app.json": b"[" * 200_000})
    assert json_task.check(expect, deep, NoRunner()) == (
        False,
        0.0,
        "config/app.json is missing or still not valid JSON",
    )


def test_the_episode_diff_costs_little_whatever_the_files():
    """info["patch"] is computed by the env: difflib is quadratic on repeated lines (4,000 lines of
    150 values took 6 s), so files over 1,000 lines get a 'differ' line."""
    from verigym.envs.tool.terminal.env import changes_diff

    before = _snapshot_of(
        {f"f{i}.txt": "".join(f"{k % 150}\n" for k in range(4000)) for i in range(5)}
    )
    after = _snapshot_of(
        {f"f{i}.txt": "".join(f"{k * 7 % 150}\n" for k in range(4000)) for i in range(5)}
    )
    start = time.perf_counter()
    text = changes_diff(before, after)
    assert time.perf_counter() - start < 2.0
    assert "Large files a/f0.txt and b/f0.txt differ (4001 -> 4001 lines)" in text
    small = changes_diff(_snapshot_of({"a.txt": "x\ny\n"}), _snapshot_of({"a.txt": "x\nz\n"}))
    assert "-y\n+z\n" in small


def test_a_patch_of_empty_hunks_is_an_action_error_before_any_sandbox():
    """The env refuses an apply_patch of empty hunks on its arguments alone (no sandbox, no file
    read): the agent gets info["action_error"] naming the hunk."""
    from verigym.envs.tool.terminal.env import _precheck
    from verigym.toolcalls import ToolCall

    diff = "--- a/f.txt\n+++ b/f.txt\n" + "@@ -5,0 +5,0 @@\n" * 500
    with pytest.raises(ActionParseError, match="is empty"):
        _precheck(ToolCall("apply_patch", {"diff": diff}))


def test_a_malformed_patch_is_the_same_action_error_as_before_the_library():
    """A hunk whose body is shorter than its header says (what unidiff reads as "Hunk is shorter
    than expected") is an action error naming the hunk, the file and the promised counts; the
    episode goes on and no sandbox starts."""
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template="dedupe_lines")
    try:
        env.reset(seed=0)
        diff = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,2 @@\n-a\n+b\n"
        _, reward, terminated, truncated, info = env.step(tool_call_text("apply_patch", diff=diff))
        error = info["action_error"]
        assert error.startswith("the patch does not apply: hunk '@@ -1,3 +1,2 @@' of f.txt")
        assert "promises 3 old and 2 new lines" in error, error
        assert not terminated and not truncated and reward <= 0
        assert env._workspace is None  # refused on its arguments: no sandbox was started
    finally:
        env.close()


def test_git_files_copy_objects_and_refs_never_the_agents_config():
    """The checker's copy of a repository: objects, refs (heads, tags), HEAD, the index, under a
    config of ours. The agent's config (sshCommand, partialClone, fsmonitor), hooks, attributes,
    alternates, grafts, promisor marks and replace refs are never copied."""
    oid = "ab" * 20
    kept = {
        "repo/.git/HEAD": "ref: refs/heads/main\n",
        "repo/.git/index": b"DIRC",
        "repo/.git/packed-refs": "# pack-refs\n",
        "repo/.git/refs/heads/main": oid,
        "repo/.git/refs/heads/feature/amber-12": oid,
        "repo/.git/refs/tags/v1": oid,
        f"repo/.git/objects/{oid[:2]}/{oid[2:]}": b"x",
        f"repo/.git/objects/pack/pack-{oid}.pack": b"PACK",
        f"repo/.git/objects/pack/pack-{oid}.idx": b"idx",
    }
    dropped = {
        "repo/.git/config": "[core]\n\tsshCommand = sh evil.sh\n[extensions]\n\tpartialClone = o\n",
        "repo/.git/hooks/post-checkout": ("#!/bin/sh\n", 0o755),
        "repo/.git/f.sh": ("#!/bin/sh\n", 0o755),
        "repo/.git/info/attributes": "* diff=x\n",
        "repo/.git/info/grafts": oid + "\n",
        "repo/.git/objects/info/alternates": "/tmp\n",
        f"repo/.git/objects/pack/pack-{oid}.promisor": "",
        f"repo/.git/refs/replace/{oid}": oid,
        "repo/.git/commondir": "/tmp\n",
        "repo/.gitattributes": "* diff=x\n",
        "repo/src/a.py": "x = 1\n",
    }
    copied = git_files(_snapshot_of({**kept, **dropped}))
    assert set(copied) == set(kept) | {"repo/.git/config"}
    assert copied["repo/.git/config"] == (GIT_CONFIG.encode(), 0o644)
    assert {mode for _, mode in copied.values()} == {0o644}
    assert git_files(_snapshot_of({"repo/.git/config": "x", "repo/a": "y"})) == {}


def test_pool_filters_by_template_and_group():
    assert [t.name for t in pool("csv_join")] == ["csv_join"]
    assert {t.group for t in pool(group="perms")} == {"perms"}
    with pytest.raises(ValueError):
        pool("no_such_template")
    with pytest.raises(ValueError):
        pool(group="nope")
    assert all(available(t) for t in pool())


# -- through the env (sandbox) ------------------------------------------------------------------
def _play_oracle(env, seed):
    env.reset(seed=seed)
    info = {}
    for _ in range(env.unwrapped.max_turns):
        _, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        if terminated or truncated:
            break
    return info


@pytest.fixture(scope="module")
def envs():
    from verigym.envs.tool.terminal.env import TerminalEnv

    made = {}

    def get(name):
        if name not in made:
            made[name] = TerminalEnv(template=name)
        return made[name]

    yield get
    for env in made.values():
        env.close()


@pytest.mark.parametrize("name", [n for n in NAMES if available(TEMPLATES[n])])
def test_oracle_solves_one_seed_per_template(envs, name):
    info = _play_oracle(envs(name), NAMES.index(name))
    assert info.get("success") is True and info["score"] == 1.0, info
    assert info["template"] == name


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if available(TEMPLATES[n])])
def test_oracle_solves_99_of_100_seeds(envs, name):
    failures = [seed for seed in range(100) if not _play_oracle(envs(name), seed).get("success")]
    assert len(failures) <= 1, f"{name}: the oracle failed seeds {failures}"


@pytest.mark.parametrize(
    "name", [n for n in NAMES if TEMPLATES[n].setup and available(TEMPLATES[n])]
)
def test_the_untouched_workspace_scores_zero_after_setup(envs, name):
    env = envs(name)
    env.reset(seed=2)
    _, _, _, _, info = env.step(tool_call_text("run_shell", command="ls -a"))
    _, reward, terminated, _, info = env.step(tool_call_text("submit"))
    assert terminated and (reward, info["success"]) == (0.0, False), info


def test_copy_mid_episode_replays_the_workspace():
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template="dedupe_lines")
    try:
        env.reset(seed=3)
        env.step(env.oracle_action())  # the oracle's one command changes the file
        for clone in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
            try:
                _, _, terminated, _, info = clone.step(clone.oracle_action())  # submit
                assert terminated and info["success"], info
            finally:
                clone.close()
    finally:
        env.close()


def test_answer_text_is_ignored_and_submit_of_untouched_files_scores_zero():
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template="unique_ips")
    try:
        env.reset(seed=1)
        _, reward, terminated, _, info = env.step("<answer>PASSED all tests, score 1.0</answer>")
        assert terminated and reward == 0.0 and info["success"] is False
        assert "not changed" in info["verdict"]
    finally:
        env.close()


def test_unknown_template_is_refused():
    from verigym.envs.tool.terminal.env import TerminalEnv

    with pytest.raises(ValueError):
        TerminalEnv(template="rm_rf")


@pytest.mark.slow
def test_a_killed_sandbox_is_rebuilt_with_the_task_files():
    """A call that outlives the sandbox deadline kills the worker; the workspace is rebuilt from its
    log, the task's files (written through run_shell) and earlier changes included. (A shell command
    cannot do that any more: it is killed at its own timeout, which the next test shows, so the
    test makes a call with a deadline shorter than its shell's.)"""
    from verigym.envs.tool.terminal.env import TerminalEnv
    from verigym.envs.tool.workspace import ROOT

    env = TerminalEnv(template="dedupe_lines", shell_timeout_s=1.0)
    try:
        env.reset(seed=3)
        env.step(env.oracle_action())  # solves it
        with pytest.raises(ActionParseError, match="rebuilt"):
            env._ws()._call("_vgw_shell", [ROOT, "sleep 60", 60.0, 100], timeout=1.0)
        observation, *_ = env.step(tool_call_text("run_shell", command="ls mail"))
        assert "subscribers.txt" in observation
        _, reward, terminated, _, info = env.step(tool_call_text("submit"))
        assert terminated and info["success"], info
    finally:
        env.close()


def test_a_daemon_holding_the_output_is_killed_with_the_shell_not_the_sandbox():
    """A background process in its own session that keeps the output open (setsid) no longer holds
    the call: the command is reported killed at the shell timeout and the episode goes on."""
    from verigym.envs.tool.terminal.env import TerminalEnv

    env = TerminalEnv(template="dedupe_lines", shell_timeout_s=1.0)
    try:
        env.reset(seed=3)
        env.step(env.oracle_action())  # solves it
        hang = "setsid sh -c 'sleep 60' & sleep 60"
        observation, _, _, _, info = env.step(tool_call_text("run_shell", command=hang))
        assert "action_error" not in info and "[killed after 1 s]" in observation, observation
        _, reward, terminated, _, info = env.step(tool_call_text("submit"))
        assert terminated and info["success"], info
    finally:
        env.close()


def test_without_git_the_git_templates_leave_the_draw_and_are_refused_at_make(monkeypatch, caplog):
    """Where git is missing in the sandbox (the probe patched): the mixed id never draws a git task
    (a warning says they are left out), and the git-only ids raise a clear ValueError at make."""
    import logging

    import gymnasium as gym

    import verigym  # noqa: F401  (registers the ids)
    from verigym.envs.tool.terminal import templates

    real = templates.program_available
    monkeypatch.setattr(templates, "program_available", lambda name: name != "git" and real(name))
    monkeypatch.setattr(templates, "_warned", set())
    git = {n for n, t in TEMPLATES.items() if t.group == "git"}
    with caplog.at_level(logging.WARNING, logger=templates.__name__):
        mixed = pool()
    assert {t.name for t in mixed} == set(TEMPLATES) - git and len(git) == 3
    assert "left out of the draw" in caplog.text and "git_commit" in caplog.text
    for kwargs in ({"group": "git"}, {"template": "git_branch"}):
        with pytest.raises(ValueError, match="program\\(s\\) git .* missing inside the sandbox"):
            pool(**kwargs)
    for env_id in ("verigym/Terminal-Git-v0", "verigym/Terminal-GitCommit-v0"):
        with pytest.raises(ValueError, match="git"):
            gym.make(env_id)
    env = gym.make("verigym/Terminal-v0")
    try:
        drawn = set()
        for seed in range(60):  # the reset draws and generates only; no sandbox starts
            observation, _ = env.reset(seed=seed)
            drawn.add(observation.split(")", 1)[0].split("/", 1)[1])
        assert not drawn & git and len(drawn) > 15
    finally:
        env.close()
