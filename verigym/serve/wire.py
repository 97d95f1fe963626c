"""The JSON wire format of served environments: values, spaces and their JSON schemas.

Everything a Gymnasium env hands out (observations, actions, ``info`` dicts) crosses the wire as
JSON with a few tagged objects for what JSON cannot say, so that ``decode(encode(x))`` gives back
``x`` with its Python and NumPy types:

==========================  ===================================================================
value                       JSON
==========================  ===================================================================
``str``/``int``/``float``   itself (``NaN``/``Infinity`` as Python's ``json`` writes them); an
                            ``int`` with more digits than Python will write
                            (``sys.get_int_max_str_digits()``) is ``{"__repr__": "<an integer
                            of N bits>"}``, so a client's malformed action reaches the env
``bool``/``None``           itself
``list``                    a JSON array
``dict`` with ``str`` keys  a JSON object (a key starting with ``"__"`` is escaped)
``tuple``                   ``{"__tuple__": [...]}``
other ``dict``              ``{"__items__": [[key, value], ...]}``
``np.ndarray``              ``{"__ndarray__": [nested list] | "<base64>", "dtype": "uint8",
                            "shape": [7, 7, 3]}``: nested lists up to :data:`INLINE_ELEMENTS`
                            elements (readable by any OpenEnv client), little-endian base64 above
NumPy scalar                ``{"__ndarray__": value, "dtype": "int64", "shape": []}``
``bytes``                   ``{"__bytes__": "<base64>"}``
anything else               ``{"__repr__": repr(value)}`` (one way: decodes to that string)
==========================  ===================================================================

Spaces travel as :func:`space_to_json` descriptions (``{"type": "Box", "low": ..., ...}``) and
are rebuilt by :func:`space_from_json`; a space subclass from verigym or Gymnasium (such as
``ReplySpace``) keeps its class, so ``sample()`` draws what the in-process space draws. A text
space of verigym (:class:`~verigym.core.UnicodeText` and its subclasses) is rebuilt by its own
constructor, so it has shape ``()`` and NumPy's object dtype on the client too (SB3's
``make_vec_env`` over :func:`verigym.remote.make` needs them).
"""

from __future__ import annotations

import base64
import importlib
import math
from typing import Any

import numpy as np
from gymnasium import spaces

from verigym.core import UnicodeText

__all__ = [
    "INLINE_ELEMENTS",
    "DECLARED_BYTES_FLOOR",
    "DECLARED_BYTES_PER_FRAME_BYTE",
    "MAX_DECODED_BYTES",
    "MAX_TEXT_LENGTH",
    "WireError",
    "decode",
    "encode",
    "frame_budget",
    "space_from_json",
    "space_json_schema",
    "space_to_json",
]

INLINE_ELEMENTS = 4096
"""Arrays with at most this many elements are sent as nested lists, larger ones as base64."""

MAX_DECODED_BYTES = 64 << 20
"""Bytes that the arrays of one :func:`decode` call may declare (dtype itemsize x elements, summed
over the payload) unless the caller gives another budget. Checked before anything is allocated:
a short payload such as ``{"__ndarray__": ["a"], "dtype": "U200000000", "shape": [1]}`` declares
800 MB and is refused."""

DECLARED_BYTES_PER_FRAME_BYTE = 16
"""Bytes of arrays that each byte (character) of a received frame may declare. What
:func:`encode` writes needs at most 4 (a float64 or int64 written as ``0,`` in a nested list;
base64 needs 3/4); a frame that declares more (``"dtype": "U16000000"`` over a one-character
list) is refused before anything is allocated."""

DECLARED_BYTES_FLOOR = 64 << 10
"""Bytes of arrays any frame may declare whatever its length (small actions, NumPy scalars)."""

_TAGS = ("__tuple__", "__items__", "__ndarray__", "__bytes__", "__repr__", "__key__")
_SPACE_MODULES = ("verigym.", "gymnasium.")


class WireError(ValueError):
    """A payload or space description that cannot be decoded (bad tag, dtype, shape or size)."""


