"""The MiniWoB++ task names the ``miniwob`` package (1.1.0) registers, and their verigym ids.

Light (no imports): :mod:`verigym.envs.gui.table` reads it at ``import verigym``. The pages
themselves are read from the installed ``miniwob`` package when an env is made.
"""

from __future__ import annotations

__all__ = [
    "CLOCKED",
    "CLOCK_EPOCH_MS",
    "DATED",
    "FLIGHT_TASKS",
    "NO_ORACLE_WHY",
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
        "ascending-numbers",
        "bisect-angle",
        "book-flight",
        "book-flight-nodelay",
        "buy-ticket",
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
        "click-option",
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
        "count-shape",
        "count-sides",
        "drag-box",
        "drag-circle",
        "drag-items",
        "drag-shapes",
        "drag-shapes-2",
        "drag-single-shape",
        "drag-sort-numbers",
        "draw-circle",
        "draw-line",
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
        "enter-password",
        "enter-text",
        "enter-text-2",
        "enter-text-dynamic",
        "find-greatest",
        "find-midpoint",
        "find-word",
        "focus-text",
        "focus-text-2",
        "form-sequence",
        "form-sequence-2",
        "form-sequence-3",
        "generate-number",
        "grid-coordinate",
        "guess-number",
        "highlight-text",
        "highlight-text-2",
        "identify-shape",
        "login-user",
        "login-user-popup",
        "multi-layouts",
        "multi-orderings",
        "number-checkboxes",
        "odd-or-even",
        "order-food",
        "read-table",
        "read-table-2",
        "resize-textarea",
        "right-angle",
        "scroll-text",
        "scroll-text-2",
        "search-engine",
        "sign-agreement",
        "simple-algebra",
        "simple-arithmetic",
        "social-media",
        "social-media-all",
        "social-media-some",
        "stock-market",
        "text-transform",
        "unicode-test",
        "use-autocomplete",
        "use-autocomplete-nodelay",
        "use-colorwheel",
        "use-colorwheel-2",
        "use-slider-2",
        "use-spinner",
        "visual-addition",
    )
)
"""The tasks with a scripted solver in :mod:`verigym.envs.gui.miniwob.oracles` (a test keeps the two
equal); the others say ``"oracle": false`` in ``verigym list --json``."""

CLOCKED: dict[str, int] = {
    "click-pie": 2000,  # wheelnav's 1.5 s spread animation ends within the step that starts it
    "drag-cube": 1000,  # a setInterval physics loop
    # a 100 ms ticker through 100 prices: 2 a step, so 50 steps are upstream's 10 s episode and
    # the target price (the 76th) shows after step 37
    "stock-market": 200,
    "terminal": 1000,  # a setInterval cursor blink (and today's date: the clock's date instead)
}
"""Task -> milliseconds of page time per step. These pages run on a controlled clock (Playwright's
fake clock, ``Browser.install_clock``): their ``Date``, ``performance.now``, timers and animation
frames stand still while the agent thinks and advance by this much, firing what falls due, after
each action and after the reset; each episode starts at :data:`CLOCK_EPOCH_MS`. So their
trajectories do not depend on the machine's speed and they are not exempt from determinism."""
CLOCK_EPOCH_MS = 1_704_110_400_000
"""Where a clocked page's clock starts (2024-01-01 12:00 UTC): the same seed gives the same task
on any day."""
TIMING_DEPENDENT: dict[str, str] = {
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
)
"""Tasks whose pages read today's date (``new Date()``): the same seed gives the same task on the
same day only (``terminal`` reads it too, from its controlled clock: any day, see :data:`CLOCKED`)."""


NO_ORACLE_WHY: dict[str, str] = {
    **dict.fromkeys(
        ("click-pie", "click-pie-nodelay"),
        "the item selected when the pie opens (white label; about 1 seed in 8 asks for it) takes "
        "no click",
    ),
    **dict.fromkeys(
        ("copy-paste", "copy-paste-2"),
        "the text (up to ~130 characters) is longer than one type action carries (64), each type "
        "replaces the field, and there are no copy and paste keys",
    ),
    "click-scroll-list": "two options of a multiple select need a Ctrl-click, and the actions "
    "have no modifier keys",
    "hot-cold": "the page answers hovering (mouse moves); every pointer action ends in a click, "
    "which ends the episode",
    "tic-tac-toe": "success needs a win, and the page's opponent, which blocks or wins when it "
    "can on 45% of its moves, can force a draw",
}
"""Task -> why no scripted solver is written for it, for tasks looked at and left (the others
without one say that none is written yet)."""


def no_oracle_reason(task: str) -> str | None:
    """Why a task has no scripted solver (docs/environments.md lists them); ``None`` when it has one.

    Args:
        task: a name of :data:`TASKS`.
    """
    if task in ORACLE_TASKS:
        return None
    if task in TIMING_DEPENDENT:
        return f"timing-dependent ({TIMING_DEPENDENT[task]}): no solver written yet"
    return NO_ORACLE_WHY.get(task, "no scripted solver written yet")


def env_name(task: str) -> str:
    """``click-button`` -> ``MiniWoB-ClickButton``, ``flight.Alaska-auto`` -> ``MiniWoB-FlightAlaskaAuto``."""
    words = task.replace(".", "-").split("-")
    return "MiniWoB-" + "".join(w[:1].upper() + w[1:] for w in words)
