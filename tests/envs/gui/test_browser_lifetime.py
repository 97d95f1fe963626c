"""The shared Chromium lives as long as its users (issue 33 §9): closing the last GUI env of a
thread stops the browser and its Playwright driver, and the next env launches them again in a new
driver; ``held()`` (``GuiEnv.shared_resources()``) keeps them across many envs made in a row, and
``verigym check`` holds them across its checks."""

from __future__ import annotations

import copy
import pickle
import threading

import pytest

from tests.envs.gui.support import require_chromium

pytestmark = pytest.mark.gui

require_chromium()

import gymnasium as gym  # noqa: E402

import verigym  # noqa: E402,F401
from tests.processes import descendants  # noqa: E402
from verigym.envs.gui import browser as browser_module  # noqa: E402
from verigym.envs.gui.browser import close_shared_browser, held  # noqa: E402
from verigym.envs.gui.env import GuiEnv  # noqa: E402


def _browser_processes() -> dict[int, str]:
    """This process's Chromium processes and Playwright drivers (pid -> command line)."""
    return {
        pid: command
        for pid, command in descendants().items()
        if "chromium" in command or "run-driver" in command
    }


def _chromium_mains() -> list[int]:
    """The Chromium main processes (not their renderers, not the drivers)."""
    return [
        pid
        for pid, command in _browser_processes().items()
        if "chromium" in command and "--type=" not in command and "run-driver" not in command
    ]


@pytest.fixture
def no_browser(monkeypatch):
    """Start and end with no browser process; counts the driver starts (``starts[0]``)."""
    close_shared_browser()
    assert not _browser_processes(), "close_shared_browser() left browser processes"
    starts = [0]
    start = browser_module._start_driver

    def counted(entry):
        starts[0] += 1
        start(entry)

    monkeypatch.setattr(browser_module, "_start_driver", counted)
    yield starts
    close_shared_browser()


def _solve(env: gym.Env, seed: int) -> dict:
    env.reset(seed=seed)
    for _ in range(env.unwrapped.max_steps):
        _, _, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        if terminated or truncated:
            return info
    raise AssertionError("the episode did not end within max_steps")


def test_make_close_cycles_leave_no_browser_process_and_each_relaunch_works(no_browser):
    """Closing the last env stops Chromium and its driver before close() returns; the next make
    launches a new driver at once (a relaunch into a driver still stopping failed once with
    "Connection closed while reading from the driver"); two relaunches, one per task."""
    for cycle in range(3):
        env = gym.make("verigym/ClickButton-v0" if cycle % 2 else "verigym/EnterText-v0")
        try:
            info = _solve(env, seed=cycle)
            assert info["success"] is True, (cycle, info)
            assert len(_chromium_mains()) == 1, (cycle, _browser_processes())
        finally:
            env.close()
        assert not _browser_processes(), f"cycle {cycle}: left {_browser_processes()}"
        env.close()  # idempotent: no count goes below zero
    assert no_browser[0] == 3


def test_the_browser_stays_while_an_env_or_a_copy_is_open(no_browser):
    envs = [GuiEnv(task="enter-text"), GuiEnv(task="login")]
    for env in envs:
        env.reset(seed=0)
    envs += [pickle.loads(pickle.dumps(envs[0])), copy.deepcopy(envs[1])]
    mains = _chromium_mains()
    assert len(mains) == 1
    for env in envs[:3]:
        env.close()
    assert _chromium_mains() == mains, "closing three of four envs must keep the shared browser"
    _, _, terminated, _, info = envs[3].step(envs[3].oracle_action())  # the copy still works
    assert isinstance(terminated, bool) and info["task"] == "login"
    envs[3].close()
    assert not _browser_processes()
    assert no_browser[0] == 1


def test_held_keeps_one_browser_across_many_envs_and_releases_it_at_the_end(no_browser):
    with held():
        assert not _browser_processes(), "a hold alone launches nothing"
        seen = set()
        for task in ("click-button", "enter-text", "login"):
            env = GuiEnv(task=task)
            try:
                assert _solve(env, seed=2)["success"] is True
                seen.update(_chromium_mains())
            finally:
                env.close()
            assert len(_chromium_mains()) == 1, "the hold keeps the browser between envs"
        with GuiEnv.shared_resources():  # nests
            pass
        assert len(seen) == 1 and _chromium_mains() == list(seen)
    assert not _browser_processes(), "leaving the hold with no env open stops the browser"
    assert no_browser[0] == 1


