"""The episode viewer shows the agent's changes as a diff (issue 30, section 4): the ``patch`` of the
final info is recorded (bounded), rendered with added and removed lines marked, escaped, and cut
with a note when it is huge."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from tests.leaderboards.rows import scored_row
from tests.sandbox.support import needs_sandbox
from verigym.leaderboards.store import ResultsStore
from verigym.leaderboards.trajectories import PATCH_CHARS, Recorder, decode
from verigym.leaderboards.viewer import DIFF_LINES, diff_html, episode_filename, write_viewer

PATCH = (
    "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,4 +1,4 @@\n def f(x):\n"
    "-    return x - 1\n+    return x + 1\n--- a comment line that was removed\n \n"
)


class _Env:
    """Just enough of an env for the recorder (text observations, no frames)."""

    unwrapped = None


def _recorded(patch: Any, *, similarity: float | None = None) -> bytes:
    recorder = Recorder(
        _Env(), object(), env_id="verigym/RepoFix-v0", env_kwargs={}, seed=7, text_view=False
    )
    recorder.reset("the issue", {"instructions": "fix it"})
    info: dict[str, Any] = {"success": True, "score": 1.0, "patch": patch}
    if similarity is not None:
        info["patch_similarity"] = similarity
    recorder.step("<tool_call>...</tool_call>", "done", 1.0, True, False, info)
    return recorder.finish()[0]


def _page(tmp_path: Path, blob: bytes) -> str:
    row = scored_row("oracle", "verigym/RepoFix-v0", 7, 1.0)
    with ResultsStore(tmp_path) as store:
        assert store.add(row, blob)
        index = write_viewer(store, tmp_path)
    return (index.parent / episode_filename(row)).read_text(encoding="utf-8")


def _spans(page: str) -> list[tuple[str, str]]:
    block = re.search(r'<pre class="diff" id="diff">(.*?)</pre>', page, re.S)
    assert block is not None, "no diff block on the page"
    return [
        (kind, html.unescape(text))
        for kind, text in re.findall(r'<span class="(\w+)">(.*?)</span>', block.group(1), re.S)
    ]


def test_a_recorded_patch_renders_as_a_diff_block(tmp_path: Path) -> None:
    page = _page(tmp_path, _recorded(PATCH, similarity=0.875))
    spans = _spans(page)
    assert spans[:3] == [
        ("file", "--- a/pkg/core.py"),
        ("file", "+++ b/pkg/core.py"),
        ("hunk", "@@ -1,4 +1,4 @@"),
    ]
    assert ("del", "-    return x - 1") in spans and ("add", "+    return x + 1") in spans
    # a removed line that starts with "--" is still a removed line (the hunk header counts them)
    assert ("del", "--- a comment line that was removed") in spans
    assert "similarity to the reference patch 0.875" in page
    assert page.index("<h2>Changes</h2>") < page.index("<h2>Transcript</h2>")
    assert 'id="diff-cut"' not in page


@needs_sandbox
def test_a_real_repofix_episode_records_its_patch_and_the_page_shows_it(tmp_path: Path) -> None:
    env = gym.make("verigym/RepoFix-v0")
    recorder = Recorder(
        env, object(), env_id="verigym/RepoFix-v0", env_kwargs={}, seed=7, text_view=False
    )
    try:
        observation, info = env.reset(seed=7)
        recorder.reset(observation, info)
        ended = False
        while not ended:
            action = env.unwrapped.oracle_action()
            observation, reward, terminated, truncated, info = env.step(action)
            recorder.step(action, observation, reward, terminated, truncated, info)
            ended = terminated or truncated
    finally:
        env.close()
    assert info["success"] and info["patch"].startswith("--- a/")
    blob = recorder.finish()[0]
    assert decode(blob)["steps"][-1]["info"]["patch"] == info["patch"]  # kept, though > 512 chars
    spans = _spans(_page(tmp_path, blob))
    assert [k for k, _ in spans].count("add") >= 1 and [k for k, _ in spans].count("del") >= 1
    removed = [t for k, t in spans if k == "del"]
    assert all(t.startswith("-") for t in removed)


def test_script_in_a_patch_is_escaped(tmp_path: Path) -> None:
    evil = PATCH + '+<script>alert("x")</script>\n<img src=x onerror=alert(1)>\n'
    page = _page(tmp_path, _recorded(evil))
    block = page[
        page.index('<pre class="diff"') : page.index("</pre>", page.index('<pre class="diff"'))
    ]
    assert "<script>" not in block and "<img" not in block
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in block
    assert page.count("<script>") == 0  # an episode page runs no script at all


def test_a_huge_patch_is_cut_with_a_note(tmp_path: Path) -> None:
    lines = "".join(f"+line {i}\n" for i in range(40_000))
    huge = f"--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,40000 @@\n{lines}"
    blob = _recorded(huge)
    kept = decode(blob)["steps"][-1]["info"]["patch"]
    assert len(kept) <= PATCH_CHARS + 20 and kept.endswith("[patch cut]\n")  # the recorder's bound
    page = _page(tmp_path, blob)
    assert len(_spans(page)) == DIFF_LINES
    note = re.search(r'<p class="cut" id="diff-cut">(.*?)</p>', page)
    assert note is not None and f"the first {DIFF_LINES:,} of its" in note.group(1)


@pytest.mark.parametrize(
    "patch", ["", "x" * 300_000, "@@ -1,99999999999999999999 +1 @@\n-\n", "\x00\r\n\\"]
)
def test_any_text_renders_bounded(patch: str) -> None:
    out = diff_html(patch)
    assert len(out) < 400_000 and "<script" not in out
    if not patch:
        assert "No file was changed" in out


def test_an_episode_without_a_patch_has_no_changes_section(tmp_path: Path) -> None:
    page = _page(tmp_path, _recorded(12345))  # not text: not a diff, never shown as one
    assert "<h2>Changes</h2>" not in page and 'class="diff"' not in page


def test_terminal_changes_diff_names_modes_binaries_and_odd_names() -> None:
    from verigym.envs.tool.terminal.core import Entry, Snapshot
    from verigym.envs.tool.terminal.env import changes_diff

    before = Snapshot(
        {
            "a.txt": Entry("f", 0o644, b"one\ntwo\n"),
            "run.sh": Entry("f", 0o644, b"echo hi\n"),
            "gone.txt": Entry("f", 0o644, b"bye\n"),
            "keys": Entry("d", 0o755),
            "repo/.git/HEAD": Entry("f", 0o644, b"ref: main\n"),
        }
    )
    after = Snapshot(
        {
            "a.txt": Entry("f", 0o644, b"one\nTWO\n"),
            "run.sh": Entry("f", 0o755, b"echo hi\n"),
            "keys": Entry("d", 0o700),
            "blob.bin": Entry("f", 0o644, b"\xff\x00\xfe"),
            "evil\n+++ b/x": Entry("f", 0o644, b"x\n"),
            "repo/.git/HEAD": Entry("f", 0o644, b"ref: other\n"),
            "new_dir": Entry("d", 0o755),
        }
    )
    diff = changes_diff(before, after)
    assert "-two\n+TWO\n" in diff
    assert "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n" in diff
    assert "old mode 040755\nnew mode 040700\n" in diff  # a folder's mode change
    assert "deleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" in diff
    assert "Binary files /dev/null and b/blob.bin differ" in diff
    assert '"evil\\n+++ b/x"' in diff and "\n+++ b/x\n" not in diff  # a name cannot forge a line
    assert ".git" not in diff and "new_dir" not in diff
    assert changes_diff(before, before) == ""
    many = Snapshot({f"f{i}.txt": Entry("f", 0o644, b"x\n" * 50) for i in range(200)})
    cut = changes_diff(Snapshot(), many, limit=5000)
    assert len(cut) <= 5000 + 20 and cut.endswith("[patch cut]\n")
