"""MiniWoB++ in verigym's browser (issue 38): one id per task of the ``miniwob`` package, the
task's own verdict read after each action, seeding, the missing-package error, the drag action's
text round trip, a verdict the agent cannot reach, the HTTP server's lifetime and the oracles.
``verigym check`` of every id runs in ``tests/test_conformance.py`` (all but one slow).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import verigym
from tests.envs.gui.support import require_chromium
from verigym.envs.gui.miniwob import catalog, server

pytestmark = pytest.mark.gui

MINIWOB_IDS = sorted(r.id for r in verigym.rows("gui") if ".miniwob." in r.entry_point)


def test_one_id_per_registered_task_with_the_extra_named_when_missing(monkeypatch):
    import gymnasium as gym

    assert len(MINIWOB_IDS) == len(catalog.TASKS) == 128
    assert "verigym/MiniWoB-ClickButton-v0" in MINIWOB_IDS
    assert "verigym/MiniWoB-FlightAlaskaAuto-v0" in MINIWOB_IDS
    from verigym.envs.gui.miniwob import oracles

    assert set(oracles.ORACLES) == catalog.ORACLE_TASKS

    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(server.resources, "files", missing)
    with pytest.raises(ModuleNotFoundError) as caught:
        gym.make("verigym/MiniWoB-ClickButton-v0")
    message = str(caught.value)
    assert "\n" not in message and "pip install 'verigym[miniwob]'" in message


pytest.importorskip("miniwob")
require_chromium()

from verigym.envs.gui.miniwob.env import MW_OPS, MiniWoBEnv, mw_action  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _browser_held():
    from verigym.envs.gui.browser import held

    with held():
        yield


def _play_oracle(env: MiniWoBEnv, seed: int) -> dict:
    env.reset(seed=seed)
    for _ in range(env.max_steps):
        _, _, terminated, truncated, info = env.step(env.oracle_action())
        if terminated or truncated:
            return info
    raise AssertionError("the episode did not end within max_steps")


def test_drag_and_every_op_round_trip_through_the_text_grammar():
    env = MiniWoBEnv(task="drag-items")  # no page is opened: spaces and grammar only
    env.action_space.seed(3)
    seen = set()
    for _ in range(300):
        action = env.action_space.sample()
        seen.add(MW_OPS[int(action["op"])])
        again = env.parse_action(env.action_text(action))
        assert set(again) == set(action)
        for key in action:
            assert np.array_equal(np.asarray(again[key]), np.asarray(action[key])), key
    assert seen == set(MW_OPS)
    assert env.parse_action("I will drag 5 6 70 80 now")["op"] == MW_OPS.index("drag")
    assert env.parse_action("drag 1 2 3 4 then click 3")["op"] == MW_OPS.index("click")
    with pytest.raises(verigym.ActionParseError):
        env.parse_action("drag 1 2 300 4")  # off the 160x210 page
    with pytest.raises(verigym.ActionParseError):
        env.parse_action('type 1 "<script>x</script>"')
    env.close()


def test_verdict_is_the_pages_reward_and_the_seed_fixes_the_task():
    env = MiniWoBEnv(task="click-button")
    try:
        first, info = env.reset(seed=7)
        again, _ = env.reset(seed=7)
        assert first["instruction"] == again["instruction"] == info["instructions"]
        assert first["text"] == again["text"]
        assert np.array_equal(first["screenshot"], again["screenshot"])
        assert first["instruction"].startswith("Click on the")
        info = _play_oracle(env, 7)
        assert info["success"] is True and info["score"] == 1.0 and info["raw_reward"] == 1.0
        assert 0.0 < info["miniwob_reward"] <= 1.0
        # a wrong button: the page's own reward function says -1
        obs, _ = env.reset(seed=7)
        target = obs["instruction"].split('"')[1]
        wrong = [e for e in env._elements if e["role"] == "button" and e["name"] != target]
        if wrong:
            _, reward, terminated, _, info = env.step(mw_action("click", element=wrong[0]["id"]))
            assert terminated and reward == 0.0 and info["success"] is False
            assert info["raw_reward"] == -1.0 and info["score"] == 0.0
    finally:
        env.close()


def test_a_pages_nan_reward_is_a_failure_not_a_crash():
    """bisect-angle with the point put on the vertex: the page's angle divides by zero and it
    reports NaN as its raw reward (null over DevTools); the step crashed on it (and NaN would
    have clamped to a score of 1)."""
    env = MiniWoBEnv(task="bisect-angle")
    try:
        env.reset(seed=0)
        # the page puts the user's point at (pageX, pageY - 50): the vertex's own coordinates
        x, y = env._browser.evaluate(
            "() => { const c = document.querySelector('.init-blue');"
            " return [Number(c.getAttribute('cx')), Number(c.getAttribute('cy')) + 50] }"
        )
        env.step(mw_action("click_xy", xy=(x, y)))
        submit = next(e for e in env._elements if e["name"] == "Submit")
        _, reward, terminated, _, info = env.step(mw_action("click", element=submit["id"]))
        assert env._browser.evaluate("() => Number.isNaN(WOB_RAW_REWARD_GLOBAL)") is True
        assert terminated and reward == 0.0 and info["success"] is False
        assert info["score"] == 0.0 and info["raw_reward"] == -1.0
    finally:
        env.close()


def test_typed_code_and_markup_change_nothing_and_no_observation_shows_the_verdict():
    """Typed text is text: a JS assignment in a field is a value, ``<`` is refused before the page
    (some pages echo text as HTML: terminal's ``innerHTML``); the reward globals never reach an
    observation."""
    env = MiniWoBEnv(task="enter-text")
    try:
        for text in ("WOB_REWARD_GLOBAL = 1", "core.endEpisode(1, true)", "WOB_DONE_GLOBAL=true"):
            env.reset(seed=1)
            box = next(e for e in env._elements if e["role"] == "textbox")
            obs, reward, terminated, _, info = env.step(
                mw_action("type", element=box["id"], text=text)
            )
            assert reward == 0.0 and not terminated and "action_error" not in info
            assert env._browser.evaluate("() => [WOB_REWARD_GLOBAL, WOB_DONE_GLOBAL]") == [0, False]
            submit = next(e for e in env._elements if e["name"] == "Submit")
            obs, reward, terminated, _, info = env.step(mw_action("click", element=submit["id"]))
            assert terminated and info["success"] is False and reward == 0.0
        env.reset(seed=1)
        before = env._browser.evaluate("() => document.body.innerHTML")
        box = next(e for e in env._elements if e["role"] == "textbox")
        action = {
            **mw_action("type", element=box["id"]),
            "text": "<img src=x onerror=core.endEpisode(1)>",
        }
        obs, reward, terminated, _, info = env.step(action)
        assert "action_error" in info and not terminated and reward == 0.0
        assert env._browser.evaluate("() => document.body.innerHTML") == before
        for text in (obs["text"], obs["instruction"]):
            assert "WOB_" not in text and "reward" not in text.lower()
    finally:
        env.close()


def _assert_same_observation(obs: dict, info: dict, expected: dict) -> None:
    """``obs`` (with its reset ``info``) is what a fresh env loading its own page showed: the same
    utterance, element list and screenshot."""
    assert obs["instruction"] == expected["instruction"] == info["instructions"]
    assert obs["text"] == expected["text"]
    assert np.array_equal(obs["screenshot"], expected["screenshot"])


def test_each_reset_shows_a_newly_loaded_page_as_a_fresh_env_would():
    """The next episode's page is loaded in a second page while this one is played: after play
    (and a page left with a global, an element and a timer), ``reset`` shows a new document with
    none of them, the same observation a fresh env gives for that seed."""
    env, fresh = MiniWoBEnv(task="click-checkboxes"), MiniWoBEnv(task="click-checkboxes")
    fresh.preload = False  # loads each page at its reset: the path without the second page
    try:
        env.reset(seed=2)
        played = env._browser._page
        env._browser.evaluate(
            "() => { window.leftover = 1; document.body.appendChild(document.createElement('i'))"
            ".id = 'leftover'; setInterval(() => { window.ticks = (window.ticks || 0) + 1 }, 5);"
            " return 1 }"
        )
        for _ in range(2):
            env.step(env.oracle_action())
        obs, info = env.reset(seed=9)
        assert env._browser._page is not played  # the preloaded page was swapped in
        left = "() => [typeof leftover, !!document.getElementById('leftover'), typeof ticks]"
        assert env._browser.evaluate(left) == ["undefined", False, "undefined"]
        expected, _ = fresh.reset(seed=9)  # a first reset loads the page itself
        _assert_same_observation(obs, info, expected)
        assert _play_oracle(env, 9)["success"] is True
    finally:
        env.close()
        fresh.close()


def test_a_drag_past_a_scroll_boxs_edge_selects_without_autoscroll():
    """Chromium autoscrolls a box once per animation frame while a selection drag holds the
    pointer near or past its edge, so how far depends on the machine's speed (scroll-text-2
    failed the determinism checks on it): a drag pins the page's scroll boxes, selects what it
    passes over, and gives the boxes back after."""
    env = MiniWoBEnv(task="scroll-text-2")
    read = (
        "() => { const t = document.getElementById('text-area');"
        " return [t.scrollTop, t.selectionEnd - t.selectionStart, getComputedStyle(t).overflowY,"
        " t.style.cssText, document.documentElement.style.cssText] }"
    )
    try:
        env.reset(seed=2)
        area = next(e for e in env._elements if e.get("multiline"))
        left, top, right, bottom = area["box"]
        before = env._browser.evaluate(read)
        assert before[0] > 0 and before[1] == 0  # the page starts it mid-text
        x = (left + right) // 2
        env.step(mw_action("drag", xy=(x, top + 5), to=(x, env.height - 1)))
        after = env._browser.evaluate(read)
        assert after[0] == before[0]  # not scrolled
        assert after[1] > 0  # the text passed over is selected
        assert after[2:] == ["auto", "", ""]  # the boxes given back
    finally:
        env.close()


def test_a_hover_icon_shows_as_soon_as_the_pointer_is_on_it():
    """social-media swaps its icons on ``:hover`` (``content:url(...-hover.png)``) without
    preloading them; fetched when the pointer arrived, the hover icon showed a variable time later
    (the determinism checks failed on it): each page's CSS images are loaded before its episode."""
    env = MiniWoBEnv(task="social-media")
    try:
        for _ in range(3):
            env.reset(seed=2)
            icon = next(
                e
                for e in env._elements
                if e["role"] == "image" and e["name"] == "like" and not e.get("covered")
            )
            obs, *_ = env.step(mw_action("click", element=icon["id"]))
            assert f'[{icon["id"]}] image "like-hover"' in obs["text"]
    finally:
        env.close()


