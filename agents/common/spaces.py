"""Observation/action spaces for the learners: JSON round trip and observation batching.

:class:`ObservationBatcher` turns one observation or a list of them into a dict of numpy arrays,
one entry per *part* of the observation (one part for a plain space, one per key of a ``Dict``).
Each part has a *kind* that picks its encoder in :mod:`verigym.agents.common.networks`:

========== ======================================================= ===========================
kind       spaces                                                  array per batch
========== ======================================================= ===========================
vector     float ``Box``, ``MultiBinary``, wide-range integer Box  ``float32 (N, prod(shape))``
discrete   ``Discrete(n)``                                         ``int64 (N,)``
multi      ``MultiDiscrete(nvec)``                                 ``int64 (N, len(nvec))``
grid       integer ``Box`` of 2 or 3 dims with values < 64         ``int64 (N, H, W, C)``
image      ``uint8 Box (H, W, C)`` with high 255, C in 1, 3, 4     ``float32 (N, C, H, W)`` / 255
text       ``Text``                                                ``float32 (N, text_dim)``
========== ======================================================= ===========================

Text is feature-hashed (:func:`verigym.wrappers.tensor_view.hashed_ngrams`), so a goal-conditioned
``Dict`` with a mission string (MiniGrid's ``{"image", "direction", "mission"}``) just works.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from verigym.core import UnicodeText

__all__ = ["ObservationBatcher", "Part", "space_from_json", "space_to_json"]

TEXT_DIM = 256


def space_to_json(space: spaces.Space) -> dict[str, Any]:
    """A JSON-serializable description of ``space`` (saved in ``meta.json``).

    Raises:
        TypeError: a space kind the learners do not support.
    """
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": space.low.tolist(),
            "high": space.high.tolist(),
            "shape": list(space.shape),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.Text):
        return {
            "type": "Text",
            "max_length": int(space.max_length),
            "min_length": int(space.min_length),
        }
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    raise TypeError(
        f"cannot serialize {space!r}; supported: Discrete, MultiDiscrete, MultiBinary, Box, Text, Dict"
    )


def space_from_json(data: Mapping[str, Any]) -> spaces.Space:
    """Rebuild a space written by :func:`space_to_json`."""
    kind = data["type"]
    if kind == "Discrete":
        return spaces.Discrete(data["n"], start=data["start"])
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(data["nvec"])
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"])
    if kind == "Box":
        dtype = np.dtype(data["dtype"])
        return spaces.Box(
            np.array(data["low"], dtype=dtype).reshape(data["shape"]),
            np.array(data["high"], dtype=dtype).reshape(data["shape"]),
            dtype=dtype,
        )
    if kind == "Text":
        return UnicodeText(data["max_length"], min_length=data["min_length"])
    if kind == "Dict":
        return spaces.Dict({k: space_from_json(s) for k, s in data["spaces"].items()})
    raise ValueError(f"unknown space type {kind!r}")


@dataclass(frozen=True)
class Part:
    """One part of an observation: its key in a ``Dict`` ("" otherwise), kind and sizes.

    ``size`` is the feature width for vector/text, ``n`` the category counts (discrete/multi/grid:
    number of values per cell), ``shape`` the array shape of one observation of this part,
    ``start`` the first value of a ``Discrete`` (subtracted, so indices start at 0).
    """

    key: str
    kind: str
    shape: tuple[int, ...]
    size: int = 0
    n: tuple[int, ...] = ()
    start: int = 0


def _part(key: str, space: spaces.Space) -> Part:
    if isinstance(space, spaces.Discrete):
        return Part(key, "discrete", (), n=(int(space.n),), start=int(space.start))
    if isinstance(space, spaces.MultiDiscrete):
        return Part(
            key, "multi", (int(space.nvec.size),), n=tuple(int(v) for v in space.nvec.ravel())
        )
    if isinstance(space, spaces.MultiBinary):
        return Part(key, "vector", tuple(np.atleast_1d(space.n)), size=int(np.prod(space.n)))
    if isinstance(space, spaces.Text):
        return Part(key, "text", (), size=TEXT_DIM)
    if isinstance(space, spaces.Box):
        shape = tuple(space.shape)
        integer = np.issubdtype(space.dtype, np.integer)
        if integer and len(shape) == 3 and shape[-1] in (1, 3, 4) and int(space.high.max()) == 255:
            return Part(key, "image", shape)
        if (
            integer
            and len(shape) in (2, 3)
            and int(space.low.min()) >= 0
            and int(space.high.max()) < 64
        ):
            return Part(
                key,
                "grid",
                shape if len(shape) == 3 else (*shape, 1),
                n=(int(space.high.max()) + 1,),
            )
        return Part(key, "vector", shape, size=int(np.prod(shape)) if shape else 1)
    raise TypeError(
        f"observation space {space!r} is not supported; use Box, Discrete, MultiDiscrete, MultiBinary, Text or a Dict of those"
    )


class ObservationBatcher:
    """Batches observations of one space into ``{key: numpy array}`` (see the module table).

    Args:
        space: the env's observation space.

    Raises:
        TypeError: an unsupported space (``Tuple``, ``Graph``, ...).
    """

    def __init__(self, space: spaces.Space):
        self.space = space
        self.is_dict = isinstance(space, spaces.Dict)
        items = space.spaces.items() if self.is_dict else [("", space)]
        self.parts: tuple[Part, ...] = tuple(_part(k, s) for k, s in items)

    def is_batched(self, obs: Any) -> bool:
        """Whether ``obs`` is a batch (a list, or arrays with one more leading axis than the space)."""
        if isinstance(obs, (list, tuple)):
            return True
        part = self.parts[0]
        value = obs[part.key] if self.is_dict else obs
        if part.kind == "text":
            return not isinstance(value, str)
        return np.ndim(value) == len(part.shape) + 1

    def __call__(self, observations: Sequence[Any] | Any) -> dict[str, np.ndarray]:
        """Batch a sequence of observations, or an already-batched ``Dict``/array observation."""
        out: dict[str, np.ndarray] = {}
        for part in self.parts:
            if isinstance(observations, (list, tuple)):
                values = [o[part.key] for o in observations] if self.is_dict else list(observations)
            else:
                values = observations[part.key] if self.is_dict else observations
            out[part.key] = self._convert(part, values)
        return out

    @staticmethod
    def _convert(part: Part, values: Any) -> np.ndarray:
        if part.kind == "text":
            from verigym.wrappers.tensor_view import hashed_ngrams

            return np.stack([hashed_ngrams(str(v), TEXT_DIM) for v in values]).astype(
                np.float32, copy=False
            )
        array = np.asarray(values)
        if part.kind == "vector":
            return array.reshape(len(array), -1).astype(np.float32, copy=False)
        if part.kind == "image":
            return np.ascontiguousarray(array.transpose(0, 3, 1, 2), dtype=np.float32) / 255.0
        if part.kind == "grid":
            return array.reshape(len(array), *part.shape).astype(np.int64, copy=False)
        array = array.astype(np.int64, copy=False)
        return array - part.start if part.start else array
