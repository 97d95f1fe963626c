"""Task identity: a content hash of what an episode poses, for the training/evaluation split.

Seeds split training (``[0, TRAIN_SEED_END)``) from evaluation (``[EVAL_SEED_START, ...)``), but
two seeds can draw the same task: GuessNumber has 100 secrets, so every evaluation seed's task is
also some training seed's. The split is therefore made on the task itself (docs/design.md,
"Training and evaluation"): :func:`task_hash` is a SHA-256 over

* the reset observation (text, or the bytes of an array, exactly),
* the reset ``info`` without its volatile entries (:data:`VOLATILE_INFO`: seeds, timings, counters),
* the env's *hidden target*, ``env.unwrapped.task_fingerprint()`` when the env has one (the base
  class of every verigym family defines it: GuessNumber's secret, a tool task's gold answer and
  hidden tests, a grid's full layout; ``None`` where the observation shows the whole task).

An env without ``task_fingerprint`` (a plugin's) is hashed on its observation and info only; where
the hidden target is left out, more tasks share a hash, so the filter drops more training episodes,
never fewer. The hash depends on nothing process-specific (no ``hash()``, no object ids, no
``PYTHONHASHSEED``): it is the same in every process and on every machine with the same env code.

:func:`plain_state` is the generic fingerprint the family base classes use: the instance's plain
data (numbers, strings, arrays and containers of them) without its random generator, seeds, spaces
and caches.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "TASK_HASH_VERSION",
    "VOLATILE_INFO",
    "canonical",
    "plain_state",
    "task_fingerprint",
    "task_hash",
]

TASK_HASH_VERSION = 1
"""Bumped whenever what :func:`task_hash` covers changes (cached hash sets are keyed by it)."""

VOLATILE_INFO = re.compile(r"seed|time|elapsed|duration|^turn$|^tool_calls$|^tool_cost$", re.I)
"""``info`` keys left out of the hash: seeds, wall-clock measurements and per-episode counters say
nothing about the task (RG's ``item_seed`` differs between two seeds that draw the same item)."""

_SKIPPED_ATTRIBUTE = re.compile(
    r"seed|random|rng|cache|^spec$|^render_mode$|^metadata$|_space$|^_episode_over$", re.I
)
_MAX_DEPTH = 8
_MAX_ITEMS = 200_000
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class _NotPlain(Exception):
    """A value that is not plain data (an object, a connection, a generator)."""


def canonical(value: Any, *, strict: bool = False, _depth: int = 0) -> Any:
    """``value`` as JSON-serializable data with one spelling per value (for hashing).

    Strings, ints, bools and None stay; floats become ``repr`` strings (NaN and infinities too);
    numpy arrays ``{"dtype", "shape", "sha256"}`` of their bytes (C order); numpy scalars their
    Python value; bytes their SHA-256; mappings sorted lists of ``[key, value]`` (keys as strings);
    lists and tuples lists; sets sorted lists. Anything else is its type's qualified name and,
    where it has one, its canonical ``__dict__`` (``strict`` raises instead), never its id.

    Raises:
        ValueError (only with ``strict``): ``value`` holds something that is not plain data, or is
            nested deeper than 8 levels or holds more than 200,000 items.
    """
    if _depth > _MAX_DEPTH:
        if strict:
            raise _NotPlain("too deep")
        return "<deep>"
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return {"float": repr(value)} if not math.isfinite(value) else repr(value)
    if isinstance(value, np.generic):
        return canonical(value.item(), strict=strict, _depth=_depth + 1)
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return canonical(value.tolist(), strict=strict, _depth=_depth + 1)
        data = np.ascontiguousarray(value)
        return {
            "dtype": data.dtype.str,
            "shape": list(data.shape),
            "sha256": hashlib.sha256(data.tobytes()).hexdigest(),
        }
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": hashlib.sha256(bytes(value)).hexdigest()}
    if isinstance(value, Mapping):
        if strict and len(value) > _MAX_ITEMS:
            raise _NotPlain("too many items")
        items = [[str(k), canonical(v, strict=strict, _depth=_depth + 1)] for k, v in value.items()]
        return {"map": sorted(items, key=lambda kv: kv[0])}
    if isinstance(value, (list, tuple)):
        if strict and len(value) > _MAX_ITEMS:
            raise _NotPlain("too many items")
        return [canonical(v, strict=strict, _depth=_depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [canonical(v, strict=strict, _depth=_depth + 1) for v in value]
        return {"set": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if strict:
        raise _NotPlain(type(value).__qualname__)
    fields = getattr(value, "__dict__", None)
    name = f"{type(value).__module__}.{type(value).__qualname__}"
    if isinstance(fields, dict):
        return {"object": name, "fields": plain_state(value)}
    return {"object": name, "repr": _ADDRESS.sub("", repr(value))[:200]}


def plain_state(obj: Any, *, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The plain data of ``obj``'s ``__dict__``, canonical (:func:`canonical`), keyed by name.

    Left out: attributes named in ``exclude``; those whose name says seed, random, rng or cache,
    ``spec``, ``render_mode``, ``metadata`` and ``*_space``; and every value that is not plain
    data (objects, connections, generators, sandboxes). What remains after a reset is the task an
    env drew (GuessNumber's secret, a tool task's gold answer and tests) and its fixed settings.

    Args:
        obj: any object (an env's ``unwrapped`` instance).
        exclude: further attribute names to leave out (per-episode counters, timings).

    Returns:
        ``{name: canonical value}`` sorted by name.
    """
    skip = set(exclude)
    out: dict[str, Any] = {}
    for name, value in sorted(vars(obj).items()) if hasattr(obj, "__dict__") else ():
        if name in skip or _SKIPPED_ATTRIBUTE.search(name):
            continue
        try:
            out[name] = canonical(value, strict=True)
        except _NotPlain:
            continue
    return out


def task_fingerprint(env: Any) -> Any:
    """The hidden target of the episode ``env`` was last reset to: ``env.unwrapped.task_fingerprint()``,
    or ``None`` when the env does not define it (or it raises)."""
    inner = getattr(env, "unwrapped", env)
    method = getattr(inner, "task_fingerprint", None)
    if not callable(method):
        return None
    try:
        return method()
    except Exception:  # noqa: BLE001 - a broken fingerprint hashes as "no hidden target" (drops more)
        return None


def _observation(observation: Any) -> Any:
    return canonical(observation)


def task_hash(env: Any, observation: Any, info: Mapping[str, Any] | None) -> str:
    """The content hash of the task ``env`` poses after ``observation, info = env.reset(seed=s)``.

    Args:
        env: the env just reset (any wrapper of it; the hidden target is read from ``unwrapped``).
        observation: the reset observation (a str, an array, a dict of them).
        info: the reset info; :data:`VOLATILE_INFO` keys are left out.

    Returns:
        64 lowercase hex digits (SHA-256); equal for two resets that pose the same task, in any
        process.
    """
    kept = {str(k): v for k, v in (info or {}).items() if not VOLATILE_INFO.search(str(k))}
    document = {
        "v": TASK_HASH_VERSION,
        "observation": _observation(observation),
        "info": canonical(kept),
        "target": canonical(task_fingerprint(env)),
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()
