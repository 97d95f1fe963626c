"""The shared Chromium lives as long as its GUI envs (issue 33 §9): closing the last env of a thread
ends the browser and its Playwright driver, the next env relaunches them, and a thread of its own
gets a Chromium of its own that closes with that thread's last env."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.gui

pytest.importorskip("playwright")
try:
    from verigym.envs.gui.browser import chromium_executable

    chromium_executable()
except RuntimeError as exc:  # pragma: no cover - depends on the machine
    pytest.skip(str(exc), allow_module_level=True)

from tests.processes import descendants  # noqa: E402
from verigym.envs.gui.browser import close_shared_browser, close_thread_browser  # noqa: E402
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


def _wait_until_none_left(seconds: float = 10.0) -> dict[int, str]:
    deadline = time.monotonic() + seconds
    while (left := _browser_processes()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def no_browser_before():
    """Start from a process with no browser (an earlier test may have left one on purpose)."""
    close_shared_browser()
    assert not _wait_until_none_left(), "close_shared_browser() left browser processes"
    yield
    close_shared_browser()


def test_closing_the_last_env_ends_the_browser_and_make_again_works(no_browser_before):
    envs = [GuiEnv(task="enter-text"), GuiEnv(task="login")]
    for env in envs:
        env.reset(seed=0)
    assert len(_chromium_mains()) == 1, _browser_processes()
    envs[0].close()
    assert len(_chromium_mains()) == 1, "closing one of two envs must keep the shared browser"
    observation, *_ = envs[1].step(envs[1].oracle_action())  # the other env still works
    assert observation["screenshot"].shape == (256, 256, 3)
    envs[1].close()
    envs[1].close()  # idempotent: no count goes below zero
    assert not _wait_until_none_left(), "a browser process outlived the last GUI env"

    again = GuiEnv(task="login")
    try:
        again.reset(seed=1)
        assert len(_chromium_mains()) == 1
        _, _, terminated, _, _ = again.step(again.oracle_action())
        assert isinstance(terminated, bool)
    finally:
        again.close()
    assert not _wait_until_none_left()


def test_an_env_outlives_the_close_of_a_copy(no_browser_before):
    import copy

    env = GuiEnv(task="click-button")
    try:
        env.reset(seed=3)
        twin = copy.deepcopy(env)
        twin.close()
        _, _, terminated, _, info = env.step(env.oracle_action())
        assert terminated and info["success"] is True
    finally:
        env.close()
    assert not _wait_until_none_left()


def test_each_thread_closes_its_own_browser_with_its_last_env(no_browser_before):
    main_env = GuiEnv(task="login")
    main_env.reset(seed=0)
    seen: dict[str, object] = {}

    def in_thread() -> None:
        try:
            env = GuiEnv(task="enter-text")
            env.reset(seed=0)
            seen["both"] = len(_chromium_mains())
            env.close()
            deadline = time.monotonic() + 10
            while len(_chromium_mains()) > 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            seen["after"] = len(_chromium_mains())
            close_thread_browser()  # nothing left to close: a no-op
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            seen["error"] = exc

    try:
        worker = threading.Thread(target=in_thread)
        worker.start()
        worker.join(120)
        assert "error" not in seen, seen.get("error")
        assert seen == {"both": 2, "after": 1}, seen  # the main thread's browser stays
        assert main_env.step(main_env.oracle_action())[0]["screenshot"].shape == (256, 256, 3)
    finally:
        main_env.close()
    assert not _wait_until_none_left()
