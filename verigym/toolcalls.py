"""The tool-call format: JSON-schema tools, tool calls and final answers.

One contract shared by the ``tool`` env family (:mod:`verigym.envs.tool.base` parses each reply
with :func:`parse_reply`), the model server, the OpenAI agent, the SFT export and training and,
through the tool envs, the TRL adapter. This module is the one place where tool calls are
converted between the Hermes text the models write and the OpenAI chat messages:

* text -> OpenAI: :func:`tool_calls_in` (the calls in a reply), :func:`text_to_message` (a reply
  as an assistant message's ``content`` and ``tool_calls``), :func:`openai_tool_call` (one
  ``tool_calls`` entry);
* OpenAI -> text: :func:`message_to_text` (one assistant message), :func:`messages_to_text` (a
  chat, ``tool`` results included), :func:`hermes_call` (one ``<tool_call>`` block).

Tools are described in the OpenAI function-calling format::

    {"type": "function", "function": {"name": "python", "description": "...",
     "parameters": {"type": "object", "properties": {...}, "required": [...]}}}

An agent's reply is either

* a **tool call**: a JSON object ``{"name": ..., "arguments": {...}}``, bare or inside
  ``<tool_call>...</tool_call>`` (as Qwen/Hermes-style chat models emit; ``arguments`` may also be
  a JSON-encoded string, as the OpenAI API returns it; a JSON list holding one such object, as
  SmolLM2 writes ``<tool_call>[{...}]</tool_call>``, is the same call); or
* an **OpenAI assistant message** with ``tool_calls`` (``{"role": "assistant", "content": ...,
  "tool_calls": [{"type": "function", "function": {"name", "arguments"}}]}``), given as a mapping
  or as its JSON text -- what an OpenAI-compatible server returns; or
* a **final answer**: ``<answer>...</answer>`` (in a message: in its ``content``).

Text inside ``<think>...</think>`` is ignored. A reply with neither, a malformed call (JSON nested
deeper than :data:`MAX_JSON_DEPTH` included), an unknown tool or arguments that do not match the
schema raises :class:`~verigym.core.ActionParseError` with
a message for the agent.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.core import ActionParseError

__all__ = [
    "FinalAnswer",
    "Tool",
    "ToolCall",
    "check_arguments",
    "hermes_call",
    "message_to_text",
    "messages_to_text",
    "openai_tool_call",
    "parse_reply",
    "strip_think",
    "text_to_message",
    "tool_calls_in",
]

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL | re.IGNORECASE)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```[a-zA-Z]*\n?(.*?)\n?```$", re.DOTALL)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
MAX_JSON_DEPTH = 64
"""Deepest ``[``/``{`` nesting of a tool call's JSON text; deeper text is refused unparsed (the
standard parser recurses once per level and would raise ``RecursionError`` near the interpreter's
limit, wherever in a stack the env's ``step`` runs)."""
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


@dataclass(frozen=True)
class Tool:
    """A tool offered to the agent.

    Attributes:
        name: the function name the agent calls.
        description: what the tool does, for the agent.
        parameters: a JSON schema of type ``object`` (``properties``, ``required``); supported
            property keywords: ``type``, ``enum``, ``items``, ``description``, ``default``.
        cost: the cost units one call adds to ``info["tool_cost"]``.
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    cost: float = 1.0

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling description of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """A parsed, schema-checked tool call."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class FinalAnswer:
    """The agent's final answer (the text inside ``<answer>``, stripped; code fences removed)."""

    text: str


def strip_think(text: str) -> str:
    """``text`` without ``<think>...</think>`` blocks (an unclosed block hides the rest)."""
    return _THINK.sub(" ", text)


def _json_loads(raw: str, what: str) -> Any:
    """``json.loads(raw)``, refusing text nested deeper than :data:`MAX_JSON_DEPTH`.

    Raises:
        ActionParseError: not valid JSON (``what`` names the text in the message) or too deep.
    """
    depth = deepest = 0
    for char in _JSON_STRING.sub("", raw):  # brackets inside strings do not nest
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    if deepest > MAX_JSON_DEPTH:
        raise ActionParseError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ActionParseError(f"{what} is not valid JSON ({str(exc)[:200]})") from None


def _loads_calls(raw: str) -> list[tuple[str, dict[str, Any]]]:
    """The call(s) in one JSON text: an object, or a list of objects."""
    raw = raw.strip()
    fenced = _FENCE.match(raw)
    if fenced:
        raw = fenced.group(1).strip()
    try:
        data = _json_loads(raw, "the tool call")
    except ActionParseError as exc:
        raise ActionParseError(f'{exc}; write {{"name": "<tool>", "arguments": {{...}}}}') from None
    if isinstance(data, list):
        if not data:
            raise ActionParseError(
                'the tool call is an empty list; write {"name": "<tool>", "arguments": {...}}'
            )
        return [_call_object(item) for item in data]
    return [_call_object(data)]


def _call_object(data: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(data, dict) and "function" in data and isinstance(data["function"], dict):
        data = data["function"]  # {"type": "function", "function": {...}}
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ActionParseError(
            'a tool call is a JSON object {"name": "<tool>", "arguments": {...}}'
        )
    arguments = data.get("arguments", data.get("parameters", {}))
    return data["name"], _arguments_object(data["name"], arguments)


def tool_calls_in(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Every tool call in a reply (``<tool_call>`` blocks, one bare JSON call or list of calls, or
    the ``tool_calls`` of an assistant message given as JSON), unchecked.

    Raises:
        ActionParseError: a call is not valid JSON or not a ``{"name", "arguments"}`` object.
    """
    message = _as_message(text)
    if message is not None:  # an OpenAI assistant message as JSON text
        text = message_to_text(message)
    visible = strip_think(text)
    blocks = _TOOL_CALL.findall(visible)
    if blocks:
        return [call for block in blocks for call in _loads_calls(block)]
    stripped = visible.strip()
    if stripped.startswith(("{", "[")) and '"name"' in stripped and not _ANSWER.search(visible):
        return _loads_calls(stripped)
    return []


def openai_tool_call(name: str, arguments: str | Mapping[str, Any]) -> dict[str, Any]:
    """One entry of an OpenAI ``message.tool_calls`` list.

    Args:
        name: the function name.
        arguments: the arguments, as the JSON text to send (kept as given, also when it is not
            valid JSON: a truncated call is handed back as written) or as a mapping (serialised
            with ``json.dumps``).

    Returns:
        ``{"id": "call_<24 hex digits>", "type": "function", "function": {"name": name,
        "arguments": <str>}}`` with a fresh random id.

    Raises:
        TypeError: a mapping ``arguments`` holds a value JSON cannot encode.
    """
    if not isinstance(arguments, str):
        arguments = json.dumps(dict(arguments))
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def hermes_call(name: str, arguments: str | Mapping[str, Any]) -> str:
    """One call as a Hermes block, ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

    Args:
        name: the function name.
        arguments: a mapping (serialised with ``json.dumps``) or JSON text, written as given.
    """
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return f'<tool_call>{{"name": {json.dumps(name)}, "arguments": {arguments}}}</tool_call>'


def text_to_message(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """A reply the model wrote (Hermes ``<tool_call>`` blocks) as OpenAI ``(content, tool_calls)``.

    Args:
        text: the reply text.

    Returns:
        ``(content, tool_calls)``: with calls (:func:`tool_calls_in`), ``content`` is the text
        before the first ``<tool_call>``, stripped, or ``None`` when that is empty (also for a
        bare JSON call), and ``tool_calls`` holds one :func:`openai_tool_call` per call, its
        arguments re-serialised with ``json.dumps``. Without calls, or when a call is malformed,
        ``(text, [])``: the text is handed back as content. Nothing is raised.
    """
    try:
        calls = tool_calls_in(text)
    except ActionParseError:  # malformed: the text is the content
        return text, []
    if not calls:
        return text, []
    cut = text.find("<tool_call>")
    content = text[:cut].strip() if cut >= 0 else ""
    return content or None, [openai_tool_call(name, arguments) for name, arguments in calls]


def _arguments_object(name: str, arguments: Any) -> dict[str, Any]:
    """A call's arguments as a JSON object (from its JSON text, ``""`` being ``{}``)."""
    if isinstance(arguments, str):
        try:
            arguments = (
                _json_loads(arguments, f"the arguments of {name!r}") if arguments.strip() else {}
            )
        except ActionParseError as exc:
            raise ActionParseError(f"{exc}: {arguments[:200]}") from None
    if not isinstance(arguments, Mapping):
        raise ActionParseError(
            f"the arguments of {name!r} must be a JSON object, got {type(arguments).__name__}"
        )
    return dict(arguments)


def _arguments_text(name: str, arguments: Any) -> str:
    """A message's (not yet serialised) arguments as JSON text, refused when JSON cannot encode
    them or they nest deeper than :data:`MAX_JSON_DEPTH` (``json.dumps`` recurses per level)."""
    try:
        text = json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ActionParseError(
            f"the arguments of {name!r} are not JSON: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    _json_loads(text, f"the arguments of {name!r}")  # the depth check (and a round trip)
    return text


def message_to_text(message: Mapping[str, Any], *, parse_arguments: bool = False) -> str:
    """The text form of an OpenAI assistant message: its ``content``, then each of its
    ``tool_calls`` as a :func:`hermes_call` block, one per line.

    Args:
        message: ``{"content": str | None | [{"type": "text", "text": str}, ...],
            "tool_calls": [{"function": {"name": str, "arguments": str | dict}}, ...]}``;
            other keys are ignored. Empty content adds no line.
        parse_arguments: ``False`` writes a string ``arguments`` as given (what a client echoes
            back, checked later by the reader); ``True`` parses it and writes it back with
            ``json.dumps``, so the text is well-formed.

    Raises:
        ActionParseError: the content is not text, ``tool_calls`` is not a list of
            ``{"function": {"name", "arguments"}}``, arguments given as a value that JSON cannot
            encode or that nests deeper than :data:`MAX_JSON_DEPTH`, or (``parse_arguments``)
            arguments that are not a JSON object or its text.
    """
    content = message.get("content") or ""
    if isinstance(content, list):  # list of parts: keep the text ones
        content = "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        )
    if not isinstance(content, str):
        raise ActionParseError(
            f"the message content must be a string, got {type(content).__name__}"
        )
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ActionParseError(
            "tool_calls must be a list of {type: function, function: {name, arguments}}"
        )
    blocks = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ActionParseError("each tool call needs function.name and function.arguments")
        name, arguments = function["name"], function.get("arguments", {})
        if parse_arguments:
            arguments = _arguments_object(name, arguments)
        if not isinstance(arguments, str):
            arguments = _arguments_text(name, arguments)
        blocks.append(hermes_call(name, arguments))
    return "\n".join([content, *blocks] if content else blocks) if blocks else content


def messages_to_text(
    messages: Sequence[Mapping[str, Any]],
    *,
    tool_response: bool = False,
    parse_arguments: bool = True,
) -> list[dict[str, str]]:
    """OpenAI chat messages in the text protocol: plain ``{"role", "content"}`` text messages.

    An assistant message's ``tool_calls`` become its content (:func:`message_to_text`: the text
    content, then one ``<tool_call>`` block per call); a ``tool`` message (a call's result)
    becomes a ``user`` message; a ``developer`` message a ``system`` one; other roles are kept.
    The two readers differ only in the keywords:

    * training and the tool envs' text view (the defaults): a tool result is the env's
      observation as the agent saw it, and arguments are parsed and re-serialised, so a
      malformed call is refused rather than trained on
      (:func:`verigym.agents.llm.sft.encode_example`);
    * a model's prompt in the model server (``tool_response=True, parse_arguments=False``): a
      tool result is wrapped as ``<tool_response>\\n...\\n</tool_response>`` (the Hermes chat
      convention), and arguments a client echoes back are written as given (a call the server
      returned truncated stays as it was).

    Args:
        messages: ``{"role": str, "content": str | None | [text parts], "tool_calls": [...]}``
            mappings (``tool_calls`` is read on assistant messages only).
        tool_response: wrap tool results in ``<tool_response>`` tags.
        parse_arguments: see :func:`message_to_text`.

    Returns:
        one ``{"role": str, "content": str}`` per message, in order.

    Raises:
        ValueError: a message that is not a mapping with a string role, or
            :class:`~verigym.core.ActionParseError` (a ``ValueError``) from
            :func:`message_to_text`.
    """
    out: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role") if isinstance(message, Mapping) else None
        if not isinstance(role, str):
            raise ValueError(f"a message without a role: {str(message)[:200]}")
        text = message_to_text(
            {
                "content": message.get("content"),
                "tool_calls": message.get("tool_calls") if role == "assistant" else None,
            },
            parse_arguments=parse_arguments,
        )
        if role == "tool":
            role = "user"
            if tool_response:
                text = f"<tool_response>\n{text}\n</tool_response>"
        elif role == "developer":
            role = "system"
        out.append({"role": role, "content": text})
    return out


def _as_message(text: str) -> Mapping[str, Any] | None:
    """The assistant message ``text`` encodes as JSON, if it is one (has ``tool_calls`` or a role)."""
    stripped = text.strip()
    if not (stripped.startswith("{") and ('"tool_calls"' in stripped or '"role"' in stripped)):
        return None
    try:
        data = _json_loads(stripped, "the message")
    except ActionParseError:
        return None
    if (
        isinstance(data, dict)
        and ("tool_calls" in data or data.get("role") == "assistant")
        and "name" not in data
    ):
        return data
    return None


def _finite(value: float) -> bool:
    """Whether a JSON number is a finite float (an integer too large for a float is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:  # math.isfinite(10**400) raises instead of answering
        return False


def _check_value(value: Any, schema: Mapping[str, Any], where: str) -> Any:
    kind = schema.get("type")
    if kind is not None:
        allowed = _JSON_TYPES.get(kind)
        if allowed is None:
            raise ValueError(f"unsupported schema type {kind!r} at {where}")
        if isinstance(value, bool) and kind != "boolean":
            raise ActionParseError(f"{where} must be of type {kind}, got a boolean")
        if (
            kind == "integer"
            and isinstance(value, float)
            and math.isfinite(value)
            and value.is_integer()
        ):
            value = int(value)
        if not isinstance(value, allowed):
            raise ActionParseError(f"{where} must be of type {kind}, got {type(value).__name__}")
        if kind == "number" and not _finite(value):
            raise ActionParseError(f"{where} must be a finite number")
    if "enum" in schema and value not in schema["enum"]:
        raise ActionParseError(f"{where} must be one of {list(schema['enum'])}, got {value!r}")
    if kind == "array" and "items" in schema:
        value = [
            _check_value(item, schema["items"], f"{where}[{i}]") for i, item in enumerate(value)
        ]
    return value


def check_arguments(tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``arguments`` against ``tool.parameters``; return them with defaults filled in.

    Raises:
        ActionParseError: a required argument is missing, an unknown one is given, or a value has
            the wrong type or is outside its ``enum``.
    """
    properties: Mapping[str, Any] = tool.parameters.get("properties", {})
    required: Sequence[str] = tool.parameters.get("required", [])
    missing = [name for name in required if name not in arguments]
    if missing:
        raise ActionParseError(f"{tool.name} is missing required argument(s) {missing}")
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        raise ActionParseError(
            f"{tool.name} has no argument(s) {unknown}; its arguments are {list(properties)}"
        )
    checked = {
        name: _check_value(value, properties[name], f"{tool.name}.{name}")
        for name, value in arguments.items()
    }
    for name, schema in properties.items():
        if name not in checked and "default" in schema:
            checked[name] = schema["default"]
    return checked


def parse_reply(text: str, tools: Sequence[Tool], *, max_length: int) -> ToolCall | FinalAnswer:
    """Parse one agent reply into a checked tool call or a final answer.

    Args:
        text: the agent's reply: text, or an OpenAI assistant message (a mapping or its JSON).
        tools: the tools on offer.
        max_length: replies longer than this are refused.

    Raises:
        TypeError: ``text`` is neither a ``str`` nor a mapping.
        ActionParseError: see the module docstring.
    """
    if isinstance(text, Mapping):
        text = message_to_text(text)
    if not isinstance(text, str):
        raise TypeError(
            f"tool envs take str actions (or an assistant message mapping), got {type(text).__name__}: {text!r:.80}"
        )
    if len(text) > max_length:
        raise ActionParseError(
            f"your reply has {len(text)} characters; at most {max_length} are read"
        )
    message = _as_message(text)
    if message is not None:
        text = message_to_text(message)
    if len(text) > max_length:
        raise ActionParseError(
            f"your reply has {len(text)} characters; at most {max_length} are read"
        )
    calls = tool_calls_in(text)
    if len(calls) > 1:
        raise ActionParseError("make one tool call per turn")
    if calls:
        name, arguments = calls[0]
        by_name = {tool.name: tool for tool in tools}
        if name not in by_name:
            raise ActionParseError(f"unknown tool {name!r}; the tools are {sorted(by_name)}")
        return ToolCall(name, check_arguments(by_name[name], arguments))
    answers = _ANSWER.findall(strip_think(text))
    if answers:
        answer = answers[-1].strip()
        fenced = _FENCE.match(answer)
        return FinalAnswer(fenced.group(1).strip() if fenced else answer)
    raise ActionParseError(
        'reply with one tool call, <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>, '
        "or with your final answer, <answer>...</answer>"
    )
