"""MiniWoBEnv: the real MiniWoB++ task pages of the ``miniwob`` package, in verigym's browser."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
from gymnasium import spaces

from verigym.core import (
    ActionParseError,
    UnicodeText,
    action_error_info,
    coerce_action,
    episode_end,
)
from verigym.envs.gui.browser import Browser, BrowserCrashed, PageTimeout, held
from verigym.envs.gui.env import MAX_TREE_LENGTH, MAX_TYPE_LENGTH, GuiActionSpace, GuiEnv
from verigym.envs.gui.miniwob import catalog, server
from verigym.envs.gui.tasks import KEYS, NO_TEXT, OPS
from verigym.kwargs_policy import IntRange, OneOf, client, operator_only
from verigym.validation import check_choice, check_int

__all__ = ["MW_OPS", "MiniWoBActionSpace", "MiniWoBEnv", "mw_action"]

logger = logging.getLogger(__name__)

MW_OPS = (*OPS, "drag")
"""The MiniWoB action kinds: the GUI ops (same indices) and ``drag`` (press at ``xy``, move to
``to``, release: drag-and-drop, sliders, text selection)."""
TYPE_CHARSET = "".join(chr(c) for c in range(32, 127) if chr(c) != "<")
"""What ``type`` can enter: printable ASCII but ``<``. Some task pages echo typed text as HTML
(terminal's ``innerHTML``): without ``<`` no typed text can become an element or a script."""
SCROLL_PIXELS = 50
SETTLE_MS = 1000
"""After an action, the page's pending short timers (``setTimeout`` of at most 1 s: autocomplete
menus, delayed widgets) are waited for, at most this long, so the next observation shows them."""
PAGE_TIMEOUT_MS = 15_000
MAX_STEPS = 50
FLIGHT_MAX_STEPS = 100

_COMMAND = re.compile(
    r"\bdrag\s*\(?\s*(?P<x>-?\d+)\s*[ ,]\s*(?P<y>-?\d+)\s*[ ,]\s*(?P<x2>-?\d+)\s*[ ,]\s*(?P<y2>-?\d+)\s*\)?",
    re.IGNORECASE,
)
_ANY_COMMAND = re.compile(r"\b(?:click_xy|click|type|press|scroll|done|drag)\b", re.IGNORECASE)

# runs once per loaded page, before the episode starts: the images its CSS names loaded, our CSS
# (the score panel hidden, no caret), jQuery animations off, and a count of the page's pending
# short timers for the settle wait
_SETUP = r"""async ([seed, settle]) => {
  // every image the page's style sheets name (a :hover icon too) is loaded before the episode
  // starts: a hover image fetched when the pointer first reaches its element would show late
  const urls = new Set();
  const walk = (rules) => {
    for (const rule of rules || []) {
      if (rule.cssRules) walk(rule.cssRules);
      for (const m of (rule.cssText || '').matchAll(/url\(\s*"?([^")]*)"?\s*\)/g)) {
        try { urls.add(new URL(m[1], rule.parentStyleSheet.href || document.baseURI).href); } catch (e) {}
      }
    }
  };
  for (const sheet of document.styleSheets) { try { walk(sheet.cssRules); } catch (e) {} }
  await Promise.all([...urls].slice(0, 64).map((url) => new Promise((done) => {
    const image = new Image(); image.onload = image.onerror = done; image.src = url;
  })));
  const style = document.createElement('style');
  style.textContent = '#reward-display, #click-canvas, #reward-reason, #sync-task-cover '
    + '{ display: none !important; } * { caret-color: transparent !important; }';
  document.head.appendChild(style);
  if (window.jQuery) window.jQuery.fx.off = true;
  const pending = new Set(), setT = window.setTimeout, clearT = window.clearTimeout;
  window.setTimeout = function (fn, ms, ...args) {
    if (typeof fn !== 'function') return setT.call(window, fn, ms, ...args);
    let id = null;
    id = setT.call(window, function () { pending.delete(id); return fn.apply(this, args); }, ms);
    if ((Number(ms) || 0) <= settle) pending.add(id);
    return id;
  };
  window.clearTimeout = function (id) { pending.delete(id); return clearT.call(window, id); };
  Object.defineProperty(window, '__verigymSettle', {value: (limit) => new Promise((done) => {
    const t0 = performance.now();
    const tick = () => (pending.size === 0 || performance.now() - t0 > limit)
      ? done(pending.size) : setT.call(window, tick, 5);
    tick();
  })});
  // a drag pins every user-scrollable box (its overflow hidden for the drag): Chromium's selection
  // and drag-and-drop autoscroll moves such a box once per animation frame while the pointer is
  // near its edge, so how far it went would depend on the machine's speed
  const pinned = [];
  Object.defineProperty(window, '__verigymPin', {value: (on) => {
    if (!on) {
      for (const [el, x, y] of pinned.splice(0)) {
        for (const [name, [value, priority]] of [['overflow-x', x], ['overflow-y', y]]) {
          if (value) el.style.setProperty(name, value, priority); else el.style.removeProperty(name);
        }
      }
      return true;
    }
    const pin = (el) => {
      const keep = (name) => [el.style.getPropertyValue(name), el.style.getPropertyPriority(name)];
      pinned.push([el, keep('overflow-x'), keep('overflow-y')]);
      el.style.setProperty('overflow-x', 'hidden', 'important');
      el.style.setProperty('overflow-y', 'hidden', 'important');
    };
    const docs = [document];
    for (const frame of document.querySelectorAll('iframe')) {
      try { if (frame.contentDocument) docs.push(frame.contentDocument); } catch (e) {}
    }
    for (const doc of docs) {
      const html = doc.documentElement, body = doc.body, view = doc.defaultView;
      if (!html || !view) continue;
      const visible = (el) => !el || /^(visible|clip)$/.test(view.getComputedStyle(el).overflowY)
        && /^(visible|clip)$/.test(view.getComputedStyle(el).overflowX);
      // the viewport's overflow: the root's, else the body's (propagated); that one is pinned
      const root = !visible(html) || visible(body) ? html : body;
      for (const el of doc.querySelectorAll('*')) {
        const s = view.getComputedStyle(el);
        if (el === root || (el !== html && /(auto|scroll)/.test(s.overflowX + s.overflowY))) pin(el);
      }
    }
    return true;
  }});
  Math.seedrandom(seed);
  core.startEpisodeReal();
  // the episode's limit is verigym's step budget: upstream's 10 s wall-clock timer would make a
  // verdict depend on the machine's load (the time-decayed reward still uses the page's clock)
  if (core.EP_TIMER !== null) clearTimeout(core.EP_TIMER);
  core.EP_TIMER = setT.call(window, function () {}, 2147483647);
  if (core.CD_TIMER) { clearInterval(core.CD_TIMER); }
  return true;
}"""

_PIN = "(on) => !window.__verigymPin || window.__verigymPin(on)"
"""Pin the page's scrollable boxes for a drag (``True``), or give them back (``False``)."""

_SCROLL = """([x, y, dy]) => {
  let el = document.elementFromPoint(x, y);
  if (el && el.tagName === 'IFRAME') {
    const r = el.getBoundingClientRect();
    const doc = el.contentDocument; el = doc && doc.elementFromPoint(x - r.left, y - r.top);
  }
  for (; el; el = el.parentElement) {
    const s = getComputedStyle(el);
    if (el.scrollHeight > el.clientHeight + 1 && /(auto|scroll)/.test(s.overflowY)) {
      el.scrollTop += dy; return true;
    }
  }
  const doc = document.scrollingElement; doc.scrollTop += dy; return true;
}"""


PARKED_PAGES = 4
"""Preloaded task pages kept per thread, inside :meth:`MiniWoBEnv.shared_resources`, by closed
envs for the next envs of the same task (each holds a renderer process; the oldest goes first)."""


@dataclass(eq=False)
class _Tab:
    """One :class:`Browser` page of a MiniWoB env, with its request hooks (see ``MiniWoBEnv``)."""

    browser: Browser
    routed: Any = None
    """The page our route and request listeners were added to (a relaunch gives a new page)."""
    inflight: int = 0
    """Requests of that page not finished yet."""
    requested: int = 0
    """Requests of that page seen so far."""
    preloading: bool = False
    """A navigation to the task page was started and not waited for yet."""

    def started(self, request: Any) -> None:
        self.inflight += 1
        self.requested += 1

    def ended(self, request: Any) -> None:
        self.inflight = max(0, self.inflight - 1)


@dataclass(eq=False)
class _Parked:
    """A closed env's page (its preloaded one, or its played one loading a new copy of the task
    page), for the next env of the same task and viewport."""

    key: tuple[str, int, int]
    """(task, width, height)."""
    tab: _Tab
    base: str
    """The server URL the page was loaded from; the entry holds one server reference."""


_POOL_LOCK = threading.Lock()
_SCOPES: dict[tuple[int, int], int] = {}
"""(pid, thread id) -> open :meth:`MiniWoBEnv.shared_resources` blocks of that thread."""
_PARKED: dict[tuple[int, int], list[_Parked]] = {}
"""(pid, thread id) -> the pages parked in that thread, oldest first (Playwright's objects work
only in the thread that made them; a fork's copy of its parent's entries is never used)."""


def _page_reward(value: Any) -> float:
    """A reward the page reported, as a float; -1 (failed) when it is not a finite number (a
    page's own arithmetic can give NaN: bisect-angle's point put on the vertex divides by zero,
    and NaN arrives as null)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return -1.0


def _thread_key() -> tuple[int, int]:
    return os.getpid(), threading.get_ident()


def _close_tab(tab: _Tab) -> None:
    """Close ``tab``'s page: our route and listeners first (the page may become a spare of the
    shared Chromium, which must not keep them), then its :class:`Browser` (never raises)."""
    page, tab.routed, tab.preloading = tab.routed, None, False
    if page is not None and tab.browser.alive and tab.browser._page is page:
        try:
            page.unroute_all(behavior="ignoreErrors")
            page.remove_listener("request", tab.started)
            page.remove_listener("requestfinished", tab.ended)
            page.remove_listener("requestfailed", tab.ended)
        except Exception as exc:  # noqa: BLE001
            logger.debug("unroute: %s", exc)
    tab.browser.close()


def _drop(entry: _Parked) -> None:
    _close_tab(entry.tab)
    server.release()


@contextlib.contextmanager
def _pool_scope() -> Iterator[None]:
    """Inside it (per thread, nests), a closed env leaves its pages for the next env of its
    task (:meth:`MiniWoBEnv.shared_resources`); on leaving the outermost block every parked page is closed and its server
    reference given back, so nothing is left once the envs are closed too."""
    key = _thread_key()
    with held():
        with _POOL_LOCK:
            _SCOPES[key] = _SCOPES.get(key, 0) + 1
        try:
            yield
        finally:
            with _POOL_LOCK:
                _SCOPES[key] -= 1
                left = [] if _SCOPES[key] else _PARKED.pop(key, [])
                if not _SCOPES[key]:
                    del _SCOPES[key]
            for entry in left:
                _drop(entry)


_SETTLED_READ = """async ([settle, count]) => {
  if (settle && window.__verigymSettle) await window.__verigymSettle(settle);
  const pending = [], seen = new Set();
  const load = (url) => {
    if (!url || seen.has(url)) return;
    seen.add(url);
    const image = new Image();
    image.src = url;
    if (!image.complete) pending.push(new Promise((done) => { image.onload = image.onerror = done; }));
  };
  for (const el of document.body ? document.body.getElementsByTagName('*') : []) {
    if (el.tagName === 'IMG') load(el.currentSrc || el.src);
    const style = getComputedStyle(el);
    for (const value of [style.content, style.backgroundImage]) {
      if (value && value.includes('url(')) {
        for (const m of value.matchAll(/url\\("?([^")]*)"?\\)/g)) load(m[1]);
      }
    }
  }
  await Promise.all(pending);
  return (%s)([count, null]);
}"""
"""One DevTools call: the page's short timers waited for, then its images (``<img>``, CSS
``content`` and background images: an icon not loaded yet has no size and would be missing from
the element list), then the page read (``observe.js``). The image loads share the document's
requests for the same files, which our route answers while the call waits."""


@lru_cache(maxsize=1)
def observe_js() -> str:
    """The page reader (``observe.js``): elements, utterance and verdict."""
    return (resources.files("verigym.envs.gui.miniwob") / "observe.js").read_text(encoding="utf-8")


def mw_action(
    op: str,
    *,
    element: int = 0,
    xy: tuple[int, int] = (0, 0),
    to: tuple[int, int] = (0, 0),
    text: str = NO_TEXT,
    key: str = KEYS[0],
) -> dict[str, Any]:
    """A canonical MiniWoB action dict (unused fields at their defaults), e.g.
    ``mw_action("drag", xy=(10, 20), to=(80, 20))``."""
    return {
        "op": MW_OPS.index(op),
        "element": int(element),
        "xy": np.asarray(xy, dtype=np.int64),
        "to": np.asarray(to, dtype=np.int64),
        "text": text,
        "key": KEYS.index(key),
    }


class MiniWoBActionSpace(GuiActionSpace):
    """:class:`GuiActionSpace` with ``drag``: ``Dict(op, element, xy, to, text, key)``; ``op``
    indexes :data:`MW_OPS`. :meth:`sample` returns canonical actions (unused fields at defaults)."""

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        raw = spaces.Dict.sample(self, mask=mask, probability=probability)
        op = MW_OPS[int(raw["op"])]
        return mw_action(
            op,
            element=int(raw["element"]) if op in ("click", "type") else 0,
            xy=tuple(raw["xy"]) if op in ("click_xy", "drag") else (0, 0),
            to=tuple(raw["to"]) if op == "drag" else (0, 0),
            text=raw["text"] if op == "type" else NO_TEXT,
            key=KEYS[int(raw["key"])] if op == "press" else KEYS[0],
        )


class MiniWoBEnv(GuiEnv):
    """One MiniWoB++ task (Liu et al. 2018), the page of the installed ``miniwob`` package, in
    verigym's headless Chromium (no Selenium, no chromedriver).

    ## Description
    The page (``miniwob/html/miniwob/<task>.html``, or the flight site of ``flight.*``) is served
    by a small HTTP server of this process bound to 127.0.0.1 (started with the first MiniWoB env,
    stopped with the last; :mod:`verigym.envs.gui.miniwob.server`); every other request is
    aborted. Each ``reset`` shows a newly loaded page (a new document and JavaScript realm: nothing
    of the previous episode is left), seeds its random generator (``Math.seedrandom``) from the
    env's seed and starts the episode (``core.startEpisodeReal``). The load is off the reset's
    path: an env holds a second page (its own browser context) where the next episode's page is
    loaded while this one is played; a reset swaps the two (the flight sites, whose site loads in
    an iframe after the episode starts, load at the reset). Inside :meth:`shared_resources` (as
    ``verigym check`` and the leaderboard runner make and close many envs of a task), a closed
    env leaves that loaded, never started page, and its played page loading a new copy of the
    task page, to the next env of its task, which swaps them in instead of opening and loading
    its own. jQuery animations are off and each observation is
    taken once the page's pending short timers (at most :data:`SETTLE_MS`) have run.

    The timing-dependent pages of :data:`~verigym.envs.gui.miniwob.catalog.CLOCKED` (a ticker, a
    physics loop, a long animation, a blinking cursor) run on a controlled clock instead
    (Playwright's fake clock): their ``Date``, ``performance.now``, timers and animation frames
    stand still between steps and advance by the task's page milliseconds per step (1 s; 2 s for
    ``click-pie``, 200 ms for ``stock-market``) after the reset and after each action, firing what falls due in order. Each
    episode starts on a new browser context whose clock reads
    :data:`~verigym.envs.gui.miniwob.catalog.CLOCK_EPOCH_MS`, so the trajectory depends on the
    seed and the actions only, never on the machine's speed, and the page's date is the same on
    any day.

    ## Action Space
    :class:`MiniWoBActionSpace`: the :class:`GuiActionSpace` ops (``click``, ``click_xy``,
    ``type``, ``press``, ``scroll_down``/``scroll_up`` (50 px, the scrollable box under the
    mouse, else the page), ``done`` = give up) and ``drag`` (op 7: press at ``xy``, move to
    ``to`` in 8 steps, release; the page's scroll boxes are pinned during it, so a selection or
    drag near a box's edge never autoscrolls it: Chromium's autoscroll moves once per animation
    frame, which would make the result depend on the machine's speed). ``text``: 1-64 printable
    ASCII characters but ``<``. Text
    commands: those of :class:`GuiEnv` and ``drag x1 y1 x2 y2``. Nothing evaluates JavaScript.

    ## Observation Space
    As :class:`GuiEnv`: ``screenshot`` ``uint8`` ``(height, width, 3)``, ``text`` the visible
    elements of the task area (``[id] role "name" value=... @(l,t,r,b)``, shapes and coloured boxes
    with ``color=``; never attributes, hidden fields or script state), ``instruction`` the task's
    utterance (``core.getUtterance()``).

    ## Rewards
    The task's own reward function decides. After each action the env reads
    ``WOB_DONE_GLOBAL``, ``WOB_RAW_REWARD_GLOBAL`` and ``WOB_REWARD_GLOBAL``. The step that ends
    the episode gets ``score = max(0, raw reward)`` (upstream's raw reward is in [-1, 1]: -1 failed,
    1 solved, partial credit between, as in the flight forms and soft checkboxes), every other
    step 0. ``info["success"]`` is raw reward > 0 (upstream's convention),
    ``info["miniwob_reward"]`` upstream's time-decayed reward (``WOB_REWARD_GLOBAL``, on the
    page's clock), ``info["raw_reward"]`` the raw one; a reward that is not a finite number (a
    page's own arithmetic: bisect-angle's point on the vertex gives NaN) counts as -1, failed. A
    malformed action costs the step and sets ``info["action_error"]``.

    ## Episode End
    Terminated when the page says done, on ``done`` (success False unless the page said done), or
    when the page navigated away from the task (``info["navigated_away"]``). Truncated after
    ``max_steps`` (success False, score 0; upstream's 10 s wall-clock limit is replaced by this
    budget), when the browser crashed (``info["browser_crashed"]``) or when the page stopped
    answering: a call into it took over ``Browser.call_timeout`` (20 s), as a script that never
    returns does (``info["page_timeout"]`` and ``info["action_error"]``); the next ``reset`` opens a
    fresh page.

    ## Arguments
    * ``task`` (str): a MiniWoB++ task name (:data:`verigym.envs.gui.miniwob.catalog.TASKS`).
    * ``max_steps`` (int | None): step budget; ``None``: 50 (100 for the flight sites).
    * ``viewport_width``, ``viewport_height`` (int | None): ``None``: the task area, 160x210
      (375x667 and 540 wide for the flight sites, whose instruction sits right of the site).
    * ``max_elements`` (int, 8..256): the longest element list.

    Raises:
        ModuleNotFoundError: the ``miniwob`` package is missing (``pip install 'verigym[miniwob]'``).

    ## Version History
    * v0: initial version (``miniwob`` 1.1.0 pages). Fixed in v0: a page's non-finite reward
      (NaN from bisect-angle's point on the vertex) crashed ``step``; it now counts as -1.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4, "family": "gui"}

    preload: bool = True
    """Load the next episode's page in a second page while this one is played (a reset then costs
    the swap and the episode's start, not a page load); ``False`` (set on the class or an
    instance) saves that page's renderer process and loads the page at each reset instead."""

    remote_kwargs = {
        "task": client(OneOf(catalog.TASKS)),
        "max_steps": operator_only(IntRange(1, 1000), why="raises the cost of an episode"),
        "viewport_width": operator_only(IntRange(128, 1280), why="rendering cost"),
        "viewport_height": operator_only(IntRange(128, 1280), why="rendering cost"),
        "max_elements": operator_only(IntRange(8, 256), why="raises the size of each observation"),
    }

    def __init__(
        self,
        *,
        task: str,
        max_steps: int | None = None,
        viewport_width: int | None = None,
        viewport_height: int | None = None,
        max_elements: int = 96,
        render_mode: str | None = None,
    ):
        check_choice("task", task, catalog.TASKS)
        flight = task in catalog.FLIGHT_TASKS
        if max_steps is not None:
            check_int("max_steps", max_steps, 1, 1000)
        width = viewport_width if viewport_width is not None else (540 if flight else 160)
        height = viewport_height if viewport_height is not None else (667 if flight else 210)
        check_int("viewport_width", width, 128, 1280)
        check_int("viewport_height", height, 128, 1280)
        check_int("max_elements", max_elements, 8, 256)
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        server.html_root()  # the one-line error, before any browser starts
        self._kwargs = {
            "task": task,
            "max_steps": max_steps,
            "viewport_width": viewport_width,
            "viewport_height": viewport_height,
            "max_elements": max_elements,
            "render_mode": render_mode,
        }
        self.task_name = task
        self.flight = flight
        self.clock_ms = catalog.CLOCKED.get(task)
        """Page milliseconds per step on the controlled clock (``None``: the page's own clock)."""
        self.max_steps = max_steps or (FLIGHT_MAX_STEPS if flight else MAX_STEPS)
        self.width, self.height = width, height
        self.max_elements = max_elements
        self.render_mode = render_mode
        self.observation_space = spaces.Dict(
            {
                "screenshot": spaces.Box(0, 255, shape=(height, width, 3), dtype=np.uint8),
                "text": UnicodeText(MAX_TREE_LENGTH),
                "instruction": UnicodeText(1024),
            }
        )
        self.action_space = MiniWoBActionSpace(
            {
                "op": spaces.Discrete(len(MW_OPS)),
                "element": spaces.Discrete(max_elements),
                "xy": spaces.MultiDiscrete([width, height]),
                "to": spaces.MultiDiscrete([width, height]),
                "text": spaces.Text(MAX_TYPE_LENGTH, min_length=1, charset=TYPE_CHARSET),
                "key": spaces.Discrete(len(KEYS)),
            }
        )
        self._tab = _Tab(Browser(width, height))  # the page played
        self._next = _Tab(Browser(width, height))  # the page loaded for the next reset
        self._browser = self._tab.browser
        self._base: str | None = None  # the server's URL while this env holds it
        self._spec: dict[str, Any] | None = None
        self._log: list[dict[str, Any]] = []
        self._notes: dict[str, Any] = {}  # the oracle's memory of this episode (what it has seen)
        self._steps = 0
        self._over = False
        self._elements: list[dict[str, Any]] = []
        self._state: dict[str, Any] = {}
        self._utterance = ""
        self._verdict: dict[str, Any] | None = None
        self._mouse = (0.0, 0.0)
        self._screenshot = np.full((height, width, 3), 255, dtype=np.uint8)
        if task in catalog.ORACLE_TASKS:
            self.oracle_action = self._oracle_step

    # -- browser plumbing ----------------------------------------------------------------------
    def _url(self) -> str:
        assert self._base is not None
        if self.flight:
            return f"{self._base}{self.task_name.replace('.', '/')}/wrapper.html"
        return f"{self._base}miniwob/{self.task_name}.html"

    def _open(self, tab: _Tab) -> None:
        """Open ``tab``'s page (no-op when open) with our route and request listeners on it, and
        clear our origin's storage in its context. A clocked task's page gets a new context with
        its clock at :data:`~verigym.envs.gui.miniwob.catalog.CLOCK_EPOCH_MS`, paused (a context
        whose clock has run keeps that time for its next documents)."""
        if self.clock_ms and tab.browser.clocked:
            fresh = Browser(self.width, self.height)
            fresh.launch()  # before the old one closes: Chromium keeps a user
            tab.browser.close()
            tab.browser, tab.routed = fresh, None
        tab.browser.launch()
        if self.clock_ms and not tab.browser.clocked:
            tab.browser.install_clock(catalog.CLOCK_EPOCH_MS)
        if self._base is None:
            self._base = server.acquire()
        browser, page = tab.browser, tab.browser._page
        if tab.routed is not page:  # requests to our server go through; the rest stay blocked
            browser._call(page.route, f"{self._base}**", server.answer)
            page.on("request", tab.started)
            page.on("requestfinished", tab.ended)
            page.on("requestfailed", tab.ended)
            tab.routed, tab.inflight = page, 0
        browser._call(
            browser._cdp.send,
            "Storage.clearDataForOrigin",
            {"origin": self._base.rstrip("/"), "storageTypes": "all"},
        )

    def _preload(self) -> None:
        """Start loading the task page in the second page, for the next reset (never raises: a
        failure leaves the next reset to load the page itself)."""
        tab = self._next
        tab.preloading = False
        if self.flight or not self.preload:
            return
        if not tab.browser.alive and self._adopt():  # a parked page instead of a new one
            return
        try:
            self._navigate(tab)
        except Exception as exc:  # noqa: BLE001 - the next reset loads the page itself
            logger.debug("preloading %s failed: %s", self.task_name, exc)

    def _navigate(self, tab: _Tab) -> None:
        """Open ``tab`` (:meth:`_open`) and start loading the task page in it, not waited for."""
        self._open(tab)
        # a marker on the old document tells it from the new one; the navigation runs while
        # this episode is played (Playwright answers its requests during our page calls)
        tab.browser.evaluate(
            "(url) => { window.__verigymOld = true; location.replace(url); return true }",
            self._url(),
        )
        tab.preloading = True

    def _preloaded(self) -> bool:
        """Swap in the preloaded page once it has loaded; False (nothing swapped) when there is
        none or it failed (that page is then closed)."""
        if not self._next.preloading:
            self._adopt()
        tab = self._next
        if not tab.preloading or not tab.browser.alive:
            return False
        tab.preloading = False
        deadline = time.monotonic() + PAGE_TIMEOUT_MS / 1000
        browser = tab.browser
        try:
            while True:
                try:
                    loaded = browser.evaluate(
                        "() => !window.__verigymOld && document.readyState === 'complete'"
                        " && typeof core === 'object' && core.cover_div !== null"
                        " && location.href"
                    )
                except BrowserCrashed:
                    raise
                except Exception:  # noqa: BLE001 - the document changed during the call
                    loaded = None
                if loaded == self._url():
                    break
                if time.monotonic() > deadline:
                    raise PageTimeout(f"the page of {self.task_name} did not load in time")
                browser._call(browser._page.wait_for_timeout, 10)
        except Exception as exc:  # noqa: BLE001 - the reset loads the page itself
            logger.debug("the preloaded page of %s failed: %s", self.task_name, exc)
            browser.close()
            return False
        self._tab, self._next = tab, self._tab
        self._browser = tab.browser
        return True

    def _load(self) -> None:
        if not self._preloaded():
            self._open(self._tab)
            self._browser = self._tab.browser
            browser, page = self._browser, self._browser._page
            browser._call(
                page.goto,
                self._url(),
                wait_until="load",
                timeout=PAGE_TIMEOUT_MS,
                limit_s=PAGE_TIMEOUT_MS / 1000 + browser.call_timeout,
            )
        browser = self._browser
        assert self._spec is not None
        # the mouse of a page stays where the last episode on it left it: hover styles (and
        # Chromium's delayed synthetic mouse move over the new document) would make the start
        # depend on that history, so each episode starts with the mouse at (0, 0)
        browser._call(browser._page.mouse.move, 0, 0)
        browser.evaluate(_SETUP, [str(self._spec["seed"]), SETTLE_MS])
        if self.flight:  # the airline site loads in the iframe and says when it is ready
            browser.evaluate(
                "(limit) => new Promise((done) => { const t0 = performance.now();"
                " const tick = () => (WOB_TASK_READY || performance.now() - t0 > limit)"
                " ? done(WOB_TASK_READY) : setTimeout(tick, 20); tick(); })",
                PAGE_TIMEOUT_MS,
                limit_s=PAGE_TIMEOUT_MS / 1000 + browser.call_timeout,
            )
        self._mouse = (0.0, 0.0)

    def _settle(self) -> None:
        """Wait (at most :data:`SETTLE_MS`) for the files the page is still fetching (CSS
        ``content:url`` icons, images added by script); its short timers are waited for in the
        page by :meth:`_refresh`'s read."""
        page, waited = self._browser._page, 0
        while self._tab.inflight and waited < SETTLE_MS:
            self._browser._call(page.wait_for_timeout, 10)  # Playwright delivers the events
            waited += 10

    def _refresh(self, screenshot: bool = True) -> None:
        # one call: the page's pending short timers (at most SETTLE_MS), then the read; the read
        # is taken again after the files still being fetched have arrived
        settle = 0 if self.flight or self.clock_ms else SETTLE_MS
        if self.clock_ms:  # the page's time moves by one step's worth, its timers firing in order
            self._browser.run_clock(self.clock_ms)
        read = _SETTLED_READ % observe_js()
        for _ in range(3):
            seen = self._browser.evaluate(read, [settle, self.max_elements])
            requested = self._tab.requested
            if screenshot:
                self._screenshot = self._browser.screenshot()
            # a file the page asked for that the read did not wait for (not an image) may be
            # reported only after the read: then it is waited for and the page read and taken
            # again, so neither the element list nor the picture depends on when it arrived
            if self._tab.requested == requested and not self._tab.inflight:
                break
            self._settle()
            settle = 0
        self._elements = seen["elements"]
        self._utterance = str(seen["utterance"])[:1024]
        self._verdict = seen["verdict"]

    def _observation(self) -> dict[str, Any]:
        lines = []
        for e in self._elements:
            line = f"[{e['id']}] {e['role']} {json.dumps(e['name'], ensure_ascii=False)}"
            if "value" in e:
                line += f" value={json.dumps(e['value'], ensure_ascii=False)}"
            if "options" in e:
                line += f" options={json.dumps(e['options'], ensure_ascii=False)}"
            if "color" in e:
                line += f" color={e['color'].replace(' ', '')}"
            if "checked" in e:
                line += " checked" if e["checked"] else " not-checked"
            if e.get("multiline"):
                line += " multiline"
            if "expanded" in e:
                line += " expanded" if e["expanded"] else " not-expanded"
            for flag in ("selected", "disabled", "focused"):
                if e.get(flag):
                    line += f" {flag}"
            left, top, right, bottom = e["box"]
            line += f" @({left},{top},{right},{bottom})"
            if bottom <= 0 or top >= self.height or right <= 0 or left >= self.width:
                line += " offscreen"
            elif e.get("covered"):
                line += " covered"
            lines.append(line)
        tree = "\n".join(lines)
        if len(tree) > MAX_TREE_LENGTH:
            tree = tree[: MAX_TREE_LENGTH - 3] + "..."
        return {"screenshot": self._screenshot.copy(), "text": tree, "instruction": self._utterance}

    def _point(self, element: dict[str, Any]) -> tuple[float, float]:
        left, top, right, bottom = element["box"]
        inside = 0 <= left and 0 <= top and right <= self.width and bottom <= self.height
        if inside and not element.get("covered"):
            return (left + right) / 2, (top + bottom) / 2
        # out of view, or clipped by its scroll box: the page scrolls it in and says where it is
        centre = self._browser.evaluate(observe_js(), [self.max_elements, element["id"]])
        if centre is None:
            raise ActionParseError(f"element {element['id']} is gone from the page")
        return float(centre[0]), float(centre[1])

    def _click(self, x: float, y: float) -> None:
        self._browser.click(x, y)
        self._mouse = (x, y)

    def _apply(self, action: dict[str, Any]) -> None:
        op = MW_OPS[int(action["op"])]
        browser = self._browser
        if op in ("click", "type"):
            element = self._element(int(action["element"]))
            if op == "type" and element["role"] not in ("textbox", "combobox"):
                raise ActionParseError(
                    f"element {element['id']} is a {element['role']}, not a textbox; type into a textbox"
                )
            self._click(*self._point(element))
            if op == "type" and element["role"] == "combobox":  # a closed list: type-ahead
                browser.press("Escape")
                browser._call(browser._page.keyboard.type, str(action["text"]))
            elif op == "type":
                browser.press("Control+A")
                browser.insert_text(str(action["text"]))
        elif op == "click_xy":
            self._click(*(float(v) for v in action["xy"]))
        elif op == "drag":
            (x1, y1), (x2, y2) = (float(v) for v in action["xy"]), (float(v) for v in action["to"])
            mouse = browser._page.mouse
            browser.evaluate(_PIN, True)  # no autoscroll: see _SETUP
            try:
                browser._call(mouse.move, x1, y1)
                browser._call(mouse.down)
                browser._call(mouse.move, x2, y2, steps=8)
                browser._call(mouse.up)
            finally:
                browser.evaluate(_PIN, False)
            self._mouse = (x2, y2)
        elif op == "press":
            browser.press(KEYS[int(action["key"])])
        elif op in ("scroll_down", "scroll_up"):
            dy = SCROLL_PIXELS if op == "scroll_down" else -SCROLL_PIXELS
            browser.evaluate(_SCROLL, [*self._mouse, dy])

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super(GuiEnv, self).reset(seed=seed)
        self._spec = {"task": self.task_name, "seed": int(self.np_random.integers(1 << 31))}
        self._log, self._steps, self._over = [], 0, False
        self._notes = {}
        for attempt in (0, 1):  # a browser that died between episodes is relaunched once
            try:
                self._load()
                self._refresh()
                break
            except BrowserCrashed:
                self._browser.close()
                if attempt:
                    raise
        self._preload()
        return self._observation(), {
            "task": self.task_name,
            "instructions": self._utterance,
            "blocked_requests": len(self._browser.blocked),
        }

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self._spec is None:
            raise RuntimeError("call reset() before step()")
        self._steps += 1
        info: dict[str, Any] = {"task": self.task_name}
        if self._over:
            return self._crashed(info, BrowserCrashed("stepped after the browser crashed"))
        op = None
        try:
            action = coerce_action(self.action_space, action)
            op = MW_OPS[int(action["op"])]
            if not (self._verdict or {}).get("done"):
                self._apply(action)
            self._log.append(action)
            self._refresh()
        except ActionParseError as exc:
            action_error_info(f"{exc}. Actions: {self._action_help()}", info)
            op = None
        except BrowserCrashed as exc:
            return self._crashed(info, exc)
        except Exception as exc:  # noqa: BLE001 - a page that broke (navigated, threw)
            logger.warning("the page of %s failed: %s", self.task_name, exc)
            self._verdict = None
        verdict = self._verdict
        navigated = verdict is None
        done = bool(verdict and verdict["done"])
        terminated = done or navigated or op == "done"
        truncated = not terminated and self._steps >= self.max_steps
        reward = 0.0
        if navigated:
            info["navigated_away"] = True
        if terminated or truncated:
            raw = _page_reward(verdict["raw"]) if done else -1.0
            success = done and raw > 0
            score = max(0.0, min(1.0, raw)) if done else 0.0
            reward = score
            episode_end(info, success=success, score=score)
            info["raw_reward"] = raw
            info["miniwob_reward"] = _page_reward(verdict["reward"]) if done else -1.0
        info["instructions"] = self._utterance
        info["blocked_requests"] = len(self._browser.blocked)
        return self._observation(), reward, terminated, truncated, info

    def _crashed(
        self, info: dict[str, Any], exc: Exception
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """The browser died or the page stopped answering (:class:`PageTimeout`): truncated, success
        False, upstream's failure reward; the next ``reset`` opens a fresh page."""
        result = super()._crashed(info, exc)
        self._verdict = None
        info["raw_reward"] = info["miniwob_reward"] = -1.0
        info["instructions"] = self._utterance
        return result

    @classmethod
    def shared_resources(cls) -> contextlib.AbstractContextManager[None]:
        """:meth:`GuiEnv.shared_resources` (this thread's Chromium kept running) and a pool of
        preloaded task pages: inside the block, ``close()`` leaves the env's preloaded page (the
        next episode's, loaded and not started) and its played page, loading a new copy of the task
        page as the next reset would have had it do, for the next env of the same task and
        viewport, whose first ``reset`` swaps the first in instead of loading the page and takes
        the other as its second page instead of opening one (at most :data:`PARKED_PAGES` per
        thread, the oldest dropped first). Leaving the outermost block closes what is parked, so
        once the envs are closed no page, Chromium or server is left. ``verigym check`` and the
        leaderboard runner enter it around their envs of this class."""
        return _pool_scope()

    def _park(self) -> list[_Tab]:
        """On ``close()`` inside :meth:`shared_resources`: leave the preloaded page in the pool,
        and the played page too once it starts loading a new copy of the task page (as this
        env's next reset would have had it do), each with a server reference of its own; the
        pages left (maybe none)."""
        key = _thread_key()
        if self._base is None or self.flight or self.clock_ms or not self.preload:
            return []
        with _POOL_LOCK:
            if not _SCOPES.get(key):
                return []
        tabs = [self._next] if self._next.preloading and self._next.browser.alive else []
        if self._tab.browser.alive:
            try:  # started now, the load overlaps the next env's first reset
                self._navigate(self._tab)
                tabs.append(self._tab)
            except Exception as exc:  # noqa: BLE001 - closed instead
                logger.debug("parking the page of %s failed: %s", self.task_name, exc)
        dropped = []
        with _POOL_LOCK:
            parked = _PARKED.setdefault(key, [])
            for tab in tabs:
                parked.append(_Parked((self.task_name, self.width, self.height), tab, self._base))
                server.acquire()  # the entry's own reference: the page's URL stays served
            while len(parked) > PARKED_PAGES:
                dropped.append(parked.pop(0))
        for old in dropped:
            _drop(old)
        return tabs

    def _adopt(self) -> bool:
        """When this env has no preloaded page (its first reset, and the second page it would
        then open): take a parked page of this task and viewport (:meth:`shared_resources`),
        the oldest first (a closed env's preloaded page before its played one), as the preloaded
        one; False when there is none."""
        if self.flight or self.clock_ms or not self.preload:
            return False
        wanted = (self.task_name, self.width, self.height)
        with _POOL_LOCK:
            parked = _PARKED.get(_thread_key(), [])
            entry = next(
                (
                    e
                    for e in parked
                    if e.key == wanted and (self._base is None or e.base == self._base)
                ),
                None,
            )
            if entry is None:
                return False
            parked.remove(entry)
        _close_tab(self._next)  # never launched (a new env's), or closed after a failure
        self._next = entry.tab
        if self._base is None:
            self._base = entry.base  # the entry's server reference is now this env's
        else:
            server.release()
        return True

    def close(self) -> None:
        parked = self._park()
        for tab in (self._tab, self._next):
            if tab not in parked:
                _close_tab(tab)
        if self._base is not None:
            self._base = None
            server.release()

    def __del__(self) -> None:
        if getattr(self, "_base", None) is not None:
            self._base = None
            server.release()

    # -- TextInterface -------------------------------------------------------------------------
    def _action_help(self) -> str:
        return super()._action_help().replace("| done;", "| drag <x1> <y1> <x2> <y2> | done;")

    def instructions(self) -> str:
        text = super().instructions()
        text = text.replace("printable ASCII,", "printable ASCII but <,")
        return text.replace(
            "  done                  finish",
            "  drag <x1> <y1> <x2> <y2>  press at (x1, y1), move to (x2, y2), release\n"
            "  done                  give up",
        ).replace("(Submit, Send, Checkout, ...)", "(the page judges it)")

    def parse_action(self, text: str) -> dict[str, Any]:
        """Read the last action command in ``text`` (:meth:`GuiEnv.parse_action` and ``drag``).

        Raises:
            ActionParseError: no command found, or its values are out of range.
        """
        if not isinstance(text, str):
            raise TypeError(f"expected str, got {type(text).__name__}")
        tail = text[-4000:]
        commands = list(_ANY_COMMAND.finditer(tail))
        drags = list(_COMMAND.finditer(tail))
        if drags and commands and commands[-1].start() == drags[-1].start():
            m = drags[-1]
            points = [int(m[k]) for k in ("x", "y", "x2", "y2")]
            for x, y in (points[:2], points[2:]):
                if not (0 <= x < self.width and 0 <= y < self.height):
                    raise ActionParseError(
                        f"drag point {x} {y} is outside the {self.width}x{self.height} page"
                    )
            return mw_action("drag", xy=tuple(points[:2]), to=tuple(points[2:]))
        parsed = super().parse_action(text)
        if parsed["op"] == OPS.index("type") and "<" in parsed["text"]:
            raise ActionParseError("typed text cannot hold '<'")
        return {**parsed, "to": np.zeros(2, dtype=np.int64)}

    def action_text(self, action: dict[str, Any]) -> str:
        """The text command of a (canonical) action; ``parse_action`` inverts it."""
        if MW_OPS[int(action["op"])] == "drag":
            (x1, y1), (x2, y2) = action["xy"], action["to"]
            return f"drag {int(x1)} {int(y1)} {int(x2)} {int(y2)}"
        return super().action_text(action)

    def task_fingerprint(self) -> Any:
        """The task and the page's seed (the page draws the task from it)."""
        return dict(self._spec) if self._spec else None

    # -- oracle --------------------------------------------------------------------------------
    oracle_action: Any = None
    """The scripted solver, set per instance for the tasks that have one (a method returning the
    next action, read from the utterance and the element list;
    :mod:`verigym.envs.gui.miniwob.oracles`). ``None`` for the others, so the checker, ``verigym
    eval --agent oracle`` and the standings see no oracle there (never a 0)."""

    def _oracle_step(self) -> dict[str, Any]:
        from verigym.envs.gui.miniwob.oracles import ORACLES

        if self._spec is None or self._over:
            return mw_action("done")
        return ORACLES[self.task_name](self._utterance, self._elements, self)
