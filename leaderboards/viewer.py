"""The episode viewer: static HTML pages (no server) over the stored trajectories.

``write_viewer(store, folder)`` writes ``folder/episodes/index.html`` -- every episode in a table,
filtered by task, agent and success (``index.html#agent=random&task=verigym/GuessNumber-v0&success=1``
opens filtered; the standings page links its scores there) -- and one page per episode with the
verdict, the conversation (system rules, observations as user turns, actions as assistant turns) or
the action/observation table, the per-step rewards and infos, the LLM agent's own messages and
token counts when recorded, and the frames as a filmstrip.

A page shows a trajectory only when it is the one written with its row
(:func:`~verigym.leaderboards.trajectories.bound_trajectory`: the row's digest, and a header naming
the row's env id, seed and kwargs); otherwise it says why and shows none of it. A ``timeout`` or
``error`` row shows no score: it was never replayed.

Where the episode's last ``info`` carries a ``patch`` (the unified diff of the agent's changes that
RepoFix and Terminal compute themselves), the page opens with it as a diff view: file headers,
hunks, added and removed lines coloured, every character escaped (the text is the agent's), cut at
:data:`DIFF_LINES` lines or :data:`DIFF_CHARS` characters with a note saying so.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import pathlib
import re
from collections.abc import Callable
from typing import Any

from verigym.leaderboards.standings import agent_label, task_label
from verigym.leaderboards.store import safe_text
from verigym.leaderboards.trajectories import (
    UnboundTrajectory,
    bound_trajectory,
    chat_messages,
    show_action,
)

__all__ = ["DIFF_CHARS", "DIFF_LINES", "diff_html", "episode_filename", "write_viewer"]

DIFF_CHARS = 100_000
"""Most characters of a patch the episode page shows (the rest is cut, with a note)."""
DIFF_LINES = 2_000
"""Most lines of a patch the episode page shows (the rest is cut, with a note)."""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1, p, code { overflow-wrap: anywhere; }
table { border-collapse: collapse; font-size: 13px; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #f0f0f0; } td.num { text-align: right; white-space: nowrap; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: 12px; }
select { max-width: 16em; }
.turn { border-radius: 8px; padding: 8px 12px; margin: 6px 0; max-width: 60em; }
.system { background: #eee; } .user { background: #e3eefa; } .assistant { background: #fdebd3; margin-left: 3em; }
.role { font-size: 11px; font-weight: bold; text-transform: uppercase; color: #555; }
.ok { color: #1a7f37; font-weight: bold; } .fail { color: #b42318; font-weight: bold; }
.film { display: flex; gap: 6px; overflow-x: auto; } .film figure { margin: 0; font-size: 11px; text-align: center; }
.film img { height: 160px; border: 1px solid #ccc; image-rendering: pixelated; }
label { margin-right: 1.5em; }
.diff { border: 1px solid #ccc; border-radius: 6px; padding: 6px 0; max-width: 80em; }
.diff span { display: block; padding: 0 8px; min-height: 1.2em; }
.diff .add { background: #e6ffec; color: #116329; } .diff .del { background: #ffebe9; color: #82071e; }
.diff .hunk { background: #ddf4ff; color: #0550ae; } .diff .file { font-weight: bold; background: #f6f8fa; }
.diff .note { color: #666; font-style: italic; } .cut { color: #9a6700; }
"""

_FILTER_SCRIPT = """
const params = new URLSearchParams(location.hash.slice(1));
const selects = {task: document.getElementById('task'), agent: document.getElementById('agent'), success: document.getElementById('success')};
for (const [name, box] of Object.entries(selects)) {
  if (params.has(name)) box.value = params.get(name);
  box.addEventListener('change', apply);
}
function apply() {
  let shown = 0;
  for (const row of document.querySelectorAll('#episodes tbody tr')) {
    const keep = Object.entries(selects).every(([name, box]) => box.value === '' || row.dataset[name] === box.value);
    row.style.display = keep ? '' : 'none';
    shown += keep;
  }
  document.getElementById('count').textContent = shown;
  const spec = document.getElementById('agent-spec');
  spec.textContent = selects.agent.value === '' ? '' : 'agent: ' + selects.agent.value;
  const state = new URLSearchParams(Object.entries(selects).filter(([, box]) => box.value !== '').map(([name, box]) => [name, box.value]));
  history.replaceState(null, '', '#' + state.toString());
}
apply();
"""


_UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError)
"""What reading a stored trajectory's values may raise (its layout is checked, not every value):
its page says so instead of showing it."""


