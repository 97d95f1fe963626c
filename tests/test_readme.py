"""Every fenced ``python`` block of README.md and of docs/*.md (but docs/design.md) runs as written.

Each block runs in a fresh interpreter (``python -c``) in an empty temporary directory, with a
timeout. A block whose first line is ``# continued from the block above`` is a fragment: it runs
appended to the block before it in the same file (one test per such chain, named after the file
and the first block's line, ``docs/agents.md:L27``).
Blocks that train read their budget from ``VERIGYM_README_STEPS``, which the test sets small.

An HTML comment on the line before a block marks it for pytest: ``<!-- readme-test: slow -->``
(also ``gui``, ``mujoco``), so the default run stays cheap and ``pytest -m slow`` runs the rest
(the blocks that train an SB3 model are slow: 5-15 s of CPU each, in a fresh interpreter);
``steps=N`` there sets that block's ``VERIGYM_README_STEPS`` (GRPO steps are not env steps).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCUMENTS = (README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "design.md"))
"""The files whose examples run: the README and the docs beside it (design.md holds contracts, not
examples)."""
CONTINUED = "# continued from the block above"
STEPS = "2048"
"""The ``VERIGYM_README_STEPS`` the test sets: two PPO updates of 8 envs x 128 steps."""
TIMEOUT_S = 300
SLOW_TIMEOUT_S = 3600
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_MARK = re.compile(r"<!--\s*readme-test:\s*([a-z0-9=_ ,]+?)\s*-->\s*$")
_MARKERS = {"slow", "gui", "mujoco", "gpu"}
_STEPS = re.compile(r"^steps=(\d+)$")


@dataclass(frozen=True)
class Block:
    """One runnable unit of a document: a block and the fragments that continue it."""

    line: int
    """1-based line of the opening fence of the first block."""
    code: str
    marks: frozenset[str]
    steps: str = STEPS
    """``VERIGYM_README_STEPS`` for this block (``steps=N`` in its marker comment)."""
    source: str = "README.md"
    """The document's path relative to the repository root."""


def readme_blocks(text: str, source: str = "README.md") -> list[Block]:
    """The python blocks of one document, fragments joined to the block they continue.

    Args:
        text: the document's Markdown.
        source: its path relative to the repository root, for the blocks and the errors.

    Raises:
        ValueError: the first block is a fragment, or a block carries an unknown marker.
    """
    blocks: list[Block] = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.search(before)
        words = set(re.split(r"[ ,]+", mark.group(1))) if mark else set()
        steps = [w for w in words if _STEPS.match(w)]
        marks = frozenset(words - set(steps))
        if marks - _MARKERS:
            raise ValueError(
                f"{source}:{line}: unknown readme-test markers {sorted(marks - _MARKERS)}"
            )
        code = match.group(1)
        if code.lstrip().startswith(CONTINUED):
            if not blocks:
                raise ValueError(f"{source}:{line}: the first python block cannot continue another")
            last = blocks.pop()
            blocks.append(
                Block(
                    last.line,
                    last.code + code,
                    last.marks | marks,
                    _STEPS.match(steps[0]).group(1) if steps else last.steps,
                    source,
                )
            )
        else:
            blocks.append(
                Block(
                    line,
                    code,
                    marks,
                    _STEPS.match(steps[0]).group(1) if steps else STEPS,
                    source,
                )
            )
    return blocks


def document_blocks() -> list[Block]:
    """The python blocks of every file of :data:`DOCUMENTS`, in that order."""
    return [
        block
        for path in DOCUMENTS
        for block in readme_blocks(
            path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix()
        )
    ]


_BLOCKS = document_blocks()


def _param(block: Block) -> object:
    return pytest.param(
        block,
        id=f"{block.source}:L{block.line}",
        marks=[getattr(pytest.mark, m) for m in sorted(block.marks)],
    )


def test_readme_has_python_blocks():
    assert len(_BLOCKS) >= 15
    assert all(CONTINUED not in b.code.split("\n", 1)[0] for b in _BLOCKS)
    sources = {b.source for b in _BLOCKS}
    without = {"docs/benchmarks.md", "docs/security.md"}  # figures and guarantees, no examples
    assert {p.relative_to(ROOT).as_posix() for p in DOCUMENTS} - without <= sources


