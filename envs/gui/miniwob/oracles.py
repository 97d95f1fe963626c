"""Scripted solvers of MiniWoB++ tasks: the next action from the utterance and the element list.

Each solver reads only what the agent reads (the instruction, the observation's elements: role,
name, value, checked, expanded, focus, box, and for ``count-sides`` and ``find-greatest`` the
screenshot) and looks at the page as it is now to return the one action that moves the task on.
What a solver remembers of the episode is the env's own record of it: the actions taken
(``env._log``) and, where the page hides again what it showed (``find-greatest``'s cards), the
notes it keeps in ``env._notes`` (emptied by each reset). ``ORACLES`` maps a task name to its solver;
:data:`verigym.envs.gui.miniwob.catalog.ORACLE_TASKS` lists the same names (a test keeps them equal).
"""

from __future__ import annotations

import colorsys
import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from verigym.envs.gui.miniwob.env import mw_action
from verigym.envs.gui.tasks import KEYS, OPS

__all__ = ["ORACLES"]

Elements = list[dict[str, Any]]
Solver = Callable[[str, Elements, Any], dict[str, Any]]
ORACLES: dict[str, Solver] = {}


def _solver(*tasks: str) -> Callable[[Solver], Solver]:
    def register(function: Solver) -> Solver:
        for task in tasks:
            ORACLES[task] = function
        return function

    return register


def _quoted(utterance: str) -> list[str]:
    return re.findall(r'"([^"]*)"', utterance)


def _visible(elements: Elements) -> Elements:
    return [e for e in elements if e["id"] != 0 or e["role"] != "text"]  # not the instruction


def _find(elements: Elements, role: str | tuple[str, ...], name: str | None = None) -> Elements:
    roles = (role,) if isinstance(role, str) else role
    return [
        e for e in _visible(elements) if e["role"] in roles and (name is None or e["name"] == name)
    ]


def _click(element: dict[str, Any]) -> dict[str, Any]:
    return mw_action("click", element=element["id"])


def _submit(elements: Elements, label: str = "submit") -> dict[str, Any]:
    buttons = [e for e in _find(elements, "button") if e["name"].lower() == label.lower()]
    return _click(buttons[0]) if buttons else mw_action("done")


def _fill(elements: Elements, values: list[str], label: str = "submit") -> dict[str, Any]:
    """Type ``values`` into the textboxes in page order, then press the ``label`` button."""
    boxes = _find(elements, "textbox")
    for box, value in zip(boxes, values, strict=False):
        shown = box.get("value", "")
        if shown != value and not (set(shown) == {"\u2022"} and len(shown) == len(value)):
            return mw_action("type", element=box["id"], text=value)
    return _submit(elements, label)


