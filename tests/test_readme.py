"""Every fenced ``python`` block of README.md runs as written.

Each block runs in a fresh interpreter (``python -c``) in an empty temporary directory, with a
timeout. A block whose first line is ``# continued from the block above`` is a fragment: it runs
appended to the block before it (one test per such chain, named after the first block's line).
Blocks that train read their budget from ``VERIGYM_README_STEPS``, which the test sets small.

An HTML comment on the line before a block marks it for pytest: ``<!-- readme-test: slow -->``
(also ``gui``, ``mujoco``), so the default run stays cheap and ``pytest -m slow`` runs the rest;
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
    """One runnable unit of README.md: a block and the fragments that continue it."""

    line: int
    """1-based line of the opening fence of the first block."""
    code: str
    marks: frozenset[str]
    steps: str = STEPS
    """``VERIGYM_README_STEPS`` for this block (``steps=N`` in its marker comment)."""


def readme_blocks(text: str) -> list[Block]:
    """The README's python blocks, fragments joined to the block they continue.

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
                f"README.md:{line}: unknown readme-test markers {sorted(marks - _MARKERS)}"
            )
        code = match.group(1)
        if code.lstrip().startswith(CONTINUED):
            if not blocks:
                raise ValueError(
                    f"README.md:{line}: the first python block cannot continue another"
                )
            last = blocks.pop()
            blocks.append(
                Block(
                    last.line,
                    last.code + code,
                    last.marks | marks,
                    _STEPS.match(steps[0]).group(1) if steps else last.steps,
                )
            )
        else:
            blocks.append(
                Block(line, code, marks, _STEPS.match(steps[0]).group(1) if steps else STEPS)
            )
    return blocks


_BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))


def _param(block: Block) -> object:
    return pytest.param(
        block, id=f"L{block.line}", marks=[getattr(pytest.mark, m) for m in sorted(block.marks)]
    )


def test_readme_has_python_blocks():
    assert len(_BLOCKS) >= 10
    assert all(CONTINUED not in b.code.split("\n", 1)[0] for b in _BLOCKS)


@pytest.mark.parametrize("block", [_param(b) for b in _BLOCKS])
def test_readme_block_runs(block: Block, tmp_path: Path):
    env = dict(os.environ, VERIGYM_README_STEPS=block.steps, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    env.setdefault("MUJOCO_GL", "egl")
    timeout = SLOW_TIMEOUT_S if "slow" in block.marks else TIMEOUT_S
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
        pytest.fail(f"README.md:{block.line}: the block did not finish within {timeout} s")
    assert done.returncode == 0, (
        f"README.md:{block.line} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )


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
    first, second = readme_blocks(text)
    assert (
        first.line == 1
        and "x = 1" in first.code
        and "print(x)" in first.code
        and first.marks == {"slow"}
    )
    assert first.steps == "3" and second.steps == STEPS
    assert second.code == "y = 2\n" and second.marks == frozenset()
    with pytest.raises(ValueError, match="cannot continue"):
        readme_blocks("```python\n" + CONTINUED + "\n```\n")
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
