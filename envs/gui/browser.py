"""A headless, offline Chromium page for the GUI environments (Playwright driving the system browser).

Chromium is launched once per process (and thread: Playwright's sync API is per thread) and shared:
each :class:`Browser` is a browser context of that Chromium (its own cookies, storage and cache,
like a fresh incognito profile) with one page of a fixed viewport, so making, copying and pickling
GUI envs costs a context (milliseconds) instead of a Chromium launch (about a second). The shared
Chromium is relaunched when it died and closed at interpreter exit (or by :func:`close_shared_browser`;
:func:`close_thread_browser` for one thread).
Each page is the task shell ``pages/app.html`` with its CSS and
JavaScript inlined, so a task never needs the network: every request the page makes is aborted by a
route handler and recorded in :attr:`Browser.blocked`.

Screenshots go through the DevTools ``Page.captureScreenshot`` command with the compositor's frame
rate limit off (Playwright's own ``page.screenshot`` waits for the next 30 Hz frame); with
animations, transitions and the text caret disabled by the page's CSS, the same actions give
byte-identical screenshots.
"""

from __future__ import annotations

import atexit
import base64
import io
import json
import logging
import os
import shutil
import signal
import threading
import time
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from verigym.workers import descendants

__all__ = [
    "Browser",
    "BrowserCrashed",
    "chromium_executable",
    "close_shared_browser",
    "close_thread_browser",
    "probe",
    "shared_chromium",
]

logger = logging.getLogger(__name__)

SCREENSHOT_RETRY_WAITS = (0.05, 0.2, 1.0, None)
"""Seconds to wait before each retry of a screenshot Chromium could not capture (``None``: give up)."""

CHROMIUM_ARGS = (
    "--no-sandbox",  # root in containers; the page is our own offline content
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-gpu",
    "--disable-gpu-vsync",
    "--disable-frame-rate-limit",
    "--font-render-hinting=none",
    "--force-color-profile=srgb",
    "--hide-scrollbars",
    "--mute-audio",
    "--disable-partial-raster",
    "--num-raster-threads=1",
    "--disable-lcd-text",
    "--disable-smooth-scrolling",  # keyboard scrolling animates otherwise: screenshots would race it
)


class BrowserCrashed(RuntimeError):
    """The Chromium process or its page died; the env ends the episode and relaunches on reset."""


