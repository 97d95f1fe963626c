"""A headless, offline Chromium page for the GUI environments (Playwright driving the system browser).

Chromium is launched once per process (and thread: Playwright's sync API is per thread) and shared:
each :class:`Browser` is a browser context of that Chromium (its own cookies, storage and cache,
like a fresh incognito profile) with one page of a fixed viewport, so making, copying and pickling
GUI envs costs a context (milliseconds) instead of a Chromium launch (about a second). The shared
Chromium counts its users, the open pages of its thread and :func:`held` references: when the last
one goes (``env.close()`` of the last GUI env), Chromium and its Playwright driver are stopped and
waited for, so no browser process is left; the next env launches them again, in a new driver. A
batch that makes many envs in a row holds the browser with :func:`held` so that it is launched once.
It is also relaunched when it died, and closed at interpreter exit (or by
:func:`close_shared_browser`; :func:`close_thread_browser` for one thread).
Each page is the task shell ``pages/app.html`` with its CSS and
JavaScript inlined, so a task never needs the network: every request the page makes is aborted by a
route handler and recorded in :attr:`Browser.blocked`.

Opening a page costs a renderer process (0.2-1 s, most of a GUI env's making). While the shared
Chromium stays (a :func:`held` block or another open page), a closed :class:`Browser` leaves its
context and page as a *spare* (at most :data:`SPARE_PAGES` per thread) and the next
:class:`Browser` of the same viewport takes it, after wiping it back to a new page's state: a new
empty document (``about:blank``, a new JavaScript realm), no cookies, no granted permissions, the
mouse at (0, 0), then the task shell again. The shell's pages live on ``about:blank`` (an opaque
origin: no storage, no cookies), so nothing of the previous env's pages is left to see.

Screenshots go through the DevTools ``Page.captureScreenshot`` command with the compositor's frame
rate limit off (Playwright's own ``page.screenshot`` waits for the next 30 Hz frame); with
animations, transitions and the text caret disabled by the page's CSS, the same actions give
byte-identical screenshots.

Every call into the page (a DevTools command, a mouse or key event, a script, a navigation) is
bounded by :attr:`Browser.call_timeout` seconds (:data:`CALL_TIMEOUT_S`): a page whose script never
returns (``while (true) {}`` in an event handler or a timer) blocks its renderer, and an unbounded
call would block the env, and the evaluation around it, for ever. On expiry the call raises
:class:`PageTimeout` (a :class:`BrowserCrashed`), the page is marked hung, and closing the
:class:`Browser` closes its context (Chromium ends that renderer; a hung page is never kept as a
spare); the env ends the episode and opens a fresh page on ``reset``.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import io
import json
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from verigym.workers import descendants, process_command, process_info

__all__ = [
    "Browser",
    "BrowserCrashed",
    "PageTimeout",
    "chromium_executable",
    "close_shared_browser",
    "close_thread_browser",
    "held",
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


class PageTimeout(BrowserCrashed):
    """A call into the page got no answer within its bound (:attr:`Browser.call_timeout`): a script
    that never returns, or a hung renderer. The page is closed with its :class:`Browser`; the env
    ends the episode (truncated, success False) and opens a fresh page on reset."""


CALL_TIMEOUT_S = 20.0
"""Seconds one call into the page may take (a screenshot, a click, a script) before it raises
:class:`PageTimeout`; generous, so that a loaded machine never ends a healthy episode."""


async def _deadline(awaitable: Any, limit: float) -> Any:
    return await asyncio.wait_for(awaitable, limit)


def _bounded(function: Any, *args: Any, limit: float, **kwargs: Any) -> Any:
    """Call ``function``, a method of a Playwright sync object, giving up after ``limit`` seconds
    (raises the builtin ``TimeoutError``).

    Playwright's sync methods have no timeout of their own (``mouse.click``, ``keyboard.press``,
    ``page.evaluate``): each runs as one task of Playwright's event loop (``SyncBase._sync``), so
    for this one call the object's ``_sync`` wraps that task in :func:`asyncio.wait_for`. Anything
    else (a lambda, an object without ``_sync``) is called unbounded.
    """
    owner = getattr(function, "__self__", None)
    run = getattr(type(owner), "_sync", None)
    if run is None or "_sync" in getattr(owner, "__dict__", {"_sync": None}):
        return function(*args, **kwargs)
    owner._sync = lambda awaitable: run(owner, _deadline(awaitable, limit))
    try:
        return function(*args, **kwargs)
    finally:
        del owner._sync


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


@dataclass(eq=False)
class _Shared:
    """The shared Chromium of one thread, its Playwright driver and who counts on them."""

    thread: threading.Thread
    """The owner: Playwright's sync objects work only in the thread that made them."""
    pid: int
    """The process that made it (a fork child finds its parent's entries and leaves them alone)."""
    users: int = 0
    """Open :class:`Browser` pages and :func:`held` references; the last to go ends the browser."""
    driver: Any = None
    """The Playwright driver (``playwright.sync_api.Playwright``) or None; never reused once stopped."""
    driver_pid: int | None = None
    """The driver's process (node running ``run-driver``), None when it could not be told apart."""
    chromium: Any = None
    """The Chromium (a Playwright ``Browser``) or None."""
    spares: list[_Page] = field(default_factory=list)
    """Pages of closed :class:`Browser` objects, kept for the next ones (they die with Chromium)."""