@pytest.mark.parametrize("block", [_param(b) for b in _BLOCKS])
def test_readme_block_runs(block: Block, tmp_path: Path):
    env = dict(os.environ, VERIGYM_README_STEPS=block.steps, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    env.setdefault("MUJOCO_GL", "egl")
    timeout = SLOW_TIMEOUT_S if "slow" in block.marks else TIMEOUT_S
    where = f"{block.source}:{block.line}"
    try:
        done = subprocess.run(
            [sys.executable, "-c", block.code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}: the block did not finish within {timeout} s")
    assert done.returncode == 0, f"{where} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def test_fragments_are_joined_and_marked(tmp_path: Path):
    text = "\n".join(
        [
            "```python",
            "x = 1",
            "```",
            "text",
            "<!-- readme-test: slow steps=3 -->",
            "```python",
            CONTINUED,
            "print(x)",
            "```",
            "```python",
            "y = 2",
            "```",
        ]
    )
    first, second = readme_blocks(text, "docs/x.md")
    assert first.source == second.source == "docs/x.md"
    assert (
        first.line == 1
        and "x = 1" in first.code
        and "print(x)" in first.code
        and first.marks == {"slow"}
    )
    assert first.steps == "3" and second.steps == STEPS
    assert second.code == "y = 2\n" and second.marks == frozenset()
    with pytest.raises(ValueError, match="docs/x.md:1: the first python block cannot continue"):
        readme_blocks("```python\n" + CONTINUED + "\n```\n", "docs/x.md")
    with pytest.raises(ValueError, match="unknown readme-test markers"):
        readme_blocks("<!-- readme-test: fast -->\n```python\nx = 1\n```\n")


def test_license_matches_pyproject():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^license = (\{ *text = )?"Apache-2\.0"', pyproject, re.M), (
        "pyproject.toml declares another license"
    )
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 150


def _env_docs_generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_env_docs", ROOT / "scripts/gen_env_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_environments_doc_is_generated_from_verigym_list():
    """docs/environments.md's id tables are what scripts/gen_env_docs.py writes from
    ``verigym list --json`` now: a registered, renamed or removed id makes this fail."""
    gen = _env_docs_generator()
    text = gen.DOC.read_text(encoding="utf-8")
    assert gen.render(text, gen.list_json()) == text, (
        "docs/environments.md is stale: run python scripts/gen_env_docs.py"
    )


def test_env_tables_group_by_family_and_leave_plugins_out():
    gen = _env_docs_generator()
    rows = [
        {"id": "acme/Sum-v0", "family": "text", "api": "gymnasium", "step_limit": "1"},
        {"id": "verigym/RG-Gcd-v0", "family": "text", "api": "gymnasium", "step_limit": "-"},
        {"id": "verigym/B-v0", "family": "grid", "api": "gymnasium", "step_limit": "9"},
        {"id": "verigym/A-v0", "family": "text", "api": "aec", "step_limit": "5"},
    ]
    for row, description in zip(rows, ["sum", "gcd", "a | b", "first"]):
        row["description"] = description
    out = gen.tables(rows)
    assert "acme/" not in out and out.startswith("3 ids.")
    assert out.index("### text (2 ids)") < out.index("`verigym/A-v0` | aec | 5 | first")
    assert out.index("<details>") < out.index("`verigym/RG-Gcd-v0`") < out.index("### grid (1 ids)")
    assert "| `verigym/B-v0` | gymnasium | 9 | a \\| b |" in out
    with pytest.raises(ValueError, match="must hold the lines"):
        gen.render("no markers here", rows)
    doc = gen.render(f"{gen.BEGIN}\n{gen.END}\n", rows)
    unknown = [{**r, "step_limit": "?"} if r["id"] == "verigym/B-v0" else r for r in rows]
    assert gen.render(doc, unknown) == doc  # an env not made here keeps its stated limit
    new = {**rows[3], "id": "verigym/C-v0", "step_limit": "?"}
    assert "| `verigym/C-v0` | aec | ? |" in gen.render(doc, [new])  # nothing stated: kept unknown
    assert "`verigym/B-v0`" not in gen.render(doc, rows[:2])  # a removed id leaves the table
