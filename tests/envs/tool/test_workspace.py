"""The sandboxed workspace: its tools, path confinement, the unified-diff applier."""

from __future__ import annotations

import time

import pytest

from tests.sandbox.support import needs_sandbox, no_sandbox_left_behind  # noqa: F401 (autouse fixture)
from verigym.core import ActionParseError
from verigym.envs.tool.workspace import (
    MAX_MATCH_LINES,
    MAX_PATCH_HUNKS,
    ROOT,
    SHELL_GRACE_S,
    PatchError,
    Workspace,
    apply_unified_diff,
    parse_unified_diff,
    unified_diff,
)
from verigym.toolcalls import ToolCall

FILES = {
    "pkg/__init__.py": "",
    "pkg/core.py": "def double(x):\n    return x * 3\n\n\ndef name():\n    return 'core'\n",
    "tests/__init__.py": "",
    "tests/test_core.py": (
        "import unittest\nfrom pkg.core import double\n\n\nclass T(unittest.TestCase):\n"
        "    def test_double(self):\n        self.assertEqual(double(4), 8)\n"
    ),
}


# -- the pure-Python diff applier (no sandbox) ------------------------------------------------------


def test_diff_round_trip_and_moved_hunk():
    old = {"a.py": "".join(f"line {i}\n" for i in range(1, 40))}
    new = {"a.py": old["a.py"].replace("line 20\n", "line twenty\n")}
    diff = unified_diff(old, new)
    ((path_a, path_b, hunks),) = parse_unified_diff(diff)
    assert (path_a, path_b) == ("a.py", "a.py")
    assert apply_unified_diff(old["a.py"], hunks) == new["a.py"]
    shifted = "extra\nextra\n" + old["a.py"]  # the file grew above the hunk: found nearby
    assert apply_unified_diff(shifted, hunks) == "extra\nextra\n" + new["a.py"]


def test_diff_mismatch_names_the_line():
    ((_, _, hunks),) = parse_unified_diff("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n")
    with pytest.raises(PatchError, match="expects 'a'"):
        apply_unified_diff("z\nc\n", hunks, "x")
    with pytest.raises(PatchError, match="before any"):
        parse_unified_diff("@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(PatchError, match="promises"):
        parse_unified_diff("--- a/x\n+++ b/x\n@@ -1,3 +1,2 @@\n-a\n+b\n")


GIT_DIFF = """diff --git a/n b/n
new file mode 100644
index 0000000..3e75765
--- /dev/null
+++ b/n
@@ -0,0 +1 @@
+new
diff --git a/x b/x
old mode 100644
new mode 100755
index 1c943a9..36ef1ba
--- a/x
+++ b/x
@@ -1,3 +1,3 @@
 a
-b
+B
 c
\\ No newline at end of file
diff --git a/y b/y2
similarity index 100%
rename from y
rename to y2
diff --git a/z b/z
index 87ae6b6..22f6b3b 100644
Binary files a/z and b/z differ
"""


def test_a_git_diff_parses_to_its_text_hunks_only():
    """``git diff`` output: a new file and a changed one with their hunks; the rename without
    content and the binary file have no '---'/'+++' lines and are left out."""
    assert parse_unified_diff(GIT_DIFF) == [
        (None, "n", [(0, ["+new"])]),
        ("x", "x", [(1, [" a", "-b", "+B", " c"])]),
    ]


def test_malformed_diffs_are_patch_errors_that_say_where():
    with pytest.raises(PatchError, match="over 9 digits"):
        parse_unified_diff("--- a/x\n+++ b/x\n@@ -1,1234567890 +1 @@\n-a\n")
    with pytest.raises(PatchError, match=r"line 7: unexpected hunk found \(a hunk must follow"):
        parse_unified_diff("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\nprose\n@@ -5 +5 @@\n-c\n+d\n")
    with pytest.raises(
        PatchError, match="hunk '@@ -1,2 \\+1,2 @@' of x: the header promises 2 old"
    ):
        parse_unified_diff("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\nnot a hunk line\n")
    with pytest.raises(PatchError, match="no file header found"):
        parse_unified_diff("just some text\n")


BIG = "".join(f"line {i}\n" for i in range(131_000))


def test_empty_hunks_and_too_many_hunks_are_refused_at_once():
    """Issue 43: 1,135 empty hunks over a 131k-line file took 7 s of env-process CPU."""
    start = time.perf_counter()
    with pytest.raises(PatchError, match="is empty"):
        parse_unified_diff("--- a/f\n+++ b/f\n" + "@@ -5,0 +5,0 @@\n" * 1135)
    many = "".join(f"@@ -{i + 1},1 +{i + 1},1 @@\n-line {i}\n+LINE\n" for i in range(1001))
    with pytest.raises(PatchError, match=f"more than {MAX_PATCH_HUNKS} hunks"):
        parse_unified_diff("--- a/f\n+++ b/f\n" + many)
    with pytest.raises(PatchError, match="more than 100 files"):
        parse_unified_diff("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n" * 101)
    assert time.perf_counter() - start < 2.0


def test_patch_cost_is_linear_in_the_file_whatever_the_hunk_count():
    """The bound's worth of hunks over a 131k-line file: each hunk no longer re-splits the whole
    file (before: 52 s on a loaded 2-core machine; now ~0.1 s)."""
    diff = "--- a/f\n+++ b/f\n" + "".join(
        f"@@ -{i * 100 + 1},1 +{i * 100 + 1},1 @@\n-line {i * 100}\n+LINE {i * 100}\n"
        for i in range(MAX_PATCH_HUNKS)
    )
    ((_, _, hunks),) = parse_unified_diff(diff)
    start = time.perf_counter()
    out = apply_unified_diff(BIG, hunks)
    assert time.perf_counter() - start < 3.0
    assert out.count("LINE ") == MAX_PATCH_HUNKS and len(out.splitlines()) == 131_000


def test_the_nearby_search_is_bounded():
    """Hunks stated 200 lines before their place make every hunk try ~400 places: the search stops
    at MAX_MATCH_LINES compared lines with a clear error."""
    text = "".join("b\n" if k % 1000 == 999 else "a\n" for k in range(131_000))
    body = " a\n" * 39 + " b\n"
    diff = "--- a/f\n+++ b/f\n" + "".join(
        f"@@ -{i * 1000 + 761},40 +{i * 1000 + 761},40 @@\n{body}" for i in range(130)
    )
    ((_, _, hunks),) = parse_unified_diff(diff)
    assert 130 * 400 * 40 > MAX_MATCH_LINES
    start = time.perf_counter()
    with pytest.raises(PatchError, match="would compare more than"):
        apply_unified_diff(text, hunks, "f")
    assert time.perf_counter() - start < 3.0
    assert apply_unified_diff(text, hunks[:5], "f") == text  # a few such hunks still apply


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "", ".", "a;b|c"])
def test_paths_outside_the_workspace_are_refused(path):
    with pytest.raises(ActionParseError):
        Workspace.resolve(path)


