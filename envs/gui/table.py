"""Registration rows of the gui family (imported by ``import verigym``; keep it light)."""

from verigym.registration import EnvRow

ENTRY_POINT = "verigym.envs.gui.env:GuiEnv"

_ROWS = {  # name: (constructor kwargs, description)
    "ClickButton": (
        {"task": "click-button"},
        "click the named button among 4 (MiniWoB++ click-button)",
    ),
    "ClickButton-Hard": (
        {"task": "click-button", "num_items": 12},
        "click the named button among 12",
    ),
    "ClickCheckboxes": (
        {"task": "click-checkboxes"},
        "tick exactly the listed boxes of 5, then Submit",
    ),
    "ClickCheckboxes-Hard": (
        {"task": "click-checkboxes", "num_items": 10},
        "tick exactly the listed boxes of 10, then Submit",
    ),
    "EnterText": ({"task": "enter-text"}, "type the given word into a text box and Submit"),
    "Login": ({"task": "login"}, "fill username and password, log in"),
    "ChooseDropdown": (
        {"task": "choose-dropdown"},
        "open a custom dropdown, choose the option, Submit",
    ),
    "PickDate": ({"task": "pick-date"}, "pick a date up to 60 days away in a calendar widget"),
    "NavigateTabs": (
        {"task": "navigate-tabs"},
        "open the right tab and click a link in it (names repeat across tabs)",
    ),
    "NavigateMenu": ({"task": "navigate-menu"}, "choose a command three levels deep in a menu bar"),
    "SearchList": ({"task": "search-list"}, "search a list of 20 items and open the right result"),
    "EmailInbox": (
        {"task": "email-inbox"},
        "reply to, forward or delete the email named in the instruction",
    ),
    "FormValidation": (
        {"task": "form-validation"},
        "submit a form that rejects its invalid prefilled fields until fixed",
    ),
    "PhoneSettings": (
        {"task": "phone-settings"},
        "multi-screen phone: toggle Wi-Fi/Bluetooth or set an alarm, then done (AndroidControl kind)",
    ),
    "ShoppingCart": (
        {"task": "shopping-cart"},
        "add the ordered items and quantities to the cart and check out",
    ),
    "Grounding": (
        {"task": "grounding"},
        "one click inside the described element (ScreenSpot kind)",
    ),
}

ROWS: list[EnvRow] = [
    EnvRow(
        id=f"verigym/{name}-v0",
        entry_point=ENTRY_POINT,
        family="gui",
        kwargs=kwargs,
        description=description,
    )
    for name, (kwargs, description) in _ROWS.items()
]

# The MiniWoB++ tasks of the `miniwob` package (issue 38): one id per task it registers; the env
# needs the `miniwob` extra (a one-line error names it)
from verigym.envs.gui.miniwob import catalog as _miniwob  # noqa: E402

ROWS += [
    EnvRow(
        id=f"verigym/{_miniwob.env_name(task)}-v0",
        entry_point="verigym.envs.gui.miniwob.env:MiniWoBEnv",
        family="gui",
        kwargs={"task": task},
        description=f"MiniWoB++ {task} (the miniwob package's page, its own reward function)",
        nondeterministic=task in _miniwob.TIMING_DEPENDENT,
        oracle=task in _miniwob.ORACLE_TASKS,  # the rest: no scripted solver yet (docs say why)
    )
    for task in _miniwob.TASKS
]