def episode_filename(row: Any) -> str:
    """The page name of one episode: a hash of its key (agent spec, config hash, env id, seed)."""
    key = json.dumps([row.agent_spec, row.config_hash, row.env_id, row.seed])
    return f"{hashlib.sha256(key.encode()).hexdigest()[:20]}.html"


def _page(title: str, body: str, script: str = "") -> str:
    tail = f"<script>{script}</script>" if script else ""
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>{body}{tail}</body></html>\n"
    )


def _score_text(row: Any) -> str:
    """A row's score as shown: none for a ``timeout``/``error`` row (it was never replayed)."""
    return f"{row.score:.3f}" if row.status == "ok" else "—"


def _verdict(row: Any) -> str:
    if row.status != "ok":
        return (
            f'<span class="fail">no score</span> &middot; status {html.escape(row.status)}: the episode has no verdict '
            f"(it was not replayed; the standings count it as a failure) &middot; {row.length} steps"
            + (f"<pre>{html.escape(row.error)}</pre>" if row.error else "")
        )
    mark = (
        '<span class="ok">success</span>' if row.success else '<span class="fail">no success</span>'
    )
    text = f"{mark} &middot; score {row.score:.3f} &middot; return {row.episode_return:.3f} &middot; {row.length} steps &middot; status {html.escape(row.status)}"
    if row.error:
        text += f"<pre>{html.escape(row.error)}</pre>"
    return text


def _pre(text: Any) -> str:
    return f"<pre>{html.escape(text if isinstance(text, str) else json.dumps(text))}</pre>"


def _observation_cell(entry: dict[str, Any]) -> str:
    if "text" in entry:
        return _pre(entry["text"])
    observation = entry.get("observation")
    if isinstance(observation, str):
        return _pre(observation)
    return _pre(json.dumps(observation)[:600])


_HUNK = re.compile(r"@@ -\d{1,9}(?:,(\d{1,9}))? \+\d{1,9}(?:,(\d{1,9}))? @@")
_FILE_LINES = (
    "diff --git ",
    "--- ",
    "+++ ",
    "old mode ",
    "new mode ",
    "new file mode ",
    "deleted file mode ",
    "Binary files ",
    "Large files ",
    "index ",
    "similarity ",
    "rename from ",
    "rename to ",
)


def _diff_classes(lines: list[str]) -> list[str]:
    """The kind of each line of a unified diff: ``file``, ``hunk``, ``add``, ``del``, ``ctx`` or
    ``note``. A hunk's header counts its lines, so a removed line that starts with ``--`` is
    still a removed line."""
    kinds, old, new = [], 0, 0
    for line in lines:
        if old > 0 or new > 0:
            head = line[:1]
            if head == "+" and new > 0:
                kinds.append("add")
                new -= 1
                continue
            if head == "-" and old > 0:
                kinds.append("del")
                old -= 1
                continue
            if head in (" ", "") and old > 0 and new > 0:
                kinds.append("ctx")
                old, new = old - 1, new - 1
                continue
            if head == "\\":
                kinds.append("note")
                continue
            old = new = 0  # the hunk ended early: read the line as a header
        match = _HUNK.match(line)
        if match:
            kinds.append("hunk")
            old = int(match.group(1) or 1)
            new = int(match.group(2) or 1)
        elif line.startswith(_FILE_LINES):
            kinds.append("file")
        else:
            kinds.append("note")
    return kinds


def diff_html(patch: str, *, max_chars: int = DIFF_CHARS, max_lines: int = DIFF_LINES) -> str:
    """A unified diff as an HTML block (``<pre class="diff">``, one ``<span>`` a line).

    Args:
        patch: the diff text (untrusted: every character is escaped; any text is accepted).
        max_chars, max_lines: bounds on what is shown; a longer patch is cut and a
            ``<p class="cut">`` says how much of it is shown.

    Returns:
        The HTML; for an empty patch a sentence saying that no file changed.
    """
    if not patch:
        return '<p id="diff-empty">No file was changed.</p>'
    lines = patch[:max_chars].split("\n")
    if lines and lines[-1] == "" and len(patch) <= max_chars:
        lines.pop()  # the newline that ends the last line
    total = patch.count("\n") + (0 if patch.endswith("\n") else 1)
    cut = len(patch) > max_chars or len(lines) > max_lines
    lines = lines[:max_lines]
    spans = "".join(
        f'<span class="{kind}">{html.escape(line) or " "}</span>'
        for line, kind in zip(lines, _diff_classes(lines))
    )
    note = (
        f'<p class="cut" id="diff-cut">The diff is cut: the first {len(lines):,} of its {total:,} lines '
        f"({len(patch):,} characters) are shown.</p>"
        if cut
        else ""
    )
    return f'<pre class="diff" id="diff">{spans}</pre>{note}'


