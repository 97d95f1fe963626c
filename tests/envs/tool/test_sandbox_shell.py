"""The sandbox-side module of the workspace and Terminal (``envs/tool/_sandbox_shell.py``), its
functions called directly in this process on a temporary folder (no sandbox)."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import time

import pytest

from verigym.envs.tool import _sandbox_shell as side
from verigym.envs.tool.terminal.core import (
    MAX_BYTES,
    MAX_FILES,
    host_snapshot,
    tree_command,
    tree_payload,
)
from verigym.envs.tool.workspace import SANDBOX_SOURCE


def test_the_source_sent_is_this_module_and_binds_only_prefixed_functions():
    """What the sandbox loads is the file ruff and these tests read; every function it defines
    in the shared notebook starts with _vg (RepoFix loads its runner into the same namespace)."""
    assert SANDBOX_SOURCE == open(side.__file__, encoding="utf-8").read()
    namespace: dict = {"__name__": "__main__"}
    exec(compile(SANDBOX_SOURCE, "<cell>", "exec"), namespace)  # loaded as a cell: no side effect
    functions = [name for name, value in namespace.items() if callable(value)]
    own = [name for name in functions if getattr(namespace[name], "__module__", "") == "__main__"]
    assert own and all(name.startswith("_vg") for name in own), own


def test_inside_refuses_paths_that_leave_the_root(tmp_path):
    root = str(tmp_path)
    assert side._vgw_inside(root, "a/b.txt") == os.path.join(root, "a/b.txt")
    for rel in ("../x", "a/../../x", "/etc/passwd"):
        with pytest.raises(PermissionError):
            side._vgw_inside(root, rel)
    os.symlink("/etc", tmp_path / "out")
    with pytest.raises(PermissionError):
        side._vgw_inside(root, "out/passwd")


def test_read_write_and_the_workspace_snapshot_skip_links_and_large_files(tmp_path):
    root = str(tmp_path)
    assert side._vgw_write(root, "pkg/a.py", "x = 1\n") == 6
    assert side._vgw_read(root, "pkg/a.py", 100) == {"text": "x = 1\n", "cut": False}
    assert side._vgw_read(root, "pkg/a.py", 3) == {"text": "x =", "cut": True}
    assert side._vgw_read(root, "missing.py", 100) == {"missing": True}
    side._vgw_write(root, "big.txt", "z" * 50)
    side._vgw_write(root, ".git/config", "[core]")
    os.symlink("/etc/passwd", tmp_path / "link")
    taken = side._vgw_snapshot(root, 10, 20)
    assert taken["files"] == {"pkg/a.py": "x = 1\n"}
    assert sorted(taken["skipped"]) == ["big.txt", "link"]
    assert side._vgw_snapshot(root, 10, 100, "pkg")["files"] == {"pkg/a.py": "x = 1\n"}


def test_output_count_says_how_much_was_cut():
    assert side._vgw_count(b"hello", 5, 3) == ("hel", 5)
    # only the first bytes were read: the file's size is the count
    assert side._vgw_count(b"hello", 5000, 3) == ("hel", 5000)
    assert side._vgw_count("é".encode() * 4, 8, 10) == ("éééé", 4)


def test_shell_merges_output_caps_it_and_kills_the_group_at_its_timeout(tmp_path):
    root = str(tmp_path)
    done = side._vgw_shell(root, "echo out; echo err >&2; pwd; exit 3", 10.0, 1000)
    assert done["status"] == 3 and not done["timed_out"]
    assert done["output"].split() == ["out", "err", root]
    long = side._vgw_shell(root, "yes | head -c 5000", 10.0, 100)
    assert len(long["output"]) == 100 and long["chars"] == 5000
    start = time.monotonic()
    killed = side._vgw_shell(root, "sleep 30 & sleep 30", 0.5, 100)
    assert killed["timed_out"] and killed["status"] == -9
    assert time.monotonic() - start < 10.0  # the background sleep holds no pipe open


def test_the_checker_run_reads_stdin_and_reports_a_timeout_as_minus_one(tmp_path, monkeypatch):
    monkeypatch.setattr(side, "_vg_python_links", lambda: None)  # no /tmp/.bin on this machine
    assert side._vg_run("tr a-z A-Z; echo x >&2", str(tmp_path), 10.0, "abc\n") == [0, "ABC\n", ""]
    assert side._vg_run("sleep 30", str(tmp_path), 0.3, "")[0] == -1


def test_write_files_then_snapshot_round_trip_modes_and_never_follow_links(tmp_path):
    root = str(tmp_path / "work")
    files = {"run.sh": ("#!/bin/sh\n", 0o755), "data/a.bin": b"\x00\x01", "t.txt": "hi"}
    assert side._vg_write_files(root, tree_payload(files)) == 3
    os.symlink("/etc/passwd", os.path.join(root, "link"))
    snap = host_snapshot(root)
    assert not snap.error
    assert snap.data("data/a.bin") == b"\x00\x01" and snap.text("t.txt") == "hi"
    assert snap.mode("run.sh") == 0o755 and snap.mode("t.txt") == 0o644
    assert snap.entries["link"].kind == "l" and snap.entries["link"].data is None
    assert stat.S_ISDIR(os.lstat(os.path.join(root, "data")).st_mode)


def test_snapshot_stops_at_its_caps(tmp_path):
    for i in range(5):
        (tmp_path / f"f{i}").write_bytes(b"x" * 10)
    assert "more than 3 entries" in side._vg_snapshot(str(tmp_path), 3, MAX_BYTES)["error"]
    assert "more than 25 bytes" in side._vg_snapshot(str(tmp_path), MAX_FILES, 25)["error"]
    os.symlink(str(tmp_path), str(tmp_path.parent / "h2_as_link"))
    try:
        assert "replaced" in side._vg_snapshot(str(tmp_path.parent / "h2_as_link"), 9, 99)["error"]
    finally:
        os.unlink(str(tmp_path.parent / "h2_as_link"))


def test_snapshot_reads_a_folder_only_up_to_its_entry_cap(tmp_path, monkeypatch):
    """The env reads the agent's tree in its own process: a folder of a million long names (tmpfs
    inodes take no size) listed whole cost it 80 MB and 0.3 s per 300,000 before the cap."""
    for i in range(60):
        (tmp_path / f"f{i:03}").write_bytes(b"")
    read = []
    real_scandir = os.scandir

    class Counted:
        def __init__(self, path):
            self.inner = real_scandir(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.inner.close()

        def __iter__(self):
            for entry in self.inner:
                read.append(entry.name)
                yield entry

    def listdir(path):
        names = [entry.name for entry in real_scandir(path)]
        read.extend(names)
        return names

    monkeypatch.setattr(side.os, "scandir", Counted)
    monkeypatch.setattr(side.os, "listdir", listdir)
    taken = side._vg_snapshot(str(tmp_path), 10, MAX_BYTES)
    assert "more than 10 entries" in taken["error"] and len(read) == 11
    read.clear()
    assert side._vg_snapshot(str(tmp_path), 60, MAX_BYTES)["error"] == ""
    assert len(read) == 60


def test_a_folder_the_snapshot_cannot_list_is_an_error(tmp_path, monkeypatch):
    """Read by a non-root env, a folder of mode 0 hid its files: ``cp`` instead of ``mv`` and a
    ``chmod 000 nested`` passed Terminal's "nothing is left under nested/" guard."""
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "a.txt").write_text("a")
    real_scandir = os.scandir

    def scandir(path):
        if str(path).endswith("/nested"):
            raise PermissionError(13, "Permission denied")  # as for a non-root reader
        return real_scandir(path)

    monkeypatch.setattr(side.os, "scandir", scandir)
    monkeypatch.setattr(side.os, "listdir", lambda path: [e.name for e in scandir(path)])
    taken = side._vg_snapshot(str(tmp_path), MAX_FILES, MAX_BYTES)
    assert "nested is unreadable" in taken["error"], taken


