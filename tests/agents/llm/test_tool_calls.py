"""Tool envs read OpenAI ``tool_calls`` assistant messages and SmolLM2's list-form calls."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import verigym  # noqa: F401 - registers the ids
from verigym.core import ActionParseError
from verigym.toolcalls import (
    FinalAnswer,
    Tool,
    ToolCall,
    message_to_text,
    parse_reply,
    tool_calls_in,
)

CALC = Tool(
    "calc",
    "evaluate",
    {"type": "object", "properties": {"e": {"type": "string"}}, "required": ["e"]},
)


def _message(name: str, arguments: object, content: str | None = None) -> dict:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


def test_list_form_call_is_one_call():
    assert parse_reply(
        '<tool_call>[{"name": "calc", "arguments": {"e": "1+1"}}]</tool_call>',
        [CALC],
        max_length=999,
    ) == ToolCall("calc", {"e": "1+1"})
    assert parse_reply(
        '[{"name": "calc", "arguments": {"e": "2"}}]', [CALC], max_length=999
    ) == ToolCall("calc", {"e": "2"})
    two = '<tool_call>[{"name": "calc", "arguments": {"e": "1"}}, {"name": "calc", "arguments": {"e": "2"}}]</tool_call>'
    with pytest.raises(ActionParseError, match="one tool call per turn"):
        parse_reply(two, [CALC], max_length=999)
    with pytest.raises(ActionParseError, match="empty list"):
        parse_reply("<tool_call>[]</tool_call>", [CALC], max_length=999)


@pytest.mark.parametrize("as_json", [False, True])
def test_openai_message_with_tool_calls(as_json):
    message = _message("calc", json.dumps({"e": "6*7"}))
    action = json.dumps(message) if as_json else message
    assert parse_reply(action, [CALC], max_length=999) == ToolCall("calc", {"e": "6*7"})
    answer = {"role": "assistant", "content": [{"type": "text", "text": "<answer>42</answer>"}]}
    assert parse_reply(
        json.dumps(answer) if as_json else answer, [CALC], max_length=999
    ) == FinalAnswer("42")


def test_bad_message_is_an_action_error_not_a_crash():
    with pytest.raises(ActionParseError, match="function.name"):
        message_to_text({"role": "assistant", "tool_calls": [{"type": "function"}]})
    with pytest.raises(ActionParseError, match="not valid JSON"):
        parse_reply(_message("calc", "{not json"), [CALC], max_length=999)
    assert tool_calls_in(json.dumps(_message("calc", {"e": "1"}))) == [("calc", {"e": "1"})]


def test_calculator_plays_a_tool_calls_message():
    env = gym.make("verigym/Calculator-v0")
    try:
        env.reset(seed=5)
        question = env.unwrapped._question
        expression = question.split(":", 1)[1].strip()
        obs, reward, terminated, _, info = env.step(
            json.dumps(_message("calculate", {"expression": expression}))
        )
        assert "action_error" not in info and not terminated and "calculate result" in obs
        value = obs.split("]", 1)[1].strip().splitlines()[0]
        *_, terminated, _, info = env.step(
            {"role": "assistant", "content": f"<answer>{value}</answer>"}
        )
        assert terminated and info["success"]
        env.reset(seed=5)
        _, reward, _, _, info = env.step(
            {"role": "assistant", "content": None, "tool_calls": "nope"}
        )
        assert reward < 0 and "tool_calls must be a list" in info["action_error"]
    finally:
        env.close()
