"""Frozen, validated agent configs whose field docstrings double as CLI help (CleanRL's ``Args``).

An algorithm's config is a frozen dataclass subclassing :class:`AgentConfig`; the docstring under
each field is its documentation and the ``--flag`` help of ``verigym train``. Types are checked on
construction (``int`` fields refuse ``1.5`` and ``True``; ``float`` fields take ints), and each
config adds its own range checks in ``check()``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

__all__ = ["AgentConfig", "add_config_arguments", "field_docs", "require"]

C = TypeVar("C", bound="AgentConfig")


def require(condition: bool, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``condition`` holds (config validation, never ``assert``)."""
    if not condition:
        raise ValueError(message)


def _check_type(name: str, value: Any, hint: Any) -> Any:
    """Return ``value`` converted to ``hint`` where that is lossless, else raise ``TypeError``."""
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in get_args(hint):
            try:
                return _check_type(name, value, option)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise TypeError(f"{name}={value!r} matches none of {hint}")
    if origin is Literal:
        if value not in get_args(hint):
            raise ValueError(f"{name} must be one of {get_args(hint)}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a sequence, got {value!r}")
        inner = get_args(hint)[0] if get_args(hint) else Any
        return tuple(_check_type(f"{name}[{i}]", v, inner) for i, v in enumerate(value))
    if hint is type(None):
        if value is not None:
            raise TypeError(f"{name} must be None, got {value!r}")
        return None
    if hint is bool:
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {value!r}")
        return value
    return value


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each dataclass field of ``cls`` and its bases (read from the source)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, following in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def _parse_bool(text: str) -> bool:
    """``true``/``yes``/``1`` or ``false``/``no``/``0`` (``bool("false")`` would be True)."""
    word = text.strip().lower()
    if word in ("true", "yes", "1"):
        return True
    if word in ("false", "no", "0"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


_parse_bool.__name__ = "bool"


def _none_or(kind: Any) -> Any:
    convert = _parse_bool if kind is bool else kind

    def parse(text: str) -> Any:
        return None if text.lower() == "none" else convert(text)

    parse.__name__ = getattr(kind, "__name__", "value")  # argparse names the type in its errors
    return parse


def add_config_arguments(
    parser: Any,
    config_class: type,
    *,
    skip: frozenset[str] | set[str] | tuple[str, ...] = (),
    aliases: Mapping[str, tuple[str, ...]] | None = None,
) -> None:
    """Add one ``--kebab-case`` command-line flag per dataclass field of ``config_class``.

    The help is the field's docstring (:func:`field_docs`) and its default. A flag that is not given
    leaves its attribute out of the parsed namespace (``argparse.SUPPRESS``), so the dataclass
    default applies. Types: ``bool`` as ``--flag/--no-flag``, a ``Literal`` as choices, a tuple
    as one or more values, ``X | None`` as ``X`` or the word ``none`` (``bool | None``: ``true``,
    ``false`` or ``none``), other types as converters.

    Args:
        parser: an ``argparse.ArgumentParser`` (the flags go into a group named after the class).
        config_class: a dataclass, e.g. :class:`AgentConfig` or a subclass.
        skip: field names that get no flag (the caller adds its own).
        aliases: extra option strings per field name, e.g. ``{"output_dir": ("--out",)}``.
    """
    import argparse

    docs = field_docs(config_class)
    hints = typing.get_type_hints(config_class)
    group = parser.add_argument_group(f"{config_class.__name__} options")
    for f in dataclasses.fields(config_class):
        if f.name in skip:
            continue
        flags = ["--" + f.name.replace("_", "-"), *(aliases or {}).get(f.name, ())]
        hint, text = hints[f.name], f"{docs.get(f.name, '')} (default: {f.default!r})"
        kwargs: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS}
        args = get_args(hint)
        if hint is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif get_origin(hint) is tuple:
            kwargs.update(nargs="+", type=args[0])
        elif get_origin(hint) is Literal:
            kwargs["choices"] = list(args)
        elif get_origin(hint) in (typing.Union, types.UnionType):
            kwargs["type"] = _none_or(next(a for a in args if a is not type(None)))
            text += "; 'none' for None"
        else:
            kwargs["type"] = hint
        group.add_argument(*flags, help=text.replace("%", "%%"), **kwargs)


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Base of the agent configs: type checks, ``check()`` hook, JSON round trip."""

    seed: int = 0
    """seed of network initialisation, action sampling and the training envs (env i gets seed + i)"""
    device: str = "auto"
    """torch device: "auto" (CUDA when present, else CPU), "cpu", "cuda", "cuda:1", ..."""
    torch_threads: int | None = None
    """torch intra-op CPU threads while the agent learns (set on entry to learn, restored after);
    None chooses per device and network size: 1 for networks under 1M parameters or on a GPU
    (more threads only fight over the cores on small matrices), torch's own setting for bigger
    networks on the CPU"""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            value = _check_type(f.name, getattr(self, f.name), hints[f.name])
            object.__setattr__(self, f.name, value)
        require(
            self.torch_threads is None or self.torch_threads >= 1,
            f"torch_threads must be None or >= 1, got {self.torch_threads}",
        )
        require(
            self.device == "auto" or self.device.split(":")[0] in {"cpu", "cuda", "mps"},
            f"device must be 'auto', 'cpu', 'cuda[:N]' or 'mps', got {self.device!r}",
        )
        self.check()

    def check(self) -> None:
        """Range checks of a concrete config; raise ``ValueError`` with the bad value."""

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-serializable dict (tuples become lists)."""
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
            for f in dataclasses.fields(self)
        }

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any]) -> C:
        """Build from a dict, e.g. a saved ``config.json``.

        Raises:
            TypeError: an unknown key (the message lists the valid ones) or a value of the wrong type.
            ValueError: a value out of range.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TypeError(
                f"unknown {cls.__name__} option(s) {unknown}; valid options: {sorted(names)}"
            )
        return cls(**dict(data))

    def replace(self: C, **changes: Any) -> C:
        """A copy with ``changes`` applied (validated)."""
        return type(self).from_dict({**self.to_dict(), **changes})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)
