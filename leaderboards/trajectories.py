"""Episode trajectories: what the agent saw and did, step by step, stored beside its result row.

A trajectory is one JSON document, zlib-compressed (format 1)::

    {"format": 1, "env_id", "env_kwargs", "seed", "text_view": bool, "instructions": str,
     "reset": {"observation", "text", "digest", "info"},
     "steps": [{"action", "observation", "text", "digest", "reward", "terminated", "truncated",
                "info", "dropped", "generation"}, ...],
     "messages": [{"role", "content"}, ...]}    # LLM agents that keep a chat history

- ``action`` is the action exactly as the agent gave it (text, int, array ...), encoded losslessly
  by :func:`encode_value`, so that :func:`replay` can feed it back.
- ``observation`` is the observation encoded the same way; arrays are stored as zlib-compressed
  bytes, and arrays over :data:`MAX_ARRAY_BYTES` (GUI screenshots) only by dtype and shape -- frames
  are opt-in. ``text`` is the env's text view of a non-text observation (``observation_text``).
  ``digest`` is a SHA-256 prefix of the full observation, so a replay can prove it saw the same.
- ``info`` keeps the step info entries whose encoding is at most :data:`MAX_INFO_CHARS` characters
  (verdicts, action errors, masks of small spaces); the names of the others are in ``dropped``.
  A text ``patch`` (the diff of the agent's changes that RepoFix and Terminal put in their final
  info, shown by the viewer) is kept up to :data:`PATCH_CHARS` characters, longer ones cut.
- ``generation``: token counts and ids of an LLM reply, when the agent exposes its last reply as
  ``agent.last_generation`` (an object with ``token_ids``, or a mapping with an OpenAI ``usage``).
- ``messages``: ``agent.history.messages`` at the end of the episode (what an LLM agent was shown).

Frames (``render()`` as PNG every k-th step, with the first and last) are stored in their own table.

Reading is bounded: a blob inflates to at most :data:`MAX_DOCUMENT_BYTES`, and the values readers
decode (the kwargs, each step's action and reward) are nested at most :data:`MAX_VALUE_DEPTH` levels
and their arrays declare at most :data:`MAX_DECODED_ARRAY_BYTES` together (a small compressed blob
never becomes gigabytes in memory, however many small arrays it holds); the document's layout is
checked before anything reads it (:func:`decode`). Text that UTF-8 cannot hold
(lone surrogates in an agent's reply or an env's message) is stored as JSON escapes, replayed as it
was, and shown escaped (:func:`chat_messages`, :func:`show_action`).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import math
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verigym.leaderboards import store as _store
from verigym.leaderboards.store import canonical_kwargs, safe_text, trajectory_digest

__all__ = [
    "FORMAT",
    "EnvCache",
    "Recorder",
    "ReplayResult",
    "ReverifyReport",
    "UnboundTrajectory",
    "bound_trajectory",
    "chat_messages",
    "dataset_records",
    "decode",
    "decode_value",
    "digest",
    "encode_value",
    "export_dataset",
    "replay",
    "reverify",
    "show_action",
]

logger = logging.getLogger(__name__)

FORMAT = 1
MAX_ARRAY_BYTES = 64 * 1024
"""Observation arrays larger than this (bytes) are recorded by dtype, shape and digest only."""
MAX_INFO_CHARS = 512
"""Step-info entries whose JSON encoding is longer than this are left out (their names are kept)."""
PATCH_CHARS = 1 << 17
"""A text ``info["patch"]`` is kept up to this many characters (cut there, ending ``[patch cut]``)."""
MAX_DOCUMENT_BYTES = 64 << 20
"""A trajectory document (uncompressed JSON) larger than this is neither stored nor read."""
MAX_DECODED_ARRAY_BYTES = 16 << 20
"""An encoded array that declares or inflates to more bytes than this is refused when decoded, and a
document whose kwargs, actions and rewards declare more than this in arrays together is not read
(each array is a few compressed bytes: without a total, 10 actions of a 713-byte blob were 1 GB of
viewer HTML)."""
MAX_VALUE_DEPTH = 32
"""Levels of lists and objects a document's kwargs, actions and rewards may nest (deeper: not read,
so no reader recurses past the interpreter's limit)."""
_ARRAY_KINDS = "biufc"
"""dtype kinds an encoded array may have (booleans and numbers; no objects, no void records)."""


# ---------------------------------------------------------------------------------------------
# Lossless JSON encoding of actions and observations
# ---------------------------------------------------------------------------------------------