@_solver("click-button", "unicode-test")
def _click_button(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    target = _quoted(utterance)[0]
    found = _find(elements, "button", target)
    return _click(found[0]) if found else mw_action("done")


@_solver("click-test")
def _click_test(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    return _click(_find(elements, "button")[0])


@_solver("click-test-2", "click-test-transfer")
def _click_test_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    target = re.search(r"button (\S+?)\.?$", utterance)
    found = _find(elements, "button", target[1] if target else None)
    return _click(found[0]) if found else mw_action("done")


@_solver("click-checkboxes", "click-checkboxes-large", "click-checkboxes-transfer", "click-option")
def _click_checkboxes(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    listed = re.search(r"Select (.*) and click Submit", utterance)
    names = listed[1] if listed else ""
    wanted = set() if names == "nothing" else {n.strip() for n in names.split(",")}
    for box in _find(elements, ("checkbox", "radio")):
        if box["checked"] != (box["name"] in wanted):
            return _click(box)
    return _submit(elements)


@_solver("enter-text", "enter-text-dynamic")
def _enter_text(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    return _fill(elements, [_quoted(utterance)[0]])


@_solver("enter-text-2")
def _enter_text_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    text = _quoted(utterance)[0]
    return _fill(elements, [text.upper() if "upper" in utterance else text.lower()])


@_solver("enter-password")
def _enter_password(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    password = _quoted(utterance)[0]
    return _fill(elements, [password, password])


@_solver("login-user")
def _login_user(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    user, password = _quoted(utterance)[:2]
    return _fill(elements, [user, password], "login")


@_solver("choose-list")
def _choose_list(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    target = re.search(r"Select (.*) from the list", utterance)[1]
    box = _find(elements, "combobox")[0]
    if box["value"] != target:
        return mw_action("type", element=box["id"], text=target)
    return _submit(elements)


@_solver("use-autocomplete", "use-autocomplete-nodelay")
def _use_autocomplete(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    quoted = _quoted(utterance)
    start, end = quoted[0], (quoted[1] if len(quoted) > 1 else "")
    box = _find(elements, "textbox")[0]
    value = box.get("value", "")
    if value.startswith(start) and value.endswith(end) and len(value) > len(start):
        return _submit(elements)
    for item in _find(elements, ("text", "menuitem", "option")):
        name = item["name"]
        if item["box"][1] > box["box"][1] and name.startswith(start) and name.endswith(end):
            return _click(item)
    return mw_action("type", element=box["id"], text=start)


@_solver("click-link")
def _click_link(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    target = _quoted(utterance)[0]
    found = _find(elements, ("text", "link"), target)
    return _click(found[0]) if found else mw_action("done")


@_solver("click-dialog")
def _click_dialog(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    return _click(_find(elements, "button", "Close")[0])


@_solver("click-dialog-2")
def _click_dialog_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    target = _quoted(utterance)[0]
    found = _find(elements, "button", "Close" if target.lower() == "x" else target)
    return _click(found[0]) if found else mw_action("done")


@_solver("click-tab")
def _click_tab(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    target = re.search(r"Click on (Tab #\d+)", utterance)[1]
    return _click(_find(elements, "link", target)[0])


@_solver("focus-text")
def _focus_text(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    return _click(_find(elements, "textbox")[0])


@_solver("focus-text-2")
def _focus_text_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    nth = int(re.search(r"(\d+)(?:st|nd|rd|th)", utterance)[1])
    return _click(_find(elements, "textbox")[nth - 1])


@_solver("click-collapsible", "click-collapsible-nodelay")
def _click_collapsible(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    headers = [e for e in _find(elements, "tab") if e["name"]]
    if headers and not headers[0].get("expanded", False):
        return _click(headers[0])
    return _submit(elements)


@_solver("click-collapsible-2", "click-collapsible-2-nodelay")
def _click_collapsible_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """The link is a word of one section: click it where shown, else open the next section."""
    target = _quoted(utterance)[-1]
    found = _find(elements, "text", target)
    if found:
        return _click(found[0])
    headers = [e for e in _find(elements, "tab") if e["name"].startswith("Section")]
    shown = next((i for i, h in enumerate(headers) if h.get("expanded")), -1)
    return _click(headers[(shown + 1) % len(headers)]) if headers else mw_action("done")


def _inside(x: float, y: float, box: list[int]) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


@_solver("click-button-sequence")
def _click_button_sequence(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """ONE, then TWO: the solver remembers its own clicks (the env's action log of this episode).
    The buttons are placed at random and TWO may cover part of ONE: ONE is clicked at a point
    TWO does not cover."""
    one, two = _find(elements, "button", "ONE"), _find(elements, "button", "TWO")
    if not one or not two:
        return mw_action("done")
    one_box, two_box = one[0]["box"], two[0]["box"]
    if any(int(a["op"]) == 1 and _inside(*a["xy"], one_box) for a in env._log):  # click_xy
        return _click(two[0])
    left, top, right, bottom = one_box
    for fy in (0.5, 0.25, 0.75, 0.1, 0.9):
        for fx in (0.5, 0.25, 0.75, 0.1, 0.9):
            x, y = round(left + (right - left) * fx), round(top + (bottom - top) * fy)
            if _inside(x, y, one_box) and not _inside(x, y, two_box):
                return mw_action("click_xy", xy=(x, y))
    return mw_action("done")  # TWO covers all of ONE


@_solver("simple-arithmetic")
def _simple_arithmetic(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    for e in _find(elements, "text"):
        m = re.fullmatch(r"(-?\d+)\s*([-+x*])\s*(-?\d+)\s*=", e["name"])
        if m:
            a, op, b = int(m[1]), m[2], int(m[3])
            answer = a + b if op == "+" else a - b if op == "-" else a * b
            return _fill(elements, [str(answer)])
    return mw_action("done")


@_solver("drag-items")
def _drag_items(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    m = re.fullmatch(
        r"Drag (.+?) (to the top|to the bottom|down by one position|up by one position"
        r"|to the (\d+)\w\w position)\.",
        utterance,
    )
    items = _find(elements, "text")
    names = [e["name"] for e in items]
    source = names.index(m[1])
    where = m[2]
    target = (
        0
        if where == "to the top"
        else len(items) - 1
        if where == "to the bottom"
        else source + 1
        if where.startswith("down")
        else source - 1
        if where.startswith("up")
        else int(m[3]) - 1
    )
    (l1, t1, r1, b1), (l2, t2, r2, b2) = items[source]["box"], items[target]["box"]
    y2 = b2 - 3 if target > source else t2 + 3
    return mw_action("drag", xy=((l1 + r1) // 2, (t1 + b1) // 2), to=((l2 + r2) // 2, y2))


@_solver("click-widget")
def _click_widget(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    kind = _quoted(utterance)[0]
    for e in _visible(elements):
        role, multiline = e["role"], bool(e.get("multiline"))
        if (
            (kind == "textarea" and role == "textbox" and multiline)
            or (kind == "text" and role == "textbox" and not multiline)
            or (kind in ("checkbox", "radio", "button") and role == kind)
        ):
            return _click(e)
    return mw_action("done")


_COLORS = {  # CSS colour names of click-color, as the browser renders them
    "red": "rgb(255,0,0)",
    "blue": "rgb(0,0,255)",
    "olive": "rgb(128,128,0)",
    "lime": "rgb(0,255,0)",
    "black": "rgb(0,0,0)",
    "white": "rgb(255,255,255)",
    "grey": "rgb(128,128,128)",
    "purple": "rgb(128,0,128)",
    "orange": "rgb(255,165,0)",
    "yellow": "rgb(255,255,0)",
    "cyan": "rgb(0,255,255)",
    "pink": "rgb(255,192,203)",
    "magenta": "rgb(255,0,255)",
}


@_solver("click-color")
def _click_color(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    named = re.search(r"Click on the (\w+) colored box", utterance)
    boxes = [e for e in elements if e["role"] == "box"]
    swatch = [e for e in boxes if e["box"][3] <= 50]
    color = _COLORS.get(named[1]) if named else None
    if color is None and swatch:
        color = swatch[0]["color"].replace(" ", "")
    for e in boxes:
        if e["box"][1] >= 50 and e["color"].replace(" ", "") == color:
            return _click(e)
    return mw_action("done")


@_solver("find-word")
def _find_word(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    nth = int(re.search(r"Find the (\d+)\w\w word", utterance)[1])
    texts = [e for e in _find(elements, "text") if len(e["name"].split()) > 1]
    words = [w.strip(".,;:!?") for w in texts[0]["name"].split()]
    return _fill(elements, [words[nth - 1]])


@_solver("read-table")
def _read_table(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    key = re.search(r"Enter the value of (.+?) into the text field", utterance)[1]
    cells = _find(elements, "text")
    for cell, value in zip(cells, cells[1:], strict=False):
        if cell["name"] == key and value["box"][1] == cell["box"][1]:
            return _fill(elements, [value["name"]])
    return mw_action("done")


@_solver("click-tab-2", "click-tab-2-easy", "click-tab-2-medium", "click-tab-2-hard")
def _click_tab_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    target = _quoted(utterance)[-1]
    panels = [e for e in elements if e["role"] == "tabpanel"]
    top = panels[0]["box"][1] if panels else 0
    for e in _find(elements, ("text", "link"), target):
        if e["box"][1] >= top:
            return _click(e)
    tabs = [e for e in elements if e["role"] == "tab"]
    links = [e for e in _find(elements, "link") if e["box"][3] <= top]  # the tabs' own links
    chosen = next((i for i, t in enumerate(tabs) if t.get("selected")), -1)
    return _click(links[(chosen + 1) % len(links)])


_EMAIL = re.compile(
    r"Find the email by (?P<name>.+?) and (?:reply to them with the text \"(?P<reply>.*)\""
    r"|forward that email to (?P<forward>[^.]+)|click the (?P<icon>trash|star) icon)"
)


@_solver(
    "email-inbox",
    "email-inbox-reply",
    "email-inbox-forward",
    "email-inbox-delete",
    "email-inbox-important",
    "email-inbox-star-reply",
    "email-inbox-noscroll",
)
def _email_inbox(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    m = _EMAIL.search(utterance)
    if m is None:
        return mw_action("done")
    images = {e["name"]: e for e in _find(elements, "image")}
    boxes = _find(elements, "textbox")
    areas = [b for b in boxes if b.get("multiline")]
    if m["reply"] is not None and areas and "send" in images:  # the reply screen
        if areas[0].get("value") != m["reply"]:
            return mw_action("type", element=areas[0]["id"], text=m["reply"])
        return _click(images["send"])
    if m["forward"] is not None and "send" in images:  # the forward screen
        to = [b for b in boxes if not b.get("multiline") and b["name"] != "Search"]
        if to and to[0].get("value") != m["forward"]:
            return mw_action("type", element=to[0]["id"], text=m["forward"])
        return _click(images["send"])
    words = {e["name"]: e for e in _find(elements, "text")}
    if m["reply"] is not None and "Reply" in words:  # the open email
        return _click(words["Reply"])
    if m["forward"] is not None and "Forward" in words:
        return _click(words["Forward"])
    sender = next((e for e in _find(elements, "text", m["name"])), None)
    if sender is None:
        return mw_action("done")
    if m["icon"]:
        wanted = "delete" if m["icon"] == "trash" else "star"
        top = sender["box"][1]
        for e in _find(elements, "image"):
            if e["name"] == wanted and top - 6 <= e["box"][1] <= top + 12:
                return _click(e)
        return mw_action("done")
    return _click(sender)


_FLIGHT = re.compile(
    r"Book the (?P<want>cheapest|shortest) one-way flight from: (?P<origin>.+?) to: "
    r"(?P<dest>.+?) on (?P<date>\d\d/\d\d/\d{4})\."
)


def _minutes(text: str) -> int | None:
    m = re.search(r"(?:(\d+)h)?\s*(?:(\d+)m)?", text)
    if not m or not (m[1] or m[2]):
        return None
    return int(m[1] or 0) * 60 + int(m[2] or 0)


@_solver("book-flight", "book-flight-nodelay")
def _book_flight(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    m = _FLIGHT.search(utterance)
    if m is None:
        return mw_action("done")
    books = [e for e in _find(elements, "button") if e["name"].startswith("Book flight for")]
    if books:  # the results: the cheapest, or the one after the shortest duration
        if m["want"] == "cheapest":
            return _click(min(books, key=lambda b: int(b["name"].rsplit("$", 1)[-1])))
        best, duration = None, None
        for e in _visible(elements):
            if e["role"] == "text" and re.fullmatch(r"(\d+h)?\s*(\d+m)?", e["name"]) and e["name"]:
                duration = _minutes(e["name"])
            elif e in books and duration is not None:
                if best is None or duration < best[0]:
                    best = (duration, e)
                duration = None
        return _click(best[1]) if best else mw_action("done")
    boxes = {b["name"]: b for b in _find(elements, "textbox")}
    for label, wanted in (("From:", m["origin"]), ("To:", m["dest"])):
        box = boxes.get(label)
        if box is None:
            return mw_action("done")
        value = box.get("value", "")
        if value != wanted and wanted in value:
            continue  # an entry of the list was chosen
        if value == wanted:  # typed: choose the menu's entry
            for e in _find(elements, ("text", "menuitem", "option")):
                if e["box"][1] > box["box"][1] and wanted in e["name"]:
                    return _click(e)
        return mw_action("type", element=box["id"], text=wanted)
    date = [b for name, b in boxes.items() if name not in ("From:", "To:")]
    if date and date[0].get("value") != m["date"]:
        return _pick_date(elements, date[0], m["date"])
    return _submit(elements, "Search")


_MONTHS = (
    "January February March April May June July August September October November December"
).split()


def _pick_date(elements: Elements, box: dict[str, Any], date: str) -> dict[str, Any]:
    """In a jQuery UI calendar: page to the month of ``date`` (mm/dd/yyyy), click its day; the
    calendar opens on a click into ``box``."""
    month, day, year = (int(part) for part in date.split("/"))
    texts = [e["name"] for e in _find(elements, "text")]
    shown = next((i for i, t in enumerate(texts) if t in _MONTHS), None)
    links = {e["name"]: e for e in _find(elements, "link")}
    if shown is None or "Next" not in links:
        return _click(box)
    year_shown = next((int(t) for t in texts[shown + 1 :] if re.fullmatch(r"\d{4}", t)), year)
    at = (year_shown, _MONTHS.index(texts[shown]) + 1)
    if at < (year, month):
        return _click(links["Next"])
    if at > (year, month):
        return _click(links["Prev"])
    return _click(links[str(day)]) if str(day) in links else mw_action("done")


@_solver("choose-date", "choose-date-easy", "choose-date-medium", "choose-date-nodelay")
def _choose_date(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    date = re.search(r"Select (\d\d/\d\d/\d{4}) as the date", utterance)[1]
    box = _find(elements, "textbox")[0]
    if box.get("value") != date:
        return _pick_date(elements, box, date)
    return _submit(elements)


@_solver("stock-market")
def _stock_market(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Buy once the shown price is at most the one asked for; else let the ticker move (a scroll
    of the page at its top: nothing changes but the clock)."""
    limit = float(re.search(r"less than \$(\d+(?:\.\d+)?)", utterance)[1])
    prices = [
        float(m[1])
        for e in _find(elements, "text")
        if (m := re.fullmatch(r"\$(\d+(?:\.\d+)?)", e["name"]))
    ]
    if prices and prices[0] <= limit:
        return _submit(elements, "buy")
    return mw_action("scroll_up")


@_solver("generate-number")
def _generate_number(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Generate until the shown number meets the condition, then submit."""
    shown = [int(e["name"]) for e in _find(elements, "text") if re.fullmatch(r"-?\d+", e["name"])]
    if shown:
        n = shown[0]
        less, more = (
            re.search(r"less than (\d+)", utterance),
            re.search(r"greater than (\d+)", utterance),
        )
        if (
            (less and n < int(less[1]))
            or (more and n > int(more[1]))
            or ("an odd number" in utterance and n % 2)
            or ("an even number" in utterance and not n % 2)
        ):
            return _submit(elements)
    return _submit(elements, "generate")


@_solver("odd-or-even")
def _odd_or_even(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Mark the rows in order (a clicked button keeps the focus: the row after the focused one is
    next), then submit."""
    rows, visible = [], _visible(elements)
    for i, e in enumerate(visible):
        if e["role"] == "text" and re.fullmatch(r"-?\d+", e["name"]) and 0 < i < len(visible) - 1:
            odd, even = visible[i - 1], visible[i + 1]
            rows.append(odd if int(e["name"]) % 2 else even)
    focused = next((k for k, b in enumerate(rows) if b.get("focused")), -1)
    if focused + 1 < len(rows):
        return _click(rows[focused + 1])
    return _submit(elements)


@_solver("simple-algebra")
def _simple_algebra(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """``x - 7 = 53`` or ``4 - x = -2``: solve for x, type it, submit."""
    for e in _find(elements, "text"):
        m = re.fullmatch(r"(x|\d+)\s*([-+])\s*(x|\d+)\s*=\s*(-?\d+)", e["name"])
        if m and "x" in (m[1], m[3]):
            left, op, right, total = m[1], m[2], m[3], int(m[4])
            known = int(right if left == "x" else left)
            if op == "+":
                answer = total - known
            else:
                answer = total + known if left == "x" else known - total
            return _fill(elements, [str(answer)])
    return mw_action("done")


@_solver("text-transform")
def _text_transform(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """The captcha's letters are one text element each, left to right above the field."""
    boxes = _find(elements, "textbox")
    if not boxes:
        return mw_action("done")
    top = boxes[0]["box"][1]
    letters = [e for e in _find(elements, "text") if len(e["name"]) == 1 and e["box"][3] <= top]
    word = "".join(e["name"] for e in sorted(letters, key=lambda e: e["box"][0]))
    return _fill(elements, [word])


_MOVIE = re.compile(r"Search for (\w+) movies directed by (.+?) from year (\d{4})\.")
_MOVIE_FIELDS = (
    ("genre", "Genre"),
    ("director", "Director"),
    ("year", "Year"),
    ("year", "Released"),
)


@_solver("multi-layouts", "multi-orderings")
def _multi_layouts(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """A form of three labelled fields in one of several layouts and orders: each label (before
    its field in the page, or after it in one layout) names the field it goes with; then the
    form's button (Submit, Search or Go!)."""
    m = _MOVIE.search(utterance)
    if m is None:
        return mw_action("done")
    wanted = {"genre": m[1], "director": m[2], "year": m[3]}
    labels, boxes, order = [], [], []
    for e in _visible(elements):
        field = next((f for f, word in _MOVIE_FIELDS if word in e["name"]), None)
        if e["role"] == "textbox":
            boxes.append(e)
            order.append("box")
        elif e["role"] == "text" and field and len(e["name"]) <= 20:
            labels.append(field)
            order.append("label")
    if len(labels) != len(boxes) or not boxes:
        return mw_action("done")
    for field, box in zip(labels, boxes, strict=True):
        if box.get("value", "") != wanted[field]:
            return mw_action("type", element=box["id"], text=wanted[field])
    last = max(e["id"] for e in boxes)
    for e in _visible(elements):
        if (
            e["id"] > last
            and e["role"] in ("button", "text")
            and e["name"] in ("Submit", "Search", "Go!")
        ):
            return _click(e)
    return mw_action("done")


@_solver("login-user-popup")
def _login_user_popup(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """login-user, but a popup may open when a field gets the focus: it is cancelled."""
    cancel = _find(elements, "button", "Cancel")
    if cancel:
        return _click(cancel[0])
    user, password = _quoted(utterance)[:2]
    return _fill(elements, [user, password], "OK")


@_solver("sign-agreement")
def _sign_agreement(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Cancel; or scroll the agreement to its end (the mouse over it, then wheel steps), which
    enables the name field and the buttons, type the name and press the button named."""
    if utterance.startswith("Click the cancel button"):
        return _submit(elements, "Cancel")
    quoted = _quoted(utterance)
    if len(quoted) < 2:
        return mw_action("done")
    name, button = quoted[0], quoted[1]
    areas = [e for e in _find(elements, "textbox") if e.get("multiline")]
    fields = [e for e in _find(elements, "textbox") if not e.get("multiline")]
    if not areas or not fields:
        return mw_action("done")
    if fields[0].get("disabled"):
        left, top, right, bottom = areas[0]["box"]
        if not _inside(*env._mouse, areas[0]["box"]):
            return mw_action("click_xy", xy=((left + right) // 2, (top + bottom) // 2))
        return mw_action("scroll_down")
    if fields[0].get("value", "") != name:
        return mw_action("type", element=fields[0]["id"], text=name)
    return _submit(elements, button)


def _posts(elements: Elements, user: str) -> list[Elements]:
    """The elements of each post by ``user`` (a post's elements run from its ``@user`` line to
    the next post's), in page order."""
    posts: list[Elements] = []
    current: Elements | None = None
    for e in _visible(elements):
        if e["role"] == "text" and re.fullmatch(r"@\S+", e["name"]):
            current = [] if e["name"] == user else None
            if current is not None:
                posts.append(current)
        elif current is not None:
            current.append(e)
    return posts


_SOCIAL_ICONS = {"Reply": "reply", "Retweet": "retweet", "Like": "like", "Share": "share"}


@_solver("social-media")
def _social_media(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """The user's post: its icon, or the entry of its "more" menu (opened first)."""
    m = re.search(r'For the user (@\S+), click on the "(.+)" button', utterance)
    if m is None:
        return mw_action("done")
    user, label = m[1].rstrip(","), m[2]
    for post in _posts(elements, user):
        icon = _SOCIAL_ICONS.get(label)
        for e in post:
            if icon and e["role"] == "image" and e["name"] in (icon, f"{icon}-hover"):
                return _click(e)
            if (
                not icon
                and e["role"] == "text"
                and (e["name"] == label or e["name"].startswith(label + " @"))
            ):
                return _click(e)
        more = [e for e in post if e["role"] == "image" and e["name"].startswith("more")]
        if not icon and more:
            return _click(more[0])
    return mw_action("done")


@_solver("social-media-all", "social-media-some")
def _social_media_all(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Click the named icon of every post by the user (or of the first N), then Submit. A clicked
    icon looks like a hovered one, so the solver counts its own clicks (the env's action log of
    this episode): its k-th action clicks the k-th target."""
    m = re.search(r'Click the "(\w+)" button on (all posts|(\d+) posts?) by (@\S+) and', utterance)
    if m is None or m[1] not in _SOCIAL_ICONS:
        return mw_action("done")
    icon, user = _SOCIAL_ICONS[m[1]], m[4]
    targets = [
        e
        for post in _posts(elements, user)
        for e in post
        if e["role"] == "image" and e["name"] in (icon, f"{icon}-hover")
    ]
    if m[3] is not None:
        targets = targets[: int(m[3])]
    done = len(env._log)
    if done < len(targets):
        return _click(targets[done])
    return _submit(elements)


@_solver("search-engine")
def _search_engine(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Type the query, Search, open the result's page (3 results a page), click the result. The
    current page is not shown, so the solver knows it from its own actions: its third action
    opens the page when that is not the first."""
    m = re.search(r'enter "(.+?)" and press "Search", then find and click the (\d+)\w\w', utterance)
    if m is None:
        return mw_action("done")
    query, nth = m[1], int(m[2])
    box = _find(elements, "textbox")
    if box and box[0].get("value", "") != query:
        return mw_action("type", element=box[0]["id"], text=query)
    links = _find(elements, "link")
    results = [e for e in links if not re.fullmatch(r"\d+|[<>«»]", e["name"])]
    if not results:
        return _submit(elements, "Search")
    page, slot = divmod(nth - 1, 3)
    if page and len(env._log) <= 2:
        pages = [e for e in links if e["name"] == str(page + 1)]
        return _click(pages[0]) if pages else mw_action("done")
    return _click(results[slot]) if slot < len(results) else mw_action("done")


@_solver("read-table-2")
def _read_table_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Each field's label (``Color:``) names a row of the table above (``Color`` | ``yellow``)."""
    cells = _find(elements, "text")
    table = {
        cell["name"]: value["name"]
        for cell, value in zip(cells, cells[1:], strict=False)
        if value["box"][1] == cell["box"][1] and value["box"][0] > cell["box"][0]
    }
    values = []
    for box in _find(elements, "textbox"):
        label = [
            c for c in cells if c["name"].endswith(":") and abs(c["box"][1] - box["box"][1]) <= 3
        ]
        if not label or label[0]["name"][:-1] not in table:
            return mw_action("done")
        values.append(table[label[0]["name"][:-1]])
    return _fill(elements, values)


@_solver("guess-number")
def _guess_number(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Guess 5, then walk one number a guess the way the feedback points (the field keeps the
    last guess; the feedback names it)."""
    box = _find(elements, "textbox")
    if not box:
        return mw_action("done")
    value = box[0].get("value", "")
    feedback = " ".join(e["name"] for e in _find(elements, "text")).replace(" .", "")
    m = re.search(r"(higher|lower) than (-?\d+)", feedback)
    if value == "":
        return mw_action("type", element=box[0]["id"], text="5")
    if m is None or value != m[2]:
        return _submit(elements)
    guess = int(m[2]) + (1 if m[1] == "higher" else -1)
    return mw_action("type", element=box[0]["id"], text=str(guess))


@_solver("use-spinner")
def _use_spinner(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Click the spinner's up or down arrow (the two links right of the field, up above down)
    until it shows the number, then Submit."""
    target = int(re.search(r"Select (-?\d+) with the spinner", utterance)[1])
    box = _find(elements, "textbox")
    arrows = sorted(
        (e for e in _find(elements, "link") if not e["name"]), key=lambda e: e["box"][1]
    )
    if not box or len(arrows) != 2:
        return mw_action("done")
    value = int(box[0].get("value") or 0)
    if value == target:
        return _submit(elements)
    return _click(arrows[0] if value < target else arrows[1])


_SHAPE_COLORS = {
    "rgb(255,0,0)": "red",
    "rgb(0,128,0)": "green",
    "rgb(0,0,255)": "blue",
    "rgb(0,255,255)": "aqua",
    "rgb(0,0,0)": "black",
    "rgb(255,0,255)": "magenta",
    "rgb(255,255,0)": "yellow",
}
_SHAPE_NAMES = {"rect": "rectangle", "circle": "circle", "polygon": "triangle"}


def _shape(e: dict[str, Any]) -> dict[str, str]:
    """What a drawn shape of common/shapes.js is: its text (the letter, digit or shape name), type,
    colour and size (large ones are drawn 20 px high, small ones 10)."""
    name = e["name"]
    if name in _SHAPE_NAMES:
        text, kind = _SHAPE_NAMES[name], "shape"
    else:
        text, kind = name, "digit" if name.isdigit() else "letter"
    size = "large" if e["box"][3] - e["box"][1] >= 16 else "small"
    color = _SHAPE_COLORS.get(str(e.get("color", "")).replace(" ", ""), "")
    return {"text": text, "type": kind, "size": size, "color": color}


def _matches(shape: dict[str, str], description: str) -> bool:
    """shapes.js's matcher: ``[large|small] [colour] (text|type|item)``."""
    words = description.split()
    if not words:
        return False
    what, rest = words[-1], words[:-1]
    for word in rest:
        if word in ("large", "small") and shape["size"] != word:
            return False
        if word not in ("large", "small") and shape["color"] != word:
            return False
    return what == "item" or what in (shape["text"], shape["type"])


@_solver("click-shape")
def _click_shape(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    m = re.fullmatch(r"Click on a (.+)", utterance.strip())
    for e in _find(elements, "shape"):
        if m and _matches(_shape(e), m[1]):
            return _click(e)
    return mw_action("done")


@_solver("count-shape")
def _count_shape(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    m = re.fullmatch(r"How many (.+)s are there\?", utterance.strip())
    if m is None:
        return mw_action("done")
    count = sum(_matches(_shape(e), m[1]) for e in _find(elements, "shape"))
    return _submit(elements, str(count))


@_solver("identify-shape")
def _identify_shape(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    shapes = _find(elements, "shape")
    if not shapes:
        return mw_action("done")
    shape = _shape(shapes[0])
    label = shape["text"] if shape["type"] == "shape" else shape["type"]
    label = {"digit": "Number"}.get(label, label.capitalize())
    return _submit(elements, label)


def _centre(e: dict[str, Any]) -> tuple[float, float]:
    left, top, right, bottom = e["box"]
    return (left + right) / 2, (top + bottom) / 2


@_solver("find-midpoint")
def _find_midpoint(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Click halfway between the two black points (the page marks the click with a blue one),
    then Submit."""
    circles = [e for e in _find(elements, "shape") if e["name"] == "circle"]
    points = [e for e in circles if e.get("color", "").replace(" ", "") == "rgb(0,0,0)"]
    if any(e.get("color", "").replace(" ", "") == "rgb(0,0,255)" for e in circles):
        return _submit(elements)
    if len(points) != 2:
        return mw_action("done")
    (x1, y1), (x2, y2) = _centre(points[0]), _centre(points[1])
    return mw_action("click_xy", xy=(round((x1 + x2) / 2), round((y1 + y2) / 2)))


@_solver("resize-textarea")
def _resize_textarea(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Drag the textarea's bottom-right grip 20 px the way asked (its first action), then Submit."""
    m = re.search(r"the (width|height) is (smaller|larger) than", utterance)
    areas = [e for e in _find(elements, "textbox") if e.get("multiline")]
    if m is None or not areas:
        return mw_action("done")
    if env._log:
        return _submit(elements)
    left, top, right, bottom = areas[0]["box"]
    x, y = right - 4, bottom - 4
    step = 20 if m[2] == "larger" else -20
    dx, dy = (step, 0) if m[1] == "width" else (0, step)
    to = (min(max(x + dx, 0), env.width - 1), min(max(y + dy, 0), env.height - 1))
    return mw_action("drag", xy=(x, y), to=to)


def _hue(color: str) -> float | None:
    """The hue (degrees) of ``rgb(r,g,b)``; ``None`` when it is not one."""
    m = re.fullmatch(r"rgba?\((\d+),(\d+),(\d+)(?:,[\d.]+)?\)", color.replace(" ", ""))
    if m is None:
        return None
    r, g, b = (int(v) / 255 for v in m.groups())
    return colorsys.rgb_to_hls(r, g, b)[0] * 360


@_solver("click-shades")
def _click_shades(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """The swatches of the named hue (red 0, green 120, blue 240 degrees; the page draws each
    with a random saturation and lightness). A selected swatch shows no mark the reader sees, so
    the solver counts its own clicks: its k-th action clicks the k-th swatch, then Submit."""
    m = re.search(r"shades of (red|green|blue)", utterance)
    if m is None:
        return mw_action("done")
    wanted = {"red": 0, "green": 120, "blue": 240}[m[1]]
    targets = []
    for e in elements:
        hue = _hue(str(e.get("color", ""))) if e["role"] == "box" else None
        if hue is not None and min(abs(hue - wanted), 360 - abs(hue - wanted)) < 60:
            targets.append(e)
    if len(env._log) < len(targets):
        return _click(targets[len(env._log)])
    return _submit(elements)


@_solver("grid-coordinate")
def _grid_coordinate(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """The grid's points are evenly spaced around the origin (the middle point): (x, y) is x
    columns right and y rows up of it."""
    m = re.search(r"\((-?\d+),\s*(-?\d+)\)", utterance)
    points = [_centre(e) for e in _find(elements, "shape") if e["name"] == "circle"]
    if m is None or not points:
        return mw_action("done")
    xs, ys = sorted({p[0] for p in points}), sorted({p[1] for p in points})
    if len(xs) < 2 or len(ys) < 2:
        return mw_action("done")
    x0, y0 = xs[len(xs) // 2], ys[len(ys) // 2]
    dx, dy = xs[1] - xs[0], ys[1] - ys[0]
    x, y = x0 + int(m[1]) * dx, y0 - int(m[2]) * dy
    return mw_action("click_xy", xy=(round(x), round(y)))


@_solver("visual-addition")
def _visual_addition(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Count the blocks on both sides of the ``+``."""
    blocks = [e for e in elements if e["role"] == "box"]
    return _fill(elements, [str(len(blocks))])


@lru_cache(maxsize=1)
def _nl_templates() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(action, pattern) of every phrasing the natural-language email tasks draw their instruction
    from (the ``miniwob`` package's template lists: ``templates.js`` of the -turk pages and the
    list in ``email-inbox-forward-nl.html``), NAME, DEST and MSG as groups."""
    from verigym.envs.gui.miniwob import server

    root = server.html_root()
    found: list[tuple[str, str]] = []
    text = (root / "common/special/email-inbox-nl/templates.js").read_text(encoding="utf-8")
    for action, splits in json.loads(text[text.index("{") : text.rindex("}") + 1]).items():
        found += [(action, t) for t in (*splits["train"], *splits["test"])]
    page = (root / "miniwob/email-inbox-forward-nl.html").read_text(encoding="utf-8")
    for block in re.findall(r"var (?:TEST_)?NL_TEMPLATES = \[(.*?)\];", page, re.S):
        found += [
            ("forward", t.replace("\\'", "'")) for t in re.findall(r"'((?:[^'\\]|\\.)*)'", block)
        ]
    patterns = []
    for action, template in found:
        pattern = re.escape(template.strip())
        for field in ("NAME", "DEST", "MSG"):
            group = ".+?" if field == "MSG" else r"[A-Za-z][\w-]*"  # names are one word
            pattern = pattern.replace(field, f"(?P<{field.lower()}>{group})", 1)
            pattern = pattern.replace(field, f"(?P={field.lower()})")
        try:
            patterns.append((action, re.compile(pattern)))
        except re.error:
            continue
    return tuple(patterns)


@_solver("email-inbox-nl-turk", "email-inbox-forward-nl", "email-inbox-forward-nl-turk")
def _email_inbox_nl(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Read the request against the task's phrasings (its sender, recipient and reply must be
    what the inbox and the phrasing allow; where two phrasings read the names both ways, the
    name after "from"/"by" or before "'s" is the sender), then act as ``email-inbox``."""
    senders = {e["name"] for e in _find(elements, "text")}
    votes: dict[tuple[str, str, str, str], int] = {}
    for action, pattern in _nl_templates():
        m = pattern.fullmatch(utterance.strip())
        if m is None:
            continue
        fields = m.groupdict()
        name, dest, msg = fields.get("name", ""), fields.get("dest", ""), fields.get("msg", "")
        if action == "forward" and not dest:
            continue
        key = (action, name, dest or "", msg or "")
        votes[key] = votes.get(key, 0) + 1
    if not votes:
        return mw_action("done")

    def rank(key: tuple[str, str, str, str]) -> tuple[int, int, int]:
        action, name, dest, _ = key
        plausible = name in senders and (not dest or dest in senders)
        cue = bool(re.search(rf"(?:from|by) {re.escape(name)}\b|\b{re.escape(name)}'s", utterance))
        return (plausible, cue, votes[key])

    action, name, dest, msg = max(votes, key=rank)
    canonical = {
        "reply": f'Find the email by {name} and reply to them with the text "{msg}"',
        "forward": f"Find the email by {name} and forward that email to {dest}.",
        "delete": f"Find the email by {name} and click the trash icon",
        "important": f"Find the email by {name} and click the star icon",
    }[action]
    return _email_inbox(canonical, elements, env)


def _nth(utterance: str, what: str) -> int | None:
    """``the 2nd checkbox`` -> 1 (0-based), for ``what`` = ``checkbox``."""
    m = re.search(rf"the (\d+)\w\w {what}", utterance)
    return int(m[1]) - 1 if m else None


@_solver("form-sequence-2")
def _form_sequence_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    radio, box = _nth(utterance, "radio button"), _nth(utterance, "textbox")
    number = _quoted(utterance)
    radios, boxes = _find(elements, "radio"), _find(elements, "textbox")
    if radio is None or box is None or not number or radio >= len(radios) or box >= len(boxes):
        return mw_action("done")
    if not radios[radio]["checked"]:
        return _click(radios[radio])
    if boxes[box].get("value", "") != number[0]:
        return mw_action("type", element=boxes[box]["id"], text=number[0])
    return _submit(elements)


@_solver("form-sequence-3")
def _form_sequence_3(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Open the styled dropdown, click the entry, then the button named."""
    m = re.search(
        r'Choose (.+) from the dropdown, then click the button labeled "(\w+)"', utterance
    )
    lists = _find(elements, "combobox")
    if m is None or not lists:
        return mw_action("done")
    if lists[0].get("value") == m[1]:
        return _submit(elements, m[2])
    entries = [e for e in _find(elements, "text", m[1]) if e["box"][1] > lists[0]["box"][1]]
    return _click(entries[0] if entries else lists[0])


@_solver("form-sequence")
def _form_sequence(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """The slider (-10..10, its value shown beside it): its handle clicked (focused), then arrow
    keys one step a press; then the checkbox, then Submit."""
    m = re.search(r"Select (-?\d+) with the slider", utterance)
    nth = _nth(utterance, "checkbox")
    handles = [e for e in elements if e["role"] == "box"]
    shown = [e for e in _find(elements, "text") if re.fullmatch(r"-?\d+", e["name"])]
    boxes = _find(elements, "checkbox")
    if m is None or nth is None or not handles or not shown or nth >= len(boxes):
        return mw_action("done")
    target, value = int(m[1]), int(shown[0]["name"])
    if value != target:
        if not handles[0].get("focused"):
            return _click(handles[0])
        return mw_action("press", key="ArrowRight" if value < target else "ArrowLeft")
    if not boxes[nth]["checked"]:
        return _click(boxes[nth])
    return _submit(elements)


@_solver("highlight-text", "highlight-text-2")
def _highlight_text(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Select the (named) paragraph: a press-move-release from the start of its first line to the
    end of its last (its first action), then Submit."""
    if env._log:
        return _submit(elements)
    texts = [e for e in _find(elements, "text") if e["name"] != "Submit"]
    nth = re.search(r"the (\d+)\w\w paragraph", utterance)
    index = int(nth[1]) - 1 if nth else 0
    if index >= len(texts):
        return mw_action("done")
    left, top, right, bottom = texts[index]["box"]
    start = (max(left, 0), top + 3)
    end = (min(right, env.width - 1) - 1, max(bottom - 3, top + 3))
    return mw_action("drag", xy=start, to=end)


_DIRECTIONS = {"up": (0, -25), "down": (0, 25), "left": (-25, 0), "right": (25, 0)}


def _drag_by(env: Any, element: dict[str, Any], dx: int, dy: int) -> dict[str, Any]:
    x, y = (round(v) for v in _centre(element))
    to = (min(max(x + dx, 0), env.width - 1), min(max(y + dy, 0), env.height - 1))
    return mw_action("drag", xy=(x, y), to=to)


@_solver("drag-single-shape", "drag-circle")
def _drag_single_shape(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Drag the one shape 25 px the way named (its first action), then Submit."""
    m = re.search(r"Drag the \w+ (up|down|left|right)", utterance)
    shapes = _find(elements, "shape")
    if m is None or not shapes:
        return mw_action("done")
    if env._log:
        return _submit(elements)
    return _drag_by(env, shapes[0], *_DIRECTIONS[m[1]])


@_solver("drag-box")
def _drag_box(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Drag the small box (``s``) onto the large one's (``L``) centre (its first action), then
    Submit."""
    small, large = _find(elements, "text", "s"), _find(elements, "text", "L")
    if not small or not large:
        return mw_action("done")
    if env._log:
        return _submit(elements)
    (x1, y1), (x2, y2) = _centre(small[0]), _centre(large[0])
    return _drag_by(env, small[0], round(x2 - x1), round(y2 - y1))


@_solver("drag-shapes")
def _drag_shapes(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Drag each shape of the named kind that is still outside the black box to a spot of its own
    inside it, then Submit."""
    m = re.search(r"Drag all (rectangles|circles|triangles) into the black box", utterance)
    drawn = _find(elements, "shape")
    boxes = [e for e in drawn if e["name"] == "rect" and e["box"][2] - e["box"][0] >= 60]
    if m is None or not boxes:
        return mw_action("done")
    kind = {"rectangles": "rect", "circles": "circle", "triangles": "polygon"}[m[1]]
    box = boxes[0]["box"]
    cx, cy = _centre(boxes[0])
    wanted = [e for e in drawn if e["name"] == kind and e is not boxes[0]]
    for k, e in enumerate(wanted):
        if not _inside(*_centre(e), box):
            x, y = _centre(e)
            return _drag_by(env, e, round(cx + (-24, -8, 8, 24)[k % 4] - x), round(cy - y))
    return _submit(elements)


@_solver("drag-sort-numbers")
def _drag_sort_numbers(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Selection sort by drags: the smallest number not in place is dragged onto the first place
    that is wrong (dropped on that item's upper edge), then Submit."""
    items = [e for e in _find(elements, "text") if re.fullmatch(r"-?\d+", e["name"])]
    values = [int(e["name"]) for e in items]
    for i, want in enumerate(sorted(values)):
        if values[i] != want:
            j = next(k for k in range(i + 1, len(values)) if values[k] == want)
            (l1, t1, r1, b1), (l2, t2, r2, _) = items[j]["box"], items[i]["box"]
            return mw_action(
                "drag", xy=((l1 + r1) // 2, (t1 + b1) // 2), to=((l2 + r2) // 2, t2 + 3)
            )
    return _submit(elements)


_DIGITS = {
    # each digit as the task's example picture draws it: 7 rows of 4 boxes, "#" checked
    "0": ".##. #..# #..# #..# #..# #..# .##.",
    "1": "..#. .##. ..#. ..#. ..#. ..#. ..#.",
    "2": ".##. #..# #..# ..#. .#.. #... ####",
    "3": ".##. #..# ...# .##. ...# #..# .##.",
    "4": "#... #.#. #.#. #### ..#. ..#. ..#.",
    "5": "#### #... #... ###. ...# #..# .##.",
    "6": ".##. #..# #... ###. #..# #..# .##.",
    "7": "#### #..# ...# ..#. ..#. .#.. .#..",
    "8": ".##. #..# #..# .##. #..# #..# .##.",
    "9": ".##. #..# #..# .### ...# #..# .##.",
}


@_solver("number-checkboxes")
def _number_checkboxes(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Draw the digit of the example picture: the 28 boxes, row by row, checked where it is."""
    digit = _quoted(utterance)[0] if _quoted(utterance) else ""
    boxes = sorted(_find(elements, "checkbox"), key=lambda e: (e["box"][1], e["box"][0]))
    if digit not in _DIGITS or len(boxes) != 28:
        return mw_action("done")
    for box, mark in zip(boxes, _DIGITS[digit].replace(" ", ""), strict=True):
        if box["checked"] != (mark == "#"):
            return _click(box)
    return _submit(elements)


@_solver("use-slider-2")
def _use_slider_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Each slider's handle dragged to where its value lies on the track (the value's label spans
    the track: 0 at its left end, the maximum, 20, at its right), checked on the label, then
    Submit."""
    m = re.search(r"combination \[([\d,\s]+)\]", utterance)
    handles = sorted((e for e in elements if e["role"] == "box"), key=lambda e: e["box"][1])
    labels = sorted(
        (e for e in _find(elements, "text") if re.fullmatch(r"\d+", e["name"])),
        key=lambda e: e["box"][1],
    )
    if m is None or not handles or len(handles) != len(labels):
        return mw_action("done")
    wanted = [int(v) for v in m[1].split(",")]
    for handle, label, value in zip(handles, labels, wanted, strict=False):
        if int(label["name"]) != value:
            left, _, right, _ = label["box"]
            x, y = _centre(handle)
            return mw_action(
                "drag",
                xy=(round(x), round(y)),
                to=(round(left + (right - left) * value / 20), round(y)),
            )
    return _submit(elements)


@_solver("drag-shapes-2")
def _drag_shapes_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Each shape not yet in its box (those of the named kind or colour: the left one, the rest:
    the right one) is dragged to a free place of that box (3 columns by 2 rows of shape-sized
    places), then Submit."""
    m = re.search(r"Drag all (\w+)(?: shapes)? into the left box", utterance)
    drawn = _find(elements, "shape")
    boxes = sorted(
        (e for e in drawn if e["name"] == "rect" and e["box"][2] - e["box"][0] >= 60),
        key=lambda e: e["box"][0],
    )
    if m is None or len(boxes) != 2:
        return mw_action("done")
    kind = {"rectangles": "rect", "circles": "circle", "triangles": "polygon"}.get(m[1])
    colour = {**_COLORS, "green": "rgb(0,128,0)", "aqua": "rgb(0,255,255)"}.get(m[1])
    shapes = [e for e in drawn if all(e is not b for b in boxes)]
    for shape in shapes:
        named = shape["name"] == kind or shape.get("color", "").replace(" ", "") == colour
        target = boxes[0]["box"] if named else boxes[1]["box"]
        if _inside(*_centre(shape), target):
            continue
        left, top, right, bottom = target
        taken = [_centre(e) for e in shapes if _inside(*_centre(e), target)]
        for y in (top + 13, bottom - 13):
            for x in (left + 12, (left + right) / 2, right - 12):
                if all(abs(x - tx) > 12 or abs(y - ty) > 12 for tx, ty in taken):
                    cx, cy = _centre(shape)
                    return _drag_by(env, shape, round(x - cx), round(y - cy))
        return mw_action("done")
    return _submit(elements)


@lru_cache(maxsize=1)
def _synonyms() -> dict[str, int]:
    """Word -> its synonym group, from the groups the ``click-checkboxes-soft`` page draws from
    (read from the installed ``miniwob`` package)."""
    from verigym.envs.gui.miniwob import server

    page = (server.html_root() / "miniwob/click-checkboxes-soft.html").read_text(encoding="utf-8")
    block = re.search(r"var SYNONYMS = \[(.*?)\n\];", page, re.S)
    groups = re.findall(r"\[([^\[\]]*)\]", block[1]) if block else []
    found: dict[str, int] = {}
    for index, group in enumerate(groups):
        for word in re.findall(r"'([^']*)'", group):
            found.setdefault(word, index)
    return found


@_solver("click-checkboxes-soft")
def _click_checkboxes_soft(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Check the boxes whose word is a synonym of a listed one (each box's word is of its own
    group), then Submit."""
    listed = re.search(r"Select words similar to (.*) and click Submit", utterance)
    names = listed[1] if listed else ""
    words = [] if names == "nothing" else [n.strip() for n in names.split(",")]
    groups = _synonyms()
    wanted = {groups.get(w, w) for w in words}
    for box in _find(elements, "checkbox"):
        if box["checked"] != (groups.get(box["name"], box["name"]) in wanted):
            return _click(box)
    return _submit(elements)


_TICKETS = {
    "cheapest cost": (lambda price, minutes: price),
    "most expensive cost": (lambda price, minutes: -price),
    "shortest duration": (lambda price, minutes: minutes),
    "longest duration": (lambda price, minutes: -minutes),
}


@_solver("buy-ticket")
def _buy_ticket(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Each ``Book for $P`` button follows its ticket's duration: the one asked for is booked."""
    m = re.search(r"Buy the ticket with the (.+?)\.", utterance)
    key = _TICKETS.get(m[1]) if m else None
    tickets, minutes = [], None
    for e in _visible(elements):
        if e["role"] == "text" and re.fullmatch(r"\d+h \d+m", e["name"]):
            minutes = _minutes(e["name"])
        elif e["role"] == "button" and e["name"].startswith("Book for $") and minutes is not None:
            tickets.append((int(e["name"].rsplit("$", 1)[-1]), minutes, e))
            minutes = None
    if key is None or not tickets:
        return mw_action("done")
    return _click(min(tickets, key=lambda t: key(t[0], t[1]))[2])


def _menu_rows(elements: Elements) -> list[dict[str, Any]]:
    """order-food's dishes: name, the ``-``/``+`` links, the diet icons and the quantity shown
    (the texts from a dish's name to its ``+``)."""
    rows: list[dict[str, Any]] = []
    row: dict[str, Any] | None = None
    for e in _visible(elements):
        if e["role"] == "image" and row is not None:
            row["types"].add(e["name"])
        elif e["role"] == "text" and e["name"] == "-" and row is not None:
            row["minus"] = e
        elif e["role"] == "text" and e["name"] == "+" and row is not None:
            row["plus"] = e
            rows.append(row)
            row = None
        elif e["role"] == "text" and row is not None and "minus" in row and e["name"].isdigit():
            row["quantity"] = int(e["name"])
        elif e["role"] == "text":
            row = {"name": e["name"].strip(), "types": set(), "quantity": 0}
    return rows


@_solver("order-food")
def _order_food(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """``Order one of each item: A, B`` (one of each) or ``Order N items that are T`` (N of the
    first dish marked T): ``+`` until the quantities are right, then Order!"""
    rows = _menu_rows(elements)
    by_name = re.search(r"Order one of each item: (.*)", utterance)
    by_type = re.search(r"Order (\d+) items that are ([\w-]+)", utterance)
    wanted: dict[str, int] = {}
    if by_name:
        wanted = {n.strip(): 1 for n in by_name[1].split(",")}
    elif by_type:
        first = next((r for r in rows if by_type[2] in r["types"]), None)
        wanted = {first["name"]: int(by_type[1])} if first else {}
    if not wanted:
        return mw_action("done")
    for row in rows:
        want = wanted.get(row["name"], 0)
        if row["quantity"] < want:
            return _click(row["plus"])
        if row["quantity"] > want:
            return _click(row["minus"])
    return _submit(elements, "Order!")


def _svg_point(x: float, y: float, env: Any) -> dict[str, Any]:
    """A click that marks page point (x, y) on the graph of circle-center, right-angle and
    bisect-angle: their graph (150 x 130 px) starts at page (2, 52), but they place the mark at
    (pageX, pageY - 50) of it, 2 px right of and below the click."""
    return mw_action("click_xy", xy=(round(x) - 2, round(y) - 2))


def _placed(env: Any) -> bool:
    """Whether this episode's solver has clicked a point already (its first action)."""
    return any(int(a["op"]) == 1 for a in env._log)  # click_xy


@_solver("circle-center")
def _circle_center(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Click the circle's centre (its first action), then Submit."""
    circles = [e for e in _find(elements, "shape", "circle") if "blue" not in e.get("color", "")]
    if not circles:
        return mw_action("done")
    if _placed(env):
        return _submit(elements)
    return _svg_point(*_centre(circles[0]), env)


def _graph_points(elements: Elements) -> tuple[Elements, Elements]:
    """The blue and the black points of the angle tasks (circles, by colour)."""
    circles = _find(elements, "shape", "circle")
    blue = [e for e in circles if e.get("color", "").replace(" ", "") == "rgb(0,0,255)"]
    black = [e for e in circles if e.get("color", "").replace(" ", "") == "rgb(0,0,0)"]
    return blue, black


def _on_graph(x: float, y: float) -> bool:
    """Whether page point (x, y) is on the angle tasks' graph (x 2..152, y 52..182 of the page)
    and above their Submit button (from y 178)."""
    return 5 <= x <= 149 and 55 <= y <= 174


def _inside_graph(vx: float, vy: float, dx: float, dy: float) -> tuple[float, float] | None:
    """The point along (dx, dy) from (vx, vy), 30 px out (or less, to stay on the graph);
    ``None`` when even 6 px out is off it."""
    norm = (dx * dx + dy * dy) ** 0.5 or 1.0
    ux, uy = dx / norm, dy / norm
    for t in (30, 24, 18, 12, 9, 6):
        if _on_graph(vx + ux * t, vy + uy * t):
            return vx + ux * t, vy + uy * t
    return None


@_solver("right-angle")
def _right_angle(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """A point perpendicular to the black point's line at the blue vertex (its first action),
    then Submit."""
    blue, black = _graph_points(elements)
    if not blue or not black:
        return mw_action("done")
    if _placed(env):
        return _submit(elements)
    (vx, vy), (ax, ay) = _centre(blue[0]), _centre(black[0])
    dx, dy = -(ay - vy), ax - vx
    point = _inside_graph(vx, vy, dx, dy) or _inside_graph(vx, vy, -dx, -dy)
    return _svg_point(*point, env) if point else mw_action("done")


@_solver("bisect-angle")
def _bisect_angle(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """A point on the bisector of the angle at the blue vertex between the two black points (its
    first action), then Submit."""
    blue, black = _graph_points(elements)
    if not blue or len(black) < 2:
        return mw_action("done")
    if _placed(env):
        return _submit(elements)
    vx, vy = _centre(blue[0])
    units = []
    for point in black[:2]:
        px, py = _centre(point)
        norm = ((px - vx) ** 2 + (py - vy) ** 2) ** 0.5 or 1.0
        units.append(((px - vx) / norm, (py - vy) / norm))
    dx, dy = units[0][0] + units[1][0], units[0][1] + units[1][1]
    point = _inside_graph(vx, vy, dx, dy)
    return _svg_point(*point, env) if point else mw_action("done")


@_solver("ascending-numbers")
def _ascending_numbers(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Click 1; the numbers then hide under squares in their order (the page's order of the
    squares): click the first square left, until none is."""
    shapes = _find(elements, "shape")
    one = [e for e in shapes if e["name"] == "1"]
    if one:
        return _click(one[0])
    squares = [e for e in shapes if e["name"] == "rect"]
    return _click(squares[0]) if squares else mw_action("done")


_CANVAS = (5, 55, 150, 160)
"""Where draw-line and draw-circle take strokes: their drawing area (150 x 110 px at page
(3, 53)), 2-3 px in from its edges (a drag that starts outside it draws nothing)."""


@_solver("draw-line")
def _draw_line(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """A straight 80-px drag through the dot, the way asked (its first action), then Submit."""
    m = re.search(r"Draw a (horizontal|vertical) line", utterance)
    dots = _find(elements, "shape", "circle")
    if m is None or not dots:
        return mw_action("done")
    if env._log:
        return _submit(elements)
    x, y = (round(v) for v in _centre(dots[0]))
    left, top, right, bottom = _CANVAS
    if m[1] == "horizontal":
        return mw_action("drag", xy=(max(x - 40, left), y), to=(min(x + 40, right), y))
    return mw_action("drag", xy=(x, max(y - 40, top)), to=(x, min(y + 40, bottom)))


@_solver("click-menu")
def _click_menu(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """By keyboard, as the menu allows: Tab focuses the menu (its first item active), ArrowDown
    moves within a level, ArrowRight opens the active item's submenu (its first item active),
    Enter selects. Where the cursor is follows from this episode's presses."""
    m = re.search(r"Select (.+)", utterance)
    path = m[1].strip().split(">") if m else []
    if not path:
        return mw_action("done")
    presses = [KEYS[int(a["key"])] for a in env._log if int(a["op"]) == 3]  # press
    if "Tab" not in presses:
        return mw_action("press", key="Tab")
    after = presses[presses.index("Tab") + 1 :]
    depth = after.count("ArrowRight")
    level_presses = after[len(after) - after[::-1].index("ArrowRight") :] if depth else after
    position = level_presses.count("ArrowDown")
    items = _find(elements, "menuitem")
    named = [e for e in items if e["name"] == path[depth]] if depth < len(path) else []
    if not named:
        return mw_action("done")
    target = named[0]
    level = sorted(
        (e for e in items if abs(e["box"][0] - target["box"][0]) <= 2), key=lambda e: e["box"][1]
    )
    index = next(i for i, e in enumerate(level) if e is target)
    if position < index:
        return mw_action("press", key="ArrowDown")
    if depth < len(path) - 1:
        return mw_action("press", key="ArrowRight")
    return mw_action("press", key="Enter")


def _polygon_sides(dark: Any, cx: float, cy: float, size: float = 35.0) -> int:
    """How many sides the regular polygon drawn around (cx, cy) with vertices ``size`` px out has:
    the dark pixels' distances from the centre, fitted by each polygon from 3 to 7 sides at every
    rotation (a side at angle a lies ``size * cos(pi/n) / cos(a mod (2pi/n) - pi/n)`` out)."""
    import numpy as np

    ys, xs = np.nonzero(dark)
    dx, dy = xs - cx, ys - cy
    radius, angle = np.hypot(dx, dy), np.arctan2(dy, dx)
    keep = (radius > size * 0.35) & (radius < size * 1.3)
    radius, angle = radius[keep], angle[keep]
    errors = {}
    for n in range(3, 8):
        sector = 2 * np.pi / n
        rotations = np.linspace(0, sector, 90, endpoint=False)[:, None]
        offset = np.mod(angle[None, :] - rotations, sector) - sector / 2
        expected = size * np.cos(np.pi / n) / np.cos(offset)
        errors[n] = float(np.median(np.abs(radius[None, :] - expected), axis=1).min())
    return min(errors, key=errors.get)


@_solver("count-sides")
def _count_sides(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Read the polygon off the screenshot (the canvas's dark pixels around its centre) and press
    the button of its number of sides."""
    canvas = [e for e in elements if e["role"] == "canvas"]
    if not canvas:
        return mw_action("done")
    left, top, right, bottom = canvas[0]["box"]
    image = env._screenshot[top:bottom, left:right].astype(int)
    dark = image.sum(axis=2) < 200
    sides = _polygon_sides(dark, (right - left) / 2, (bottom - top) / 2)
    found = _find(elements, "button", str(sides))
    return _click(found[0]) if found else mw_action("done")


_CSS_HEX = {  # the CSS colour keywords the use-colorwheel task names, as hex (CSS Color Level 3)
    "black": "000000",
    "white": "ffffff",
    "aqua": "00ffff",
    "blue": "0000ff",
    "gray": "808080",
    "green": "008000",
    "lime": "00ff00",
    "maroon": "800000",
    "navy": "000080",
    "olive": "808000",
    "purple": "800080",
    "red": "ff0000",
    "silver": "c0c0c0",
    "teal": "008080",
    "yellow": "ffff00",
    "pink": "ffc0cb",
    "magenta": "ff00ff",
    "gold": "ffd700",
    "orange": "ffa500",
}


@_solver("use-colorwheel", "use-colorwheel-2")
def _use_colorwheel(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """The picker's field takes a hex colour: the named one's, or the swatch's (read from its
    ``rgb(...)``), typed; a click on a blank spot closes the picker (it covers the button), then Submit."""
    named = re.search(r"Select (\w+) with the color picker", utterance)
    wanted = _CSS_HEX.get(named[1]) if named else None
    swatch = [e for e in elements if e["role"] == "box" and e["box"][3] <= 50]
    if wanted is None and swatch:
        rgb = re.findall(r"\d+", swatch[0].get("color", ""))[:3]
        wanted = "".join(f"{int(v):02x}" for v in rgb) if len(rgb) == 3 else None
    field = _find(elements, "textbox")
    if wanted is None or not field:
        return mw_action("done")
    if field[0].get("value", "").lower() != wanted:
        return mw_action("type", element=field[0]["id"], text=wanted.upper())
    if any(e["role"] == "canvas" for e in elements):  # the picker is open over the button
        return mw_action("click_xy", xy=(env.width - 5, 55))  # a blank spot
    return _submit(elements)


@_solver("draw-circle")
def _draw_circle(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """A stroke 22 px round the marked point: a drag from the point's right (or left) to below
    (or above) it, inside the drawing area (a chord of the circle, whose distances from the
    centre stay within 0.71..1 of the radius and whose box is 22 px square), its first action;
    then Submit."""
    dots = _find(elements, "shape", "circle")
    if not dots:
        return mw_action("done")
    if env._log:
        return _submit(elements)
    x, y = (round(v) for v in _centre(dots[0]))
    side = x + 22 if x + 22 <= _CANVAS[2] else x - 22  # right of the point, else left
    end = y + 22 if y + 22 <= _CANVAS[3] else y - 22  # below it, else above
    return mw_action("drag", xy=(side, y), to=(x, end))


def _card_centres(env: Any, top: int, bottom: int) -> list[float]:
    """The x centres of find-greatest's face-down cards (red) between rows ``top`` and ``bottom``
    of the screenshot, left to right."""
    image = env._screenshot[top:bottom].astype(int)
    red = (image[..., 0] > 180) & (image[..., 1] < 140) & (image[..., 2] < 140)
    columns = [x for x in range(red.shape[1]) if red[:, x].sum() >= 5]
    runs: list[list[int]] = []
    for x in columns:
        if runs and x - runs[-1][-1] <= 3:
            runs[-1].append(x)
        else:
            runs.append([x])
    return [(run[0] + run[-1]) / 2 for run in runs if len(run) >= 20]


@_solver("find-greatest")
def _find_greatest(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Turn each card (a click shows it and hides the others), noting its number; then turn the
    greatest and Submit. The card places are read from the first screenshot (three red cards)."""
    submit = _find(elements, "button", "Submit")
    if not submit:
        return mw_action("done")
    top, bottom = 52, submit[0]["box"][1] - 2
    notes = env._notes
    if "centres" not in notes:
        centres = _card_centres(env, top, bottom)
        if len(centres) != 3:
            return mw_action("done")
        notes["centres"], notes["values"] = centres, {}
    centres, values = notes["centres"], notes["values"]
    shown = [
        e
        for e in _find(elements, "text")
        if re.fullmatch(r"\d+", e["name"]) and top <= e["box"][1] <= bottom
    ]
    face_up = None
    if shown:
        x = _centre(shown[0])[0]
        face_up = min(range(len(centres)), key=lambda i: abs(centres[i] - x))
        values[face_up] = int(shown[0]["name"])
    middle = (top + bottom) / 2
    for i in range(len(centres)):
        if i not in values:
            return mw_action("click_xy", xy=(round(centres[i]), round(middle)))
    best = max(values, key=values.get)
    if face_up == best:
        return _click(submit[0])
    return mw_action("click_xy", xy=(round(centres[best]), round(middle)))


def _type_then_submit(elements: Elements, box: dict[str, Any], text: str) -> dict[str, Any]:
    """Type ``text`` into ``box`` unless it holds it already, then Submit."""
    if box.get("value", "") != text:
        return mw_action("type", element=box["id"], text=text)
    return _submit(elements)


@_solver("scroll-text")
def _scroll_text(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """The text area's last word (its text, punctuation dropped) typed into the field, then
    Submit."""
    areas = [e for e in _find(elements, "textbox") if e.get("multiline")]
    fields = [e for e in _find(elements, "textbox") if not e.get("multiline")]
    words = areas[0].get("value", "").split() if areas else []
    if not words or not fields:
        return mw_action("done")
    return _type_then_submit(elements, fields[0], re.sub(r"[^A-Za-z0-9]", "", words[-1]))


_SCROLLS = 24
"""Wheel steps (50 px each) that take scroll-text-2's text area from anywhere to its end: its
text (at most 150 words) is under 1,200 px tall."""


@_solver("scroll-text-2")
def _scroll_text_2(utterance: str, elements: Elements, env: Any) -> dict[str, Any]:
    """Point at the text area (a click), wheel it ``_SCROLLS`` steps the way asked, then Submit."""
    m = re.search(r"Scroll the textarea to the (top|bottom)", utterance)
    areas = [e for e in _find(elements, "textbox") if e.get("multiline")]
    if m is None or not areas:
        return mw_action("done")
    if not env._log:
        return _click(areas[0])
    wheel = "scroll_down" if m[1] == "bottom" else "scroll_up"
    if sum(OPS[int(a["op"])] == wheel for a in env._log if int(a["op"]) < len(OPS)) < _SCROLLS:
        return mw_action(wheel)
    return _submit(elements)