@dataclass(eq=False)
class _Page:
    """A browser context with its one page and DevTools session (see :class:`Browser`)."""

    context: Any
    page: Any
    cdp: Any
    size: tuple[int, int]
    """The viewport (width, height)."""
    blocked: list[list[str]]
    """``[list]``: where the route handler records the URLs it aborted (the current owner's
    :attr:`Browser.blocked`, swapped when a spare changes hands)."""
    owner: Any = None
    """The :class:`Browser` using it: an unclosed one is freed by the cycle collector, not at once
    where its last reference goes (a close from there hung inside Playwright's event loop)."""
    clocked: bool = False
    """Its context has Playwright's fake clock (:meth:`Browser.install_clock`): never a spare."""


_SHARED: dict[int, _Shared] = {}
"""Thread id -> the shared Chromium of that thread."""
_LOCK = threading.RLock()
"""Guards ``_SHARED`` and the counts, and keeps two threads' driver starts apart (pids by difference)."""
STOP_WAIT_S = 5.0
SPARE_PAGES = 4
"""Closed pages kept per thread for the next :class:`Browser` (each holds a renderer process)."""
"""Seconds a stopped driver and its Chromium processes get to exit before they are killed."""


def _this_thread(create: bool) -> _Shared | None:
    """This thread's entry (made when ``create``). Call with ``_LOCK`` held.

    An entry of another process (inherited through fork) is dropped untouched; one of a dead thread
    whose id this thread reuses is ended by signal (its Playwright objects belong to that thread).
    """
    key = threading.get_ident()
    entry = _SHARED.get(key)
    if entry is not None and entry.pid != os.getpid():
        del _SHARED[key]
        entry = None
    elif entry is not None and entry.thread is not threading.current_thread():
        del _SHARED[key]
        _stop(entry)
        entry = None
    if entry is None and create:
        entry = _SHARED[key] = _Shared(threading.current_thread(), os.getpid())
    return entry


def _driver_pids() -> list[int]:
    """This process's child processes that are Playwright drivers (node running ``run-driver``)."""
    found = []
    for pid in descendants(os.getpid()):
        info, command = process_info(pid), process_command(pid) or b""
        if (
            info is not None
            and info.parent == os.getpid()
            and b"playwright" in command
            and b"run-driver" in command
        ):
            found.append(pid)
    return found