def encode_value(value: Any, *, max_array_bytes: int | None = None) -> Any:
    """A JSON-able tree from which :func:`decode_value` rebuilds ``value`` exactly.

    Args:
        value: str, bool, int, float, None, NumPy scalars and arrays (any dtype and shape), and
            lists, tuples and string-keyed mappings of these.
        max_array_bytes: arrays larger than this are replaced by ``{"__omitted__": {dtype, shape}}``.

    Returns:
        Plain JSON values; arrays become ``{"__array__": {"dtype", "shape", "zlib": base64}}``,
        tuples ``{"__tuple__": [...]}``, non-finite floats ``{"__float__": "nan"}``, anything
        else ``{"__repr__": str}`` (not rebuilt).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, np.generic):
        if isinstance(value, (np.bool_, np.integer, np.floating)):
            return {"__scalar__": {"dtype": value.dtype.str, "value": encode_value(value.item())}}
        return encode_value(np.asarray(value), max_array_bytes=max_array_bytes)
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return {"__repr__": repr(value)[:500]}
        if max_array_bytes is not None and value.nbytes > max_array_bytes:
            return {"__omitted__": {"dtype": value.dtype.str, "shape": list(value.shape)}}
        data = base64.b64encode(zlib.compress(np.ascontiguousarray(value).tobytes(), 6)).decode(
            "ascii"
        )
        return {"__array__": {"dtype": value.dtype.str, "shape": list(value.shape), "zlib": data}}
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v, max_array_bytes=max_array_bytes) for v in value]}
    if isinstance(value, list):
        return [encode_value(v, max_array_bytes=max_array_bytes) for v in value]
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and not k.startswith("__") for k in value
    ):
        return {k: encode_value(v, max_array_bytes=max_array_bytes) for k, v in value.items()}
    return {"__repr__": repr(value)[:500]}


def decode_value(tree: Any) -> Any:
    """Inverse of :func:`encode_value` (``__omitted__`` and ``__repr__`` entries come back as they are).

    Raises:
        ValueError: an encoded array or scalar is malformed: a dtype that is not a boolean or number,
            a shape that is not a list of non-negative ints, a declared size over
            :data:`MAX_DECODED_ARRAY_BYTES`, or data that does not inflate to exactly that size.
    """
    if isinstance(tree, list):
        return [decode_value(v) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if len(tree) == 1:
        ((tag, body),) = tree.items()
        if tag == "__array__":
            return _decode_array(body)
        if tag == "__scalar__":
            value = decode_value(body.get("value")) if isinstance(body, dict) else None
            if not isinstance(value, (bool, int, float)):
                raise ValueError(f"a malformed encoded scalar: {str(body)[:200]}")
            try:
                return _dtype(body.get("dtype")).type(value)
            except OverflowError:
                raise ValueError(
                    f"an encoded scalar {str(value)[:40]} does not fit its dtype {str(body.get('dtype'))[:40]!r}"
                ) from None
        if tag == "__tuple__" and isinstance(body, list):
            return tuple(decode_value(v) for v in body)
        if tag == "__float__" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag in ("__omitted__", "__repr__"):
            return tree
    return {k: decode_value(v) for k, v in tree.items()}


def _dtype(text: Any) -> np.dtype:
    try:
        dtype = np.dtype(text) if isinstance(text, str) and len(text) <= 8 else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in _ARRAY_KINDS:
        raise ValueError(
            f"an encoded value has dtype {str(text)[:40]!r}; only booleans and numbers are stored"
        )
    return dtype


def _array_layout(body: Any) -> tuple[np.dtype, list[int], int]:
    """The dtype, shape and declared bytes of an encoded array's body, checked (``ValueError``)."""
    if not isinstance(body, dict) or not isinstance(body.get("zlib"), str):
        raise ValueError(f"a malformed encoded array: {str(body)[:200]}")
    dtype, shape = _dtype(body.get("dtype")), body.get("shape")
    if (
        not isinstance(shape, list)
        or len(shape) > 32
        or not all(type(n) is int and n >= 0 for n in shape)
    ):
        raise ValueError(
            f"an encoded array has shape {str(shape)[:200]}; a shape is a list of non-negative ints"
        )
    size = dtype.itemsize * math.prod(shape)
    if size > MAX_DECODED_ARRAY_BYTES:
        raise ValueError(
            f"an encoded array declares {size} bytes (at most {MAX_DECODED_ARRAY_BYTES} are decoded)"
        )
    return dtype, shape, size


def _decode_array(body: Any) -> np.ndarray:
    dtype, shape, size = _array_layout(body)
    try:
        raw = inflate(base64.b64decode(body["zlib"], validate=True), size)
    except (ValueError, zlib.error) as exc:
        raise ValueError(f"an encoded array's data is damaged: {exc}") from None
    if len(raw) != size:
        raise ValueError(
            f"an encoded array's data is {len(raw)} bytes, its dtype and shape say {size}"
        )
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def inflate(data: bytes, limit: int) -> bytes:
    """zlib-decompress ``data`` into at most ``limit`` bytes, without ever holding more.

    Args:
        data: a complete zlib stream.
        limit: the most bytes the result may have.

    Returns:
        The decompressed bytes.

    Raises:
        ValueError: the data inflates past ``limit`` (a decompression bomb is refused after
            ``limit + 1`` bytes), is truncated, or is followed by other bytes.
        zlib.error: the data is not a zlib stream.
    """
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise ValueError(f"it inflates to more than {limit} bytes")
    if not inflater.eof or inflater.unused_data:
        raise ValueError("it is truncated or followed by other data")
    return out


def digest(value: Any) -> str:
    """A 16-hex-digit SHA-256 prefix of ``value``'s full content (arrays by dtype, shape and bytes)."""
    hasher = hashlib.sha256()

    def feed(item: Any) -> None:
        if isinstance(item, np.ndarray) or isinstance(item, np.generic):
            array = np.ascontiguousarray(item)
            hasher.update(f"A{array.dtype.str}{array.shape}".encode())
            hasher.update(array.tobytes())
        elif isinstance(item, Mapping):
            hasher.update(b"D")
            for key in sorted(item, key=str):
                hasher.update(f"{key!s}:".encode())
                feed(item[key])
        elif isinstance(item, (list, tuple)):
            hasher.update(f"L{len(item)}".encode())
            for entry in item:
                feed(entry)
        else:
            hasher.update(f"{type(item).__name__}:{item!r};".encode())

    feed(value)
    return hasher.hexdigest()[:16]