def test_paths_inside_are_normalized():
    assert Workspace.resolve(f"{ROOT}/pkg/./core.py") == "pkg/core.py"
    assert Workspace.resolve("pkg/sub/../core.py") == "pkg/core.py"


# -- in the sandbox -------------------------------------------------------------------------------


@needs_sandbox
def test_tools_in_the_sandbox():
    ws = Workspace(test_command="python -m unittest discover -s tests -t . -q", shell_timeout_s=3)
    try:
        ws.reset(FILES)
        assert "FAILED" in ws.run_tests()
        assert "    2      return x * 3" in ws.read_file("pkg/core.py", 2, 2)
        diff = "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,2 @@\n def double(x):\n-    return x * 3\n+    return x * 2\n"
        assert ws.call_tool(ToolCall("apply_patch", {"diff": diff})) == "patched pkg/core.py"
        out = ws.run_tests()
        assert "OK" in out and "[exit status 0]" in out
        with pytest.raises(ActionParseError, match="does not apply"):
            ws.apply_patch(diff)  # already applied: the old line is gone
        assert ws.write_file("notes/a.txt", "hi\n") == "wrote notes/a.txt (1 lines)"
        assert ws.snapshot()["notes/a.txt"] == "hi\n"
        long = ws.run_shell("seq 1 20000")
        assert "[output cut:" in long and "[exit status 0]" in long
        assert "[killed after 0.5 s]" in ws.run_shell("sleep 5", timeout_s=0.5)
        ws.run_shell("ln -s /etc etc_link")
        with pytest.raises(ActionParseError, match="leaves the workspace"):
            ws.read_file("etc_link/passwd")
        assert "etc_link" not in ws.snapshot()  # links are never read out
        ws.reset(FILES)  # a new episode: nothing of the last one is left
        assert "notes/a.txt" not in ws.snapshot()
        assert "return x * 3" in ws.read_text("pkg/core.py")
    finally:
        ws.close()


