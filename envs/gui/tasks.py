"""The GUI tasks: a generator, a verifier and a scripted solver for each page in ``pages/tasks.js``.

A task is three pure functions over JSON data:

* ``generate(rng, num_items, width, height) -> spec``: everything random about the episode (labels,
  layout, values, distractors and the instruction), drawn from the env's ``np_random``. The page
  renders the spec deterministically.
* ``verify(spec, state) -> bool``: the verdict from the page's JavaScript state (``window.vg.st``,
  values the page's own event handlers wrote); text shown on the page is never read.
* ``oracle(spec, state, elements) -> action``: the scripted solver's next action, computed from the
  current state alone, so it recovers from any detour (the checker interleaves random actions).

The task kinds follow MiniWoB++ (Shi et al. 2017; Liu et al. 2018: click-button, click-checkboxes,
enter-text, login-user, choose-list, choose-date, click-tab, click-menu, search-engine, email-inbox),
AndroidControl (Li et al. 2024: multi-screen app control) and ScreenSpot (Cheng et al. 2024:
single-step grounding, a click inside the described element's box).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["KEYS", "OPS", "TASKS", "Task", "make_action"]

OPS = ("click", "click_xy", "type", "press", "scroll_down", "scroll_up", "done")
"""Action kinds (``action["op"]`` indexes this tuple)."""
KEYS = (
    "Enter",
    "Tab",
    "Backspace",
    "Escape",
    "Delete",
    "ArrowUp",
    "ArrowDown",
    "ArrowLeft",
    "ArrowRight",
    "Home",
    "End",
    "Space",
)
"""Keys of the ``press`` action (``action["key"]`` indexes this tuple); Playwright key names."""
NO_TEXT = " "
"""The ``text`` field of actions that type nothing (the space's texts have at least one character)."""

Spec = dict[str, Any]
State = dict[str, Any]
Elements = list[dict[str, Any]]
Action = dict[str, Any]

WORDS = (
    "amber",
    "apple",
    "berry",
    "birch",
    "cedar",
    "coral",
    "delta",
    "dune",
    "echo",
    "ember",
    "fern",
    "fjord",
    "glade",
    "grape",
    "harbor",
    "hazel",
    "indigo",
    "iris",
    "jade",
    "juniper",
    "kiwi",
    "lemon",
    "lotus",
    "maple",
    "mint",
    "nectar",
    "nova",
    "olive",
    "pearl",
    "quartz",
    "raven",
    "sage",
    "tulip",
    "umber",
    "violet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
    "cobalt",
)
PEOPLE = (
    "Alice",
    "Bruno",
    "Chen",
    "Dana",
    "Emeka",
    "Fatima",
    "Goran",
    "Hana",
    "Ivan",
    "Jia",
    "Kofi",
    "Lena",
    "Mateo",
    "Nora",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tariq",
    "Uma",
    "Viktor",
    "Wen",
    "Yara",
)
SURNAMES = (
    "Stone",
    "Rivera",
    "Okafor",
    "Novak",
    "Tanaka",
    "Berg",
    "Haddad",
    "Costa",
    "Larsen",
    "Moreau",
)
COLORS = {
    "red": "#c62828",
    "blue": "#1565c0",
    "green": "#2e7d32",
    "purple": "#6a1b9a",
    "orange": "#e65100",
    "black": "#212121",
}
PRODUCTS = (
    "mug",
    "pen",
    "notebook",
    "lamp",
    "scarf",
    "kettle",
    "backpack",
    "candle",
    "plant",
    "clock",
    "towel",
    "bottle",
)
PHRASES = (
    "Thanks, got it",
    "See you Monday",
    "Sounds good",
    "I will call you",
    "Please send the file",
    "Works for me",
)
SUBJECTS = (
    "Lunch plans",
    "Project update",
    "Invoice",
    "Weekend trip",
    "Meeting notes",
    "Quick question",
    "Photos",
    "Schedule",
)


def make_action(
    op: str,
    *,
    element: int = 0,
    xy: tuple[int, int] = (0, 0),
    text: str = NO_TEXT,
    key: str = KEYS[0],
) -> Action:
    """A canonical action dict (unused fields at their defaults), e.g. ``make_action("click", element=3)``."""
    return {
        "op": OPS.index(op),
        "element": int(element),
        "xy": np.asarray(xy, dtype=np.int64),
        "text": text,
        "key": KEYS.index(key),
    }


def _find(elements: Elements, role: str, name: str | None = None) -> dict[str, Any] | None:
    for element in elements:
        if element["role"] == role and (name is None or element["name"] == name):
            return element
    return None


def _click(elements: Elements, role: str, name: str | None = None) -> Action:
    element = _find(elements, role, name)
    if element is None:  # the page is not where the solver expects it: press Escape and look again
        return make_action("press", key="Escape")
    return make_action("click", element=element["id"])


def _type(elements: Elements, name: str, text: str) -> Action:
    element = _find(elements, "textbox", name)
    if element is None:
        return make_action("press", key="Escape")
    return make_action("type", element=element["id"], text=text)


def _pick(rng: np.random.Generator, pool: tuple[str, ...] | list[str], k: int) -> list[str]:
    return [str(pool[i]) for i in rng.choice(len(pool), size=k, replace=False)]


def _cells(
    rng: np.random.Generator, k: int, width: int, height: int, cell: tuple[int, int]
) -> tuple[list[tuple[int, int]], int]:
    """``k`` distinct random cells of a grid over the task area: top-left pixels, and the area height."""
    area_height = max(cell[1], height - 46)
    columns, rows = max(1, (width - 8) // cell[0]), max(1, area_height // cell[1])
    if k > columns * rows:
        raise ValueError(
            f"{k} elements do not fit a {width}x{height} viewport; use a larger viewport or fewer items"
        )
    chosen = rng.choice(columns * rows, size=k, replace=False)
    return [
        (
            int(c % columns) * cell[0] + int(rng.integers(0, 6)),
            int(c // columns) * cell[1] + int(rng.integers(0, 4)),
        )
        for c in chosen
    ], area_height


@dataclass(frozen=True)
class Task:
    """One task kind.

    Attributes:
        name: the page's task name (``tasks.js``).
        generate: ``(rng, num_items, width, height) -> spec`` with ``spec["instruction"]``.
        verify: ``(spec, state) -> success``.
        oracle: ``(spec, state, elements) -> action``.
        items: ``(default, minimum, maximum)`` of the ``num_items`` knob (buttons, checkboxes,
            options, emails, products ... by task).
        max_steps: default step budget.
        ends_on_done: the episode ends only with the ``done`` action (app-control tasks); other tasks
            end when the page's flow finishes (submit, send, checkout, the chosen click).
    """

    name: str
    generate: Callable[[np.random.Generator, int, int, int], Spec]
    verify: Callable[[Spec, State], bool]
    oracle: Callable[[Spec, State, Elements], Action]
    items: tuple[int, int, int]
    max_steps: int
    ends_on_done: bool = False


TASKS: dict[str, Task] = {}


def _task(
    name: str, items: tuple[int, int, int], max_steps: int, *, ends_on_done: bool = False
) -> Callable:
    def register(functions: type) -> type:
        TASKS[name] = Task(
            name,
            functions.generate,
            functions.verify,
            functions.oracle,
            items,
            max_steps,
            ends_on_done,
        )
        return functions

    return register


# -- click-button ------------------------------------------------------------------------------
@_task("click-button", items=(4, 2, 16), max_steps=10)
class _ClickButton:
    @staticmethod
    def generate(rng, n, width, height):
        labels = _pick(rng, WORDS, n)
        cells, area = _cells(rng, n, width, height, (80, 24))
        target = labels[int(rng.integers(n))]
        buttons = [
            {"label": label.capitalize(), "x": x, "y": y} for label, (x, y) in zip(labels, cells)
        ]
        return {
            "instruction": f'Click the button "{target.capitalize()}".',
            "buttons": buttons,
            "target": target.capitalize(),
            "height": area,
        }

    @staticmethod
    def verify(spec, state):
        return state["clicked"] == spec["target"]

    @staticmethod
    def oracle(spec, state, elements):
        return _click(elements, "button", spec["target"])


# -- click-checkboxes --------------------------------------------------------------------------
@_task("click-checkboxes", items=(5, 2, 12), max_steps=20)
class _ClickCheckboxes:
    @staticmethod
    def generate(rng, n, width, height):
        items = _pick(rng, WORDS, n)
        targets = sorted(_pick(rng, items, int(rng.integers(1, n + 1))))
        initial = [bool(b) for b in rng.random(n) < 0.3]
        quoted = ", ".join(f'"{t}"' for t in targets)
        return {
            "instruction": f"Select exactly {quoted} and click Submit.",
            "items": items,
            "initial": initial,
            "targets": targets,
        }

    @staticmethod
    def verify(spec, state):
        return sorted(state["checked"]) == spec["targets"]

    @staticmethod
    def oracle(spec, state, elements):
        for item in spec["items"]:
            if (item in spec["targets"]) != (item in state["checked"]):
                return _click(elements, "checkbox", item)
        return _click(elements, "button", "Submit")


# -- enter-text --------------------------------------------------------------------------------
@_task("enter-text", items=(1, 1, 3), max_steps=10)
class _EnterText:
    @staticmethod
    def generate(rng, n, width, height):
        phrase = " ".join(_pick(rng, WORDS, n))
        label = str(rng.choice(["Your answer", "Text", "Note", "Word"]))
        return {
            "instruction": f'Enter "{phrase}" into the text box and click Submit.',
            "phrase": phrase,
            "label": label,
        }

    @staticmethod
    def verify(spec, state):
        return state["value"] == spec["phrase"]

    @staticmethod
    def oracle(spec, state, elements):
        if state["value"] != spec["phrase"]:
            return _type(elements, spec["label"], spec["phrase"])
        return _click(elements, "button", "Submit")


# -- login -------------------------------------------------------------------------------------
@_task("login", items=(6, 4, 12), max_steps=12)
class _Login:
    @staticmethod
    def generate(rng, n, width, height):
        user = f"{str(rng.choice(PEOPLE)).lower()}{int(rng.integers(10, 100))}"
        alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
        password = "".join(alphabet[i] for i in rng.integers(0, len(alphabet), size=n))
        return {
            "instruction": f'Log in with username "{user}" and password "{password}".',
            "username": user,
            "password": password,
        }

    @staticmethod
    def verify(spec, state):
        return state["username"] == spec["username"] and state["password"] == spec["password"]

    @staticmethod
    def oracle(spec, state, elements):
        for field, label in (("username", "Username"), ("password", "Password")):
            if state[field] != spec[field]:
                return _type(elements, label, spec[field])
        return _click(elements, "button", "Log in")


# -- choose-dropdown ---------------------------------------------------------------------------
@_task("choose-dropdown", items=(5, 2, 10), max_steps=12)
class _ChooseDropdown:
    @staticmethod
    def generate(rng, n, width, height):
        options = [w.capitalize() for w in _pick(rng, WORDS, n)]
        target = options[int(rng.integers(n))]
        label = str(rng.choice(["Favourite colour", "Category", "Size", "Country", "Plan"]))
        return {
            "instruction": f'Choose "{target}" from the "{label}" list and click Submit.',
            "options": options,
            "target": target,
            "label": label,
        }

    @staticmethod
    def verify(spec, state):
        return state["selected"] == spec["target"]

    @staticmethod
    def oracle(spec, state, elements):
        if state["selected"] == spec["target"]:
            return _click(elements, "button", "Submit")
        if not state["open"]:
            return _click(elements, "combobox", spec["label"])
        return _click(elements, "option", spec["target"])


# -- pick-date ---------------------------------------------------------------------------------
@_task("pick-date", items=(60, 0, 400), max_steps=25)
class _PickDate:
    """``num_items`` is the largest distance in days between the shown month's "today" and the target."""

    @staticmethod
    def generate(rng, n, width, height):
        today = datetime.date(2024, 1, 1) + datetime.timedelta(days=int(rng.integers(0, 3 * 365)))
        target = today + datetime.timedelta(days=int(rng.integers(-n, n + 1)))
        return {
            "instruction": f"Pick the date {target:%m/%d/%Y} ({target:%B} {target.day}, {target.year}) and click Submit.",
            "today": [today.year, today.month, today.day],
            "target": [target.year, target.month, target.day],
        }

    @staticmethod
    def verify(spec, state):
        return state["date"] == spec["target"]

    @staticmethod
    def oracle(spec, state, elements):
        year, month, day = spec["target"]
        if state["date"] == spec["target"]:
            return _click(elements, "button", "Submit")
        if not state["open"]:
            return _click(elements, "combobox", "Date")
        shown = state["view"][0] * 12 + state["view"][1]
        if shown != year * 12 + month:
            return _click(
                elements, "button", "Next month" if shown < year * 12 + month else "Previous month"
            )
        return _click(elements, "gridcell", str(day))


# -- navigate-tabs -----------------------------------------------------------------------------
TAB_TITLES = ("Home", "News", "Sports", "Music", "Travel", "Food", "Tech", "Books")


@_task("navigate-tabs", items=(4, 2, 8), max_steps=10)
class _NavigateTabs:
    @staticmethod
    def generate(rng, n, width, height):
        titles = _pick(rng, TAB_TITLES, n)
        tabs = [
            {"title": t, "links": _pick(rng, WORDS[:12], int(rng.integers(2, 5)))} for t in titles
        ]
        tab = int(rng.integers(1, n)) if n > 1 else 0
        link = tabs[tab]["links"][int(rng.integers(len(tabs[tab]["links"])))]
        return {
            "instruction": f'Open the "{titles[tab]}" tab and click the link "{link}" there.',
            "tabs": tabs,
            "target": [titles[tab], link],
        }

    @staticmethod
    def verify(spec, state):
        return state["clicked"] == spec["target"]

    @staticmethod
    def oracle(spec, state, elements):
        tab, link = spec["target"]
        if spec["tabs"][state["tab"]]["title"] != tab:
            return _click(elements, "tab", tab)
        return _click(elements, "link", link)


# -- navigate-menu -----------------------------------------------------------------------------
MENU_LEVELS = (
    ("File", "Edit", "View", "Tools", "Window", "Help"),
    ("Export", "Import", "Share", "Print", "Format", "Insert", "Zoom", "Layout"),
    ("PDF", "PNG", "Word", "Email", "Link", "Large", "Small", "Grid", "Table", "Chart"),
)


@_task("navigate-menu", items=(4, 2, 6), max_steps=12)
class _NavigateMenu:
    """``num_items`` is the number of top-level menus; each opens 2-4 submenus of 2-4 commands."""

    @staticmethod
    def generate(rng, n, width, height):
        def level(depth: int, k: int) -> list[dict[str, Any]]:
            nodes = [{"label": label} for label in _pick(rng, MENU_LEVELS[depth], k)]
            if depth + 1 < len(MENU_LEVELS):
                for node in nodes:
                    node["children"] = level(depth + 1, int(rng.integers(2, 5)))
            return nodes

        menu = level(0, n)
        path, nodes = [], menu
        while nodes:
            node = nodes[int(rng.integers(len(nodes)))]
            path.append(node["label"])
            nodes = node.get("children")
        return {
            "instruction": "Choose " + " > ".join(path) + " from the menu.",
            "menu": menu,
            "path": path,
        }

    @staticmethod
    def verify(spec, state):
        return state["chosen"] == spec["path"]

    @staticmethod
    def oracle(spec, state, elements):
        path = spec["path"]
        for depth, label in enumerate(path[:-1]):
            if len(state["open"]) <= depth or state["open"][depth] != label:
                return _click(elements, "menuitem", label)
        return _click(elements, "menuitem", path[-1])


# -- search-list -------------------------------------------------------------------------------
@_task("search-list", items=(20, 5, 30), max_steps=12)
class _SearchList:
    @staticmethod
    def generate(rng, n, width, height):
        first, second = _pick(rng, WORDS, n), [w.capitalize() for w in _pick(rng, WORDS, n)]
        items = [
            {
                "name": f"{a.capitalize()} {b}",
                "desc": f"Item {int(rng.integers(100, 1000))}, rated {int(rng.integers(1, 6))}/5",
            }
            for a, b in zip(first, second)
        ]
        target = items[int(rng.integers(n))]["name"]
        return {
            "instruction": f'Search for "{target}" and open that result.',
            "items": items,
            "target": target,
        }

    @staticmethod
    def verify(spec, state):
        return state["opened"] == spec["target"]

    @staticmethod
    def oracle(spec, state, elements):
        if state["results"] is not None and spec["target"] in state["results"]:
            return _click(elements, "link", spec["target"])
        if state["query"] != spec["target"]:
            return _type(elements, "Search", spec["target"])
        return _click(elements, "button", "Search")


# -- email-inbox -------------------------------------------------------------------------------
@_task("email-inbox", items=(5, 2, 10), max_steps=15)
class _EmailInbox:
    @staticmethod
    def generate(rng, n, width, height):
        senders = _pick(rng, PEOPLE, n + 1)
        emails = [
            {
                "id": i,
                "sender": s,
                "subject": str(rng.choice(SUBJECTS)),
                "body": f"Hi, {str(rng.choice(PHRASES)).lower()}.",
            }
            for i, s in enumerate(senders[:n])
        ]
        target = emails[int(rng.integers(n))]
        kind = str(rng.choice(["reply", "forward", "delete"]))
        goal: dict[str, Any] = {"kind": kind, "id": target["id"]}
        if kind == "reply":
            goal["body"] = str(rng.choice(PHRASES))
            instruction = (
                f'Reply to the email from {target["sender"]} with the message "{goal["body"]}".'
            )
        elif kind == "forward":
            goal["to"] = f"{senders[n].lower()}@mail.com"
            instruction = f"Forward the email from {target['sender']} to {goal['to']}."
        else:
            instruction = f"Delete the email from {target['sender']}."
        return {"instruction": instruction, "emails": emails, "goal": goal}

    @staticmethod
    def verify(spec, state):
        done, goal = state["done"], spec["goal"]
        if not done or done["kind"] != goal["kind"] or done["id"] != goal["id"]:
            return False
        if goal["kind"] == "reply":
            return done["body"] == goal["body"]
        if goal["kind"] == "forward":
            return done["to"] == goal["to"]
        return True

    @staticmethod
    def oracle(spec, state, elements):
        goal = spec["goal"]
        mail = next(m for m in spec["emails"] if m["id"] == goal["id"])
        screen = state["screen"]
        if screen == "inbox":
            return _click(elements, "link", f"{mail['sender']}: {mail['subject']}")
        if screen == "read":
            if state["open"] != goal["id"]:
                return _click(elements, "button", "Back")
            return _click(elements, "button", goal["kind"].capitalize())
        if state["open"] != goal["id"] or state["mode"] != goal["kind"]:
            return _click(elements, "button", "Back")
        if goal["kind"] == "reply" and state["body"] != goal["body"]:
            return _type(elements, "Message", goal["body"])
        if goal["kind"] == "forward" and state["to"] != goal["to"]:
            return _type(elements, "To", goal["to"])
        return _click(elements, "button", "Send")


# -- form-validation ---------------------------------------------------------------------------
@_task("form-validation", items=(2, 1, 3), max_steps=15)
class _FormValidation:
    """``num_items`` is the number of prefilled fields that start out invalid."""

    @staticmethod
    def generate(rng, n, width, height):
        first, last = str(rng.choice(PEOPLE)), str(rng.choice(SURNAMES))
        target = {
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}@example.com",
            "age": str(int(rng.integers(18, 100))),
        }
        broken = {
            "name": "",
            "email": str(
                rng.choice(
                    [
                        f"{first.lower()}.{last.lower()}example.com",
                        f"{first.lower()}@",
                        f"{first.lower()} {last.lower()}@example.com",
                    ]
                )
            ),
            "age": str(
                rng.choice(["abc", str(int(rng.integers(1, 18))), str(int(rng.integers(100, 200)))])
            ),
        }
        wrong = set(_pick(rng, ("name", "email", "age"), n))
        initial = {field: broken[field] if field in wrong else target[field] for field in target}
        instruction = f'Submit the form with name "{target["name"]}", email "{target["email"]}" and age {target["age"]}; fix the invalid fields.'
        return {"instruction": instruction, "target": target, "initial": initial}

    @staticmethod
    def verify(spec, state):
        return state["submitted"] == spec["target"]

    @staticmethod
    def oracle(spec, state, elements):
        for field, label in (("name", "Name"), ("email", "Email"), ("age", "Age")):
            if state[field] != spec["target"][field]:
                return _type(elements, label, spec["target"][field])
        return _click(elements, "button", "Submit")


# -- phone-settings ----------------------------------------------------------------------------
APPS = ("Settings", "Clock", "Camera", "Messages", "Maps", "Music", "Photos", "Weather")
BACK_FROM = {
    "settings": "home",
    "clock": "home",
    "wifi": "settings",
    "bluetooth": "settings",
    "alarm": "clock",
}


@_task("phone-settings", items=(6, 2, 8), max_steps=25, ends_on_done=True)
class _PhoneSettings:
    """``num_items`` is the number of apps on the home screen (Settings and Clock always among them)."""

    @staticmethod
    def generate(rng, n, width, height):
        apps = ["Settings", "Clock", *_pick(rng, APPS[2:], n - 2)]
        apps = [apps[i] for i in rng.permutation(len(apps))]
        initial = {"wifi": bool(rng.random() < 0.5), "bluetooth": bool(rng.random() < 0.5)}
        others = [
            f"{int(h):02d}:{int(m) * 5:02d}"
            for h, m in zip(rng.integers(0, 24, size=2), rng.integers(0, 12, size=2))
        ]
        initial["alarms"] = sorted(set(others[: int(rng.integers(0, 3))]))
        goal = {"wifi": initial["wifi"], "bluetooth": initial["bluetooth"], "alarm": None}
        kind = str(rng.choice(["wifi", "bluetooth", "alarm"]))
        if kind == "alarm":
            alarm = f"{int(rng.integers(0, 24)):02d}:{int(rng.integers(0, 12)) * 5:02d}"
            while alarm in initial["alarms"]:
                alarm = f"{int(rng.integers(0, 24)):02d}:{int(rng.integers(0, 12)) * 5:02d}"
            goal["alarm"] = alarm
            instruction = f"Set an alarm for {alarm}, then say done."
        else:
            goal[kind] = not initial[kind]
            label = "Wi-Fi" if kind == "wifi" else "Bluetooth"
            instruction = f"Turn {label} {'on' if goal[kind] else 'off'}, then say done."
        return {"instruction": instruction, "apps": apps, "initial": initial, "goal": goal}

    @staticmethod
    def verify(spec, state):
        goal = spec["goal"]
        alarm_ok = goal["alarm"] is None or goal["alarm"] in state["alarms"]
        return (
            state["wifi"] == goal["wifi"] and state["bluetooth"] == goal["bluetooth"] and alarm_ok
        )

    @staticmethod
    def oracle(spec, state, elements):
        goal, screen = spec["goal"], state["screen"]
        for key, label in (("wifi", "Wi-Fi"), ("bluetooth", "Bluetooth")):
            if state[key] != goal[key]:
                if screen == key:
                    return _click(elements, "switch", label)
                if screen == "settings":
                    return _click(elements, "link", label)
                if screen == "home":
                    return _click(elements, "button", "Settings")
                return _click(elements, "button", "Back")
        if goal["alarm"] is not None and goal["alarm"] not in state["alarms"]:
            if screen == "alarm":
                hour, minute = (int(v) for v in goal["alarm"].split(":"))
                if state["hour"] != hour:
                    return _click(
                        elements,
                        "button",
                        "Hour up" if (hour - state["hour"]) % 24 <= 12 else "Hour down",
                    )
                if state["minute"] != minute:
                    return _click(
                        elements,
                        "button",
                        "Minute up" if (minute - state["minute"]) % 60 <= 30 else "Minute down",
                    )
                return _click(elements, "button", "Save")
            if screen == "clock":
                return _click(elements, "button", "Add alarm")
            if screen == "home":
                return _click(elements, "button", "Clock")
            return _click(elements, "button", "Back")
        return make_action("done")


# -- shopping-cart -----------------------------------------------------------------------------
@_task("shopping-cart", items=(5, 2, 10), max_steps=25)
class _ShoppingCart:
    @staticmethod
    def generate(rng, n, width, height):
        colors = list(COLORS)
        names = sorted(
            {
                f"{colors[int(rng.integers(len(colors)))].capitalize()} {p}"
                for p in _pick(rng, PRODUCTS, n)
            }
        )
        products = [{"name": name, "price": int(rng.integers(2, 100))} for name in names]
        products = [products[i] for i in rng.permutation(len(products))]
        chosen = _pick(rng, names, int(rng.integers(1, min(3, len(names)) + 1)))
        order = {name: int(rng.integers(1, 3)) for name in sorted(chosen)}
        wanted = " and ".join(f"{q} x {name}" for name, q in order.items())
        return {
            "instruction": f"Buy {wanted} (nothing else): add them to the cart and check out.",
            "products": products,
            "order": order,
        }

    @staticmethod
    def verify(spec, state):
        bought = {k: v for k, v in (state["purchased"] or {}).items() if v > 0}
        return state["purchased"] is not None and bought == spec["order"]

    @staticmethod
    def oracle(spec, state, elements):
        order, cart = spec["order"], state["cart"]
        missing = [name for name in order if cart.get(name, 0) < order[name]]
        extra = [name for name in cart if cart[name] > order.get(name, 0)]
        if state["screen"] == "shop":
            if missing:
                return _click(elements, "button", f"Add {missing[0]}")
            return _click(elements, "link", "Cart")
        if extra:
            return _click(elements, "button", f"Remove {extra[0]}")
        if missing:
            return _click(elements, "link", "Back to shop")
        return _click(elements, "button", "Checkout")


# -- grounding ---------------------------------------------------------------------------------
KIND_ROLE = {"button": "button", "link": "link", "icon": "img", "label": "text"}


@_task("grounding", items=(8, 2, 16), max_steps=5)
class _Grounding:
    """One click (``click_xy`` or ``click``) at the described element; ``num_items`` elements."""

    @staticmethod
    def generate(rng, n, width, height):
        cells, area = _cells(rng, n, width, height, (80, 28))
        kinds, colors = list(KIND_ROLE), list(COLORS)
        seen: set[tuple[str, str]] = set()
        elements = []
        for x, y in cells:
            while True:
                kind, label = (
                    kinds[int(rng.integers(len(kinds)))],
                    str(rng.choice(WORDS[:10])).capitalize(),
                )
                if (kind, label) not in seen:
                    break
            seen.add((kind, label))
            color = colors[int(rng.integers(len(colors)))]
            elements.append(
                {
                    "kind": kind,
                    "label": label,
                    "color": COLORS[color],
                    "color_name": color,
                    "x": x,
                    "y": y,
                }
            )
        target = int(rng.integers(n))
        e = elements[target]
        what = {"button": "button", "link": "link", "icon": "round icon", "label": "text label"}[
            e["kind"]
        ]
        named = f'named "{e["label"]}"' if e["kind"] == "icon" else f'"{e["label"]}"'
        return {
            "instruction": f"Click the {e['color_name']} {what} {named}.",
            "elements": elements,
            "target": target,
            "height": area,
        }

    @staticmethod
    def verify(spec, state):
        if state["click"] is None:
            return False
        (x, y), (left, top, right, bottom) = state["click"], state["box"]
        return left <= x < right and top <= y < bottom

    @staticmethod
    def oracle(spec, state, elements):
        e = spec["elements"][spec["target"]]
        found = _find(elements, KIND_ROLE[e["kind"]], e["label"])
        if found is None:
            return make_action("press", key="Escape")
        left, top, right, bottom = found["box"]
        return make_action("click_xy", xy=((left + right) // 2, (top + bottom) // 2))
