"""The tool-call format: JSON-schema tools, tool calls and final answers.

One contract shared by the ``tool`` env family (:mod:`verigym.envs.tool.base` parses each reply
with :func:`parse_reply`), the model server and the OpenAI agent (:func:`message_to_text`,
:func:`tool_calls_in`) and, through the tool envs, the TRL adapter.

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

Text inside ``<think>...</think>`` is ignored. A reply with neither, a malformed call, an unknown
tool or arguments that do not match the schema raises :class:`~verigym.core.ActionParseError` with
a message for the agent.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.core import ActionParseError

__all__ = [
    "FinalAnswer",
    "Tool",
    "ToolCall",
    "check_arguments",
    "message_to_text",
    "parse_reply",
    "strip_think",
    "tool_calls_in",
]

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL | re.IGNORECASE)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```[a-zA-Z]*\n?(.*?)\n?```$", re.DOTALL)
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


def _loads_calls(raw: str) -> list[tuple[str, dict[str, Any]]]:
    """The call(s) in one JSON text: an object, or a list of objects."""
    raw = raw.strip()
    fenced = _FENCE.match(raw)
    if fenced:
        raw = fenced.group(1).strip()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ActionParseError(
            f'the tool call is not valid JSON ({exc}); write {{"name": "<tool>", "arguments": {{...}}}}'
        ) from None
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
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise ActionParseError(
                f"the arguments of {data['name']!r} are a string that is not a JSON object"
            ) from None
    if not isinstance(arguments, dict):
        raise ActionParseError(
            f"the arguments of {data['name']!r} must be a JSON object, got {type(arguments).__name__}"
        )
    return data["name"], arguments


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


def message_to_text(message: Mapping[str, Any]) -> str:
    """The text form of an OpenAI assistant message: its ``tool_calls`` as ``<tool_call>`` blocks
    after its ``content``.

    Raises:
        ActionParseError: ``tool_calls`` is not a list of ``{"function": {"name", "arguments"}}``.
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
        arguments = function.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        blocks.append(
            f'<tool_call>{{"name": {json.dumps(function["name"])}, "arguments": {arguments}}}</tool_call>'
        )
    return "\n".join([content, *blocks]) if blocks else content


def _as_message(text: str) -> Mapping[str, Any] | None:
    """The assistant message ``text`` encodes as JSON, if it is one (has ``tool_calls`` or a role)."""
    stripped = text.strip()
    if not (stripped.startswith("{") and ('"tool_calls"' in stripped or '"role"' in stripped)):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if (
        isinstance(data, dict)
        and ("tool_calls" in data or data.get("role") == "assistant")
        and "name" not in data
    ):
        return data
    return None


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
        if kind == "number" and not math.isfinite(value):
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