def decode(blob: bytes) -> dict[str, Any]:
    """The trajectory document of a stored blob, inflated within :data:`MAX_DOCUMENT_BYTES` and checked.

    Raises:
        ValueError: the blob is not a trajectory of a known format, inflates past the bound, or its
            document lacks a field or has one of the wrong type (the message names it).
    """
    try:
        doc = json.loads(inflate(bytes(blob), MAX_DOCUMENT_BYTES))
    except (zlib.error, ValueError, RecursionError) as exc:
        raise ValueError(f"not a stored trajectory: {type(exc).__name__}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(
            f"unknown trajectory format {str(doc.get('format') if isinstance(doc, dict) else None)[:40]!r}"
        )
    _check_document(doc)
    _check_decoded_values(doc)
    return doc


def _check_document(doc: Mapping[str, Any]) -> None:
    """Raise ValueError unless ``doc`` has the layout :class:`Recorder` writes (so readers may index it)."""

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(f"not a stored trajectory: {what}")

    need(
        isinstance(doc.get("env_id"), str) and isinstance(doc.get("env_kwargs"), dict),
        "env_id must be a string and env_kwargs an object",
    )
    need(
        type(doc.get("seed")) is int and isinstance(doc.get("text_view"), bool),
        "seed must be an int and text_view a bool",
    )
    need(isinstance(doc.get("instructions", ""), str), "instructions must be a string")
    reset = doc.get("reset")
    need(
        reset is None
        or (
            isinstance(reset, dict)
            and isinstance(reset.get("digest"), str)
            and isinstance(reset.get("info", {}), dict)
        ),
        "reset must be null or an object with a digest",
    )
    steps = doc.get("steps")
    need(isinstance(steps, list), "steps must be a list")
    for index, step in enumerate(steps, 1):
        need(
            isinstance(step, dict)
            and "action" in step
            and "reward" in step
            and isinstance(step.get("digest"), str)
            and isinstance(step.get("terminated"), bool)
            and isinstance(step.get("truncated"), bool)
            and isinstance(step.get("info", {}), dict)
            and isinstance(step.get("generation") or {}, dict),
            f"step {index} lacks action, reward, digest, terminated/truncated or info (or its generation is not an object)",
        )
    messages = doc.get("messages", [])
    need(
        isinstance(messages, list)
        and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
            for m in messages
        ),
        "messages must be a list of {role, content} strings",
    )


def _check_decoded_values(doc: Mapping[str, Any]) -> None:
    """Raise ValueError unless the values readers decode (``env_kwargs``, each step's ``action``
    and ``reward``) nest at most :data:`MAX_VALUE_DEPTH` levels and their arrays declare at most
    :data:`MAX_DECODED_ARRAY_BYTES` together (walked without recursion, before any is inflated)."""
    stack = [(doc["env_kwargs"], 1)]
    for step in doc["steps"]:
        stack += [(step["action"], 1), (step["reward"], 1)]
    declared = 0
    while stack:
        value, depth = stack.pop()
        if depth > MAX_VALUE_DEPTH:
            raise ValueError(
                f"not a stored trajectory: a kwarg, action or reward nests more than {MAX_VALUE_DEPTH} levels"
            )
        if isinstance(value, list):
            stack += [(item, depth + 1) for item in value]
        elif isinstance(value, dict):
            if len(value) == 1 and "__array__" in value:
                declared += _array_layout(value["__array__"])[2]
                if declared > MAX_DECODED_ARRAY_BYTES:
                    raise ValueError(
                        f"not a stored trajectory: its kwargs, actions and rewards declare more than "
                        f"{MAX_DECODED_ARRAY_BYTES} bytes of arrays together"
                    )
            else:
                stack += [(item, depth + 1) for item in value.values()]


# ---------------------------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------------------------


def _text_view(env: Any, observation: Any) -> str | None:
    if isinstance(observation, str):
        return None  # the observation is its own text
    to_text = getattr(getattr(env, "unwrapped", env), "observation_text", None)
    if not callable(to_text):
        return None
    try:
        return str(to_text(observation))
    except Exception:  # noqa: BLE001 - a view that fails is simply not recorded
        return None


def _info(
    info: Mapping[str, Any] | None, skip: tuple[str, ...] = ()
) -> tuple[dict[str, Any], list[str]]:
    kept, dropped = {}, []
    for key, value in (info or {}).items():
        if key in skip:
            continue
        if key == "patch" and isinstance(value, str):  # the viewer's diff: kept, bounded
            cut = len(value) > PATCH_CHARS
            kept[key] = value[:PATCH_CHARS] + "\n[patch cut]\n" if cut else value
            continue
        encoded = encode_value(value, max_array_bytes=MAX_INFO_CHARS)
        if len(json.dumps(encoded)) <= MAX_INFO_CHARS:
            kept[str(key)] = encoded
        else:
            dropped.append(str(key))
    return kept, dropped


def _generation(agent: Any) -> dict[str, Any] | None:
    last = getattr(agent, "last_generation", None)
    if last is None:
        return None
    out: dict[str, Any] = {}
    token_ids = (
        last.get("token_ids") if isinstance(last, Mapping) else getattr(last, "token_ids", None)
    )
    if token_ids is not None:
        out["completion_tokens"] = len(token_ids)
        out["token_ids"] = [int(t) for t in token_ids]
    usage = last.get("usage") if isinstance(last, Mapping) else getattr(last, "usage", None)
    if isinstance(usage, Mapping):
        out.update(
            {
                k: int(v)
                for k, v in usage.items()
                if k in ("prompt_tokens", "completion_tokens", "total_tokens")
                and isinstance(v, int)
            }
        )
    return out or None