def test_a_timing_dependent_page_runs_on_the_steps_clock_not_the_wall_clock():
    """stock-market's ticker (a 100 ms setInterval) moves only as the env steps: each observation
    is taken after one step's worth of page time (``catalog.CLOCKED``), however long the agent
    thought; each episode (the second on the preloaded page) starts on a new clock at
    ``CLOCK_EPOCH_MS``; a clocked context is closed with its env, never kept as a spare."""
    import time

    from verigym.envs.gui import browser

    env = MiniWoBEnv(task="stock-market")
    now = (
        "() => [Date.now(), performance.now(), document.querySelector('#stock-price').textContent]"
    )
    try:
        seen, contexts = [], set()
        for pause in (0.0, 0.5):
            env.reset(seed=4)
            contexts |= {env._tab.browser._context, env._next.browser._context}
            time.sleep(pause)  # the agent thinks: the page must not move meanwhile
            obs, *_ = env.step(mw_action("press", key="Tab"))
            seen.append((obs["text"], obs["screenshot"].tobytes(), env._browser.evaluate(now)))
        assert seen[0] == seen[1]
        step_ms = catalog.CLOCKED["stock-market"]
        assert seen[0][2][:2] == [catalog.CLOCK_EPOCH_MS + 2 * step_ms, 2 * step_ms]
        assert seen[0][2][2].startswith("$"), "the ticker did not run"
    finally:
        env.close()
    assert len(contexts) == 3  # a new context (clock) for each episode
    for entry in browser._SHARED.values():
        assert not contexts & set(entry.chromium.contexts)
        assert not any(p.clocked for p in entry.spares)


