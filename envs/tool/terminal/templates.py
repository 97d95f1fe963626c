"""The catalogue of Terminal task templates (:data:`TEMPLATES`, by name) and their groups.

Groups: ``text`` (log and text processing), ``data`` (CSV/JSON transformation), ``refactor``
(find-and-fix across many files), ``files`` (archives and directory surgery), ``script`` (write a
program the checker runs on new inputs), ``git`` (a local repository; only where ``git`` exists in
the sandbox), ``perms`` (file modes), ``repair`` (a config or build that fails).
"""

from __future__ import annotations

import shutil

from verigym.envs.tool.terminal import admin, data, files, git, refactor, scripts, text
from verigym.envs.tool.terminal.core import Template

__all__ = ["GROUPS", "TEMPLATES", "available", "pool"]

TEMPLATES: dict[str, Template] = {
    t.name: t
    for module in (text, data, refactor, files, scripts, git, admin)
    for t in module.TEMPLATES
}
"""Every template by name."""

GROUPS: tuple[str, ...] = ("text", "data", "refactor", "files", "script", "git", "perms", "repair")

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The directories of programs visible inside the sandbox (it binds the host's /usr, /bin)."""


def available(template: Template) -> bool:
    """Whether every program the template needs exists inside the sandbox."""
    return all(shutil.which(name, path=SANDBOX_PATH) for name in template.needs)


def pool(template: str | None = None, group: str | None = None) -> list[Template]:
    """The templates an env draws from: one by name, a group, or all; unavailable ones left out.

    Raises:
        ValueError: an unknown template or group name, or a template outside the given group.
    """
    if template is not None:
        if template not in TEMPLATES:
            raise ValueError(f"unknown Terminal template {template!r}; one of {sorted(TEMPLATES)}")
        if group is not None and TEMPLATES[template].group != group:
            raise ValueError(f"template {template!r} is not in the group {group!r}")
        chosen = [TEMPLATES[template]]
    else:
        if group is not None and group not in GROUPS:
            raise ValueError(f"unknown Terminal group {group!r}; one of {list(GROUPS)}")
        chosen = [t for t in TEMPLATES.values() if group is None or t.group == group]
    return [t for t in chosen if available(t)]
