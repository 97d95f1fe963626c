"""The catalogue of Terminal task templates (:data:`TEMPLATES`, by name) and their groups.

Groups: ``text`` (log and text processing), ``data`` (CSV/JSON transformation), ``refactor``
(find-and-fix across many files), ``files`` (archives and directory surgery), ``script`` (write a
program the checker runs on new inputs), ``git`` (a local repository; only where ``git`` exists in
the sandbox), ``perms`` (file modes), ``repair`` (a config or build that fails).

Where ``git`` is missing inside the sandbox (:func:`program_available`, the probe), the git
templates are left out of the draw of the mixed pools (``Terminal-v0``: a warning says so once, and
the seed -> task mapping then differs from a machine with git), while asking for them alone
(``group="git"``, ``template="git_commit"``, the ids ``Terminal-Git-v0``, ``Terminal-GitCommit-v0``
...) raises a ``ValueError`` naming the missing program when the env is made: never a failure in the
middle of an episode.
"""

from __future__ import annotations

import logging
import shutil

from verigym.envs.tool.terminal import admin, data, files, git, refactor, scripts, text
from verigym.envs.tool.terminal.core import Template

__all__ = ["GROUPS", "TEMPLATES", "available", "missing_programs", "pool", "program_available"]

logger = logging.getLogger(__name__)
_warned: set[tuple[str, ...]] = set()

TEMPLATES: dict[str, Template] = {
    t.name: t
    for module in (text, data, refactor, files, scripts, git, admin)
    for t in module.TEMPLATES
}
"""Every template by name."""

GROUPS: tuple[str, ...] = ("text", "data", "refactor", "files", "script", "git", "perms", "repair")

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The directories of programs visible inside the sandbox (it binds the host's /usr, /bin)."""


def program_available(name: str) -> bool:
    """Whether the program ``name`` exists inside the sandbox (on :data:`SANDBOX_PATH`; the
    sandbox binds the host's ``/usr`` and ``/bin``). The probe of every template's ``needs``."""
    return shutil.which(name, path=SANDBOX_PATH) is not None


def missing_programs(template: Template) -> list[str]:
    """The programs ``template`` needs that the sandbox lacks (empty: it can be drawn)."""
    return [name for name in template.needs if not program_available(name)]


def available(template: Template) -> bool:
    """Whether every program the template needs exists inside the sandbox."""
    return not missing_programs(template)


def pool(template: str | None = None, group: str | None = None) -> list[Template]:
    """The templates an env draws from: one by name, a group, or all; unavailable ones left out.

    A mixed pool that loses templates this way logs a warning (once per set of templates); a
    pool left empty raises (below).

    Raises:
        ValueError: an unknown template or group name, a template outside the given group, or
            nothing left to draw because the programs of the asked templates (``git``) are
            missing in the sandbox (the message names them).
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
    kept = [t for t in chosen if available(t)]
    left_out = tuple(t.name for t in chosen if t not in kept)
    if not kept:
        missing = sorted({name for t in chosen for name in missing_programs(t)})
        asked = f"template={template!r}" if template is not None else f"group={group!r}"
        raise ValueError(
            f"no Terminal task can be drawn for {asked}: the program(s) {', '.join(missing)} "
            f"it needs are missing inside the sandbox (looked for on {SANDBOX_PATH}); install "
            "them, or pick another template or group"
        )
    if left_out and left_out not in _warned:
        _warned.add(left_out)
        logger.warning(
            "Terminal: templates %s are left out of the draw (programs missing inside the "
            "sandbox: %s)",
            ", ".join(left_out),
            ", ".join(sorted({n for t in chosen if t not in kept for n in missing_programs(t)})),
        )
    return kept