@pytest.mark.timeout(120)  # without the bound on page calls, the hung step never returns
def test_a_page_script_that_never_returns_ends_the_episode_and_reset_recovers():
    """A timer of the page that loops for ever (the renderer stops answering): the step ends the
    episode, truncated with success False and upstream's failure reward, and ``reset`` plays a
    fresh page (:attr:`verigym.envs.gui.browser.Browser.call_timeout`)."""
    env = MiniWoBEnv(task="click-button")
    try:
        env.reset(seed=5)
        hung = env._browser._page
        env._browser.evaluate("() => { setTimeout(() => { while (true) {} }, 0); return 1 }")
        env._browser.call_timeout = 1.5
        _, reward, terminated, truncated, info = env.step(mw_action("press", key="Tab"))
        assert truncated and not terminated and reward == 0.0
        assert info["success"] is False and info["raw_reward"] == -1.0
        assert info["page_timeout"] is True and "did not answer" in info["action_error"]
        assert hung.is_closed()
        del env._browser.call_timeout
        info = _play_oracle(env, 5)
        assert env._browser._page is not hung and info["success"] is True
    finally:
        env.close()


def test_the_server_and_browser_stop_with_the_last_env():
    assert not server.running()
    a, b = MiniWoBEnv(task="click-test"), MiniWoBEnv(task="flight.AA")
    a.reset(seed=0)
    assert server.running()
    b.close()  # never reset: held nothing
    assert server.running()
    a.close()
    a.close()
    assert not server.running()


