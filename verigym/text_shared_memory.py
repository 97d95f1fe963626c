"""Text observations through ``AsyncVectorEnv``'s shared memory (docs/design.md section 2).

``gymnasium.make_vec(id, n, vectorization_mode="async")`` uses shared memory by default. For a
``Text`` space, Gymnasium 1.4 stores character indices into the space's charset and decodes them
into a tuple of ``str`` once, when the vector env is built: every later ``reset``/``step``
returns that first tuple (blank strings), and characters outside the charset are lost.

Importing this module (``verigym.core`` does) registers shared-memory handlers for
:class:`verigym.core.UnicodeText` (every text and tool observation) with Gymnasium's
``create_shared_memory``/``read_from_shared_memory``/``write_to_shared_memory``. A copy's slot
holds its string's length and its code points (``int32``, any unicode), and the vector env's
observation is a :class:`LiveTexts` view that decodes the slots when read; the default
``copy=True`` returns a plain ``tuple`` of ``str`` from every ``reset``/``step``.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any, overload

import numpy as np
from gymnasium.vector.utils import shared_memory as gym_shm

from verigym.core import UnicodeText

__all__ = ["LiveTexts"]


def _slots(shared: Any, n: int, max_length: int) -> np.ndarray:
    return np.frombuffer(shared.get_obj(), dtype=np.int32).reshape(n, max_length + 1)


class LiveTexts(Sequence[str]):
    """The ``n`` strings in a ``UnicodeText`` shared-memory block, decoded when read.

    ``deepcopy`` (what ``AsyncVectorEnv`` does with ``copy=True``) and ``tuple(...)`` give a plain
    ``tuple`` of ``str``.
    """

    def __init__(self, shared: Any, n: int, max_length: int) -> None:
        self._slots = _slots(shared, n, max_length)

    def __len__(self) -> int:
        return self._slots.shape[0]

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...
    def __getitem__(self, i: int | slice) -> str | tuple[str, ...]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        row = self._slots[i]
        return row[1 : 1 + int(row[0])].tobytes().decode("utf-32-le", errors="surrogatepass")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]  # mutable view

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"LiveTexts({tuple(self)!r})"


@gym_shm.create_shared_memory.register(UnicodeText)
def _create(space: UnicodeText, n: int = 1, ctx: ModuleType = mp) -> Any:
    return ctx.Array(np.dtype(np.int32).char, n * (space.max_length + 1))


@gym_shm.read_from_shared_memory.register(UnicodeText)
def _read(space: UnicodeText, shared_memory: Any, n: int = 1) -> LiveTexts:
    return LiveTexts(shared_memory, n, space.max_length)


@gym_shm.write_to_shared_memory.register(UnicodeText)
def _write(space: UnicodeText, index: int, value: str, shared_memory: Any) -> None:
    size = space.max_length + 1
    # surrogatepass: a lone surrogate (never in a verigym env's output) travels instead of raising
    data = str(value).encode("utf-32-le", errors="surrogatepass")
    codes = np.frombuffer(data, dtype=np.int32)[: space.max_length]
    slot = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)[index * size : (index + 1) * size]
    slot[0] = codes.size
    slot[1 : 1 + codes.size] = codes
