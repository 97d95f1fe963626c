"""The MiniWoB++ task names the ``miniwob`` package (1.1.0) registers, and their verigym ids.

Light (no imports): :mod:`verigym.envs.gui.table` reads it at ``import verigym``. The pages
themselves are read from the installed ``miniwob`` package when an env is made.
"""

from __future__ import annotations

__all__ = [
    "DATED",
    "FLIGHT_TASKS",
    "ORACLE_TASKS",
    "TASKS",
    "TIMING_DEPENDENT",
    "env_name",
    "no_oracle_reason",
]

TASKS: tuple[str, ...] = (
    "bisect-angle",
    "book-flight",
    "book-flight-nodelay",
    "choose-date",
    "choose-date-easy",
    "choose-date-medium",
    "choose-date-nodelay",
    "choose-list",
    "circle-center",
    "click-button",
    "click-button-sequence",
    "click-checkboxes",
    "click-checkboxes-large",
    "click-checkboxes-soft",
    "click-checkboxes-transfer",
    "click-collapsible",
    "click-collapsible-2",
    "click-collapsible-2-nodelay",
    "click-collapsible-nodelay",
    "click-color",
    "click-dialog",
    "click-dialog-2",
    "click-link",
    "click-menu",
    "click-menu-2",
    "click-option",
    "click-pie",
    "click-pie-nodelay",
    "click-scroll-list",
    "click-shades",
    "click-shape",
    "click-tab",
    "click-tab-2",
    "click-tab-2-easy",
    "click-tab-2-hard",
    "click-tab-2-medium",
    "click-test",
    "click-test-2",
    "click-test-transfer",
    "click-widget",
    "copy-paste",
    "copy-paste-2",
    "count-shape",
    "count-sides",
    "drag-box",
    "drag-circle",
    "drag-cube",
    "drag-items",
    "drag-items-grid",
    "drag-shapes",
    "drag-sort-numbers",
    "email-inbox",
    "email-inbox-delete",
    "email-inbox-forward",
    "email-inbox-forward-nl",
    "email-inbox-forward-nl-turk",
    "email-inbox-important",
    "email-inbox-nl-turk",
    "email-inbox-noscroll",
    "email-inbox-reply",
    "email-inbox-star-reply",
    "enter-date",
    "enter-password",
    "enter-text",
    "enter-text-2",
    "enter-text-dynamic",
    "enter-time",
    "find-midpoint",
    "find-word",
    "focus-text",
    "focus-text-2",
    "grid-coordinate",
    "guess-number",
    "highlight-text",
    "highlight-text-2",
    "identify-shape",
    "login-user",
    "login-user-popup",
    "multi-layouts",
    "multi-orderings",
    "navigate-tree",
    "number-checkboxes",
    "read-table",
    "read-table-2",
    "resize-textarea",
    "right-angle",
    "scroll-text",
    "scroll-text-2",
    "search-engine",
    "simple-algebra",
    "simple-arithmetic",
    "social-media",
    "social-media-all",
    "social-media-some",
    "terminal",
    "text-editor",
    "text-transform",
    "tic-tac-toe",
    "unicode-test",
    "use-autocomplete",
    "use-autocomplete-nodelay",
    "use-colorwheel",
    "use-colorwheel-2",
    "use-slider",
    "use-slider-2",
    "use-spinner",
    "visual-addition",
    "flight.Alaska",
    "flight.Alaska-auto",
    "flight.AA",
    "ascending-numbers",
    "buy-ticket",
    "daily-calendar",
    "drag-shapes-2",
    "drag-single-shape",
    "draw-circle",
    "draw-line",
    "find-greatest",
    "form-sequence",
    "form-sequence-2",
    "form-sequence-3",
    "generate-number",
    "hot-cold",
    "odd-or-even",
    "order-food",
    "phone-book",
    "sign-agreement",
    "stock-market",
)
"""Every task ``miniwob`` registers (``miniwob/<task>-v1``), in its registration order."""