def _png(frame: Any) -> bytes | None:
    array = np.asarray(frame) if frame is not None else None
    if array is None or array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] not in (3, 4):
        return None
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


class Recorder:
    """Records one episode as the runner plays it.

    Args:
        env: the env the episode is played on (its ``observation_text`` gives the text view,
            its ``render()`` the frames).
        agent: the agent (its ``history.messages`` and ``last_generation`` are read when present).
        env_id, env_kwargs, seed, text_view: how to rebuild the episode for :func:`replay`.
        frames_every: render a frame every this many steps (0: no frames). Frames need an env
            made with ``render_mode="rgb_array"``.
    """

    def __init__(
        self,
        env: Any,
        agent: Any,
        *,
        env_id: str,
        env_kwargs: Mapping[str, Any],
        seed: int,
        text_view: bool,
        frames_every: int = 0,
    ):
        self.env, self.agent, self.frames_every = env, agent, int(frames_every)
        self.doc: dict[str, Any] = {
            "format": FORMAT,
            "env_id": env_id,
            "env_kwargs": encode_value(dict(env_kwargs)),
            "seed": int(seed),
            "text_view": bool(text_view),
            "instructions": "",
            "reset": None,
            "steps": [],
        }
        self.frames: list[tuple[int, bytes]] = []
        self._frame_bytes = (0, 0)  # the frames' PNG bytes and declared decoded bytes

    def _observation(self, observation: Any) -> dict[str, Any]:
        entry = {
            "observation": encode_value(observation, max_array_bytes=MAX_ARRAY_BYTES),
            "digest": digest(observation),
        }
        text = _text_view(self.env, observation)
        if text is not None:
            entry["text"] = text
        return entry

    def _frame(self, step: int, last: bool = False) -> None:
        if self.frames_every <= 0 or not (step % self.frames_every == 0 or last):
            return
        if self.frames and self.frames[-1][0] == step:
            return
        try:
            png = _png(self.env.render())
        except Exception as exc:  # noqa: BLE001 - a frame is optional; the episode goes on
            logger.debug("no frame at step %d: %s", step, exc)
            return
        if png is not None and self._fits(png, last):
            self.frames.append((step, png))

    def _fits(self, png: bytes, last: bool) -> bool:
        """Whether ``png`` may join :attr:`frames` within what the store reads back
        (``store.MAX_FRAMES``, ``MAX_FRAME_BYTES``, ``MAX_FRAME_PIXEL_BYTES`` and their totals):
        a frame past a bound is dropped here, so an honest filmstrip is never refused whole on
        read. One place is kept for the last frame."""
        try:
            pixel_bytes = _store.png_decoded_bytes(png, len(self.frames))
        except ValueError:
            return False
        fits = (
            len(self.frames) + (1 if last else 2) <= _store.MAX_FRAMES
            and len(png) <= _store.MAX_FRAME_BYTES
            and self._frame_bytes[0] + len(png) <= _store.MAX_FRAMES_BYTES
            and self._frame_bytes[1] + pixel_bytes <= _store.MAX_FRAMES_PIXEL_BYTES
        )
        if fits:
            self._frame_bytes = (
                self._frame_bytes[0] + len(png),
                self._frame_bytes[1] + pixel_bytes,
            )
        return fits

    def reset(self, observation: Any, info: Mapping[str, Any] | None) -> None:
        """Record the reset observation and info (``info["instructions"]`` goes to the header)."""
        instructions = (info or {}).get("instructions")
        if not isinstance(instructions, str):
            to_text = getattr(getattr(self.env, "unwrapped", self.env), "instructions", None)
            try:
                instructions = str(to_text()) if callable(to_text) else ""
            except Exception:  # noqa: BLE001
                instructions = ""
        self.doc["instructions"] = instructions
        kept, dropped = _info(info, skip=("instructions",))
        self.doc["reset"] = {**self._observation(observation), "info": kept, "dropped": dropped}
        self._frame(0)

    def step(
        self,
        action: Any,
        observation: Any,
        reward: Any,
        terminated: Any,
        truncated: Any,
        info: Mapping[str, Any] | None,
    ) -> None:
        """Record one step: the action as given and what the env returned."""
        kept, dropped = _info(info)
        entry = {
            "action": encode_value(action),
            **self._observation(observation),
            "reward": encode_value(_plain(reward)),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": kept,
        }
        if dropped:
            entry["dropped"] = dropped
        generation = _generation(self.agent)
        if generation:
            entry["generation"] = generation
        self.doc["steps"].append(entry)
        self._frame(len(self.doc["steps"]), last=bool(terminated or truncated))

    def finish(self) -> tuple[bytes, list[tuple[int, bytes]]]:
        """The compressed document and the frames.

        Raises:
            ValueError: the document is over :data:`MAX_DOCUMENT_BYTES` (the runner keeps the row
                without it).
        """
        messages = getattr(getattr(self.agent, "history", None), "messages", None)
        if isinstance(messages, list) and all(
            isinstance(m, Mapping) and "role" in m and "content" in m for m in messages
        ):
            self.doc["messages"] = [
                {"role": str(m["role"]), "content": str(m["content"])} for m in messages
            ]
        try:
            text = json.dumps(self.doc, separators=(",", ":"), ensure_ascii=False).encode()
        except (
            UnicodeEncodeError
        ):  # text UTF-8 cannot hold (a lone surrogate in a reply): kept as JSON escapes
            text = json.dumps(self.doc, separators=(",", ":"), ensure_ascii=True).encode()
        if len(text) > MAX_DOCUMENT_BYTES:
            raise ValueError(
                f"the trajectory is {len(text)} bytes, over the {MAX_DOCUMENT_BYTES} a trajectory may have"
            )
        return zlib.compress(text, 9), self.frames


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