def test_held_reuses_a_closed_envs_page_wiped(no_browser, monkeypatch):
    """Within a hold, the next env takes a closed env's page (no new renderer) after wiping it: a
    new JavaScript realm, its own blocked-request count; a page of another viewport is not taken;
    the spares go with the browser."""
    opened = []
    new_page = browser_module.Browser._new_page
    monkeypatch.setattr(
        browser_module.Browser, "_new_page", lambda self: opened.append(1) or new_page(self)
    )
    with held():
        first = GuiEnv(task="click-button")
        first.reset(seed=0)
        page = first.unwrapped._browser._page
        first.unwrapped._browser.evaluate("() => { window.leftOver = 1; }")
        first.unwrapped._browser.blocked.append("http://example.invalid/")
        first.close()
        second = GuiEnv(task="enter-text")
        other_size = GuiEnv(task="enter-text", viewport_width=320)
        try:
            second.reset(seed=0)
            other_size.reset(seed=0)
            assert second._browser._page is page and other_size._browser._page is not page
            assert second._browser.evaluate("() => typeof window.leftOver") == "undefined"
            assert second.step(second.oracle_action())[4]["blocked_requests"] == 0
            assert len(opened) == 2, "one new page per viewport"
        finally:
            second.close()
            other_size.close()
    assert not _browser_processes()


def test_each_thread_stops_its_own_browser_with_its_last_env(no_browser):
    main_env = GuiEnv(task="login")
    main_env.reset(seed=0)
    seen: dict[str, object] = {}

    def in_thread() -> None:
        try:
            env = GuiEnv(task="enter-text")
            env.reset(seed=0)
            seen["both"] = len(_chromium_mains())
            env.close()
            seen["after"] = len(_chromium_mains())
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            seen["error"] = exc

    try:
        worker = threading.Thread(target=in_thread)
        worker.start()
        worker.join(120)
        assert seen == {"both": 2, "after": 1}, seen  # the main thread's browser stays
        assert main_env.step(main_env.oracle_action())[0]["screenshot"].shape == (256, 256, 3)
    finally:
        main_env.close()
    assert not _browser_processes()


def test_verigym_check_launches_the_browser_once_and_leaves_none(no_browser):
    from verigym.checker import check_env

    report = check_env("verigym/ClickButton-v0", steps=3, checks=["reset_leak", "close_twice"])
    assert report.passed, report.format()
    assert no_browser[0] == 1, "the checker holds the browser across its envs (shared_resources)"
    assert not _browser_processes()


def test_a_leaderboard_worker_holds_the_browser_across_its_gui_tasks(no_browser):
    """The runner's per-worker player switches envs between tasks: one launch for all of them."""
    from verigym.leaderboards.episode import EpisodePlayer, Job

    player = EpisodePlayer("oracle")
    try:
        for env_id in ("verigym/ClickButton-v0", "verigym/EnterText-v0", "verigym/ClickButton-v0"):
            result = player(Job(env_id, {}, seed=1, time_limit_s=60))
            assert result.get("success") is True, result
        assert no_browser[0] == 1
    finally:  # not player.close(): it ends every process of this one (the test runner's too)
        player.env.close()
        player.resources.close()
    assert not _browser_processes()


def test_a_driver_not_told_apart_at_its_start_is_still_ended(no_browser, monkeypatch):
    """When the new driver's pid could not be found at its start, the stop ends the driver children
    of this process that no other browser owns (and waits for them)."""
    start = browser_module._start_driver

    def untold(entry):
        start(entry)
        entry.driver_pid = None

    monkeypatch.setattr(browser_module, "_start_driver", untold)
    env = GuiEnv(task="click-button")
    try:
        env.reset(seed=0)
        assert _chromium_mains()
    finally:
        env.close()
    assert not _browser_processes()