def encode(value: Any) -> Any:
    """Turn ``value`` into JSON-ready Python objects (see the module table).

    Args:
        value: an observation, action, reward or ``info`` dict, nested arbitrarily.

    Returns:
        Objects made of ``dict``/``list``/``str``/``int``/``float``/``bool``/``None`` only.
    """
    kind = type(value)
    if kind is int and value.bit_length() > _SHORT_INT_BITS:
        return _encode_long_int(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        if all(type(k) is str for k in value):
            return {
                ("__key__" + k if k.startswith("__") else k): encode(v) for k, v in value.items()
            }
        return {"__items__": [[encode(k), encode(v)] for k, v in value.items()]}
    if kind is list:
        return [encode(v) for v in value]
    if kind is tuple:
        return {"__tuple__": [encode(v) for v in value]}
    if isinstance(value, np.ndarray):
        return _encode_array(value)
    if isinstance(value, np.generic):
        if value.dtype.kind in "biuf":
            return {
                "__ndarray__": value.item(),
                "dtype": value.dtype.str.lstrip("<>|="),
                "shape": [],
            }
        return _encode_array(np.asarray(value))
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return encode(dict(value))
    if isinstance(value, (list, tuple)):  # subclasses (named tuples) lose their class
        return encode(list(value) if isinstance(value, list) else tuple(value))
    for base in (bool, int, float, str):  # IntEnum, str subclasses, ...
        if isinstance(value, base):
            return base(value)
    return {"__repr__": repr(value)}


_SHORT_INT_BITS = 4096
"""Integers of at most this many bits (1,234 digits) are written without a check."""


def _encode_long_int(value: int) -> int | dict[str, str]:
    """``value`` itself if ``json`` can write it, else a ``__repr__`` naming its size: past
    ``sys.get_int_max_str_digits()`` digits ``json.dumps`` raises ``ValueError``, which would end
    the sender's step instead of letting the env judge the action."""
    try:
        int.__repr__(value)
    except ValueError:
        return {"__repr__": f"<an integer of {value.bit_length()} bits>"}
    return value


def _encode_array(array: np.ndarray) -> dict[str, Any]:
    if array.dtype.kind not in "biufcU":
        if array.dtype == object:
            return {
                "__ndarray__": [encode(v) for v in array.ravel().tolist()],
                "dtype": "object",
                "shape": list(array.shape),
            }
        raise WireError(f"arrays of dtype {array.dtype} cannot be sent; use numbers or strings")
    dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    name = np.dtype(dtype).str.lstrip("<>|=")
    if array.size <= INLINE_ELEMENTS and array.dtype.kind in "biuf":
        return {"__ndarray__": array.tolist(), "dtype": name, "shape": list(array.shape)}
    data = np.ascontiguousarray(array, dtype=np.dtype(dtype)).tobytes()
    return {
        "__ndarray__": base64.b64encode(data).decode("ascii"),
        "dtype": name,
        "shape": list(array.shape),
    }


def frame_budget(frame_bytes: int, cap: int = MAX_DECODED_BYTES) -> int:
    """The bytes of arrays a frame of ``frame_bytes`` bytes (or characters) may declare:
    :data:`DECLARED_BYTES_FLOOR` plus :data:`DECLARED_BYTES_PER_FRAME_BYTE` per byte, at most
    ``cap``. So what a server allocates for a frame grows with what the client sent: a 97-byte
    frame may make it allocate 66 KB, not 64 MB.

    Args:
        frame_bytes: length of the received frame (its JSON text).
        cap: the most any frame may declare.

    Returns:
        A budget in bytes for :func:`decode`'s ``max_bytes``.
    """
    return int(min(cap, DECLARED_BYTES_FLOOR + DECLARED_BYTES_PER_FRAME_BYTE * max(0, frame_bytes)))


def decode(value: Any, *, max_bytes: int = MAX_DECODED_BYTES) -> Any:
    """Invert :func:`encode`.

    Args:
        value: parsed JSON (``json.loads`` output).
        max_bytes: bytes that all arrays in ``value`` may declare together (itemsize times
            elements), checked before each array is allocated.

    Returns:
        The original value with tuples, NumPy arrays (dtype and shape kept), NumPy scalars and
        bytes restored.

    Raises:
        WireError: a tagged object is malformed (unknown dtype, data that does not fit the shape)
            or its arrays declare more than ``max_bytes``.
    """
    return _Decoder(max_bytes).decode(value)


class _Decoder:
    """One :func:`decode` call: the walk over the payload and what is left of its byte budget."""

    def __init__(self, max_bytes: int) -> None:
        self.budget = self.left = int(max_bytes)

    def decode(self, value: Any) -> Any:
        kind = type(value)
        if kind is str or kind is int or kind is float or kind is bool or value is None:
            return value
        if kind is list:
            return [self.decode(v) for v in value]
        if kind is not dict:
            raise WireError(f"cannot decode a {kind.__name__}")
        if len(value) == 1:
            ((tag, inner),) = value.items()
            if tag == "__tuple__" and type(inner) is list:
                return tuple(self.decode(v) for v in inner)
            if tag == "__items__" and type(inner) is list:
                try:
                    return {_hashable(self.decode(k)): self.decode(v) for k, v in inner}
                except (TypeError, ValueError) as exc:
                    if isinstance(exc, WireError):
                        raise
                    raise WireError(f"malformed __items__: {exc}") from None
            if tag == "__bytes__" and type(inner) is str:
                return _b64(inner)
            if tag == "__repr__" and type(inner) is str:
                return inner
        if "__ndarray__" in value and value.keys() <= {"__ndarray__", "dtype", "shape"}:
            return self.array(value)
        return {(k[7:] if k.startswith("__key__") else k): self.decode(v) for k, v in value.items()}

    def charge(self, count: int, itemsize: int, shape: list[int], dtype_name: str) -> None:
        """Take ``count * itemsize`` bytes from the budget, or raise before anything is allocated."""
        size = count * itemsize
        if size > self.left:
            raise WireError(
                f"an __ndarray__ of shape {shape} and dtype {dtype_name} declares {size} bytes; "
                f"a payload may declare {self.budget} bytes of arrays at most"
            )
        self.left -= size

    def array(self, value: dict[str, Any]) -> Any:
        data, dtype_name, shape = value["__ndarray__"], value.get("dtype"), value.get("shape")
        if (
            not isinstance(dtype_name, str)
            or not isinstance(shape, list)
            or not all(type(n) is int and n >= 0 for n in shape)
        ):
            raise WireError(
                "an __ndarray__ needs a dtype string and a shape list of non-negative ints"
            )
        if len(shape) > 32:
            raise WireError(f"an __ndarray__ of {len(shape)} dimensions")
        count = math.prod(shape)
        if dtype_name == "object":
            if type(data) is not list:
                raise WireError("an object __ndarray__ needs a list")
            self.charge(max(count, len(data)), np.dtype(object).itemsize, shape, dtype_name)
            array = np.empty(len(data), dtype=object)
            array[:] = [self.decode(v) for v in data]
            try:
                return array.reshape(shape)
            except ValueError as exc:
                raise WireError(str(exc)) from None
        if len(dtype_name) > 32:
            raise WireError(f"unknown dtype {dtype_name[:40]!r}...")
        try:
            dtype = np.dtype(dtype_name)
        except (TypeError, ValueError, OverflowError, MemoryError):
            raise WireError(f"unknown dtype {dtype_name!r}") from None
        if dtype.kind not in "biufcU":
            raise WireError(f"dtype {dtype_name!r} cannot be sent")
        self.charge(max(count, 1), dtype.itemsize, shape, dtype_name)
        try:
            if type(data) is str:
                if len(data) // 4 * 3 > count * dtype.itemsize + 3:
                    raise WireError(
                        f"{len(data)} base64 characters overfill shape {shape} of {dtype_name}"
                    )
                raw = _b64(data)
                if len(raw) != count * dtype.itemsize:
                    raise WireError(f"{len(raw)} bytes do not fill shape {shape} of {dtype_name}")
                return (
                    np.frombuffer(raw, dtype=dtype.newbyteorder("<"))
                    .astype(dtype, copy=True)
                    .reshape(shape)
                )
            if not shape:
                if type(data) not in (int, float, bool):
                    raise WireError("a NumPy scalar needs a number")
                return dtype.type(data)
            if dtype.kind == "U":
                # a string's itemsize is the declared one, not the data's: check the shape on an
                # object array (8 bytes a string) before the charged conversion allocates
                cells = np.array(data, dtype=object)
                if list(cells.shape) != shape:
                    raise WireError(
                        f"__ndarray__ data of shape {list(cells.shape)} does not match shape {shape}"
                    )
                array = cells.astype(dtype)
                del cells
            else:
                array = np.array(data, dtype=dtype)
        except (ValueError, TypeError, OverflowError) as exc:
            if isinstance(exc, WireError):
                raise
            raise WireError(f"bad __ndarray__ data: {exc}") from None
        if list(array.shape) != shape:
            raise WireError(
                f"__ndarray__ data of shape {list(array.shape)} does not match shape {shape}"
            )
        return array


def _hashable(key: Any) -> Any:
    return key.item() if isinstance(key, np.ndarray) and key.ndim == 0 else key


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, TypeError) as exc:
        raise WireError(f"bad base64: {exc}") from None