@needs_sandbox
def test_a_copied_workspace_holds_the_same_tree():
    import copy
    import pickle

    ws = Workspace()
    copies = []
    try:
        ws.reset(FILES)
        ws.write_file("pkg/new.py", "X = 1\n")
        ws.run_shell("echo made > notes.txt")
        copies = [copy.deepcopy(ws), pickle.loads(pickle.dumps(ws))]
        for clone in copies:
            assert clone.snapshot() == ws.snapshot()
            assert clone.snapshot()["notes.txt"] == "made\n"
    finally:
        for item in (ws, *copies):
            item.close()


@needs_sandbox
def test_reset_reuses_only_an_untouched_sandbox():
    ws = Workspace()
    try:
        ws.reset(FILES)
        first = ws.sandbox.worker_pid
        ws.read_file("pkg/core.py")  # reading runs nothing of the agent's
        ws.reset({"other.txt": "x\n"})
        assert ws.sandbox.worker_pid == first and sorted(ws.snapshot()) == ["other.txt"]
        ws.run_shell("true")
        ws.reset(FILES)
        second = ws.sandbox.worker_pid
        assert second != first  # a tool ran: a new sandbox
        ws.sandbox.run("open('/tmp/outside', 'w').close()")  # someone used the sandbox directly
        ws.reset(FILES)
        assert ws.sandbox.worker_pid != second
    finally:
        ws.close()


@needs_sandbox
def test_a_sandbox_that_dies_is_rebuilt_from_the_log():
    ws = Workspace()
    try:
        ws.reset(FILES)
        ws.write_file("pkg/new.py", "X = 1\n")
        ws.sandbox.run("import os; os._exit(1)")  # the worker dies (as if killed)
        assert ws.read_text("pkg/new.py") == "X = 1\n"
        assert sorted(ws.snapshot()) == sorted([*FILES, "pkg/new.py"])
        with pytest.raises(ActionParseError, match="rebuilt"):  # killed at the call's deadline
            ws._call("_vgw_shell", [ROOT, "touch gone.txt; sleep 5", 10.0, 100], timeout=1.0)
        assert "pkg/new.py" in ws.snapshot() and "gone.txt" not in ws.snapshot()
    finally:
        ws.close()


def test_a_worker_restarted_before_the_first_write_gets_the_helpers_back(monkeypatch):
    """A worker that restarts cold right after the helpers loaded (seen under load: the pause after
    the load could not stop it) has lost them; the reset's first write, with nothing logged to
    replay, loads them again instead of failing with "no function named"."""
    ws = Workspace()
    real = Workspace.load_helpers
    deaths = [1]

    def load_then_die(self):
        real(self)
        if deaths and deaths.pop():
            self.sandbox.run("import os; os._exit(1)")  # the worker dies: the helpers are gone

    monkeypatch.setattr(Workspace, "load_helpers", load_then_die)
    try:
        ws.reset(FILES)
        assert sorted(ws.snapshot()) == sorted(FILES) and not deaths
    finally:
        ws.close()


@needs_sandbox
def test_a_shell_timeout_is_the_tools_observation_never_a_sandbox_death(monkeypatch):
    """The run_shell call's deadline is the shell's timeout + SHELL_GRACE_S, and a background process
    that keeps the output open (a new session: the kill of the shell's group misses it) no longer
    holds the call until the sandbox kills it: the shell is reported killed, the sandbox lives on."""
    ws = Workspace(shell_timeout_s=0.5)
    deadlines = []
    real_call = ws.sandbox.call

    def spy(name, args=(), *, timeout=None):
        if name == "_vgw_shell":
            deadlines.append(timeout)
        return real_call(name, args, timeout=timeout)

    monkeypatch.setattr(ws.sandbox, "call", spy)
    try:
        ws.reset(FILES)
        ws.write_file("kept.txt", "still here\n")
        pid = ws.sandbox.notebook_pid
        out = ws.run_shell("setsid sleep 30 & echo started")  # the daemon holds stdout open
        assert out == "started\n[exit status 0]"
        out = ws.run_shell("(setsid sleep 30 &); echo before; sleep 5")
        assert "before" in out and "[killed after 0.5 s]" in out, out
        assert "[killed after 1 s]" in ws.run_shell("sleep 5", timeout_s=1.0)
        assert ws.sandbox.notebook_pid == pid  # the same worker: no sandbox restart
        assert ws.read_text("kept.txt") == "still here\n"  # nothing was rebuilt
        assert deadlines == [0.5 + SHELL_GRACE_S, 0.5 + SHELL_GRACE_S, 1.0 + SHELL_GRACE_S]
    finally:
        ws.close()