# ---------------------------------------------------------------------------------------------
# Chat view (viewer and dataset export)
# ---------------------------------------------------------------------------------------------


def _show(entry: Mapping[str, Any]) -> str:
    if isinstance(entry.get("text"), str):
        return safe_text(entry["text"])
    observation = entry.get("observation")
    return (
        safe_text(observation) if isinstance(observation, str) else json.dumps(observation)[:2000]
    )


def _plain_json(value: Any) -> Any:
    """A decoded value as plain JSON: arrays as nested lists, NumPy scalars as numbers, tuples as lists."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain_json(v) for k, v in value.items()}
    return value


def show_action(action: Any) -> str:
    """A recorded action as text: text actions as they are, others as plain JSON (``2``, ``[0.1, -0.4]``, ``{"op": 2, ...}``).

    Text UTF-8 cannot hold (a lone surrogate) is shown escaped (``\\ud800``).

    Raises:
        ValueError: a malformed encoded value (:func:`decode_value`).
    """
    if isinstance(action, str):
        return safe_text(action)
    value = _plain_json(decode_value(action))
    return safe_text(value) if isinstance(value, str) else json.dumps(value)


def chat_messages(doc: Mapping[str, Any]) -> list[dict[str, str]]:
    """The episode as chat messages: the instructions (system), each observation (user), each action
    (assistant), ending with the last observation when the episode ended on it. Text that UTF-8
    cannot hold is escaped (:func:`~verigym.leaderboards.store.safe_text`)."""
    messages = []
    if doc.get("instructions"):
        messages.append({"role": "system", "content": safe_text(doc["instructions"])})
    if doc.get("reset"):
        messages.append({"role": "user", "content": _show(doc["reset"])})
    steps = doc.get("steps", [])
    for index, step in enumerate(steps):
        messages.append({"role": "assistant", "content": show_action(step["action"])})
        if index + 1 < len(steps):
            messages.append({"role": "user", "content": _show(step)})
    return messages


# ---------------------------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------------------------


@dataclass
class ReplayResult:
    """What replaying one stored episode gave.

    Attributes:
        success, score: the verdict of the replay (None when it could not run).
        diverged_at: the first step whose observation, reward or end flags differ (``0``: the
            reset observation), None when the replay matched the recording step for step.
        reasons: why the verdict changed (empty when it did not).
    """

    success: bool | None
    score: float | None
    diverged_at: int | None = None
    detail: str = ""
    reasons: list[str] = field(default_factory=list)


class EnvCache:
    """Builds envs through ``make_env`` and keeps the last one, so that consecutive replays of one
    task reuse it (``reset(seed=...)`` reproduces the task on a used env; GUI envs keep their browser).

    Args:
        make_env: ``(env_id, env_kwargs, text_view) -> env`` building the env as the runner did.
    """

    def __init__(self, make_env: Callable[[str, dict[str, Any], bool], Any]):
        self.make_env = make_env
        self.key: str | None = None
        self.env: Any = None

    def get(self, doc: Mapping[str, Any]) -> Any:
        key = json.dumps([doc["env_id"], doc["env_kwargs"], bool(doc["text_view"])], sort_keys=True)
        if key != self.key:
            self.close()
            self.env = self.make_env(
                doc["env_id"], decode_value(doc["env_kwargs"]), bool(doc["text_view"])
            )
            self.key = key
        return self.env

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
        self.env, self.key = None, None


def replay(
    doc: Mapping[str, Any], make_env: Callable[[str, dict[str, Any], bool], Any] | EnvCache
) -> ReplayResult:
    """Replay a recorded episode's actions from its seed and recompute the verdict.

    Args:
        doc: a trajectory document (:func:`decode`).
        make_env: ``(env_id, env_kwargs, text_view) -> env`` building the env as the runner did
            (the env is closed after the replay), or an :class:`EnvCache` (the env is kept).

    Returns:
        The new verdict and the first divergence from the recording (observation digests,
        rewards, ``terminated``/``truncated``).
    """
    cache = make_env if isinstance(make_env, EnvCache) else EnvCache(make_env)
    env = cache.get(doc)
    try:
        observation, info = env.reset(seed=doc["seed"])
        result = ReplayResult(None, None)
        if digest(observation) != doc["reset"]["digest"]:
            result.diverged_at, result.detail = 0, "the reset observation differs"
        ended = False
        for index, step in enumerate(doc["steps"], 1):
            if ended:
                if result.diverged_at is None:
                    result.diverged_at, result.detail = index, "the replayed episode ended earlier"
                break
            observation, reward, terminated, truncated, info = env.step(
                decode_value(step["action"])
            )
            ended = bool(terminated or truncated)
            if result.diverged_at is None:
                recorded_reward = decode_value(step["reward"])
                if digest(observation) != step["digest"]:
                    result.diverged_at, result.detail = index, "the observation differs"
                elif not _same_number(_plain(reward), recorded_reward):
                    result.diverged_at, result.detail = (
                        index,
                        f"the reward differs ({recorded_reward!r} recorded, {_plain(reward)!r} now)",
                    )
                elif (bool(terminated), bool(truncated)) != (step["terminated"], step["truncated"]):
                    result.diverged_at, result.detail = index, "terminated/truncated differ"
        if not ended and result.diverged_at is None:
            result.diverged_at, result.detail = (
                len(doc["steps"]),
                "the replayed episode did not end",
            )
        if ended and "success" in info and "score" in info:
            result.success, result.score = bool(info["success"]), float(info["score"])
        return result
    except BaseException:
        cache.close()  # an env that failed mid-replay is not reused
        raise
    finally:
        if cache is not make_env:
            cache.close()


def _same_number(a: Any, b: Any) -> bool:
    """Equal rewards, up to the last-bit noise of vectorized float arithmetic (relative 1e-9)."""
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))


# ---------------------------------------------------------------------------------------------
# Re-verification of a store
# ---------------------------------------------------------------------------------------------


@dataclass
class ReverifyReport:
    """What :func:`reverify` found.

    Attributes:
        checked: episodes replayed.
        changed: ``(row, reasons)`` of every episode whose ``success`` or ``score`` changed, or
            whose replay diverged from its recording.
        unverifiable: ``(row, why)`` of every result (an ``ok`` row) that could not be replayed:
            no trajectory, a trajectory not bound to its row (digest or header differ), a row
            migrated from before rows were bound, kwargs refused by
            :func:`verigym.registration.untrusted_kwargs`, an id not registered here, or a row that
            failed validation when read (a :class:`~verigym.leaderboards.store.RefusedRow`).
        skipped: ``(row, why)`` of ``error``/``timeout`` rows (not results; not replayed).
    """

    checked: int = 0
    changed: list[tuple[Any, list[str]]] = field(default_factory=list)
    unverifiable: list[tuple[Any, str]] = field(default_factory=list)
    skipped: list[tuple[Any, str]] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        """True when every result replayed to its recorded verdict (nothing changed or unverifiable)."""
        return not self.changed and not self.unverifiable

    def summary(self) -> str:
        """One line: ``412 episodes re-verified, 0 changed`` (then how many were unverifiable or not replayed)."""
        line = f"{self.checked} episodes re-verified, {len(self.changed)} changed"
        if self.unverifiable:
            line += f", {len(self.unverifiable)} unverifiable"
        return line + (f" ({len(self.skipped)} not replayed)" if self.skipped else "")


def reverify(
    store: Any,
    rows: list[Any],
    make_env: Callable[[str, dict[str, Any], bool], Any],
    *,
    current: Mapping[str, str],
    on_row: Callable[[Any, list[str]], None] | None = None,
    on_unverifiable: Callable[[Any, str], None] | None = None,
    refused: Iterable[Any] = (),
    allow_kwargs: Collection[str] = (),
) -> ReverifyReport:
    """Replay stored episodes in the current env versions, each from its row's own values, and compare the verdicts.

    Each result is replayed from the row's env id, seed and kwargs (never the trajectory's own),
    after checking that its trajectory is the one written with it (the row's digest, the
    trajectory's header) and that its kwargs pass :func:`verigym.registration.untrusted_kwargs`.
    A result that cannot be replayed is reported as unverifiable, never skipped.

    Args:
        store: a :class:`~verigym.leaderboards.store.ResultsStore`.
        rows: the rows to re-verify (``ok`` rows are replayed; ``error``/``timeout`` rows are skipped).
        make_env: builds an env as the runner did (:func:`verigym.leaderboards.episode.make_env`).
        current: this installation's provenance (``verigym_version``, ``git_sha``), named in the reasons.
        on_row: called with each changed row and its reasons as soon as it is found.
        on_unverifiable: called with each unverifiable row and why as soon as it is found.
        refused: rows that failed validation when read (:class:`~verigym.leaderboards.store.RefusedRow`);
            each is reported as unverifiable.
        allow_kwargs: kwargs names the operator allows beyond the client-settable ones
            (``untrusted_kwargs(..., allow=...)``; ``never`` parameters stay refused).

    Returns:
        The report; a changed episode's reasons say what changed (the verdict, where the replay
        diverged) and why it may have (the verifier, or the env, changed since the recording).

    Raises:
        StoreError: the store has no trajectories table (nothing in it can be re-verified).
    """
    import gymnasium as gym

    store.require_trajectories()
    report = ReverifyReport()

    def unverifiable(row: Any, why: str) -> None:
        report.unverifiable.append((row, why))
        if on_unverifiable is not None:
            on_unverifiable(row, why)

    for row in refused:
        unverifiable(row, f"the stored row is invalid: {row.reason}")
    cache = EnvCache(make_env)
    try:
        for row in rows:
            if row.status != "ok":
                report.skipped.append((row, f"status {row.status}"))
                continue
            bound = _bound_document(store, row, gym.registry, tuple(allow_kwargs))
            if isinstance(bound, str):
                unverifiable(row, bound)
                continue
            _replay_row(row, bound, cache, current, on_row, report)
    finally:
        cache.close()
    return report


def _text_view_of(agent_spec: str) -> bool:
    """Whether an agent spec plays through the text view, read from the spec text alone (a stored
    spec is never imported or built): ``llm:...`` and ``openai:...`` do."""
    from verigym.leaderboards.agent_spec import TEXT_KINDS

    head, sep, _ = agent_spec.partition(":")
    return bool(sep) and head in TEXT_KINDS


def _plain_kwargs(encoded: Any) -> Any:
    return json.loads(json.dumps(_plain_json(decode_value(encoded)), sort_keys=True))


class UnboundTrajectory(ValueError):
    """A stored trajectory that is not read for its row: it was not written with the row (digest,
    header), it cannot be decoded, or the row's kwargs are refused; the message says which."""