# ----------------------------------------------------------------------------------------------
# spaces


def space_to_json(space: spaces.Space) -> dict[str, Any]:
    """Describe ``space`` so that :func:`space_from_json` rebuilds an equal space.

    Args:
        space: a ``Discrete``, ``Box``, ``MultiDiscrete``, ``MultiBinary``, ``Text``, ``Dict``,
            ``Tuple`` or ``Sequence`` space, or a subclass of one (its class is named in
            ``"class"`` and restored on the client when it lives in verigym or Gymnasium).

    Returns:
        A JSON-ready dict with a ``"type"`` key.

    Raises:
        WireError: the space is of another kind.
    """
    out: dict[str, Any]
    if isinstance(space, spaces.Discrete):
        out = {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    elif isinstance(space, spaces.Box):
        out = {
            "type": "Box",
            "low": encode(space.low),
            "high": encode(space.high),
            "shape": list(space.shape),
            "dtype": np.dtype(space.dtype).name,
        }
    elif isinstance(space, spaces.MultiDiscrete):
        out = {
            "type": "MultiDiscrete",
            "nvec": encode(space.nvec),
            "start": encode(space.start),
            "dtype": np.dtype(space.dtype).name,
        }
    elif isinstance(space, spaces.MultiBinary):
        out = {"type": "MultiBinary", "n": encode(np.asarray(space.n).tolist())}
    elif isinstance(space, spaces.Text):
        out = {
            "type": "Text",
            "min_length": int(space.min_length),
            "max_length": int(space.max_length),
            "charset": "".join(space.character_list),
        }
    elif isinstance(space, spaces.Dict):
        out = {
            "type": "Dict",
            "spaces": [[key, space_to_json(sub)] for key, sub in space.spaces.items()],
        }
    elif isinstance(space, spaces.Tuple):
        out = {"type": "Tuple", "spaces": [space_to_json(sub) for sub in space.spaces]}
    elif isinstance(space, spaces.Sequence):
        out = {
            "type": "Sequence",
            "feature_space": space_to_json(space.feature_space),
            "stack": bool(space.stack),
        }
    else:
        raise WireError(f"{type(space).__name__} spaces cannot be served yet ({space})")
    if type(space) is not getattr(spaces, out["type"]):
        out["class"] = f"{type(space).__module__}:{type(space).__qualname__}"
    return out


def space_from_json(description: dict[str, Any]) -> spaces.Space:
    """Rebuild a space from :func:`space_to_json` output.

    A ``"class"`` from a public ``verigym.*`` or ``gymnasium.*`` module (no part starting with
    ``_``) that subclasses the base type is restored (its methods, e.g. ``sample``, then behave as
    in process); any other class name is ignored and the base Gymnasium space is returned.

    Raises:
        WireError: the description is malformed.
    """
    try:
        kind = description["type"]
        if kind == "Discrete":
            space: spaces.Space = spaces.Discrete(
                int(description["n"]), start=int(description["start"])
            )
        elif kind == "Box":
            dtype = np.dtype(description["dtype"])
            _check_space_size(description["shape"], dtype.itemsize)
            space = spaces.Box(
                low=decode(description["low"]),
                high=decode(description["high"]),
                shape=tuple(description["shape"]),
                dtype=dtype,
            )
        elif kind == "MultiDiscrete":
            space = spaces.MultiDiscrete(
                decode(description["nvec"]),
                dtype=np.dtype(description["dtype"]),
                start=decode(description["start"]),
            )
        elif kind == "MultiBinary":
            n = description["n"]
            _check_space_size(n if isinstance(n, list) else [n], 1)
            space = spaces.MultiBinary(n)
        elif kind == "Text":
            space = _text_space(description)
        elif kind == "Dict":
            space = spaces.Dict({key: space_from_json(sub) for key, sub in description["spaces"]})
        elif kind == "Tuple":
            space = spaces.Tuple([space_from_json(sub) for sub in description["spaces"]])
        elif kind == "Sequence":
            space = spaces.Sequence(
                space_from_json(description["feature_space"]), stack=bool(description["stack"])
            )
        else:
            raise WireError(f"unknown space type {kind!r}")
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, WireError):
            raise
        raise WireError(f"malformed space description {str(description)[:200]}: {exc}") from None
    cls = _space_class(description.get("class"), type(space))
    if cls is not None:
        restored = cls.__new__(cls)
        restored.__dict__.update(space.__dict__)
        space = restored
    return space


