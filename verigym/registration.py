"""One table-driven registration for Gymnasium and PettingZoo ids (docs/design.md sections 2-3, 7).

An env table is a light module with ``ROWS``, a list of :class:`EnvRow`. Tables are found through
the entry-point group ``verigym.envs`` (:data:`ENV_GROUP`): verigym declares its own families'
tables (``verigym.envs.<family>.table``) there in its ``pyproject.toml``, and a third-party package
declares its table the same way::

    [project.entry-points."verigym.envs"]
    acme = "acme_envs.table"

``import verigym`` calls :func:`register_all`, which imports those tables (never the env modules
themselves: env entry points are ``"module:Class"`` strings) and registers each row in Gymnasium's
registry, or PettingZoo's for ``api="aec"``/``"parallel"`` (a parallel game is registered for
``"aec"`` too, through its ``aec_env`` or ``parallel_to_aec``, as PettingZoo does with its own). Registering the same
row twice is a no-op; registering a different row under an existing id raises. A table that fails
to import or holds bad rows is skipped with a warning naming it; :func:`plugin_errors` lists those
failures (``verigym doctor`` reports them).

A plugin's table may register ids only in a namespace of its own: never ``verigym/`` and never a
namespace that another package (or Gymnasium's registry) already holds, so a built-in id, the
unversioned form of one (``verigym/Wordle`` resolves to its highest version) or another package's id
never resolves to a plugin's class; ids its import registered directly in such a namespace are
removed again. A plugin that raises anything at import (``SystemExit`` included) is skipped like
any broken plugin; only a real Ctrl-C (a SIGINT that arrived while the tables loaded) stops
:func:`register_all`; :func:`run_plugin` is that rule for any plugin code (a plugin agent's
module, a doctor probe). A plugin is code run in verigym's process: these rules stop mistakes and name
clashes, not a hostile package.

Example::

    ROWS = variants(
        "verigym/DoorKey-{}-v0", "verigym.envs.grid.doorkey:DoorKeyEnv", family="grid",
        rows={"5x5": {"size": 5}, "8x8": {"size": 8}}, max_episode_steps=None,
    )
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import importlib.metadata
import logging
import re
import signal
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from verigym.core import FAMILIES
from verigym.kwargs_policy import KwargsRefused, check_kwargs, declared_kwargs

__all__ = [
    "ENV_GROUP",
    "EnvRow",
    "KwargsRefused",
    "ParallelAsAEC",
    "PluginError",
    "entry_points",
    "make",
    "namespace",
    "native_vector",
    "plugin_errors",
    "record_plugin_error",
    "register_all",
    "register_rows",
    "require_id",
    "row",
    "rows",
    "run_plugin",
    "unknown_id_message",
    "untrusted_kwargs",
    "variants",
]

logger = logging.getLogger(__name__)

ID_PATTERN = re.compile(
    r"^[a-z][a-z0-9_.]*(?:-[a-z0-9_.]+)*/[A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*-v\d+$"
)
"""``<namespace>/<CamelCaseName>[-<Variant>]-v<N>``: ``verigym/`` for ours, a package's own
lowercase namespace (``acme/Coin-v0``) for a plugin's."""

ENV_GROUP = "verigym.envs"
"""Entry-point group of env tables: each entry point names a module with a ``ROWS`` list."""

Api = Literal["gymnasium", "aec", "parallel"]