def bound_trajectory(
    store: Any,
    row: Any,
    *,
    rebuild: bool = False,
    allow: Collection[str] = (),
    registry: Any = None,
) -> dict[str, Any] | None:
    """The trajectory of a stored row, read only when it is provably the one written with the row.

    Every path that reads a stored episode goes through here (``reverify``, ``export`` in every
    format, the episode viewer), so none of them trusts the trajectory's own header. The row's
    ``trajectory_digest`` must match the blob (:func:`~verigym.leaderboards.store.trajectory_digest`:
    it binds the row's env id, version, seed, kwargs, agent and config), and the trajectory's
    header must name the row's env id, seed, kwargs and text view. The document returned carries
    the row's own values in those fields, never the trajectory's.

    Args:
        store: a :class:`~verigym.leaderboards.store.ResultsStore`.
        row: the :class:`~verigym.leaderboards.store.EpisodeRow`.
        rebuild: the caller will build the env from the returned ``env_kwargs`` (reverify, the SFT
            export): the row's kwargs must then pass :func:`verigym.registration.untrusted_kwargs`
            (with ``allow``) and its id must be registered; a row migrated from before rows named
            their kwargs (``env_kwargs == ""``) is refused. Without ``rebuild`` (the viewer, the
            dataset export) such a legacy row is read when its header names the row's env id and
            seed, and the document says ``"bound": False``.
        allow: operator-only kwargs the row may carry (``untrusted_kwargs(..., allow=...)``);
            ``never`` parameters (``unsafe``) stay refused.
        registry: Gymnasium's registry (default: ``gymnasium.registry``), with ``rebuild``.

    Returns:
        The trajectory document (:func:`decode`) with ``env_id``, ``seed``, ``env_kwargs`` (encoded,
        :func:`encode_value`) and ``text_view`` set from the row, and ``"bound"`` (True unless the
        row is a legacy one); None when no trajectory was recorded for the row.

    Raises:
        UnboundTrajectory: why the trajectory is not read (the message is one line).
    """
    from verigym.registration import KwargsRefused, untrusted_kwargs

    legacy = not row.env_kwargs
    if rebuild:
        if registry is None:
            import gymnasium

            registry = gymnasium.registry
        if row.env_id not in registry:
            raise UnboundTrajectory(
                f"{row.env_id} is not registered here (a newer version replaced it?)"
            )
        if legacy:
            raise UnboundTrajectory(
                "unbound: recorded before rows named their kwargs and the digest of their trajectory; "
                "run these episodes again into a new folder (--out DIR) to verify them"
            )
        try:
            kwargs = untrusted_kwargs(row.env_id, json.loads(row.env_kwargs), allow=tuple(allow))
        except KwargsRefused as exc:
            raise UnboundTrajectory(
                f"its kwargs are refused, so it is not replayed: {exc}"
            ) from None
    else:
        kwargs = {} if legacy else json.loads(row.env_kwargs)
    try:
        blob = store.trajectory(row)
    except ValueError as exc:
        raise UnboundTrajectory(f"its trajectory is not read: {exc}") from None
    if blob is None:
        return None
    if not legacy and row.trajectory_digest != trajectory_digest(row, blob):
        raise UnboundTrajectory(
            "the stored trajectory is not the one written with this row (the row's trajectory digest does not match it)"
        )
    try:
        doc = decode(blob)
        recorded = (doc["env_id"], doc["seed"], _plain_kwargs(doc["env_kwargs"]), doc["text_view"])
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise UnboundTrajectory(
            f"its trajectory cannot be read: {safe_text(str(exc))[:500]}"
        ) from None
    expected = (
        row.env_id,
        row.seed,
        json.loads(canonical_kwargs(kwargs)),
        _text_view_of(row.agent_spec),
    )
    names = ("env id", "seed", "kwargs", "text view")
    checked = 2 if legacy else 4  # a legacy row names no kwargs: its env id and seed are checked
    differ = "; ".join(
        f"{n} {safe_text(repr(r))[:200]} in the trajectory, {e!r} in the row"
        for n, r, e in list(zip(names, recorded, expected))[:checked]
        if r != e
    )
    if differ:
        raise UnboundTrajectory(f"the trajectory was recorded for another episode: {differ}")
    bound = {**doc, "env_id": row.env_id, "seed": row.seed, "bound": not legacy}
    if not legacy:
        bound.update(env_kwargs=encode_value(kwargs), text_view=expected[3])
    return bound