def _start_driver(entry: _Shared) -> None:
    """Start a new Playwright driver for ``entry`` (a new ``sync_playwright()`` each time: the
    event loop and greenlet of a stopped one are never reused). Call with ``_LOCK`` held, so the
    one new driver child is this one's."""
    from playwright.sync_api import sync_playwright

    before = set(_driver_pids())
    entry.driver = sync_playwright().start()
    new = set(_driver_pids()) - before
    entry.driver_pid = new.pop() if len(new) == 1 else None


def _launch(entry: _Shared) -> Any:
    """``entry``'s Chromium, launched (in a new driver) when it is not running. Call with ``_LOCK``
    held, in ``entry``'s thread.

    Raises:
        RuntimeError: Chromium or playwright is missing.
    """
    if entry.chromium is not None and entry.chromium.is_connected():
        return entry.chromium
    executable = chromium_executable()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        raise RuntimeError("the GUI envs need playwright: pip install 'verigym[gui]'") from exc
    _stop(entry)  # a browser that died: its driver goes too (it may have died with it)
    for attempt in (1, 2):  # a driver or browser that dies while starting is started anew, once
        try:
            _start_driver(entry)
            entry.chromium = entry.driver.chromium.launch(
                executable_path=executable, headless=True, args=list(CHROMIUM_ARGS)
            )
            break
        except Exception as exc:
            _stop(entry)
            if attempt == 2:
                raise
            logger.warning("starting the shared browser failed, trying once more: %s", exc)
    logger.debug("launched the shared %s", executable)
    return entry.chromium


def _quietly(action: Any, what: str) -> None:
    try:
        action()
    except Exception as exc:  # a dead browser or driver, or another thread's
        logger.debug("ignored while %s: %s", what, exc)


def _stop(entry: _Shared) -> None:
    """Close ``entry``'s Chromium and stop its driver, and return only once both have exited (never
    raises; the entry can launch again afterwards, in a new driver).

    A process forked since the driver started (a fork-based worker) holds a copy of the driver's
    stdin, so closing ours never reaches node with an EOF and a graceful stop would wait for ever:
    the driver is sent SIGTERM first. Playwright reaps it during ``stop()``; from another thread
    (whose calls Playwright refuses) or after a failed stop, the driver and the Chromium processes
    it started get :data:`STOP_WAIT_S` seconds to exit, then SIGKILL. So no process of the old
    browser is left when the next driver starts.
    """
    chromium, driver, driver_pid = entry.chromium, entry.driver, entry.driver_pid
    entry.chromium = entry.driver = entry.driver_pid = None
    entry.spares.clear()  # they close with their Chromium
    if driver is None:
        return
    if driver_pid is not None:
        drivers = [driver_pid]
    else:  # not told apart at its start: every driver child that no other entry owns
        owned = {other.driver_pid for other in _SHARED.values()}
        drivers = [pid for pid in _driver_pids() if pid not in owned]
    tree = [pid for root in drivers for pid in (root, *descendants(root))]
    started = {pid: info.start_ticks for pid in tree if (info := process_info(pid)) is not None}
    if chromium is not None:
        _quietly(chromium.close, "closing the shared browser")
    for pid in drivers:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    _quietly(driver.stop, "stopping the Playwright driver")

    def alive() -> list[int]:
        left = []
        for pid, start in started.items():
            info = process_info(pid)
            if info is not None and info.start_ticks == start and info.state not in ("Z", "X"):
                left.append(pid)
        return left

    for last_try in (False, True):
        deadline = time.monotonic() + STOP_WAIT_S
        while (left := alive()) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if last_try:
            logger.warning("processes of the shared browser outlived SIGKILL: %s", left)


def shared_chromium() -> Any:
    """This thread's shared Chromium (a Playwright ``Browser``), launched on first use or after it
    died.

    It does not count as a user: it stays until its last user (a :class:`Browser` page or a
    :func:`held` reference) goes, or :func:`close_thread_browser` / :func:`close_shared_browser`.

    Raises:
        RuntimeError: Chromium or playwright is missing.
    """
    with _LOCK:
        return _launch(_this_thread(create=True))