def chromium_executable() -> str:
    """Path of the system Chromium: ``$VERIGYM_CHROMIUM``, else ``chromium`` on ``PATH``.

    Raises:
        RuntimeError: no Chromium is installed (says how to install it).
    """
    path = (
        os.environ.get("VERIGYM_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )
    if not path:
        raise RuntimeError(
            "the GUI envs need the system Chromium: apt-get install -y chromium (and pip install 'verigym[gui]')"
        )
    return path


@lru_cache(maxsize=1)
def app_html() -> str:
    """The task shell with its CSS and JavaScript inlined (read once from the package data)."""
    pages = resources.files("verigym.envs.gui") / "pages"
    html = (pages / "app.html").read_text(encoding="utf-8")
    css = (pages / "app.css").read_text(encoding="utf-8")
    js = (pages / "tasks.js").read_text(encoding="utf-8")
    return html.replace("/*APP_CSS*/", css).replace("/*APP_JS*/", js)


_SHARED: dict[int, tuple[int, Any, Any]] = {}
"""Thread id -> (pid, Playwright driver, Chromium) of the shared Chromium of that thread."""


def shared_chromium() -> Any:
    """This thread's shared Chromium (a Playwright ``Browser``), launched on first use or after it died.

    Raises:
        RuntimeError: Chromium or playwright is missing.
    """
    key = threading.get_ident()
    entry = _SHARED.get(key)
    if entry is not None and entry[0] != os.getpid():  # inherited through fork: not ours to use
        del _SHARED[key]
        entry = None
    if entry is not None and entry[2].is_connected():
        return entry[2]
    executable = chromium_executable()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise RuntimeError("the GUI envs need playwright: pip install 'verigym[gui]'") from exc
    driver = entry[1] if entry is not None else sync_playwright().start()
    try:
        chromium = driver.chromium.launch(
            executable_path=executable, headless=True, args=list(CHROMIUM_ARGS)
        )
    except Exception:
        if entry is None:
            _stop(driver)
            raise
        _stop(driver)  # the driver may have died with the browser: start a new one, once
        driver = sync_playwright().start()
        try:
            chromium = driver.chromium.launch(
                executable_path=executable, headless=True, args=list(CHROMIUM_ARGS)
            )
        except Exception:
            _SHARED.pop(key, None)
            _stop(driver)
            raise
    _SHARED[key] = (os.getpid(), driver, chromium)
    logger.debug("launched the shared %s", executable)
    return chromium


def _stop_browser(chromium: Any) -> None:
    try:
        chromium.close()
    except Exception as exc:  # a dead browser or driver, or another thread's
        logger.debug("ignored while closing the shared browser: %s", exc)


def _stop(driver: Any, chromium: Any = None) -> None:
    for action in (getattr(chromium, "close", None), driver.stop):
        if action is None:
            continue
        try:
            action()
        except Exception as exc:  # a dead browser/driver, or another thread's driver
            logger.debug("ignored while stopping the shared browser: %s", exc)


def _driver_pids() -> list[int]:
    """This process's child processes that are Playwright drivers (node running ``run-driver``)."""
    found = []
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"playwright" in command and b"run-driver" in command:
            found.append(pid)
    return found


def close_shared_browser() -> None:
    """Close this process's shared Chromium processes and Playwright drivers (idempotent).

    Runs at interpreter exit by itself; call it to free the memory earlier. A later GUI env
    relaunches Chromium.
    """
    mine = [(key, entry) for key, entry in _SHARED.items() if entry[0] == os.getpid()]
    if not mine:
        return
    for key, (_, _, chromium) in mine:
        del _SHARED[key]
        _stop_browser(chromium)
    # A process forked since a driver started (a fork-based worker) holds a copy of the driver's
    # stdin, so closing ours never reaches node with an EOF and a graceful stop would wait for
    # ever: end the drivers first, then let Playwright collect them.
    for pid in _driver_pids():
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    for _, (_, driver, _) in mine:
        _stop(driver)


atexit.register(close_shared_browser)


def close_thread_browser() -> None:
    """Close the calling thread's shared Chromium and its Playwright driver (idempotent).

    For a thread that ends (an env server's worker thread): thread ids are reused, and the next
    thread with this id must not find a Playwright driver bound to a dead thread.
    """
    entry = _SHARED.pop(threading.get_ident(), None)
    if entry is not None and entry[0] == os.getpid():
        _stop(entry[1], entry[2])


class Browser:
    """One page showing the task shell, in its own context of the shared headless Chromium.

    Args:
        width: viewport width in CSS pixels (= screenshot pixels; device scale factor 1).
        height: viewport height in CSS pixels.

    Raises:
        RuntimeError: Chromium or playwright is missing.
    """

    def __init__(self, width: int, height: int):
        self.width, self.height = int(width), int(height)
        self.blocked: list[str] = []
        self._browser: Any = None
        self._context: Any = None
        self._page: Any = None
        self._cdp: Any = None

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        """True when the page is open and its Chromium connected."""
        return (
            self._page is not None and self._browser.is_connected() and not self._page.is_closed()
        )

    def launch(self) -> None:
        """Open this browser's context and page in the shared Chromium (no-op when open)."""
        if self.alive:
            return
        self.close()
        self._browser = shared_chromium()
        try:
            context = self._context = self._browser.new_context(
                viewport={"width": self.width, "height": self.height},
                device_scale_factor=1,
                locale="en-US",
                timezone_id="UTC",
                reduced_motion="reduce",
                service_workers="block",
                java_script_enabled=True,
            )
            context.route("**/*", self._block)
            self._page = context.new_page()
            self._page.set_default_timeout(10_000)
            self._cdp = context.new_cdp_session(self._page)
            self._page.set_content(app_html())
        except Exception:
            self.close()
            raise
        logger.debug("opened a %dx%d page", self.width, self.height)

    def _block(self, route: Any) -> None:
        """Abort every request: the task shell is inlined and needs no network."""
        self.blocked.append(route.request.url)
        route.abort("blockedbyclient")

    def close(self) -> None:
        """Close the page and its context (idempotent; never raises). The shared Chromium stays."""
        context = self._context
        self._browser = self._context = self._page = self._cdp = None
        if context is not None:
            try:
                context.close()
            except Exception as exc:  # a crashed browser, a dead driver, or another thread's
                logger.debug("ignored while closing the browser context: %s", exc)

    # -- page access (every call maps a dead browser to BrowserCrashed) ----------------------
    def _call(self, function: Any, *args: Any) -> Any:
        if self._page is None:
            raise BrowserCrashed("the browser is not running")
        try:
            return function(*args)
        except BrowserCrashed:
            raise
        except Exception as exc:
            if (
                not self.alive
                or self._page.is_closed()
                or "closed" in str(exc).lower()
                or "crash" in str(exc).lower()
            ):
                raise BrowserCrashed(
                    f"the browser died: {type(exc).__name__}: {str(exc)[:200]}"
                ) from exc
            raise

    def evaluate(self, script: str, argument: Any = None) -> Any:
        """Call ``script`` (a JS function expression) in the page with the JSON ``argument``.

        Goes straight to DevTools ``Runtime.evaluate`` (about 10x faster than Playwright's
        ``page.evaluate``); promises are awaited.

        Returns:
            The JSON-serializable result.

        Raises:
            RuntimeError: the script threw (the JS message).
            BrowserCrashed: the browser died.
        """
        expression = f"({script})({json.dumps(argument)})"
        reply = self._call(
            self._cdp.send,
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            message = details.get("exception", {}).get("description") or details.get("text", "")
            raise RuntimeError(f"the page's script failed: {message[:300]}")
        return reply.get("result", {}).get("value")

    def load(self, task: str, spec: dict[str, Any]) -> None:
        """Show ``task`` built from ``spec``: the shell empties the task area, the scroll position,
        the focus and the selection, and renders the new task. (The page has no hover styles, so
        where the mouse was left does not show.)"""
        self.evaluate("([task, spec]) => window.vg.load(task, spec)", [task, spec])

    def click(self, x: float, y: float) -> None:
        """A real (trusted) left click at viewport pixel ``(x, y)``."""
        self._call(self._page.mouse.click, float(x), float(y))

    def press(self, key: str) -> None:
        """Press one key (Playwright key name, e.g. ``"Enter"``)."""
        self._call(self._page.keyboard.press, key)

    def insert_text(self, text: str) -> None:
        """Insert ``text`` into the focused element (one ``input`` event, like a paste)."""
        self._call(self._cdp.send, "Input.insertText", {"text": text})

    def scroll(self, dy: float) -> None:
        """Scroll the document by ``dy`` CSS pixels (``window.scrollBy``; synchronous, unlike wheel events)."""
        self._call(self._page.evaluate, "dy => window.vg.scroll(dy)", float(dy))

    def screenshot(self) -> np.ndarray:
        """The viewport as a ``uint8`` array of shape ``(height, width, 3)`` (RGB)."""
        from PIL import Image

        reply = None
        for wait in SCREENSHOT_RETRY_WAITS:
            try:
                reply = self._call(
                    self._cdp.send,
                    "Page.captureScreenshot",
                    {"format": "png", "optimizeForSpeed": True},
                )
                break
            except BrowserCrashed:
                raise
            except Exception as exc:
                # headless Chromium under load sometimes has no frame to give yet; a new frame
                # comes within a few compositor ticks, so this one error is retried, briefly
                if "Unable to capture screenshot" not in str(exc) or wait is None:
                    raise
                time.sleep(wait)
        with Image.open(io.BytesIO(base64.b64decode(reply["data"]))) as image:
            array = np.asarray(image.convert("RGB"), dtype=np.uint8)
        if array.shape != (self.height, self.width, 3):  # never expected; keep the space contract
            fixed = np.full((self.height, self.width, 3), 255, dtype=np.uint8)
            h, w = min(self.height, array.shape[0]), min(self.width, array.shape[1])
            fixed[:h, :w] = array[:h, :w]
            array = fixed
        return array

    def crash(self) -> None:
        """Crash the shared Chromium process on purpose (DevTools ``Browser.crash``), for tests;
        every page of this process and thread dies with it."""
        session = self._browser.new_browser_cdp_session()
        try:
            session.send("Browser.crash")
        except Exception as exc:
            logger.debug("Browser.crash: %s", exc)

    def __del__(self) -> None:
        self.close()


def probe() -> Any:
    """``verigym doctor`` probe: launch Chromium offline, load a task, take a screenshot."""
    from verigym.doctor import Probe

    browser = Browser(64, 64)
    try:
        browser.launch()
        version = browser._browser.version
        pixels = browser.screenshot()
    except Exception as exc:
        return Probe(
            "GUI envs (headless Chromium)",
            False,
            f"{type(exc).__name__}: {str(exc)[:200]}",
            "apt-get install -y chromium; pip install 'verigym[gui]'",
        )
    finally:
        browser.close()
    return Probe(
        "GUI envs (headless Chromium)",
        True,
        f"Chromium {version} launched offline via playwright, screenshot {pixels.shape}",
    )
