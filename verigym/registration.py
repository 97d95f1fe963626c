"""One table-driven registration for Gymnasium and PettingZoo ids (DESIGN.md sections 2-3).

Each family folder ``envs/<family>/`` has a light module ``table.py`` with ``ROWS``, a list of
:class:`EnvRow`. ``import verigym`` calls :func:`register_all`, which imports those tables (never the
env modules themselves: entry points are ``"module:Class"`` strings) and registers each row in
Gymnasium's registry, or PettingZoo's for ``api="aec"``/``"parallel"``. Registering the same row
twice is a no-op; registering a different row under an existing id raises.

Example::

    ROWS = variants(
        "verigym/DoorKey-{}-v0", "verigym.envs.grid.doorkey:DoorKeyEnv", family="grid",
        rows={"5x5": {"size": 5}, "8x8": {"size": 8}}, max_episode_steps=None,
    )
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from verigym.core import FAMILIES

__all__ = ["EnvRow", "make", "register_all", "register_rows", "require_id", "row", "rows", "unknown_id_message", "variants"]

ID_PATTERN = re.compile(r"^verigym/[A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*-v\d+$")

Api = Literal["gymnasium", "aec", "parallel"]


@dataclass(frozen=True)
class EnvRow:
    """One registered environment id.

    Attributes:
        id: ``verigym/<Name>[-<Variant>]-v<N>``, CamelCase name.
        entry_point: ``"module:attr"`` string, imported only when the env is made.
        family: one of :data:`verigym.core.FAMILIES`.
        kwargs: constructor keyword arguments of this variant (JSON-serializable).
        max_episode_steps: Gymnasium ``TimeLimit`` (``max_cycles`` for PettingZoo); ``None`` when
            the env enforces its own limit (preferred: then the truncating step carries
            ``success``/``score`` too).
        api: ``"gymnasium"``, or ``"aec"``/``"parallel"`` for PettingZoo envs.
        description: one line for ``verigym list`` and the README.
        reward_threshold: Gymnasium's "solved" return, if any.
        nondeterministic: the env cannot be made deterministic from its seed (``verigym check``
            then skips the determinism checks and says so).
    """

    id: str
    entry_point: str
    family: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None
    api: Api = "gymnasium"
    description: str = ""
    reward_threshold: float | None = None
    nondeterministic: bool = False

    def __post_init__(self) -> None:
        if not ID_PATTERN.match(self.id):
            raise ValueError(
                f"env id {self.id!r} must look like 'verigym/<CamelCaseName>[-<Variant>]-v<N>'"
            )
        if self.family not in FAMILIES:
            raise ValueError(f"family {self.family!r} of {self.id} is not one of {FAMILIES}")
        if self.api not in ("gymnasium", "aec", "parallel"):
            raise ValueError(f"api {self.api!r} of {self.id} must be 'gymnasium', 'aec' or 'parallel'")
        if ":" not in self.entry_point:
            raise ValueError(f"entry point {self.entry_point!r} of {self.id} must be 'module:attr'")
        object.__setattr__(self, "kwargs", dict(self.kwargs))

    def __hash__(self) -> int:
        return hash((self.id, self.entry_point, self.api))


def variants(
    id_template: str,
    entry_point: str,
    *,
    family: str,
    rows: Mapping[str, Mapping[str, Any]],
    **common: Any,
) -> list[EnvRow]:
    """Expand one env class into a row per variant.

    Args:
        id_template: an id with ``{}`` where the variant name goes, e.g. ``"verigym/DoorKey-{}-v0"``.
        entry_point: shared by all rows.
        family: shared by all rows.
        rows: variant name -> constructor kwargs.
        **common: other :class:`EnvRow` fields shared by all rows (``max_episode_steps``, ...).
    """
    return [
        EnvRow(id=id_template.format(name), entry_point=entry_point, family=family, kwargs=kwargs, **common)
        for name, kwargs in rows.items()
    ]


_TABLE: dict[str, EnvRow] = {}
_LOADED = False


def register_rows(new_rows: Iterable[EnvRow]) -> None:
    """Register rows in verigym's table and in Gymnasium's or PettingZoo's registry.

    Idempotent for identical rows.

    Raises:
        ValueError: an id is already registered with a different row.
    """
    for item in new_rows:
        if not isinstance(item, EnvRow):
            raise TypeError(f"expected EnvRow, got {type(item).__name__}: {item!r}")
        existing = _TABLE.get(item.id)
        if existing is not None:
            if existing == item:
                continue
            raise ValueError(
                f"{item.id} is already registered with entry point {existing.entry_point} and "
                f"kwargs {existing.kwargs}; bump the version number instead of reusing an id"
            )
        _TABLE[item.id] = item
        if item.api == "gymnasium":
            import gymnasium

            if item.id not in gymnasium.registry:
                gymnasium.register(
                    id=item.id,
                    entry_point=item.entry_point,
                    kwargs=dict(item.kwargs),
                    max_episode_steps=item.max_episode_steps,
                    reward_threshold=item.reward_threshold,
                    nondeterministic=item.nondeterministic,
                )
        else:
            import pettingzoo

            registry = pettingzoo.aec_registry if item.api == "aec" else pettingzoo.parallel_registry
            if item.id not in registry:
                pettingzoo.register(
                    item.api,
                    item.id,
                    item.entry_point,
                    max_cycles=item.max_episode_steps,
                    kwargs=dict(item.kwargs),
                )


def register_all() -> None:
    """Import every ``verigym.envs.<family>.table`` and register its ``ROWS`` (once)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import verigym.envs as envs_package

    for module in sorted(pkgutil.iter_modules(envs_package.__path__), key=lambda m: m.name):
        if not module.ispkg:
            continue
        name = f"verigym.envs.{module.name}.table"
        if importlib.util.find_spec(name) is None:
            continue
        table = importlib.import_module(name)
        register_rows(getattr(table, "ROWS", ()))


