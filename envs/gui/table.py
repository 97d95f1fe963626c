"""Registration rows of the gui family (imported by ``import verigym``; keep it light)."""

from verigym.registration import EnvRow, variants

ENTRY_POINT = "verigym.envs.gui.env:GuiEnv"

ROWS: list[EnvRow] = variants(
    "verigym/{}-v0",
    ENTRY_POINT,
    family="gui",
    rows={
        "ClickButton": {"task": "click-button"},
        "ClickButton-Hard": {"task": "click-button", "num_items": 12},
        "ClickCheckboxes": {"task": "click-checkboxes"},
        "ClickCheckboxes-Hard": {"task": "click-checkboxes", "num_items": 10},
        "EnterText": {"task": "enter-text"},
        "Login": {"task": "login"},
        "ChooseDropdown": {"task": "choose-dropdown"},
        "PickDate": {"task": "pick-date"},
        "NavigateTabs": {"task": "navigate-tabs"},
        "NavigateMenu": {"task": "navigate-menu"},
        "SearchList": {"task": "search-list"},
        "EmailInbox": {"task": "email-inbox"},
        "FormValidation": {"task": "form-validation"},
        "PhoneSettings": {"task": "phone-settings"},
        "ShoppingCart": {"task": "shopping-cart"},
        "Grounding": {"task": "grounding"},
    },
    description="A web or phone-style app task in headless Chromium (screenshot + accessibility tree, clicks and keys).",
)
