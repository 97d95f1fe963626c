"""The HTML standings and episode viewer stay readable with long agent specs and many tasks: short
labels (full spec in a tooltip and on the agent's page), numbers that do not wrap, no sideways
scrolling at 1280 px, no link behind a missing value (issue 29)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.leaderboards.rows import scored_row
from verigym.leaderboards.standings import LABEL_LENGTH, agent_label, compute_standings, render_html
from verigym.leaderboards.store import ResultsStore
from verigym.leaderboards.suite import Suite, Task
from verigym.leaderboards.viewer import write_viewer

LONG = "llm:/home/someone/models/HuggingFaceTB/SmolLM2-1.7B-Instruct-finetuned-on-verigym?temperature=0.7&max_new_tokens=512&families=text,tool"
TASKS = (
    "verigym/GuessNumber-v0",
    "verigym/Treasure-7x7-v0",
    "verigym/DoorKey-5x5-v0",
    "verigym/DoorKey-6x6-v0",
    "verigym/Empty-5x5-v0",
    "verigym/Empty-8x8-v0",
    "verigym/FourRooms-v0",
    "verigym/IceLake-4x4-v0",
    "verigym/Maze-11x11-v0",
    "verigym/Sokoban-6x6-B1-v0",
    "verigym/LavaCrossing-S9N1-v0",
    "verigym/TicTacToe-Random-v0",
)
SUITE = Suite("wide", tuple(Task(env_id, episodes=1) for env_id in TASKS))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A leaderboard page and its episode viewer: two complete entries (one with a long spec) and a
    partial one that played one task (so the others are "—")."""
    out = tmp_path_factory.mktemp("site")
    plays = {
        "random": TASKS,
        LONG: TASKS,
        "ppo:runs/ppo-guess-number-from-a-long-training-run": TASKS[:1],
    }
    with ResultsStore(out) as store:
        for agent, tasks in plays.items():
            for task in SUITE:
                if task.env_id in tasks:
                    assert store.add(
                        scored_row(
                            agent,
                            task.env_id,
                            task.seeds[0],
                            1.0 if agent == LONG else 0.25,
                            suite="wide",
                        )
                    )
        standings = compute_standings(store, SUITE)
        viewer = write_viewer(store, out)
    (out / "leaderboard.html").write_text(
        render_html(standings, episodes_href=viewer.relative_to(out).as_posix()), encoding="utf-8"
    )
    return out


@pytest.mark.parametrize(
    ("spec", "label"),
    [
        ("random", "random"),
        ("ppo:runs/ppo-doorkey", "ppo:ppo-doorkey"),
        ("openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B", "openai:Qwen2.5-7B"),
        ("llm:/models/SmolLM2?temperature=0.7", "llm:SmolLM2?…"),
    ],
)
def test_agent_label_keeps_the_kind_and_the_last_part(spec: str, label: str) -> None:
    assert agent_label(spec) == label


def test_agent_label_is_bounded_for_any_stored_text() -> None:
    for spec in (LONG, "x" * 500, "a:" + "/" * 40, ":" * 30, "k:" + "é" * 60 + "?q"):
        label = agent_label(spec)
        assert 0 < len(label) <= LABEL_LENGTH, (spec, label)


def test_page_shows_short_labels_with_the_full_spec_as_tooltip(site: Path) -> None:
    page = (site / "leaderboard.html").read_text(encoding="utf-8")
    assert f'title="{LONG.replace("&", "&amp;")} (config' in page
    assert f">{agent_label(LONG)}<" in page
    assert f">{LONG.replace('&', '&amp;')}<" not in page  # never the whole spec as cell text
    assert "white-space: nowrap" in page


def test_a_missing_value_is_not_a_link(site: Path) -> None:
    page = (site / "leaderboard.html").read_text(encoding="utf-8")
    assert re.search(r"<a [^>]*>—</a>", page) is None
    assert page.count("<td>—</td>") >= len(TASKS) - 1  # the partial entry's tasks it did not play


@pytest.mark.gui
def test_pages_fit_1280_px_in_chromium(site: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api")
    from verigym.envs.gui.browser import shared_chromium

    # the process's shared Chromium (a second sync_playwright() in a thread that already drives it
    # would be refused), in a context of its own
    context = shared_chromium().new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto((site / "leaderboard.html").as_uri())
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 1280
        label = page.locator("#standings .agent", has_text=agent_label(LONG))
        assert label.inner_text() == agent_label(LONG) and len(label.inner_text()) <= LABEL_LENGTH
        assert label.get_attribute("title").startswith(LONG)
        for cell in page.locator("#per-task tbody td").all()[
            :6
        ]:  # a number never breaks over lines
            assert cell.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"
        page.screenshot(path=str(site / "leaderboard.png"), full_page=True)
        label.click()  # the agent's page: its episodes, with the full spec
        page.wait_for_load_state()
        assert page.inner_text("#count") == str(len(TASKS))
        assert page.inner_text("#agent-spec") == f"agent: {LONG}"
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 1280
        page.screenshot(path=str(site / "episodes.png"), full_page=True)
        page.locator("#episodes tbody tr:visible a").first.click()
        page.wait_for_load_state()
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 1280
        assert page.evaluate(
            "document.querySelector('h1').scrollWidth <= document.querySelector('h1').clientWidth"
        )
        assert LONG in page.inner_text("#agent")
        page.screenshot(path=str(site / "episode.png"), full_page=True)
    finally:
        context.close()