def rows(family: str | None = None) -> list[EnvRow]:
    """All registered rows, sorted by id, optionally of one family.

    Raises:
        ValueError: ``family`` is not a known family.
    """
    register_all()
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of {', '.join(FAMILIES)}")
    return sorted((r for r in _TABLE.values() if family is None or r.family == family), key=lambda r: r.id)


def row(env_id: str) -> EnvRow:
    """The row of ``env_id``.

    Raises:
        KeyError: the id is not registered; the message suggests close ids.
    """
    register_all()
    try:
        return _TABLE[env_id]
    except KeyError:
        raise KeyError(unknown_id_message(env_id)) from None


def unknown_id_message(env_id: str) -> str:
    """A helpful message for an unregistered id, with the closest registered ids.

    Candidates are verigym's ids and, for ids outside ``verigym/``, Gymnasium's registry too
    (``CartPol-v1`` suggests ``CartPole-v1``).
    """
    register_all()
    candidates = list(_TABLE)
    if not env_id.startswith("verigym/"):
        import gymnasium

        candidates += [name for name in gymnasium.registry if name not in _TABLE]
    close = difflib.get_close_matches(env_id, candidates, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else "."
    family = _TABLE[close[0]].family if close and close[0] in _TABLE else None
    listing = f"verigym list --family {family}" if family else "verigym list"
    return f"{env_id} not found{hint} Run \"{listing}\" to see the registered ids."


def require_id(env_id: str) -> Api:
    """Check that ``env_id`` can be made here, before any work is done with it.

    The one id lookup of the command line (``play``, ``check``, ``train``, ``eval --env``): a
    verigym id must be in verigym's table; any other id must be in Gymnasium's registry (or use
    Gymnasium's ``"module:Id-vN"`` form, which imports ``module`` first and is not checked here).

    Args:
        env_id: the id the user typed.

    Returns:
        The id's api: ``"gymnasium"``, or ``"aec"``/``"parallel"`` for verigym's PettingZoo ids.

    Raises:
        KeyError: the id is not registered; ``args[0]`` is a message with the closest ids.
    """
    register_all()
    item = _TABLE.get(env_id)
    if item is not None:
        return item.api
    if not env_id.startswith("verigym/"):
        import gymnasium

        if env_id in gymnasium.registry or ":" in env_id:
            return "gymnasium"
    raise KeyError(unknown_id_message(env_id))


def make(env_id: str, **kwargs: Any) -> Any:
    """Make a registered env: ``gymnasium.make`` or ``pettingzoo.make`` by the row's api.

    Raises:
        KeyError: the id is not registered (with suggestions).
    """
    item = row(env_id)
    if item.api == "gymnasium":
        import gymnasium

        return gymnasium.make(env_id, **kwargs)
    import pettingzoo

    return pettingzoo.make(item.api, env_id, **kwargs)