def _changes(doc: dict[str, Any]) -> str:
    """The diff section of an episode page, from the last step whose ``info`` has a ``patch``."""
    for step in reversed(doc.get("steps", [])):
        info = step.get("info") if isinstance(step, dict) else None
        if not isinstance(info, dict) or not isinstance(info.get("patch"), str):
            continue
        similarity = info.get("patch_similarity")
        extra = (
            f" &middot; similarity to the reference patch {similarity:.3f}"
            if isinstance(similarity, (int, float))
            and not isinstance(similarity, bool)
            and 0 <= similarity <= 1  # a 400-digit int does not become a float
            else ""
        )
        return f"<h2>Changes</h2><p>The agent's changes, as the env computed them{extra}.</p>{diff_html(info['patch'])}"
    return ""


def _episode_page(
    row: Any,
    doc: dict[str, Any] | None,
    frames: list[tuple[int, bytes]],
    refused: str = "",
    frames_refused: str = "",
) -> str:
    title = f"{row.env_id} seed {row.seed} — {row.agent_spec}"
    heading = f"{row.env_id} seed {row.seed} — {agent_label(row.agent_spec)}"
    parts = [
        f'<p><a href="index.html">all episodes</a></p><h1 title="{html.escape(title)}">{html.escape(heading)}</h1>',
        f'<p id="agent">agent <code>{html.escape(row.agent_spec)}</code></p>',
        f'<p id="verdict">{_verdict(row)}</p>',
        f"<p>recorded {html.escape(row.created_at)} with verigym {html.escape(row.verigym_version)} ({html.escape(row.git_sha[:12])}), "
        f"config {html.escape(row.config_hash[:12])}, {row.time_s:.2f} s</p>",
        f'<p id="kwargs">env kwargs <code>{html.escape(row.env_kwargs or "(not recorded)")}</code></p>',
    ]
    if refused:
        parts.append(
            f'<p id="unbound" class="fail">The stored trajectory is not shown: {html.escape(refused)}</p>'
        )
        return _page(title, "".join(parts))
    if doc is None:
        parts.append("<p>No trajectory was recorded for this episode.</p>")
        return _page(title, "".join(parts))
    parts.append(_changes(doc))
    if frames_refused:
        parts.append(
            f'<h2>Frames</h2><p id="filmstrip" class="fail">The stored frames are not shown: {html.escape(frames_refused)}</p>'
        )
    elif frames:
        figures = "".join(
            f'<figure><img alt="step {step}" src="data:image/png;base64,{base64.b64encode(png).decode()}"><figcaption>step {step}</figcaption></figure>'
            for step, png in frames
        )
        parts.append(f'<h2>Frames</h2><div class="film" id="filmstrip">{figures}</div>')
    turns = []
    rewards = [s.get("reward") for s in doc.get("steps", [])]
    step_index = 0
    for message in chat_messages(doc):
        extra = ""
        if message["role"] == "assistant" and step_index < len(rewards):
            step = doc["steps"][step_index]
            step_index += 1
            notes = [f"step {step_index}", f"reward {json.dumps(rewards[step_index - 1])}"]
            if step.get("info", {}).get("action_error"):
                notes.append(f"action error: {step['info']['action_error']}")
            if step.get("generation"):
                notes.append(
                    ", ".join(f"{k} {v}" for k, v in step["generation"].items() if k != "token_ids")
                )
            extra = f'<div class="role">{html.escape(" · ".join(str(n) for n in notes))}</div>'
        turns.append(
            f'<div class="turn {message["role"]}"><div class="role">{message["role"]}</div>{_pre(message["content"])}{extra}</div>'
        )
    parts.append(f'<h2>Transcript</h2><div id="transcript">{"".join(turns)}</div>')
    rows = []
    for index, step in enumerate(doc.get("steps", []), 1):
        info = {k: v for k, v in step.get("info", {}).items()}
        rows.append(
            f'<tr><td class="num">{index}</td><td>{_pre(show_action(step["action"]))}</td>'
            f'<td class="num">{html.escape(json.dumps(step.get("reward")))}</td><td>{"terminated" if step["terminated"] else ""}{"truncated" if step["truncated"] else ""}</td>'
            f"<td>{_observation_cell(step)}</td><td>{_pre(json.dumps(info)[:800])}</td></tr>"
        )
    parts.append(
        '<h2>Steps</h2><table id="steps"><thead><tr><th>step</th><th>action</th><th>reward</th><th>end</th><th>observation</th><th>info</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    if doc.get("messages"):
        own = "".join(
            f'<div class="turn {html.escape(m["role"])}"><div class="role">{html.escape(m["role"])}</div>{_pre(m["content"])}</div>'
            for m in doc["messages"]
        )
        parts.append(f"<h2>The agent's own context at the end</h2>{own}")
    return _page(title, "".join(parts))


def _select(name: str, values: list[tuple[str, str]]) -> str:
    options = "".join(
        f'<option value="{html.escape(v)}" title="{html.escape(v)}">{html.escape(label)}</option>'
        for v, label in values
    )
    return (
        f'<label>{name} <select id="{name}"><option value="">all</option>{options}</select></label>'
    )


def write_viewer(
    store: Any,
    folder: str | pathlib.Path,
    rows: list[Any] | None = None,
    *,
    subfolder: str = "episodes",
    task_of: Callable[[Any], str] | None = None,
) -> pathlib.Path:
    """Write the viewer into ``folder/<subfolder>``: exactly ``rows``, nothing else.

    Args:
        store: a :class:`~verigym.leaderboards.store.ResultsStore`.
        folder: the results folder (the standings pages sit beside ``episodes/``).
        rows: the episodes to show (default: every row of the store).
        subfolder: the viewer's folder name (``episodes``; ``verigym leaderboard --suite S``
            writes ``episodes-S``, so a suite's viewer lists the suite's episodes only).
        task_of: a row's task name for the task filter (default :func:`task_label`: the env id,
            with the kwargs when they are not the defaults, as the standings name it).

    Returns:
        The path of ``<subfolder>/index.html``.
    """
    target = pathlib.Path(folder) / subfolder
    target.mkdir(parents=True, exist_ok=True)
    rows = store.rows() if rows is None else rows
    task_of = task_of or (lambda row: task_label(row.env_id, row.env_kwargs))
    lines = []
    for row in rows:
        refused = ""
        try:
            doc = bound_trajectory(store, row)
        except UnboundTrajectory as exc:
            doc, refused = None, str(exc)
        name = episode_filename(row)
        frames, frames_refused = [], ""
        if doc is not None:
            try:
                frames = store.frames(row)
            except ValueError as exc:  # the trajectory is still shown; the frames are not
                frames_refused = safe_text(str(exc))[:500]
        try:
            page = _episode_page(row, doc, frames, refused, frames_refused)
        except _UNREADABLE as exc:  # one episode's bad trajectory never stops the others' pages
            why = (
                f"its trajectory cannot be shown: {type(exc).__name__}: {safe_text(str(exc))[:500]}"
            )
            page = _episode_page(row, None, [], why)
        (target / name).write_text(
            page, encoding="utf-8", errors="backslashreplace"
        )  # text UTF-8 cannot hold (lone surrogates) shown escaped
        task = task_of(row)
        lines.append(
            f'<tr data-task="{html.escape(task)}" data-agent="{html.escape(row.agent_spec)}" data-success="{int(row.success)}">'
            f'<td>{html.escape(task)}</td><td title="{html.escape(row.agent_spec)}">{html.escape(agent_label(row.agent_spec))}</td><td class="num">{row.seed}</td>'
            f"<td>{html.escape(row.status)}</td><td>{'yes' if row.success else 'no'}</td>"
            f'<td class="num"><a href="{name}">{_score_text(row)}</a></td><td class="num">{row.episode_return:.3f}</td>'
            f'<td class="num">{row.length}</td></tr>'
        )
    tasks = sorted({task_of(r) for r in rows})
    agents = sorted({r.agent_spec for r in rows})
    filters = (
        _select("task", [(t, t) for t in tasks])
        + _select("agent", [(a, agent_label(a)) for a in agents])
        + _select("success", [("1", "success"), ("0", "no success")])
    )
    body = (
        f'<h1>Episodes</h1><p>{filters} <span id="count">{len(rows)}</span> shown; open an episode from its score.</p><p id="agent-spec"></p>'
        '<table id="episodes"><thead><tr><th>task</th><th>agent</th><th>seed</th><th>status</th><th>success</th><th>score</th>'
        f"<th>return</th><th>length</th></tr></thead><tbody>{''.join(lines)}</tbody></table>"
    )
    index = target / "index.html"
    index.write_text(
        _page("verigym episodes", body, _FILTER_SCRIPT), encoding="utf-8", errors="backslashreplace"
    )
    return index
