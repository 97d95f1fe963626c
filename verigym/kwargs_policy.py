"""Which constructor arguments an env accepts from outside the process (docs/design.md section 8).

Constructor kwargs reach ``gym.make`` from places the operator does not control: a ``serve-env``
client's ``reset(kwargs=...)``, a stored trajectory replayed by ``verigym reverify``, a suite file.
Some turn safety off (``unsafe=True`` runs agent code outside the sandbox) and some raise costs
(time limits, generator sizes). So every env class declares, next to its constructor, which
parameters such a source may set and within which bounds, in the class attribute
``remote_kwargs`` (a mapping ``name -> Kwarg``). Declarations are inherited: the effective policy
of a class is the union of ``remote_kwargs`` over its MRO, a subclass's entry winning. The policy
is closed by default: a parameter no class declares is refused.

Three kinds of entry:

* :func:`client` -- a client may set it, within its bound (``difficulty``, ``render_mode``).
* :func:`operator_only` -- refused unless the operator names it (``verigym serve-env --allow-kwargs
  timeout_s``): a cost (time limits, sizes); its bound still applies when allowed. Any generator
  parameter (size, density, level, config) whose bounds let one ``reset`` take more than
  :data:`RESET_BUDGET_S` is operator-only: a client's resets run in the server's process and
  share its CPUs with every other session.
* :func:`never` -- never taken from outside, whatever the operator allows (``unsafe``).

Example::

    class PythonMathEnv(ToolEnv):
        remote_kwargs = {
            "difficulty": client(IntRange(0, 2)),
            "timeout_s": operator_only(FloatRange(0.1, 60.0), why="wall-clock seconds per code call"),
            "unsafe": never("runs agent code outside the sandbox"),
        }

Values must be plain JSON (``None``, ``bool``, ``int``, finite ``float``, ``str``, lists and
``str``-keyed dicts), small (:data:`MAX_STRING`, :data:`MAX_ITEMS`, :data:`MAX_DEPTH`) even where
the operator allows an undeclared parameter. This module imports only the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Bound",
    "FLAG",
    "Fields",
    "FloatRange",
    "IntRange",
    "Kwarg",
    "KwargsRefused",
    "MAKE_KWARGS",
    "NEVER_REMOTE",
    "OneOf",
    "RESET_BUDGET_S",
    "check_kwargs",
    "client",
    "declared_kwargs",
    "never",
    "operator_only",
]

RESET_BUDGET_S = 0.05
"""Seconds of generator work a client-settable kwarg may make one ``reset`` cost (at its bounds);
anything costlier is :func:`operator_only`."""
MAX_STRING = 1024
"""Longest string value (characters) accepted anywhere in untrusted kwargs."""
MAX_ITEMS = 64
"""Most items of one list or dict, and most top-level kwargs."""
MAX_DEPTH = 4
"""Deepest nesting of lists and dicts."""

Access = Literal["client", "operator", "never"]


class KwargsRefused(ValueError):
    """Constructor kwargs from an untrusted source were refused.

    The message names the parameter, the reason and the fix. Attributes: ``param`` (the parameter
    name, ``""`` for the whole mapping) and ``code`` (``"INVALID_KWARGS"``, the wire error code).
    """

    code = "INVALID_KWARGS"

    def __init__(self, message: str, *, param: str = ""):
        super().__init__(message)
        self.param = param


class Bound:
    """A constraint on one value; :meth:`problem` says what is wrong with a value, or ``None``."""

    def problem(self, value: Any) -> str | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


def _is_int(value: Any) -> bool:
    return type(value) is int


@dataclass(frozen=True)
class IntRange(Bound):
    """An ``int`` (not ``bool``) in ``[low, high]``."""

    low: int
    high: int

    def problem(self, value: Any) -> str | None:
        if not _is_int(value):
            return f"must be an int, got {type(value).__name__}"
        if not self.low <= value <= self.high:
            return f"{value} is outside {self.describe()}"
        return None

    def describe(self) -> str:
        return f"int in [{self.low}, {self.high}]"


@dataclass(frozen=True)
class FloatRange(Bound):
    """A finite ``int`` or ``float`` (not ``bool``) in ``[low, high]``."""

    low: float
    high: float

    def problem(self, value: Any) -> str | None:
        if type(value) not in (int, float) or not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if not self.low <= value <= self.high:
            return f"{value} is outside {self.describe()}"
        return None

    def describe(self) -> str:
        return f"number in [{self.low:g}, {self.high:g}]"


@dataclass(frozen=True)
class OneOf(Bound):
    """One of ``choices`` (compared with its type: ``1`` is not ``True``)."""

    choices: tuple[Any, ...]

    def problem(self, value: Any) -> str | None:
        if any(type(value) is type(c) and value == c for c in self.choices):
            return None
        return f"{value!r} is not {self.describe()}"

    def describe(self) -> str:
        return f"one of {', '.join(repr(c) for c in self.choices)}"


FLAG = OneOf((True, False))
"""A ``bool``."""


@dataclass(frozen=True)
class Fields(Bound):
    """A dict whose keys are among ``fields`` and whose values each meet that field's bound
    (e.g. a generator's ``config``)."""

    fields: Mapping[str, Bound]

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"must be an object, got {type(value).__name__}"
        for key, item in value.items():
            bound = self.fields.get(key)
            if bound is None:
                known = ", ".join(sorted(self.fields)) or "none"
                return f"field {key!r} may not be set (settable fields: {known})"
            wrong = bound.problem(item)
            if wrong is not None:
                return f"field {key!r}: {wrong}"
        return None

    def describe(self) -> str:
        return "{" + ", ".join(f"{k}: {b.describe()}" for k, b in self.fields.items()) + "}"


@dataclass(frozen=True)
class Kwarg:
    """The declaration of one constructor parameter (see the module docstring).

    Attributes:
        access: ``"client"`` (settable within ``bound``), ``"operator"`` (only when the operator
            allows it by name) or ``"never"``.
        bound: the values accepted (``None``: any small JSON value).
        why: why it is restricted, quoted in the refusal.
    """

    access: Access
    bound: Bound | None = None
    why: str = ""


def client(bound: Bound) -> Kwarg:
    """A parameter any client may set, within ``bound``."""
    return Kwarg("client", bound)


def operator_only(bound: Bound | None = None, *, why: str) -> Kwarg:
    """A safety- or cost-relevant parameter: refused unless the operator allows it by name."""
    return Kwarg("operator", bound, why)


def never(why: str) -> Kwarg:
    """A parameter never taken from a client or stored data, whatever the operator allows."""
    return Kwarg("never", None, why)


NEVER_REMOTE: Mapping[str, Kwarg] = {
    "unsafe": never("it runs agent code outside the sandbox, as the server's user"),
}
"""Declared for every class, plugins' included (a class may not relax them): the conventional name
of the switch that turns the code sandbox off."""

MAKE_KWARGS: Mapping[str, Kwarg] = {
    "render_mode": client(OneOf((None, "rgb_array", "ansi"))),
    "max_episode_steps": operator_only(IntRange(1, 100_000), why="raises the cost of an episode"),
    "autoreset": operator_only(FLAG, why="changes the episode contract"),
}
"""Parameters of ``gymnasium.make`` itself, the same for every Gymnasium id (an env class may
override them). ``render_mode="human"`` would open windows on the server and is never accepted."""


def declared_kwargs(cls: type | None, *, gymnasium: bool = True) -> dict[str, Kwarg]:
    """The effective declaration of an env class: ``remote_kwargs`` merged over its MRO.

    Args:
        cls: the env class (``None``: an entry point that is not a class; nothing declared).
        gymnasium: include :data:`MAKE_KWARGS` (ids made through ``gymnasium.make``).

    Returns:
        Parameter name -> :class:`Kwarg`; a subclass's entry overrides its bases', and
        :data:`NEVER_REMOTE` overrides all.
    """
    merged: dict[str, Kwarg] = dict(MAKE_KWARGS) if gymnasium else {}
    if isinstance(cls, type):
        for klass in reversed(cls.__mro__):
            own = klass.__dict__.get("remote_kwargs")
            if isinstance(own, Mapping):
                merged.update(own)
    merged.update(NEVER_REMOTE)
    return merged


def _json_problem(value: Any, depth: int = 0) -> str | None:
    """What makes ``value`` not small plain JSON, or ``None``."""
    if value is None or type(value) in (bool, int):
        return None
    if type(value) is float:
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if type(value) is str:
        return (
            None
            if len(value) <= MAX_STRING
            else f"a {len(value)}-character string is over the {MAX_STRING}-character limit"
        )
    if type(value) in (list, dict):
        if depth >= MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if len(value) > MAX_ITEMS:
            return f"{len(value)} items are over the {MAX_ITEMS}-item limit"
        if type(value) is dict:
            for key, item in value.items():
                if type(key) is not str:
                    return f"a key {key!r} is not a string"
                wrong = _json_problem(key, depth + 1) or _json_problem(item, depth + 1)
                if wrong:
                    return wrong
            return None
        for item in value:
            wrong = _json_problem(item, depth + 1)
            if wrong:
                return wrong
        return None
    return f"a {type(value).__name__} is not a plain JSON value"


def check_kwargs(
    declared: Mapping[str, Kwarg],
    kwargs: Mapping[str, Any],
    *,
    allow: Collection[str] = (),
    env_id: str = "this env",
) -> dict[str, Any]:
    """Validate untrusted constructor kwargs against a declaration (see the module docstring).

    Args:
        declared: :func:`declared_kwargs` of the env class.
        kwargs: the kwargs from the client, the stored row or the spec file.
        allow: parameter names the operator allows beyond the ``client`` ones (never ``never``).
        env_id: named in the messages.

    Returns:
        A new dict with the same items.

    Raises:
        KwargsRefused: a parameter is not settable from outside, breaks its bound or is not small
            plain JSON; the message says which and how to fix it.
    """
    if not isinstance(kwargs, Mapping):
        raise KwargsRefused(
            f"kwargs of {env_id} must be an object of parameter -> value, got {type(kwargs).__name__}"
        )
    if len(kwargs) > MAX_ITEMS:
        raise KwargsRefused(
            f"{len(kwargs)} kwargs for {env_id} are over the {MAX_ITEMS}-parameter limit"
        )
    allowed = frozenset(allow)
    out: dict[str, Any] = {}
    for name, value in kwargs.items():
        if type(name) is not str or len(name) > 128:
            raise KwargsRefused(
                f"a kwargs key of {env_id} must be a short string, got {name!r:.80}"
            )
        entry = declared.get(name)
        if entry is not None and entry.access == "never":
            raise KwargsRefused(
                f"{env_id}: {name!r} is never accepted from a client or stored data ({entry.why}); "
                "only code on the server may set it, so remove it from the request",
                param=name,
            )
        if entry is None or entry.access == "operator":
            if name not in allowed:
                reason = (
                    f"it is safety- or cost-relevant ({entry.why})"
                    if entry is not None
                    else "it is not declared settable from outside"
                )
                settable = sorted(k for k, v in declared.items() if v.access == "client")
                raise KwargsRefused(
                    f"{env_id}: kwarg {name!r} refused: {reason}. Clients may set: {', '.join(settable) or 'nothing'}; "
                    f"the operator may pass --allow-kwargs {name}",
                    param=name,
                )
        wrong = _json_problem(value)
        if wrong is None and entry is not None and entry.bound is not None:
            wrong = entry.bound.problem(value)
        if wrong is not None:
            raise KwargsRefused(f"{env_id}: kwarg {name!r} refused: {wrong}", param=name)
        out[name] = value
    return out
