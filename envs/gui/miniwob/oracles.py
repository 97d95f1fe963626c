"""Scripted solvers of MiniWoB++ tasks: the next action from the utterance and the element list.

Each solver reads only what the agent reads (the instruction and the observation's elements: role,
name, value, checked, expanded, focus, box) and is stateless: it looks at the page as it is now
and returns the one action that moves the task on. ``ORACLES`` maps a task name to its solver;
:data:`verigym.envs.gui.miniwob.catalog.ORACLE_TASKS` lists the same names (a test keeps them equal).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from verigym.envs.gui.miniwob.env import mw_action

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
