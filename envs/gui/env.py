"""GuiEnv: web and phone-style app tasks in a real, offline, headless Chromium."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import re
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from verigym.core import (
    ActionParseError,
    EpisodeGuard,
    UnicodeText,
    action_error_info,
    coerce_action,
    episode_end,
)
from verigym.envs.gui.browser import Browser, BrowserCrashed, PageTimeout, held
from verigym.envs.gui.tasks import KEYS, NO_TEXT, OPS, TASKS, make_action
from verigym.kwargs_policy import IntRange, OneOf, client, operator_only
from verigym.render_modes import accept_render_mode
from verigym.validation import check_choice, check_int

__all__ = ["GuiActionSpace", "GuiEnv"]

logger = logging.getLogger(__name__)

TYPE_CHARSET = "".join(chr(c) for c in range(32, 127))
"""Characters the ``type`` action can enter: printable ASCII (letters, digits, space, punctuation)."""
MAX_TYPE_LENGTH = 64
MAX_TREE_LENGTH = 1 << 14
SCROLL_PIXELS = 100

_COMMAND = re.compile(
    r"\b(?P<op>click_xy)\s*\(?\s*(?P<x>-?\d+)\s*[ ,]\s*(?P<y>-?\d+)\s*\)?"
    r"|\b(?P<op2>click)\s*\(?\s*\[?(?P<element>\d+)\]?\s*\)?"
    r"|\b(?P<op3>type)\s*\(?\s*\[?(?P<field>\d+)\]?\s*,?\s*(?P<text>\"(?:[^\"\\]|\\.)*\")\s*\)?"
    r"|\b(?P<op4>press)\s*\(?\s*(?P<key>[A-Za-z]+)\s*\)?"
    r"|\b(?P<op5>scroll)\s*\(?\s*(?P<direction>up|down)\s*\)?"
    r"|\b(?P<op6>done)\b",
    re.IGNORECASE,
)


class GuiActionSpace(spaces.Dict):
    """The structured GUI action: ``Dict(op, element, xy, text, key)``.

    Only the fields of the chosen ``op`` are read; :meth:`sample` returns *canonical* actions (the
    unused fields at their defaults: element 0, xy (0, 0), text ``" "``, key 0), which is also what
    :meth:`GuiEnv.parse_action` returns, so text and tensor actions correspond one to one.
    """

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        raw = super().sample(mask=mask, probability=probability)
        op = OPS[int(raw["op"])]
        return make_action(
            op,
            element=int(raw["element"]) if op in ("click", "type") else 0,
            xy=tuple(raw["xy"]) if op == "click_xy" else (0, 0),
            text=raw["text"] if op == "type" else NO_TEXT,
            key=KEYS[int(raw["key"])] if op == "press" else KEYS[0],
        )


class GuiEnv(EpisodeGuard, gym.Env[dict[str, Any], dict[str, Any]]):
    """A web or phone-style app task on a real headless Chromium, acted on with clicks and keys.

    ## Description
    The page is one of our own HTML/JS tasks (``pages/tasks.js``), generated from the seed: labels,
    layout, values, distractors and the instruction. Task kinds (``task``): ``click-button``,
    ``click-checkboxes``, ``enter-text``, ``login``, ``choose-dropdown``, ``pick-date``,
    ``navigate-tabs``, ``navigate-menu``, ``search-list``, ``email-inbox`` (reply / forward /
    delete), ``form-validation`` (fix the fields the form rejects), ``phone-settings`` (a
    multi-screen phone: toggle Wi-Fi or Bluetooth, set an alarm; the AndroidControl kind),
    ``shopping-cart`` and ``grounding`` (one click inside the described element; ScreenSpot kind).
    The browser is Playwright driving the system Chromium, headless, with a fresh profile and no
    network: every request is aborted (``info["blocked_requests"]`` counts them). One Chromium
    process per Python process (and thread), shared: each env instance (and each pickled or deep
    copy) has its own browser context and page in it, reused across resets. ``close()`` of the last
    env stops that Chromium (no browser process is left); the next env launches it again (about a
    second). To make and close many envs in a row, hold it: ``with GuiEnv.shared_resources():``.

    ## Action Space
    :class:`GuiActionSpace`, a ``Dict``; ``op`` selects what the other fields mean:

    | op | name | fields | effect |
    |----|------|--------|--------|
    | 0 | ``click`` | ``element`` | real mouse click at the centre of element ``element`` (scrolled into view) |
    | 1 | ``click_xy`` | ``xy`` | real mouse click at viewport pixel ``(x, y)`` |
    | 2 | ``type`` | ``element``, ``text`` | click textbox ``element``, select all, insert ``text`` (replaces its content) |
    | 3 | ``press`` | ``key`` | press ``KEYS[key]`` (Enter, Tab, Backspace, Escape, arrows ...) |
    | 4, 5 | ``scroll_down``, ``scroll_up`` | | scroll the page by 100 px |
    | 6 | ``done`` | | end the episode; the verifier judges the page state |

    ``element``: ``Discrete(max_elements)``, an id of the last observation's element list; ``xy``:
    ``MultiDiscrete([width, height])`` pixels; ``text``: ``Text`` of 1-64 printable ASCII
    characters; ``key``: ``Discrete(12)``. Text commands (the text view): ``click 3``,
    ``click_xy 40 120``, ``type 2 "hello"``, ``press Enter``, ``scroll down``, ``done``.

    ## Observation Space
    ``Dict``: ``screenshot`` ``uint8`` ``(viewport_height, viewport_width, 3)`` RGB; ``text`` the
    accessibility tree, one addressable element a line: ``[id] role "name" value=... checked
    @(left,top,right,bottom)`` (pixel boxes; ``offscreen`` when scrolled out of view);
    ``instruction`` the task in words (also shown in the yellow bar at the top of the page).

    ## Rewards
    1.0 on the step that ends the episode with the task verified done, else 0. A malformed action
    (unparsable, out of range, an element id not on the page, typing into a non-textbox) does
    nothing, costs the step and sets ``info["action_error"]``.

    ## Starting State
    A fresh document with the generated task; the mouse at (0, 0), nothing focused, not scrolled.

    ## Episode End
    Terminated when the page's flow finishes (the chosen button/link/menu command, Submit, Send,
    Delete, Checkout, the grounding click) or on ``done``. The verifier compares the page's JavaScript
    state (values the page's own event handlers recorded) with the generated spec; page text never
    counts. ``success`` = verified, ``score`` = 1.0 or 0.0. Truncated after ``max_steps`` steps
    (``success=False``, ``score=0``), or at once if the browser crashed (``info["browser_crashed"]``;
    the next ``reset`` relaunches it) or the page stopped answering: a call into it (a click, a key,
    a screenshot) took over ``Browser.call_timeout`` (20 s), as a script that never returns does
    (also ``info["page_timeout"]`` and ``info["action_error"]``; the next ``reset`` opens a fresh
    page). After the end, ``step`` raises
    :class:`verigym.core.EpisodeEndedError` until ``reset``: the page is not acted on again and the
    verdict cannot change.

    ## Arguments
    * ``task`` (str): one of the task kinds above.
    * ``num_items`` (int | None): the task's difficulty knob (number of buttons, checkboxes,
      options, tabs, menus, list items, emails, apps, products, elements; for ``pick-date`` the
      largest distance in days to the target; for ``form-validation`` the invalid fields);
      ``None`` is the task's default.
    * ``max_steps`` (int | None): step budget; ``None`` is the task's default.
    * ``viewport_width``, ``viewport_height`` (int, 128..1280): page size in pixels (= screenshot).
    * ``max_elements`` (int, 8..256): the longest element list (and the ``element`` range).

    ## Version History
    * v0: initial version.

    References: Shi et al. 2017 (World of Bits), Liu et al. 2018 (MiniWoB++), Li et al. 2024
    (AndroidControl), Cheng et al. 2024 (SeeClick / ScreenSpot).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4, "family": "gui"}

    remote_kwargs = {
        "task": client(OneOf(tuple(sorted(TASKS)))),
        "num_items": client(IntRange(1, 64)),
        "max_steps": operator_only(IntRange(1, 1000), why="raises the cost of an episode"),
        "viewport_width": operator_only(IntRange(128, 1280), why="rendering cost"),
        "viewport_height": operator_only(IntRange(128, 1280), why="rendering cost"),
        "max_elements": operator_only(IntRange(8, 256), why="raises the size of each observation"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        task: str,
        num_items: int | None = None,
        max_steps: int | None = None,
        viewport_width: int = 256,
        viewport_height: int = 256,
        max_elements: int = 64,
        render_mode: str | None = None,
    ):
        spec = TASKS[check_choice("task", task, sorted(TASKS))]
        default, low, high = spec.items
        if num_items is not None:
            check_int(f"num_items of {task}", num_items, low, high)
        if max_steps is not None:
            check_int("max_steps", max_steps, 1)
        check_int("viewport_width", viewport_width, 128, 1280)
        check_int("viewport_height", viewport_height, 128, 1280)
        check_int("max_elements", max_elements, 8, 256)
        render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        self._kwargs = {
            "task": task,
            "num_items": num_items,
            "max_steps": max_steps,
            "viewport_width": viewport_width,
            "viewport_height": viewport_height,
            "max_elements": max_elements,
            "render_mode": render_mode,
        }
        self.task = spec
        self.num_items = default if num_items is None else num_items
        self.max_steps = spec.max_steps if max_steps is None else max_steps
        self.width, self.height = viewport_width, viewport_height
        self.max_elements = max_elements
        self.render_mode = render_mode
        self.observation_space = spaces.Dict(
            {
                "screenshot": spaces.Box(
                    0, 255, shape=(viewport_height, viewport_width, 3), dtype=np.uint8
                ),
                "text": UnicodeText(MAX_TREE_LENGTH),
                "instruction": UnicodeText(1024),
            }
        )
        self.action_space = GuiActionSpace(
            {
                "op": spaces.Discrete(len(OPS)),
                "element": spaces.Discrete(max_elements),
                "xy": spaces.MultiDiscrete([viewport_width, viewport_height]),
                "text": spaces.Text(MAX_TYPE_LENGTH, min_length=1, charset=TYPE_CHARSET),
                "key": spaces.Discrete(len(KEYS)),
            }
        )
        self._browser = Browser(viewport_width, viewport_height)
        self._spec: dict[str, Any] | None = None
        self._log: list[
            dict[str, Any]
        ] = []  # the applied actions of this episode (replayed by copies)
        self._steps = 0
        self._over = False
        self._elements: list[dict[str, Any]] = []
        self._state: dict[str, Any] = {}
        self._screenshot = np.full((viewport_height, viewport_width, 3), 255, dtype=np.uint8)
        self._shot_version = -1

    # -- browser plumbing ----------------------------------------------------------------------
    def _load(self) -> None:
        self._browser.launch()
        self._browser.load(self.task.name, self._spec)
        self._shot_version = -1  # the page's change counter at the last screenshot

    def _refresh(self, screenshot: bool = True) -> None:
        seen = self._browser.evaluate("n => window.vg.observe(n)", self.max_elements)
        self._elements, self._state = seen["elements"], seen["state"]
        if screenshot and seen["version"] != self._shot_version:
            self._screenshot = self._browser.screenshot()
            self._shot_version = seen["version"]

    def _observation(self) -> dict[str, Any]:
        lines = []
        for e in self._elements:
            line = f"[{e['id']}] {e['role']} {json.dumps(e['name'], ensure_ascii=False)}"
            if "value" in e:
                line += f" value={json.dumps(e['value'], ensure_ascii=False)}"
            for flag in ("checked", "expanded", "selected"):
                if e.get(flag):
                    line += f" {flag}"
                elif flag in e and flag != "selected":
                    line += f" not-{flag}"
            if e.get("focused"):
                line += " focused"
            left, top, right, bottom = e["box"]
            line += f" @({left},{top},{right},{bottom})"
            if bottom <= 0 or top >= self.height or right <= 0 or left >= self.width:
                line += " offscreen"
            lines.append(line)
        tree = "\n".join(lines)
        if len(tree) > MAX_TREE_LENGTH:
            tree = tree[: MAX_TREE_LENGTH - 3] + "..."
        instruction = str(self._spec["instruction"]) if self._spec else ""
        return {"screenshot": self._screenshot.copy(), "text": tree, "instruction": instruction}

    def _element(self, index: int) -> dict[str, Any]:
        if index >= len(self._elements):
            raise ActionParseError(
                f"there is no element {index} on the page; the ids are 0..{len(self._elements) - 1}"
            )
        return self._elements[index]

    def _apply(self, action: dict[str, Any]) -> None:
        """Perform one coerced action on the page.

        Raises:
            ActionParseError: the action does not fit the page (no such element, not a textbox).
            BrowserCrashed: the browser died.
        """
        op = OPS[int(action["op"])]
        if op in ("click", "type"):
            element = self._element(int(action["element"]))
            if op == "type" and element["role"] != "textbox":
                raise ActionParseError(
                    f"element {element['id']} is a {element['role']}, not a textbox; type into a textbox"
                )
            left, top, right, bottom = element["box"]
            if 0 <= left and 0 <= top and right <= self.width and bottom <= self.height:
                centre = [(left + right) / 2, (top + bottom) / 2]
            else:  # scrolled out of view: the page scrolls it in and says where it is now
                centre = self._browser.evaluate("id => window.vg.locate(id)", element["id"])
            if centre is None:
                raise ActionParseError(f"element {element['id']} is gone from the page")
            self._browser.click(*centre)
            if op == "type":
                self._browser.press("Control+A")
                self._browser.insert_text(str(action["text"]))
        elif op == "click_xy":
            self._browser.click(*(int(v) for v in action["xy"]))
        elif op == "press":
            self._browser.press(KEYS[int(action["key"])])
        elif op in ("scroll_down", "scroll_up"):
            self._browser.scroll(SCROLL_PIXELS if op == "scroll_down" else -SCROLL_PIXELS)

    def _crashed(
        self, info: dict[str, Any], exc: Exception
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        logger.warning("the browser of %s crashed: %s", self._kwargs["task"], exc)
        self._browser.close()
        self._over = True
        self._elements, self._state = [], {}
        self._screenshot = np.full((self.height, self.width, 3), 255, dtype=np.uint8)
        info["browser_crashed"] = True
        episode_end(info, success=False, score=0.0)
        observation = self._observation()
        observation["text"] = "The browser crashed; the episode is over. Call reset()."
        if isinstance(exc, PageTimeout):  # the page stopped answering (a script that never ends)
            info["page_timeout"] = True
            action_error_info(f"{exc}; the episode is over (truncated). Call reset().", info)
            observation["text"] = "The page stopped answering; the episode is over. Call reset()."
        return observation, 0.0, False, True, info

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self._spec = self.task.generate(self.np_random, self.num_items, self.width, self.height)
        self._log, self._steps, self._over = [], 0, False
        for attempt in (0, 1):  # a browser that died between episodes is relaunched once
            try:
                self._load()
                self._refresh()
                break
            except BrowserCrashed:
                self._browser.close()
                if attempt:
                    raise
        return self._observation(), {
            "task": self.task.name,
            "blocked_requests": len(self._browser.blocked),
        }

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self._spec is None:
            raise RuntimeError("call reset() before step()")
        self._steps += 1
        info: dict[str, Any] = {"task": self.task.name}
        if self._over:
            return self._crashed(info, BrowserCrashed("stepped after the browser crashed"))
        op = None
        try:
            action = coerce_action(self.action_space, action)
            op = OPS[int(action["op"])]
            self._apply(action)
            self._log.append(action)
            self._refresh()
        except ActionParseError as exc:
            action_error_info(f"{exc}. Actions: {self._action_help()}", info)
            op = None
        except BrowserCrashed as exc:
            return self._crashed(info, exc)
        terminated = bool(self._state.get("ended")) or op == "done"
        truncated = not terminated and self._steps >= self.max_steps
        reward = 0.0
        if terminated or truncated:
            success = terminated and bool(self.task.verify(self._spec, self._state))
            reward = 1.0 if success else 0.0
            episode_end(info, success=success, score=reward)
        info["blocked_requests"] = len(self._browser.blocked)
        return self._observation(), reward, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array":
            return self._screenshot.copy()
        return None

    def close(self) -> None:
        self._browser.close()

    @classmethod
    def shared_resources(cls) -> contextlib.AbstractContextManager[None]:
        """A context manager that keeps what GUI envs share (this thread's Chromium) running while
        many envs are made and closed in a row (:func:`verigym.envs.gui.browser.held`); ``verigym
        check`` and the leaderboard runner enter it around their envs of this class."""
        return held()

    # -- copies: a live browser cannot be pickled, so a copy replays the episode in its own ------
    def __getstate__(self) -> dict[str, Any]:
        generator = self._np_random.bit_generator.state if self._np_random is not None else None
        return {
            "kwargs": dict(self._kwargs),
            "rng": copy.deepcopy(generator),
            "spec": copy.deepcopy(self._spec),
            "log": copy.deepcopy(self._log),
            "steps": self._steps,
            "over": self._over,
            "episode_over": self._episode_over,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["kwargs"])
        if state["rng"] is not None:
            generator = np.random.Generator(getattr(np.random, state["rng"]["bit_generator"])())
            generator.bit_generator.state = state["rng"]
            self._np_random = generator
        self._spec, self._steps, self._over = state["spec"], state["steps"], state["over"]
        self._episode_over = bool(state.get("episode_over", False))
        if self._spec is not None and not self._over:
            self._load()
            for action in state["log"]:
                self._refresh(screenshot=False)
                self._apply(action)
            self._log = state["log"]
            self._refresh()

    def __deepcopy__(self, memo: dict[int, Any]) -> GuiEnv:
        clone = type(self).__new__(type(self))
        clone.__setstate__(self.__getstate__())
        memo[id(self)] = clone
        return clone

    # -- TextInterface -------------------------------------------------------------------------
    def _action_help(self) -> str:
        return (
            'click <id> | click_xy <x> <y> | type <id> "<text>" | press <key> | scroll down | scroll up | done; '
            f"keys: {', '.join(KEYS)}"
        )

    def instructions(self) -> str:
        return (
            f"You operate a web page of {self.width}x{self.height} pixels. Each observation gives the task and "
            'the page\'s elements, one a line: [id] role "name", its value and state, and its box '
            "@(left,top,right,bottom) in pixels. Reply with one action:\n"
            "  click <id>            click element <id>\n"
            "  click_xy <x> <y>      click at pixel (x, y)\n"
            '  type <id> "<text>"    replace the content of textbox <id> with text (JSON string, printable ASCII, at most 64 characters)\n'
            f"  press <key>           press a key: {', '.join(KEYS)}\n"
            "  scroll down | scroll up\n"
            "  done                  finish (the page state is then checked)\n"
            f"The episode ends when the task's flow finishes (Submit, Send, Checkout, ...), on done, or after {self.max_steps} steps."
        )

    def observation_text(self, observation: dict[str, Any]) -> str:
        return f"Task: {observation['instruction']}\nElements:\n{observation['text']}"

    def parse_action(self, text: str) -> dict[str, Any]:
        """Read the last action command in ``text`` (formats in :meth:`instructions`).

        Raises:
            ActionParseError: no command found, or its values are out of range.
        """
        if not isinstance(text, str):
            raise TypeError(f"expected str, got {type(text).__name__}")
        matches = list(_COMMAND.finditer(text[-4000:]))
        if not matches:
            raise ActionParseError(f"no action found; reply with one of: {self._action_help()}")
        m = matches[-1]
        if m["op"]:
            x, y = int(m["x"]), int(m["y"])
            if not (0 <= x < self.width and 0 <= y < self.height):
                raise ActionParseError(
                    f"click_xy {x} {y} is outside the {self.width}x{self.height} page"
                )
            return make_action("click_xy", xy=(x, y))
        if m["op2"] or m["op3"]:
            index = int(m["element"] or m["field"])
            if index >= self.max_elements:
                raise ActionParseError(f"element ids are below {self.max_elements}, got {index}")
            if m["op2"]:
                return make_action("click", element=index)
            try:
                typed = json.loads(m["text"])
            except ValueError:
                raise ActionParseError(
                    'write the text as a JSON string in double quotes, e.g. type 2 "hello"'
                ) from None
            if not 1 <= len(typed) <= MAX_TYPE_LENGTH or any(c not in TYPE_CHARSET for c in typed):
                raise ActionParseError(
                    f"typed text must be 1 to {MAX_TYPE_LENGTH} printable ASCII characters"
                )
            return make_action("type", element=index, text=typed)
        if m["op4"]:
            names = {k.lower(): k for k in KEYS}
            if m["key"].lower() not in names:
                raise ActionParseError(f"unknown key {m['key']!r}; keys: {', '.join(KEYS)}")
            return make_action("press", key=names[m["key"].lower()])
        if m["op5"]:
            return make_action("scroll_down" if m["direction"].lower() == "down" else "scroll_up")
        return make_action("done")

    def action_text(self, action: dict[str, Any]) -> str:
        """The text command of a (canonical) action; ``parse_action`` inverts it."""
        op = OPS[int(action["op"])]
        if op == "click":
            return f"click {int(action['element'])}"
        if op == "click_xy":
            return f"click_xy {int(action['xy'][0])} {int(action['xy'][1])}"
        if op == "type":
            return f"type {int(action['element'])} {json.dumps(action['text'])}"
        if op == "press":
            return f"press {KEYS[int(action['key'])]}"
        if op in ("scroll_down", "scroll_up"):
            return op.replace("_", " ")
        return "done"

    def task_fingerprint(self) -> Any:
        """The generated page spec (the task's target values and layout); the screenshot and the
        element list are left to the observation."""
        from verigym.task_split import canonical

        return canonical(self._spec)

    # -- oracle --------------------------------------------------------------------------------
    def oracle_action(self) -> dict[str, Any]:
        """The scripted solver's next action, from the page state and the current element list."""
        if self._spec is None or self._over:
            return make_action("done")
        return self.task.oracle(self._spec, self._state, self._elements)