MAX_TEXT_LENGTH = MAX_DECODED_BYTES // 4
"""The longest ``max_length`` (characters) a ``Text`` space description may give: a string of
that many characters takes :data:`MAX_DECODED_BYTES` in NumPy's 4-byte-per-character form, and
Gymnasium's ``Text.sample`` draws up to ``max_length`` characters. A charset may hold at most as
many characters."""


def _text_space(description: dict[str, Any]) -> spaces.Text:
    """A ``Text`` description as a space: verigym's :class:`~verigym.core.UnicodeText` (shape
    ``()``, object dtype: what SB3's ``DummyVecEnv`` needs for a batch of strings) when its
    ``"class"`` names it or a subclass, else Gymnasium's ``Text`` over the sent charset. The
    lengths must be ints with ``0 <= min_length <= max_length <=`` :data:`MAX_TEXT_LENGTH`."""
    lengths = [description["min_length"], description["max_length"]]
    if not all(type(n) is int for n in lengths) or not 0 <= lengths[0] <= lengths[1]:
        raise WireError(f"a Text space needs ints 0 <= min_length <= max_length, got {lengths}")
    if lengths[1] > MAX_TEXT_LENGTH:
        raise WireError(
            f"a Text space's max_length is at most {MAX_TEXT_LENGTH} characters, got {lengths[1]}"
        )
    if _space_class(description.get("class"), UnicodeText) is not None:
        return UnicodeText(lengths[1], min_length=lengths[0])
    charset = description["charset"]
    if not isinstance(charset, str) or not 0 < len(charset) <= MAX_TEXT_LENGTH:
        raise WireError("a Text space's charset must be a non-empty str of bounded length")
    return spaces.Text(max_length=lengths[1], min_length=lengths[0], charset=charset)