@dataclass(frozen=True)
class EnvRow:
    """One registered environment id.

    Attributes:
        id: ``<namespace>/<Name>[-<Variant>]-v<N>``, CamelCase name; the namespace is ``verigym``
            for ours and the package's own (``acme``) for a plugin's.
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
        additional_wrappers: ``"module:Class"`` wrappers (no arguments) that ``gymnasium.make``
            puts outermost, as Gymnasium's ``additional_wrappers`` (the MuJoCo goal envs'
            ``compute_reward`` for third-party clients).
        vector_entry_point: ``"module:attr"`` of a natively batched ``VectorEnv`` factory
            (called as ``attr(num_envs=N, **kwargs)``), which ``gymnasium.make_vec`` uses by
            default (``vectorization_mode="vector_entry_point"``); ``None``: none. The learners
            step it with ``autoreset_mode=AutoresetMode.SAME_STEP`` (:func:`native_vector`), so
            the factory takes that argument.
        oracle: the env has a scripted solver (``oracle_action()``, :class:`verigym.OracleInterface`)
            for every task it draws; ``False`` when it has none (``verigym list --json`` says
            ``"oracle": false`` and the standings show "no oracle" in the ``oracle`` agent's cell).
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
    additional_wrappers: tuple[str, ...] = ()
    vector_entry_point: str | None = None
    oracle: bool = True

    def __post_init__(self) -> None:
        if not ID_PATTERN.match(self.id):
            raise ValueError(
                f"env id {self.id!r} must look like '<namespace>/<CamelCaseName>[-<Variant>]-v<N>' "
                "(namespace 'verigym' for verigym's envs, a lowercase package name for a plugin's)"
            )
        if self.family not in FAMILIES:
            raise ValueError(f"family {self.family!r} of {self.id} is not one of {FAMILIES}")
        if self.api not in ("gymnasium", "aec", "parallel"):
            raise ValueError(
                f"api {self.api!r} of {self.id} must be 'gymnasium', 'aec' or 'parallel'"
            )
        if ":" not in self.entry_point:
            raise ValueError(f"entry point {self.entry_point!r} of {self.id} must be 'module:attr'")
        if not isinstance(self.oracle, bool):  # a plugin's row: a flag, never a truthy object
            raise ValueError(f"oracle {self.oracle!r} of {self.id} must be True or False")
        if self.vector_entry_point is not None and (
            ":" not in self.vector_entry_point or self.api != "gymnasium"
        ):
            raise ValueError(
                f"vector entry point {self.vector_entry_point!r} of {self.id} must be 'module:attr' on a gymnasium row"
            )
        object.__setattr__(self, "kwargs", dict(self.kwargs))
        object.__setattr__(self, "additional_wrappers", tuple(self.additional_wrappers))
        for wrapper in self.additional_wrappers:
            if not isinstance(wrapper, str) or ":" not in wrapper or self.api != "gymnasium":
                raise ValueError(
                    f"additional wrapper {wrapper!r} of {self.id} must be a 'module:Class' string on a gymnasium row"
                )

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
        EnvRow(
            id=id_template.format(name),
            entry_point=entry_point,
            family=family,
            kwargs=kwargs,
            **common,
        )
        for name, kwargs in rows.items()
    ]


class ParallelAsAEC:
    """PettingZoo ``"aec"`` entry point of a parallel game: the game's own ``aec_env(**kwargs)``
    when it has one (verigym's ``ParallelGame``: a turn-by-turn view that refuses a step after the
    end), else the game wrapped in PettingZoo's ``parallel_to_aec`` (which only warns after the
    end). Picklable: it holds only the ``"module:attr"`` string.

    Args:
        entry_point: the parallel env's ``"module:attr"``.
    """

    def __init__(self, entry_point: str) -> None:
        self.entry_point = entry_point

    def __call__(self, **kwargs: Any) -> Any:
        from pettingzoo.utils.conversions import parallel_to_aec

        module, attr = self.entry_point.split(":")
        game = getattr(importlib.import_module(module), attr)
        if callable(getattr(game, "aec_env", None)):
            return game.aec_env(**kwargs)
        return parallel_to_aec(game(**kwargs))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParallelAsAEC) and other.entry_point == self.entry_point

    def __hash__(self) -> int:
        return hash(self.entry_point)

    def __repr__(self) -> str:
        return f"ParallelAsAEC({self.entry_point!r})"


@dataclass(frozen=True)
class PluginError:
    """An entry point that could not be used (its package is skipped, verigym keeps working).

    Attributes:
        group: the entry-point group (``verigym.envs``, ``verigym.agents``, ``verigym.doctor``).
        name: the entry point's name.
        value: what it points to (``"module"`` or ``"module:attr"``).
        distribution: the installed package that declares it (``""`` when unknown).
        error: ``"<ExceptionType>: <message>"``.
    """

    group: str
    name: str
    value: str
    distribution: str
    error: str

    def __str__(self) -> str:
        where = f" of {self.distribution}" if self.distribution else ""
        return f"plugin {self.name!r}{where} ({self.group} = {self.value!r}) failed: {self.error}"


_TABLE: dict[str, EnvRow] = {}
_LOADED = False
_PLUGIN_ERRORS: list[PluginError] = []
_NAMESPACE_OWNERS: dict[str, str] = {"verigym": "verigym"}
"""Namespace -> the distribution whose table registered it first (``verigym/`` is verigym's)."""


def entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    """The installed entry points of ``group``: verigym's own first, then by distribution, each
    distribution's in name order.

    Duplicates (the same distribution found twice on ``sys.path``) are dropped.
    """
    found: dict[tuple[str, str], importlib.metadata.EntryPoint] = {}
    for point in _installed_entry_points().select(group=group):
        found.setdefault((point.name, point.value), point)

    def order(point: importlib.metadata.EntryPoint) -> tuple[bool, str, str]:
        dist = _distribution(point)
        return dist != "verigym", dist, point.name

    return sorted(found.values(), key=order)


@functools.cache
def _installed_entry_points() -> importlib.metadata.EntryPoints:
    """Every installed entry point, read once per process (the scan of all installed
    distributions is the slow part; the groups are selected from this one result)."""
    return importlib.metadata.entry_points()


def _distribution(point: importlib.metadata.EntryPoint) -> str:
    dist = getattr(point, "dist", None)
    return str(dist.metadata["Name"]) if dist is not None and dist.metadata["Name"] else ""


def record_plugin_error(
    group: str, point: importlib.metadata.EntryPoint, exc: BaseException
) -> PluginError:
    """Log a clear warning for an entry point that failed and remember it for :func:`plugin_errors`.

    Args:
        group: the entry-point group.
        point: the failing entry point.
        exc: what it raised.

    Returns:
        The recorded :class:`PluginError`.
    """
    error = PluginError(
        group, point.name, point.value, _distribution(point), f"{type(exc).__name__}: {exc}"
    )
    if error not in _PLUGIN_ERRORS:
        _PLUGIN_ERRORS.append(error)
        logger.warning("%s; skipped (verigym keeps working without it)", error)
    return error


def plugin_errors() -> list[PluginError]:
    """The entry points (env tables, agents, doctor probes) that failed to load so far."""
    register_all()
    return list(_PLUGIN_ERRORS)


def register_rows(new_rows: Iterable[EnvRow]) -> None:
    """Register rows in verigym's table and in Gymnasium's or PettingZoo's registry.

    Idempotent for identical rows. A ``"parallel"`` row is registered for ``"aec"`` too.

    Raises:
        TypeError: an item is not an :class:`EnvRow`.
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
                    vector_entry_point=item.vector_entry_point,
                    kwargs=dict(item.kwargs),
                    max_episode_steps=item.max_episode_steps,
                    reward_threshold=item.reward_threshold,
                    nondeterministic=item.nondeterministic,
                    additional_wrappers=tuple(
                        gymnasium.envs.registration.WrapperSpec(
                            name=w.rpartition(":")[2], entry_point=w, kwargs={}
                        )
                        for w in item.additional_wrappers
                    ),
                )
            continue
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
        if item.api == "parallel" and item.id not in pettingzoo.aec_registry:
            pettingzoo.register(
                "aec",
                item.id,
                ParallelAsAEC(item.entry_point),
                max_cycles=item.max_episode_steps,
                kwargs=dict(item.kwargs),
            )


def _owner(point: importlib.metadata.EntryPoint) -> str:
    """Who an entry point speaks for: its distribution's name, else its module."""
    return _distribution(point) or f"module {point.value.partition(':')[0]}"


def _namespace_holder(space: str, owner: str, foreign: Collection[str]) -> str | None:
    """Who else holds namespace ``space`` (``None`` when it is free or ``owner``'s own).

    Args:
        space: a namespace (``""`` for an id without one).
        owner: the distribution asking (:func:`_owner`).
        foreign: namespaces of Gymnasium ids that verigym's table did not register.
    """
    holder = _NAMESPACE_OWNERS.get(space)
    if holder is None and space in foreign:
        holder = "another library (it is in Gymnasium's registry)"
    return holder if holder not in (None, owner) else None


def _foreign_namespaces() -> set[str]:
    import gymnasium

    return {namespace(env_id) for env_id in gymnasium.registry if env_id not in _TABLE}


def _registries() -> dict[str, dict[str, Any]]:
    """Gymnasium's and PettingZoo's registries (``{}`` for PettingZoo when it is not installed)."""
    import gymnasium

    found: dict[str, dict[str, Any]] = {"gymnasium": gymnasium.registry}
    try:
        import pettingzoo
    except ImportError:  # pragma: no cover - a dependency of verigym
        return found
    for name in ("aec_registry", "parallel_registry"):
        registry = getattr(pettingzoo, name, None)
        if isinstance(registry, dict):
            found[f"pettingzoo.{name}"] = registry
    return found


def _undo_direct_registrations(
    before: dict[str, dict[str, Any]], owner: str, foreign: Collection[str]
) -> list[str]:
    """Undo what an import registered directly (not through ``ROWS``) in a namespace that is not
    ``owner``'s, or over an id that was there; return one line per undone change."""
    undone = []
    for name, registry in _registries().items():
        old = before.get(name, {})
        for env_id in list(registry):
            if env_id in old:
                if registry[env_id] is not old[env_id]:
                    registry[env_id] = old[env_id]
                    undone.append(f"{env_id} was re-registered in {name}")
            elif _namespace_holder(namespace(env_id), owner, foreign) is not None:
                del registry[env_id]
                undone.append(
                    f"{env_id} was registered in {name} in a namespace that is not the plugin's"
                )
        for env_id in old.keys() - registry.keys():
            registry[env_id] = old[env_id]
            undone.append(f"{env_id} was removed from {name}")
    return undone


def _register_table(point: importlib.metadata.EntryPoint) -> None:
    """Import one ``verigym.envs`` entry point's module and register its ``ROWS`` (all or none).

    Raises:
        BaseException: whatever the import raised; ``AttributeError``/``TypeError`` for a module
            without a list of :class:`EnvRow`; ``ValueError`` for an id in another's namespace, a
            reused id, or ids the import registered directly in another's namespace (undone).
    """
    owner = _owner(point)
    foreign = _foreign_namespaces()
    before = {name: dict(registry) for name, registry in _registries().items()}
    try:
        table = point.load()
    finally:
        undone = _undo_direct_registrations(before, owner, foreign)
    if undone:
        raise ValueError(
            "its import changed the env registry behind verigym's back (undone): "
            + "; ".join(undone[:5])
        )
    table_rows = getattr(table, "ROWS", None)
    if table_rows is None:
        raise AttributeError(f"module {point.value!r} has no ROWS list of EnvRow")
    table_rows = list(table_rows)
    for item in table_rows:
        if not isinstance(item, EnvRow):
            raise TypeError(f"ROWS holds {type(item).__name__} {item!r}, not an EnvRow")
        space = namespace(item.id)
        holder = _namespace_holder(space, owner, foreign)
        if holder is not None:
            raise ValueError(
                f"{item.id}: the namespace {space!r} belongs to {holder}; a plugin registers its ids in a "
                "lowercase namespace of its own (acme/Sum-v0)"
            )
        existing = _TABLE.get(item.id)
        if existing is not None and existing != item:
            raise ValueError(
                f"{item.id} is already registered by another table with entry point {existing.entry_point}"
            )
    register_rows(table_rows)
    for item in table_rows:
        _NAMESPACE_OWNERS.setdefault(namespace(item.id), owner)


@contextlib.contextmanager
def _user_interrupts() -> Iterator[Callable[[], bool]]:
    """Tell the user's Ctrl-C from a ``KeyboardInterrupt`` that plugin code raised itself.

    In the main thread, SIGINT's Python handler is wrapped for the duration to note that a real
    interrupt arrived. Yields a function that says whether a ``KeyboardInterrupt`` seen now is the
    user's: one that arrived through SIGINT, or any one when SIGINT's handler is not Python's (then
    the two cannot be told apart, and the user wins). Off the main thread, or with SIGINT ignored,
    no ``KeyboardInterrupt`` can be the user's.
    """
    pressed = False
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else signal.SIG_IGN

    def noting(signum: int, frame: Any) -> Any:
        nonlocal pressed
        pressed = True
        return previous(signum, frame)  # type: ignore[operator]

    if callable(previous):
        signal.signal(signal.SIGINT, noting)
    try:
        yield lambda: pressed or previous is None
    finally:
        if callable(previous):
            signal.signal(signal.SIGINT, previous)


def register_all() -> None:
    """Register the ``ROWS`` of every ``verigym.envs`` entry point (once per process).

    verigym's own families come first. A table that fails to import (whatever it raises, also
    ``SystemExit`` or a ``KeyboardInterrupt`` of its own), has no ``ROWS``, holds something else
    than :class:`EnvRow`, reuses a registered id or registers in a namespace that is not its own
    (``verigym/``, another package's) is skipped whole, with a warning naming the plugin and the
    error (see :func:`plugin_errors`).

    Raises:
        KeyboardInterrupt: the user pressed Ctrl-C while the tables loaded.
    """
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    points = entry_points(ENV_GROUP)
    if not any(_distribution(p) == "verigym" for p in points):
        logger.warning(
            "no %s entry points of verigym itself are installed, so verigym's own envs are not registered; "
            "install verigym (pip install verigym, or pip install -e . in a checkout)",
            ENV_GROUP,
        )
    for point in points:
        failure = run_plugin(lambda point=point: _register_table(point))[1]
        if failure is not None:
            record_plugin_error(ENV_GROUP, point, failure)


def run_plugin(fn: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """Run plugin code (import a table, load an agent's module, call a doctor probe) so that
    nothing it raises ends verigym: ``(result, None)``, or ``(None, what it raised)``.

    Whatever the code raises is returned, ``SystemExit``, ``GeneratorExit`` and a
    ``KeyboardInterrupt`` it raised itself included; only the user's real Ctrl-C (a SIGINT that
    arrived while it ran, see :func:`_user_interrupts`) propagates. The caller reports the failure
    (:func:`record_plugin_error` for an entry point: a warning naming the plugin).

    Raises:
        KeyboardInterrupt: the user pressed Ctrl-C while the plugin code ran.
    """
    with _user_interrupts() as user_interrupted:
        try:
            return fn(), None
        except BaseException as exc:  # noqa: BLE001 - a broken plugin must not break (or end) verigym
            if isinstance(exc, KeyboardInterrupt) and user_interrupted():
                raise
            return None, exc


def namespace(env_id: str) -> str:
    """The namespace of an id (``"acme"`` for ``"acme/Coin-v0"``; ``""`` without one)."""
    head, sep, _ = env_id.partition("/")
    return head if sep else ""


def _own_namespace(env_id: str) -> bool:
    """Whether ``env_id`` is in a namespace of verigym's table (ours or a plugin's)."""
    space = namespace(env_id)
    return space == "verigym" or any(namespace(known) == space for known in _TABLE)


def rows(family: str | None = None) -> list[EnvRow]:
    """All registered rows, sorted by id, optionally of one family.

    Raises:
        ValueError: ``family`` is not a known family.
    """
    register_all()
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of {', '.join(FAMILIES)}")
    return sorted(
        (r for r in _TABLE.values() if family is None or r.family == family), key=lambda r: r.id
    )


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


def native_vector(env_id: str) -> bool:
    """Whether ``env_id`` is a registered id with a natively batched engine
    (:attr:`EnvRow.vector_entry_point`); False for an id outside the table."""
    register_all()
    entry = _TABLE.get(env_id)
    return entry is not None and entry.vector_entry_point is not None


def unknown_id_message(env_id: str) -> str:
    """A helpful message for an unregistered id, with the closest registered ids.

    Candidates are the table's ids (verigym's and plugins') and, for ids outside the table's
    namespaces, Gymnasium's registry too (``CartPol-v1`` suggests ``CartPole-v1``).
    """
    register_all()
    candidates = list(_TABLE)
    if not _own_namespace(env_id):
        import gymnasium

        candidates += [name for name in gymnasium.registry if name not in _TABLE]
    close = difflib.get_close_matches(env_id, candidates, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else "."
    family = _TABLE[close[0]].family if close and close[0] in _TABLE else None
    listing = f"verigym list --family {family}" if family else "verigym list"
    return f'{env_id} not found{hint} Run "{listing}" to see the registered ids.'


def require_id(env_id: str) -> Api:
    """Check that ``env_id`` can be made here, before any work is done with it.

    The one id lookup of the command line (``play``, ``check``, ``train``, ``eval --env``): a
    verigym id must be in verigym's table; any other id must be in Gymnasium's registry (or use
    Gymnasium's ``"module:Id-vN"`` form, which imports ``module`` first and is not checked here).
    Plugin ids are in the table like ours.

    Args:
        env_id: the id the user typed.

    Returns:
        The id's api: ``"gymnasium"``, or ``"aec"``/``"parallel"`` for the table's PettingZoo ids.

    Raises:
        KeyError: the id is not registered; ``args[0]`` is a message with the closest ids.
    """
    register_all()
    item = _TABLE.get(env_id)
    if item is not None:
        return item.api
    if not _own_namespace(env_id):
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


def _entry_class(env_id: str) -> tuple[Any, bool]:
    """The class behind ``env_id`` (``None`` when its entry point is not a class or cannot be
    imported) and whether the id is made through ``gymnasium.make``.

    Raises:
        KwargsRefused: the id is not registered.
    """
    register_all()
    item = _TABLE.get(env_id)
    if item is not None:
        entry: Any = item.entry_point
        is_gymnasium = item.api == "gymnasium"
    else:
        import gymnasium

        if env_id not in gymnasium.registry:
            raise KwargsRefused(
                f"cannot check kwargs of an unknown id: {unknown_id_message(env_id)}"
            )
        entry, is_gymnasium = gymnasium.spec(env_id).entry_point, True
    return entry_point_class(entry), is_gymnasium


def entry_point_class(entry: Any) -> type | None:
    """The class an env registration's ``entry_point`` names, imported but not built.

    Args:
        entry: ``"module:Class"`` or the object itself (a class or a factory).

    Returns:
        The class, or ``None`` when the entry point is a factory rather than a class, or its module
        cannot be imported: an optional extra is missing, or the module raised anything at import
        (a broken plugin is skipped through :func:`run_plugin`, never ends verigym).
    """
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry, error = run_plugin(lambda: getattr(importlib.import_module(module), attr))
        if error is not None:
            logger.debug("entry point %s:%s cannot be imported: %r", module, attr, error)
    return entry if isinstance(entry, type) else None


def untrusted_kwargs(
    env_id: str, kwargs: Mapping[str, Any], *, allow: Collection[str] = ()
) -> dict[str, Any]:
    """Validate constructor kwargs that come from outside the operator's control.

    A ``serve-env`` client's ``reset(kwargs=...)``, a stored trajectory's ``env_kwargs`` and a
    suite file's task kwargs all pass here before ``gym.make``. Each env class declares, in its
    ``remote_kwargs`` (see :mod:`verigym.kwargs_policy`), which parameters such a source may set
    and within which bounds; anything else is refused. The row's own kwargs (from its table) are
    trusted and not checked: only ``kwargs``, given on top of them, are (restating a row's own
    value, as a stored episode may, changes nothing and is accepted).

    Args:
        env_id: a registered id (verigym's table, or Gymnasium's registry).
        kwargs: parameter name -> value, decoded from JSON.
        allow: names the operator allows beyond the client-settable ones (``verigym serve-env
            --allow-kwargs``); a parameter declared ``never`` (``unsafe``) stays refused.

    Returns:
        The validated kwargs (a new dict with the same items, nothing added).

    Raises:
        KwargsRefused: a parameter is undeclared, operator-only and not allowed, never settable,
            out of its bound, or not small plain JSON; or the id is unknown. The message names the
            parameter, the reason and the fix.
    """
    if not isinstance(kwargs, Mapping):
        raise KwargsRefused(
            f"kwargs of {env_id} must be an object of parameter -> value, got {type(kwargs).__name__}"
        )
    if not kwargs:
        return {}
    cls, is_gymnasium = _entry_class(env_id)
    own = _TABLE[env_id].kwargs if env_id in _TABLE else {}
    restated = {
        k: v for k, v in kwargs.items() if k in own and type(v) is type(own[k]) and v == own[k]
    }
    checked = check_kwargs(
        declared_kwargs(cls, gymnasium=is_gymnasium),
        {k: v for k, v in kwargs.items() if k not in restated},
        allow=allow,
        env_id=env_id,
    )
    return {k: restated[k] if k in restated else checked[k] for k in kwargs}