def _bound_document(
    store: Any, row: Any, registry: Any, allow: tuple[str, ...]
) -> dict[str, Any] | str:
    """The row's trajectory set to replay from the row's own values, or why it cannot be replayed."""
    try:
        doc = bound_trajectory(store, row, rebuild=True, allow=allow, registry=registry)
    except UnboundTrajectory as exc:
        return str(exc)
    if doc is None:
        return "no trajectory was recorded for this result"
    if doc["reset"] is None:
        return "its trajectory has no reset (the episode did not start)"
    return doc


def _replay_row(
    row: Any,
    doc: Mapping[str, Any],
    cache: EnvCache,
    current: Mapping[str, str],
    on_row: Callable[[Any, list[str]], None] | None,
    report: ReverifyReport,
) -> None:
    try:
        result = replay(doc, cache)
    except Exception as exc:  # noqa: BLE001 - a replay that crashes is a change to report, not a crash
        result = ReplayResult(
            None, None, 0, f"the replay raised {type(exc).__name__}: {safe_text(str(exc))[:500]}"
        )
    report.checked += 1
    reasons = []
    if result.success is None:
        reasons.append(
            f"the replay gave no verdict ({result.detail or 'no success/score at the end'})"
        )
    elif result.success != row.success or not math.isclose(
        result.score, row.score, rel_tol=0, abs_tol=1e-9
    ):
        cause = (
            "the replay diverged"
            if result.diverged_at is not None
            else "the verifier changed (same steps, new verdict)"
        )
        reasons.append(
            f"success {row.success} -> {result.success}, score {row.score:g} -> {result.score:g}: {cause}"
        )
    if result.diverged_at is not None and result.success is not None:
        reasons.append(f"replay diverged at step {result.diverged_at}: {result.detail}")
    if reasons:
        if (row.verigym_version, row.git_sha) != (
            current.get("verigym_version"),
            current.get("git_sha"),
        ):
            reasons.append(
                f"recorded with verigym {row.verigym_version} ({row.git_sha[:12]}), now {current.get('verigym_version')} "
                f"({str(current.get('git_sha'))[:12]}): the env or its verifier changed since"
            )
        report.changed.append((row, reasons))
        if on_row is not None:
            on_row(row, reasons)