FLIGHT_TASKS = frozenset(t for t in TASKS if t.startswith("flight."))
"""The tasks that load a whole airline site in an iframe (served over HTTP, 375x667 pixels)."""

ORACLE_TASKS: frozenset[str] = frozenset(
    (
        "book-flight",
        "book-flight-nodelay",
        "choose-date",
        "choose-date-easy",
        "choose-date-medium",
        "choose-date-nodelay",
        "choose-list",
        "click-button",
        "click-button-sequence",
        "click-checkboxes",
        "click-checkboxes-large",
        "click-checkboxes-transfer",
        "click-collapsible",
        "click-collapsible-2",
        "click-collapsible-2-nodelay",
        "click-collapsible-nodelay",
        "click-color",
        "click-dialog",
        "click-dialog-2",
        "click-link",
        "click-option",
        "click-tab",
        "click-tab-2",
        "click-tab-2-easy",
        "click-tab-2-hard",
        "click-tab-2-medium",
        "click-test",
        "click-test-2",
        "click-test-transfer",
        "click-widget",
        "drag-items",
        "email-inbox",
        "email-inbox-delete",
        "email-inbox-forward",
        "email-inbox-important",
        "email-inbox-noscroll",
        "email-inbox-reply",
        "email-inbox-star-reply",
        "enter-password",
        "enter-text",
        "enter-text-2",
        "enter-text-dynamic",
        "find-word",
        "focus-text",
        "focus-text-2",
        "login-user",
        "read-table",
        "simple-arithmetic",
        "unicode-test",
        "use-autocomplete",
        "use-autocomplete-nodelay",
    )
)
"""The tasks with a scripted solver in :mod:`verigym.envs.gui.miniwob.oracles` (a test keeps the two
equal); the others say ``"oracle": false`` in ``verigym list --json``."""

TIMING_DEPENDENT: dict[str, str] = {
    "click-pie": "the pie's wedges are drawn by a timed animation longer than the 1 s settle wait",
    "stock-market": "a setInterval ticker changes the price on the page continuously",
    "drag-cube": "a setInterval physics loop moves the cube between observations",
    "terminal": "a setInterval blinks the cursor in the page",
    "email-inbox-delete": "the list re-renders after a delete on a timer (screenshots race it)",
    "email-inbox-noscroll": "the list re-renders after a delete on a timer (screenshots race it)",
    "flight.Alaska": "the airline site loads in an iframe after the episode starts",
    "flight.Alaska-auto": "the airline site loads in an iframe after the episode starts",
    "flight.AA": "the airline site loads in an iframe after the episode starts",
}
"""Task -> why its trajectories depend on wall-clock time (exempt from the determinism check only;
docs/environments.md lists them)."""
DATED = (
    "book-flight",
    "book-flight-nodelay",
    "buy-ticket",
    "choose-date",
    "choose-date-easy",
    "choose-date-medium",
    "choose-date-nodelay",
    "enter-date",
    "enter-time",
    "terminal",
)
"""Tasks whose pages read today's date (``new Date()``): the same seed gives the same task on the
same day only."""


def no_oracle_reason(task: str) -> str | None:
    """Why a task has no scripted solver (docs/environments.md lists them); ``None`` when it has one.

    Args:
        task: a name of :data:`TASKS`.
    """
    if task in ORACLE_TASKS:
        return None
    if task in TIMING_DEPENDENT:
        return f"timing-dependent ({TIMING_DEPENDENT[task]}): no solver written yet"
    return "no scripted solver written yet"


def env_name(task: str) -> str:
    """``click-button`` -> ``MiniWoB-ClickButton``, ``flight.Alaska-auto`` -> ``MiniWoB-FlightAlaskaAuto``."""
    words = task.replace(".", "-").split("-")
    return "MiniWoB-" + "".join(w[:1].upper() + w[1:] for w in words)