def _acquire(launch: bool) -> _Shared:
    """This thread's entry, counted as used by one more user (see :func:`_release`); with
    ``launch``, its Chromium is running (launched when it is not).

    Raises:
        RuntimeError: Chromium or playwright is missing (nothing is counted then).
    """
    with _LOCK:
        entry = _this_thread(create=True)
        if launch:
            _launch(entry)
        entry.users += 1
        return entry


def _release(entry: _Shared, stop: bool = True) -> None:
    """One user of ``entry`` is gone: the last one ends the browser (with ``stop``, in its thread).

    From another thread (an env closed by a thread that did not make it) or without ``stop`` (a
    garbage-collected page), the count goes down but the browser stays: the next user of its thread
    reuses it, and :func:`close_thread_browser` or :func:`close_shared_browser` ends it.
    """
    if entry.pid != os.getpid():  # a fork's copy: the driver and its pipes are the parent's
        return
    with _LOCK:
        entry.users = max(0, entry.users - 1)
        if (
            entry.users
            or not stop
            or entry.thread is not threading.current_thread()
            or _SHARED.get(threading.get_ident()) is not entry  # closed already, or a fork's
        ):
            return
        del _SHARED[threading.get_ident()]
        _stop(entry)
    logger.debug("closed the shared browser: its last user is gone")


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Keep this thread's shared Chromium running across many GUI envs made and closed in a row.

    A reference that is not an env: inside the block, closing the last GUI env leaves Chromium
    running for the next one (a context, milliseconds, instead of a launch, about a second); on
    leaving it, Chromium is closed if no env still uses it. Nothing is launched by the hold itself.
    Nests; per thread (enter and leave it in the thread that makes the envs). The library holds it
    where it makes many envs in a row: ``GuiEnv.shared_resources()`` is this, entered by
    ``verigym check`` and the leaderboard runner::

        with held():
            for task in tasks:
                env = GuiEnv(task=task); ...; env.close()
    """
    entry = _acquire(launch=False)
    try:
        yield
    finally:
        _release(entry)


def close_shared_browser() -> None:
    """Close every shared Chromium of this process (all threads) and their drivers now (idempotent).

    Runs at interpreter exit by itself. Pages still open die (their env reports a browser crash and
    relaunches on ``reset``), :func:`held` blocks stop holding; a later GUI env relaunches Chromium.
    Another thread's Playwright objects refuse calls from this one: its driver is ended by signal.
    """
    with _LOCK:
        mine = [key for key, entry in _SHARED.items() if entry.pid == os.getpid()]
        for entry in [_SHARED.pop(key) for key in mine]:
            _stop(entry)


atexit.register(close_shared_browser)


def close_thread_browser() -> None:
    """Close the calling thread's shared Chromium and its Playwright driver now (idempotent).

    For a thread that ends (an env server's worker thread): thread ids are reused, and the next
    thread with this id must not find a Playwright driver bound to a dead thread.
    """
    with _LOCK:
        entry = _this_thread(create=False)
        if entry is not None:
            del _SHARED[threading.get_ident()]
            _stop(entry)


class Browser:
    """One page showing the task shell, in its own context of the shared headless Chromium.

    An open page counts as a user of its thread's shared Chromium: closing the last one (and no
    :func:`held` block around it) stops that Chromium.

    Args:
        width: viewport width in CSS pixels (= screenshot pixels; device scale factor 1).
        height: viewport height in CSS pixels.

    Raises:
        RuntimeError: Chromium or playwright is missing.
    """

    call_timeout: float = CALL_TIMEOUT_S
    """Seconds one call into the page may take before it raises :class:`PageTimeout`."""

    def __init__(self, width: int, height: int):
        self.width, self.height = int(width), int(height)
        self.blocked: list[str] = []
        self._hung = False
        self._shared: _Shared | None = None
        self._browser: Any = None
        self._held: _Page | None = None
        self._context: Any = None
        self._page: Any = None
        self._cdp: Any = None

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        """True when the page is open, answering (no call timed out) and its Chromium connected."""
        return (
            self._page is not None
            and not getattr(self, "_hung", False)
            and self._browser.is_connected()
            and not self._page.is_closed()
        )

    def launch(self) -> None:
        """Open this browser's context and page in the shared Chromium (no-op when open): a spare
        of the same viewport when this thread has one (see the module docstring), else a new one."""
        if self.alive:
            return
        self.close()
        self._shared = _acquire(launch=True)
        self._browser = self._shared.chromium
        try:
            held = self._held = self._spare() or self._new_page()
            held.blocked[0], held.owner = self.blocked, self
            self._context, self._page, self._cdp = held.context, held.page, held.cdp
            self._page.set_content(app_html())
        except Exception:
            self.close()
            raise
        logger.debug("opened a %dx%d page", self.width, self.height)

    def _new_page(self) -> _Page:
        """A new context with one page and its DevTools session (every request aborted)."""
        context = self._browser.new_context(
            viewport={"width": self.width, "height": self.height},
            device_scale_factor=1,
            locale="en-US",
            timezone_id="UTC",
            reduced_motion="reduce",
            service_workers="block",
            java_script_enabled=True,
        )
        held = _Page(context, None, None, (self.width, self.height), [self.blocked])
        try:
            context.route("**/*", lambda route: _block(route, held.blocked[0]))
            held.page = context.new_page()
            held.page.set_default_timeout(10_000)
            held.cdp = context.new_cdp_session(held.page)
        except Exception:
            _quietly(context.close, "closing a context that failed to open")
            raise
        return held

    def _spare(self) -> _Page | None:
        """A spare page of this viewport from this thread's Chromium, wiped back to a new page's
        state (a new empty document, no cookies or permissions, the mouse at (0, 0)); ``None``
        when there is none (a spare that fails its wipe is closed)."""
        assert self._shared is not None
        spares = self._shared.spares
        while True:
            with _LOCK:
                index = next(
                    (i for i, s in enumerate(spares) if s.size == (self.width, self.height)), None
                )
                if index is None:
                    return None
                held = spares.pop(index)
            try:
                held.page.goto("about:blank")
                held.context.clear_cookies()
                held.context.clear_permissions()
                _bounded(held.page.mouse.move, 0, 0, limit=self.call_timeout)
                return held
            except Exception as exc:  # its renderer died: a new page instead
                logger.debug("dropped a spare page: %s", exc)
                _quietly(held.context.close, "closing a spare page")

    def close(self) -> None:
        """Close the page and its context (idempotent; never raises); the last user of the shared
        Chromium stops it (see :func:`held` to keep it for more envs)."""
        self._close(stop=True)

    def _close(self, stop: bool) -> None:
        held, shared = getattr(self, "_held", None), getattr(self, "_shared", None)
        alive = held is not None and self.alive  # False for a hung page: its context is closed
        self._hung = False
        self._shared = self._browser = self._held = self._context = self._page = self._cdp = None
        if shared is not None and shared.pid != os.getpid():
            return  # a fork's copy: a call would write into the parent's driver pipe
        if held is not None:
            held.blocked[0], held.owner = [], None  # its requests are no longer this env's
            if not (alive and stop and _keep_spare(shared, held)):
                _quietly(held.context.close, "closing the browser context")
        if shared is not None:
            _release(shared, stop=stop)

    # -- page access (every call maps a dead browser to BrowserCrashed) ----------------------
    def _call(self, function: Any, *args: Any, limit_s: float | None = None, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)``, a method of a Playwright object of this page, bounded by
        ``limit_s`` seconds (default :attr:`call_timeout`).

        Raises:
            PageTimeout: no answer in time (the page is marked hung: see the module docstring).
            BrowserCrashed: the browser or the page died.
        """
        if self._page is None or getattr(self, "_hung", False):
            raise BrowserCrashed("the browser is not running")
        limit = self.call_timeout if limit_s is None else float(limit_s)
        try:
            return _bounded(function, *args, limit=limit, **kwargs)
        except BrowserCrashed:
            raise
        except TimeoutError as exc:  # asyncio's deadline (builtin); Playwright's own is below
            self._hung = True
            raise PageTimeout(
                f"the page did not answer within {limit:g} s (a script that never returns?)"
            ) from exc
        except Exception as exc:
            if type(exc).__name__ == "TimeoutError" and type(exc).__module__.startswith(
                "playwright"
            ):  # Playwright's own (a navigation's timeout)
                self._hung = True
                raise PageTimeout(f"the page timed out: {str(exc)[:200]}") from exc
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

    @property
    def clocked(self) -> bool:
        """True when this page's context runs on a fake clock (:meth:`install_clock`)."""
        return self._held is not None and self._held.clocked

    def install_clock(self, epoch_ms: int) -> None:
        """Give this context Playwright's fake clock, paused at ``epoch_ms`` (Unix time in ms):
        from the next document on, the page's ``Date``, ``performance.now``, timers and animation
        frames advance only by :meth:`run_clock`. Install it before navigating to the page.

        The clock belongs to the context (Playwright records every clock call as an init script
        that each new document replays), so a clocked context is never kept as a spare; a new
        context is a new clock.

        Raises:
            PageTimeout, BrowserCrashed: as :meth:`_call`.
        """
        if self._held is None:
            raise BrowserCrashed("the browser is not running")
        self._held.clocked = True
        clock = self._context.clock
        # pause_at alone (it installs the clock too): after clock.install the clock runs in real
        # time until the pause, and each new document replays that gap into performance.now()
        self._call(clock.pause_at, epoch_ms / 1000)  # the Python API takes seconds

    def run_clock(self, ms: int) -> None:
        """Advance the fake clock by ``ms`` milliseconds, firing every timer and animation frame
        due on the way, in order (bounded like every call: a timer that never returns raises
        :class:`PageTimeout`)."""
        self._call(self._context.clock.run_for, int(ms))

    def evaluate(self, script: str, argument: Any = None, limit_s: float | None = None) -> Any:
        """Call ``script`` (a JS function expression) in the page with the JSON ``argument``.

        Goes straight to DevTools ``Runtime.evaluate`` (about 10x faster than Playwright's
        ``page.evaluate``); promises are awaited, all within ``limit_s`` seconds (default
        :attr:`call_timeout`).

        Returns:
            The JSON-serializable result.

        Raises:
            RuntimeError: the script threw (the JS message).
            PageTimeout: no answer in time.
            BrowserCrashed: the browser died.
        """
        expression = f"({script})({json.dumps(argument)})"
        reply = self._call(
            self._cdp.send,
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            limit_s=limit_s,
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
        # garbage collection may run inside Playwright's own event loop: gives the count back
        # but leaves stopping the browser to its next user, close_thread_browser or exit
        self._close(stop=False)


def _block(route: Any, blocked: list[str]) -> None:
    """Abort every request (the task shell is inlined and needs no network); record its URL."""
    blocked.append(route.request.url)
    try:
        route.abort("blockedbyclient")
    except Exception as exc:  # the page navigated away or closed: the request is gone already
        logger.debug("abort %s: %s", route.request.url[:200], exc)


def _keep_spare(shared: _Shared, held: _Page) -> bool:
    """Keep ``held`` (an open page being closed) as a spare of ``shared`` when its Chromium stays
    for another user of this thread and the spares are not full; ``False``: close it."""
    with _LOCK:
        if (
            shared.users > 1  # someone else (a hold, another page) keeps Chromium running
            and shared.thread is threading.current_thread()
            and _SHARED.get(threading.get_ident()) is shared
            and len(shared.spares) < SPARE_PAGES
            and not held.clocked  # its fake clock (init scripts) would follow it
        ):
            shared.spares.append(held)
            return True
    return False


def probe() -> Any:
    """``verigym doctor`` probe: launch Chromium offline, load a task, take a screenshot."""
    from verigym.probe import Probe

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
