"""A page whose script never returns ends the episode, never the evaluation (issue 38, item 1).

Every call into a GUI env's page is bounded (``Browser.call_timeout``): a renderer stuck in
``while (true) {}`` makes the step end the episode as truncated with success False,
``info["page_timeout"]`` and ``info["action_error"]``, and the next ``reset`` opens a fresh page
that plays to success. Without the bound the step blocks for ever: ``pytest-timeout`` fails the
test then.
"""

from __future__ import annotations

import time

import pytest

from tests.envs.gui.support import require_chromium

pytestmark = pytest.mark.gui

require_chromium()

from verigym.envs.gui.browser import Browser, held  # noqa: E402
from verigym.envs.gui.env import GuiEnv  # noqa: E402

HANG_LIMIT_S = 1.5
"""The bound these tests set for the step that hangs (the default is 20 s)."""


@pytest.fixture(scope="module", autouse=True)
def _browser_held():
    with held():  # one Chromium for the module (a launch is 1-10 s)
        yield


@pytest.mark.timeout(120)
def test_a_click_whose_handler_never_returns_truncates_the_episode_and_reset_recovers():
    env = GuiEnv(task="click-button")
    try:
        env.reset(seed=3)
        hung = env._browser._page
        env._browser.evaluate(
            "() => { document.addEventListener('mousedown', () => { while (true) {} }, true);"
            " return true }"
        )
        env._browser.call_timeout = HANG_LIMIT_S
        start = time.monotonic()
        _, reward, terminated, truncated, info = env.step(env.oracle_action())
        waited = time.monotonic() - start
        assert truncated and not terminated and reward == 0.0
        assert info["success"] is False and info["score"] == 0.0
        assert info["page_timeout"] is True and "did not answer" in info["action_error"]
        assert waited < 60  # the bound, not the page, ended the step
        assert hung.is_closed()  # the hung page's context is closed, never kept as a spare
        del env._browser.call_timeout  # back to the class default for the fresh page
        env.reset(seed=3)
        assert env._browser._page is not hung
        for _ in range(env.max_steps):
            _, reward, terminated, truncated, info = env.step(env.oracle_action())
            if terminated or truncated:
                break
        assert info["success"] is True and reward == 1.0
    finally:
        env.close()


CALLS = {
    "script": lambda browser: browser.evaluate("() => 1"),
    "screenshot": lambda browser: browser.screenshot(),
    "key": lambda browser: browser.press("Tab"),
    "click": lambda browser: browser.click(1, 1),
    "text": lambda browser: browser.insert_text("x"),
    "scroll": lambda browser: browser.scroll(10),
}


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", sorted(CALLS))
def test_every_kind_of_page_call_is_bounded(kind):
    """A timer that loops for ever blocks every kind of call into the page: each raises
    ``PageTimeout`` within its bound; later calls fail at once, and the next page answers."""
    from verigym.envs.gui.browser import BrowserCrashed, PageTimeout

    browser = Browser(128, 128)
    try:
        browser.launch()
        browser.evaluate("() => { setTimeout(() => { while (true) {} }, 50); return 1 }")
        time.sleep(0.3)
        browser.call_timeout = HANG_LIMIT_S
        with pytest.raises(PageTimeout):
            CALLS[kind](browser)
        assert not browser.alive
        start = time.monotonic()
        with pytest.raises(BrowserCrashed):
            browser.evaluate("() => 1")
        assert time.monotonic() - start < 5  # a hung page is not asked again
    finally:
        browser.close()
    fresh = Browser(128, 128)
    try:
        fresh.launch()
        assert fresh.evaluate("() => 2") == 2
    finally:
        fresh.close()