# ---------------------------------------------------------------------------------------------
# Dataset export
# ---------------------------------------------------------------------------------------------


def dataset_records(
    store: Any, rows: Iterable[Any], refused: list[tuple[Any, str]] | None = None
) -> Iterator[dict[str, Any]]:
    """One record per episode with a trajectory, in the chat format of Hugging Face ``datasets``, one at a time.

    Each record: ``messages`` (list of ``{"role", "content"}``), ``reward`` (the episode return),
    ``score``, ``success``, ``env_id``, ``seed``, ``agent``, ``config_hash``, ``status``, ``length``,
    ``suite``, and ``provenance`` (a JSON string: verigym version, git SHA, packages, Python, time).

    A trajectory is read only when it is bound to its row (:func:`bound_trajectory`): the row's
    digest matches it and its header names the row's env id, seed, kwargs and text view (rows
    migrated from before rows were bound have no digest: their env id and seed are checked).

    Args:
        store: a :class:`~verigym.leaderboards.store.ResultsStore`.
        rows: the rows to export (rows without a trajectory are left out).
        refused: when given, ``(row, why)`` of each trajectory that is not exported (oversized, a
            decompression bomb, malformed, not bound to its row) is appended here; when None, such
            a trajectory raises.

    Raises:
        ValueError: a trajectory cannot be exported and ``refused`` is None.
    """
    for row in rows:
        try:
            doc = bound_trajectory(store, row)
            if doc is None:
                continue
            messages = chat_messages(doc)
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            why = f"{row.agent_spec} {row.env_id} seed {row.seed}: {safe_text(str(exc))[:500]}"
            if refused is None:
                raise ValueError(why) from None
            refused.append((row, why))
            continue
        yield {
            "messages": messages,
            "reward": float(row.episode_return),
            "score": float(row.score),
            "success": bool(row.success),
            "env_id": row.env_id,
            "seed": int(row.seed),
            "agent": row.agent_spec,
            "config_hash": row.config_hash,
            "status": row.status,
            "length": int(row.length),
            "suite": row.suite,
            "provenance": json.dumps(
                {
                    "verigym_version": row.verigym_version,
                    "git_sha": row.git_sha,
                    "packages": json.loads(row.packages),
                    "python": row.python,
                    "created_at": row.created_at,
                },
                sort_keys=True,
            ),
        }


def export_dataset(
    records: Iterable[dict[str, Any]], path: Any, fmt: str, *, batch_size: int = 256
) -> tuple[Any, int]:
    """Write records as JSON Lines (``jsonl``) or Parquet (``parquet``, needs ``pyarrow``), streaming.

    Records are written as they come (Parquet in row groups of ``batch_size``), so memory holds
    one batch, not the dataset. The file is written beside ``path`` and moved into place when
    complete: a failed export leaves no partial file (and an earlier file at ``path`` as it was).

    Args:
        records: the records (:func:`dataset_records`).
        path: the file to write.
        fmt: ``jsonl`` or ``parquet``.
        batch_size: records per Parquet row group.

    Returns:
        The path written and the number of records.

    Raises:
        ValueError: an unknown format.
        RuntimeError: ``parquet`` without pyarrow.
    """
    import itertools
    import os
    import pathlib

    if fmt not in ("jsonl", "parquet"):
        raise ValueError(f"format must be jsonl or parquet, got {fmt!r}")
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    count = 0
    try:
        if fmt == "jsonl":
            with partial.open("w", encoding="utf-8") as handle:
                for record in records:
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                    count += 1
        else:
            try:
                import pyarrow as pa
                import pyarrow.parquet as pq
            except ImportError:
                raise RuntimeError(
                    'Parquet export needs pyarrow: pip install "verigym[trl]" (or pyarrow)'
                ) from None
            schema = pa.schema(
                [
                    (
                        "messages",
                        pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
                    ),
                    ("reward", pa.float64()),
                    ("score", pa.float64()),
                    ("success", pa.bool_()),
                    ("env_id", pa.string()),
                    ("seed", pa.int64()),
                    ("agent", pa.string()),
                    ("config_hash", pa.string()),
                    ("status", pa.string()),
                    ("length", pa.int64()),
                    ("suite", pa.string()),
                    ("provenance", pa.string()),
                ]
            )
            records = iter(records)
            with pq.ParquetWriter(partial, schema) as writer:
                while batch := list(itertools.islice(records, batch_size)):
                    writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                    count += len(batch)
                if count == 0:
                    writer.write_table(pa.Table.from_pylist([], schema=schema))
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path, count