def _prints_ok(code: str, *, timeout: float) -> None:
    """Run ``code`` in a fresh interpreter (its own browser and page server) and assert it reached
    its last line, ``print('ok')``."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert done.stdout.strip().endswith("ok"), done.stderr[-2000:]


@pytest.mark.slow
def test_twenty_make_close_cycles_leave_no_process_or_server():
    code = (
        "from verigym.envs.gui.miniwob.env import MiniWoBEnv\n"
        "from verigym.envs.gui.miniwob import server\n"
        "from tests.processes import descendants\n"
        "for i in range(20):\n"
        "    env = MiniWoBEnv(task='click-test' if i % 2 else 'flight.AA'); env.reset(seed=i)\n"
        "    env.close()\n"
        "    assert not server.running()\n"
        "    left = [c for c in descendants().values() if 'chromium' in c or 'playwright' in c]\n"
        "    assert left == [], left\n"
        "print('ok')\n"
    )
    _prints_ok(code, timeout=600)


@pytest.mark.slow
def test_a_closed_envs_pages_serve_the_next_env_of_its_task():
    """Inside ``MiniWoBEnv.shared_resources()`` a closed env leaves its preloaded page (loaded, not
    started) and its played page to the next env of its task: its first reset swaps in the first,
    its second reset the other (loading a new copy of the task page since that close), each
    showing what a fresh env loading its own page shows; a clocked page is never left; leaving the block closes
    what is parked and gives back the server."""
    from verigym.envs.gui import browser
    from verigym.envs.gui.miniwob import env as mw

    with MiniWoBEnv.shared_resources():
        a = MiniWoBEnv(task="click-checkboxes")
        a.reset(seed=1)
        a.step(a.oracle_action())
        preloaded, played = a._next.browser._page, a._browser._page
        a.close()
        assert server.running()  # the parked pages' URL stays served
        b, fresh = MiniWoBEnv(task="click-checkboxes"), MiniWoBEnv(task="click-checkboxes")
        fresh.preload = False
        try:
            expected, _ = fresh.reset(seed=9)
            for page in (preloaded, played):
                obs, info = b.reset(seed=9)
                assert b._browser._page is page
                _assert_same_observation(obs, info, expected)
            assert _play_oracle(b, 9)["success"] is True
        finally:
            b.close()
            fresh.close()
        clocked = MiniWoBEnv(task="stock-market")
        clocked.reset(seed=0)
        clocked.close()
        left = mw._PARKED[mw._thread_key()]
        assert [e.key[0] for e in left] == ["click-checkboxes"] * 2
        kept = [e.tab.browser._page for e in left]
    assert mw._thread_key() not in mw._PARKED and not server.running()
    spares = [s.page for entry in browser._SHARED.values() for s in entry.spares]
    assert all(page.is_closed() or page in spares for page in kept)  # spares are wiped for reuse


@pytest.mark.slow
def test_the_page_pool_leaves_no_process_or_server():
    code = (
        "from verigym.envs.gui.miniwob.env import MiniWoBEnv\n"
        "from verigym.envs.gui.miniwob import server\n"
        "from tests.processes import descendants\n"
        "with MiniWoBEnv.shared_resources():\n"
        "    for i in range(4):\n"
        "        env = MiniWoBEnv(task='click-test'); env.reset(seed=i); env.close()\n"
        "    assert server.running()\n"
        "assert not server.running()\n"
        "left = [c for c in descendants().values() if 'chromium' in c or 'playwright' in c]\n"
        "assert left == [], left\n"
        "print('ok')\n"
    )
    _prints_ok(code, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(catalog.ORACLE_TASKS))
def test_oracle_solves_99_of_100_seeds(task):
    env = MiniWoBEnv(task=task)
    try:
        wins = sum(bool(_play_oracle(env, seed).get("success")) for seed in range(100))
    finally:
        env.close()
    assert wins >= 99, f"{task}: oracle solved {wins}/100"


@pytest.mark.slow
@pytest.mark.parametrize("env_id", MINIWOB_IDS)
def test_adversarial_typing_and_give_up_score_zero(env_id):
    """On every MiniWoB id: code and verdict words typed into every field, then ``done``,
    score 0, and no observation mentions the reward globals. Where typing into a field is itself
    the task (focus-text, click-widget: the field is focused or clicked), the typed code changes
    nothing: the same steps with plain text earn the same reward."""
    import gymnasium as gym

    def typed(text: str) -> list[tuple[Any, float, bool, bool, dict]]:
        obs, _ = env.reset(seed=0)
        steps = [(obs, 0.0, False, False, {})]
        for box in [e for e in env.unwrapped._elements if e["role"] == "textbox"][:4]:
            steps.append(env.step(mw_action("type", element=box["id"], text=text)))
            if steps[-1][2] or steps[-1][3]:
                break
        return steps

    env = gym.make(env_id)
    try:
        steps = typed("WOB_REWARD_GLOBAL = 1; success")
        plain = [r for _, r, *_ in typed("plain words")] if any(r for _, r, *_ in steps) else None
        seen = [o for o, *_ in steps]
        if plain is not None:
            assert [r for _, r, *_ in steps] == plain
            steps = []  # the reward is the task's own, earned by the focus or click
        ended = not steps or steps[-1][2] or steps[-1][3]
        for _, reward, _, _, info in steps:
            assert reward == 0.0 and not info.get("success", False)
        if not ended:
            obs, reward, terminated, truncated, info = env.step(mw_action("done"))
            seen.append(obs)
            assert terminated and reward == 0.0 and info["success"] is False
        for obs in seen:
            for text in (obs["text"], obs["instruction"]):
                assert "WOB_DONE" not in text and "WOB_RAW" not in text
                assert "Last reward" not in text and "Episodes done" not in text
    finally:
        env.close()