def _check_space_size(shape: Any, itemsize: int) -> None:
    """Refuse a space shape whose bounds would take more than :data:`MAX_DECODED_BYTES`."""
    if (
        not isinstance(shape, list)
        or not all(type(n) is int and n >= 0 for n in shape)
        or len(shape) > 32
    ):
        raise WireError(
            f"a space shape must be a list of at most 32 non-negative ints, got {str(shape)[:80]}"
        )
    if math.prod(shape) * itemsize > MAX_DECODED_BYTES:
        raise WireError(f"a space of shape {shape} takes more than {MAX_DECODED_BYTES} bytes")


def _space_class(name: Any, base: type) -> type | None:
    """The class ``"module:Qualname"`` names when it is a subclass of ``base`` in a public module
    of verigym or Gymnasium, else ``None``. The name comes from the other side of the wire: a
    module with a private part (``verigym.__main__`` runs the CLI when imported) is never
    imported, and a module that fails to import (whatever it raises) names no class."""
    if not isinstance(name, str) or ":" not in name or len(name) > 200:
        return None
    module_name, _, qualname = name.partition(":")
    parts = module_name.split(".") + qualname.split(".")
    if not module_name.startswith(_SPACE_MODULES) or not all(
        part.isidentifier() and not part.startswith("_") for part in parts
    ):
        return None
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception:  # noqa: BLE001 - a module the sender names must not break the receiver
        return None
    return obj if isinstance(obj, type) and issubclass(obj, base) else None


def space_json_schema(space: spaces.Space) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12 subset) of the wire form of values in ``space``.

    Used by ``/schema`` for OpenEnv clients; the exact space is under ``"x-gymnasium-space"`` of
    the enclosing schema.
    """
    if isinstance(space, spaces.Discrete):
        return {
            "type": "integer",
            "minimum": int(space.start),
            "maximum": int(space.start + space.n - 1),
        }
    if isinstance(space, spaces.Text):
        return {
            "type": "string",
            "minLength": int(space.min_length),
            "maxLength": int(space.max_length),
        }
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return {
            "type": "object",
            "description": f"a NumPy array of shape {list(space.shape)} and dtype {np.dtype(space.dtype).name}",
            "properties": {
                "__ndarray__": {"type": ["array", "string", "number"]},
                "dtype": {"const": np.dtype(space.dtype).name},
                "shape": {"const": list(space.shape)},
            },
            "required": ["__ndarray__", "dtype", "shape"],
        }
    if isinstance(space, spaces.Dict):
        return {
            "type": "object",
            "properties": {key: space_json_schema(sub) for key, sub in space.spaces.items()},
            "required": list(space.spaces),
        }
    if isinstance(space, spaces.Tuple):
        return {
            "type": "object",
            "properties": {
                "__tuple__": {
                    "type": "array",
                    "prefixItems": [space_json_schema(s) for s in space.spaces],
                }
            },
        }
    return {"description": str(space)}
