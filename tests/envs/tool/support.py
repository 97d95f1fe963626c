"""Which tool ids the default test run checks through another id that draws from the same code."""

from __future__ import annotations

import verigym

DRAW_FROM_EVERY_VARIANT = frozenset({"verigym/RepoFix-v0", "verigym/Terminal-v0"})
"""The RepoFix and Terminal ids whose tasks are drawn from every repository, level and template."""

WORKSPACE_VARIANT_IDS = frozenset(
    r.id
    for r in verigym.rows("tool")
    if (".repofix." in r.entry_point or ".terminal." in r.entry_point)
    and r.id not in DRAW_FROM_EVERY_VARIANT
)
"""Every other RepoFix and Terminal id: one repository, level, template or template group of the
same env class (each costs a sandbox and a test or checker run per episode). The registry-wide
tests (conformance, the pinned adversarial replies) check them in the slow run and
``DRAW_FROM_EVERY_VARIANT`` in the default one."""
