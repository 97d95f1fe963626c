"""A headless, offline Chromium page for the GUI environments (Playwright driving the system browser).

Chromium is launched once per process (and thread: Playwright's sync API is per thread) and shared:
each :class:`Browser` is a browser context of that Chromium (its own cookies, storage and cache,
like a fresh incognito profile) with one page of a fixed viewport, so making, copying and pickling
GUI envs costs a context (milliseconds) instead of a Chromium launch (about a second). The shared
Chromium counts the open :class:`Browser` pages of its thread: it is closed, with its Playwright
driver, when the last one closes (so ``env.close()`` on the last GUI env leaves no browser
process), relaunched by the next one, relaunched when it died, and closed at interpreter exit or by
:func:`close_shared_browser`. Each page is the task shell ``pages/app.html`` with its CSS and
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
from dataclasses import dataclass
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
    "shutdown",
]

logger = logging.getLogger(__name__)

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


@dataclass
class _Shared:
    """The shared Chromium of one thread and the :class:`Browser` pages open in it."""

    thread: threading.Thread
    driver: Any
    """The Playwright driver (``playwright.sync_api.Playwright``)."""
    driver_pid: int | None
    """The driver's process (node running ``run-driver``), None if it could not be told apart."""
    chromium: Any
    """The Chromium (a Playwright ``Browser``)."""
    users: int = 0
    """Open :class:`Browser` pages that count on it; the last to close closes it."""


_SHARED: dict[int, _Shared] = {}
"""Thread id -> the shared Chromium of that thread (this process's only; emptied in a fork child)."""
_LOCK = threading.RLock()