def test_the_module_runs_as_a_script_for_the_fresh_snapshot_and_the_tree_command(tmp_path):
    """The two ways a new interpreter runs the module: ``_vg_fresh_snapshot`` (``-c <source>
    --vg-snapshot``) and :func:`tree_command` (a one-line bootstrap, ``--vg-write-files``)."""
    root = str(tmp_path / "work")
    command = tree_command(root, {"a/b.txt": "hello", "x.sh": ("echo\n", 0o700)})
    assert "def " not in command  # the module travels compressed, not as source text
    env = {"PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin"}
    subprocess.run(
        ["/bin/sh", "-c", command.replace("python3", sys.executable, 1)], env=env, check=True
    )
    assert open(os.path.join(root, "a/b.txt")).read() == "hello"
    assert stat.S_IMODE(os.stat(os.path.join(root, "x.sh")).st_mode) == 0o700
    taken = side._vg_fresh_snapshot(SANDBOX_SOURCE, root, MAX_FILES, MAX_BYTES, 30.0)
    assert taken["error"] == ""
    assert base64.b64decode(taken["entries"]["a/b.txt"][2]) == b"hello"
    assert json.loads(json.dumps(taken)) == side._vg_snapshot(root, MAX_FILES, MAX_BYTES)
    failed = side._vg_fresh_snapshot("raise SystemExit(2)", root, MAX_FILES, MAX_BYTES, 30.0)
    assert failed["entries"] == {} and failed["error"].startswith("snapshot failed")