def _forget_after_fork() -> None:
    """A fork child inherits the parent's entries but not its browser processes: not ours to use."""
    global _LOCK
    _LOCK = threading.RLock()
    _SHARED.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _driver_children() -> set[int]:
    """This process's child processes that are Playwright drivers (node running ``run-driver``)."""
    found = set()
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read()
            with open(f"/proc/{pid}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"playwright" in command and b"run-driver" in command:
            found.add(pid)
    return found


def _start_driver() -> tuple[Any, int | None]:
    """Start a Playwright driver; (driver, its pid or None). Call with ``_LOCK`` held, so no other
    thread's driver starts in between and the new child process is this one's."""
    from playwright.sync_api import sync_playwright

    before = _driver_children()
    driver = sync_playwright().start()
    new = _driver_children() - before
    return driver, (new.pop() if len(new) == 1 else None)


def _launch(driver: Any, executable: str) -> Any:
    return driver.chromium.launch(
        executable_path=executable, headless=True, args=list(CHROMIUM_ARGS)
    )


def _quietly(action: Any, what: str) -> None:
    try:
        action()
    except Exception as exc:  # a dead browser or driver, or another thread's
        logger.debug("ignored while %s: %s", what, exc)


def _end(entry: _Shared) -> None:
    """Close one shared Chromium and its driver (never raises; call it from the entry's thread).

    A process forked since the driver started (a fork-based worker) holds a copy of the driver's
    stdin, so closing ours never reaches node with an EOF and a graceful stop would wait for ever:
    the driver is ended with SIGTERM first, then Playwright collects it.
    """
    if entry.chromium is not None:
        _quietly(entry.chromium.close, "closing the shared browser")
    if entry.driver_pid is not None:
        try:
            os.kill(entry.driver_pid, signal.SIGTERM)
        except OSError:
            pass
    _quietly(entry.driver.stop, "stopping the Playwright driver")


def _this_thread() -> _Shared | None:
    """This thread's entry; a dead thread's entry under a reused thread id is ended first."""
    key = threading.get_ident()
    entry = _SHARED.get(key)
    if entry is not None and entry.thread is not threading.current_thread():
        del _SHARED[key]
        if entry.driver_pid is not None:  # its Playwright objects belong to the dead thread
            try:
                os.kill(entry.driver_pid, signal.SIGTERM)
            except OSError:
                pass
        entry = None
    return entry


def _shared_entry() -> _Shared:
    """This thread's shared Chromium, launched on first use or after it died (counts no user).

    Raises:
        RuntimeError: Chromium or playwright is missing.
    """
    with _LOCK:
        entry = _this_thread()
        if entry is not None and entry.chromium.is_connected():
            return entry
        executable = chromium_executable()
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError as exc:
            raise RuntimeError("the GUI envs need playwright: pip install 'verigym[gui]'") from exc
        if entry is None:
            driver, driver_pid = _start_driver()
            try:
                chromium = _launch(driver, executable)
            except Exception:
                _end(_Shared(threading.current_thread(), driver, driver_pid, None))
                raise
            entry = _SHARED[threading.get_ident()] = _Shared(
                threading.current_thread(), driver, driver_pid, chromium
            )
        else:  # it died: relaunch it, in a new driver if the old one died with it
            try:
                entry.chromium = _launch(entry.driver, executable)
            except Exception:
                _quietly(entry.driver.stop, "stopping the Playwright driver")
                entry.driver, entry.driver_pid = _start_driver()
                try:
                    entry.chromium = _launch(entry.driver, executable)
                except Exception:
                    del _SHARED[threading.get_ident()]
                    _end(entry)
                    raise
        logger.debug("launched the shared %s", executable)
        return entry


def shared_chromium() -> Any:
    """This thread's shared Chromium (a Playwright ``Browser``), launched on first use or after it
    died.

    It does not count as a user: a Chromium launched only through this function stays until
    :func:`close_thread_browser` or :func:`close_shared_browser`.

    Raises:
        RuntimeError: Chromium or playwright is missing.
    """
    return _shared_entry().chromium


def _acquire() -> _Shared:
    """This thread's shared Chromium, counted as used by one more page (see :func:`_release`)."""
    with _LOCK:
        entry = _shared_entry()
        entry.users += 1
        return entry


def _release(entry: _Shared) -> None:
    """One page of ``entry`` closed: the last one closes the shared Chromium of its thread.

    From another thread (a garbage-collected env, a server closing a stuck session) the count goes
    down but the Chromium stays: Playwright objects work only in their own thread, where the next
    page reuses it, or :func:`close_thread_browser` or :func:`close_shared_browser` ends it.
    """
    with _LOCK:
        entry.users -= 1
        if entry.users > 0 or entry.thread is not threading.current_thread():
            return
        if _SHARED.get(threading.get_ident()) is not entry:  # closed already, or a fork's copy
            return
        del _SHARED[threading.get_ident()]
    _end(entry)
    logger.debug("closed the shared browser: its last page closed")


def close_thread_browser() -> None:
    """Close the calling thread's shared Chromium and its Playwright driver now (idempotent).

    For a thread that ends (a server's worker thread) while pages of it may still be open: those
    pages die (their env reports a browser crash and relaunches on ``reset``).
    """
    with _LOCK:
        entry = _this_thread()
        if entry is None:
            return
        del _SHARED[threading.get_ident()]
    _end(entry)


def close_shared_browser() -> None:
    """Close every shared Chromium of this process (all threads) and their Playwright drivers now.

    Idempotent; runs at interpreter exit by itself. Pages still open die (their env reports a
    browser crash and relaunches on ``reset``); a later GUI env relaunches Chromium. Another
    thread's Playwright objects refuse calls from this one, so each driver is ended with SIGTERM
    (Chromium exits with it) before Playwright is asked to stop.
    """
    with _LOCK:
        entries = list(_SHARED.values())
        _SHARED.clear()
    if not entries:
        return
    for entry in entries:
        _quietly(entry.chromium.close, "closing the shared browser")
    known = {entry.driver_pid for entry in entries}
    for pid in _driver_children() if None in known else known:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    for entry in entries:
        _quietly(entry.driver.stop, "stopping the Playwright driver")


shutdown = close_shared_browser
"""Former name of :func:`close_shared_browser`, kept for callers written against it."""

atexit.register(close_shared_browser)


class Browser:
    """One page showing the task shell, in its own context of the shared headless Chromium.

    An open page counts as a user of its thread's shared Chromium: closing the last one closes it.

    Args:
        width: viewport width in CSS pixels (= screenshot pixels; device scale factor 1).
        height: viewport height in CSS pixels.

    Raises:
        RuntimeError: Chromium or playwright is missing.
    """

    def __init__(self, width: int, height: int):
        self.width, self.height = int(width), int(height)
        self.blocked: list[str] = []
        self._shared: _Shared | None = None
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
        self._shared = _acquire()
        self._browser = self._shared.chromium
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
        """Close the page and its context (idempotent; never raises); the last page of the shared
        Chromium closes it too."""
        context, shared = self._context, self._shared
        self._shared = self._browser = self._context = self._page = self._cdp = None
        if context is not None:
            _quietly(context.close, "closing the browser context")
        if shared is not None:
            _release(shared)

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

        reply = self._call(
            self._cdp.send, "Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}
        )
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
