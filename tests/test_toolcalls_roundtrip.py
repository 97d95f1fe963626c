"""Round trip over the tool-call formats: Hermes text -> OpenAI message -> text -> the same calls."""

from __future__ import annotations

import json
import re

import pytest

from verigym.core import ActionParseError
from verigym.leaderboards.demonstrations import demonstration_messages, tool_call_of
from verigym.toolcalls import (
    Tool,
    ToolCall,
    hermes_call,
    message_to_text,
    messages_to_text,
    openai_tool_call,
    parse_reply,
    text_to_message,
    tool_calls_in,
)

LOOKUP = Tool(
    "lookup",
    "find a word",
    {
        "type": "object",
        "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["q"],
    },
)


def _block(name: str, arguments: dict, *, ensure_ascii: bool = True) -> str:
    call = {"name": name, "arguments": arguments}
    return f"<tool_call>{json.dumps(call, ensure_ascii=ensure_ascii)}</tool_call>"


REPLIES = {
    "one call": _block("lookup", {"q": "cat", "n": 2}),
    "content before several calls": "Let me look both up.\n"
    + _block("lookup", {"q": "cat"})
    + "\n"
    + _block("lookup", {"q": "dog", "n": 3}),
    "non-ASCII written as is": _block(
        "lookup", {"q": "Café «ü» 日本語 \u2603"}, ensure_ascii=False
    ),
    "non-ASCII escaped": _block("lookup", {"q": "Café «ü» 日本語 \u2603"}),
    "list form": '<tool_call>[{"name": "lookup", "arguments": {"q": "a"}}, '
    '{"name": "lookup", "arguments": {"q": "b"}}]</tool_call>',
    "arguments as a string": '<tool_call>{"name": "lookup", "arguments": "{\\"q\\": \\"x\\"}"}</tool_call>',
}


@pytest.mark.parametrize("reply", list(REPLIES.values()), ids=list(REPLIES))
def test_hermes_text_to_openai_and_back_gives_the_same_calls(reply):
    calls = tool_calls_in(reply)
    assert calls and all(name == "lookup" for name, _ in calls)
    content, tool_calls = text_to_message(reply)
    assert len(tool_calls) == len(calls)
    for (name, arguments), entry in zip(calls, tool_calls):
        assert re.fullmatch(r"call_[0-9a-f]{24}", entry["id"]) and entry["type"] == "function"
        assert entry["function"]["name"] == name
        assert isinstance(entry["function"]["arguments"], str)
        assert json.loads(entry["function"]["arguments"]) == arguments
    assert len({entry["id"] for entry in tool_calls}) == len(tool_calls)
    cut = reply.find("<tool_call>")
    assert content == (reply[:cut].strip() or None)
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    text = message_to_text(message)
    assert tool_calls_in(text) == calls
    if content is not None:
        assert text.startswith(content + "\n<tool_call>")
    else:
        assert text.startswith("<tool_call>")  # no empty line before the calls
    # the rendered text is a fixed point: reading it again gives the same message
    again_content, again_calls = text_to_message(text)
    assert again_content == content
    assert [c["function"] for c in again_calls] == [c["function"] for c in tool_calls]
    assert message_to_text({"content": again_content, "tool_calls": again_calls}) == text
    # both renderings of a chat agree with the one-message form
    for keywords in ({}, {"tool_response": True, "parse_arguments": False}):
        (plain,) = messages_to_text([message], **keywords)
        assert plain == {"role": "assistant", "content": text}
    if len(calls) == 1:  # what a tool env reads, checked against the schema
        assert parse_reply(message, [LOOKUP], max_length=10_000) == ToolCall(*calls[0])
        assert parse_reply(text, [LOOKUP], max_length=10_000) == ToolCall(*calls[0])


def test_canonical_hermes_text_survives_exactly():
    reply = REPLIES["content before several calls"]
    content, tool_calls = text_to_message(reply)
    assert message_to_text({"content": content, "tool_calls": tool_calls}) == reply
    assert message_to_text({"tool_calls": [openai_tool_call("lookup", {"q": "cat"})]}) == (
        hermes_call("lookup", {"q": "cat"})
    )


@pytest.mark.parametrize(
    "arguments", ['{"q": "Café 日本"}', {"q": "Café 日本"}], ids=["string", "object"]
)
def test_arguments_as_string_or_object_give_the_same_text(arguments):
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [openai_tool_call("lookup", arguments)],
    }
    assert isinstance(message["tool_calls"][0]["function"]["arguments"], str)
    (plain,) = messages_to_text([message])
    assert (
        plain["content"]
        == '<tool_call>{"name": "lookup", "arguments": {"q": "Caf\\u00e9 \\u65e5\\u672c"}}</tool_call>'
    )
    assert tool_calls_in(plain["content"]) == [("lookup", {"q": "Café 日本"})]


def test_tool_results_and_roles_in_both_renderings():
    call = openai_tool_call("lookup", {"q": "cat"})
    chat = [
        {"role": "developer", "content": "rules"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "find "}, {"type": "text", "text": "cat"}],
        },
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "a small feline\nü"},
        {"role": "user", "content": "ok", "tool_calls": [call]},  # read on assistants only
        {"role": "assistant", "content": "<answer>feline</answer>"},
    ]
    plain = messages_to_text(chat)
    assert [m["role"] for m in plain] == [
        "system",
        "user",
        "assistant",
        "user",
        "user",
        "assistant",
    ]
    assert plain[1]["content"] == "find cat"
    assert plain[2]["content"] == hermes_call("lookup", {"q": "cat"})
    assert plain[3]["content"] == "a small feline\nü"  # the observation as the agent saw it
    assert plain[4]["content"] == "ok"
    prompt = messages_to_text(chat, tool_response=True, parse_arguments=False)
    assert prompt[3]["content"] == "<tool_response>\na small feline\nü\n</tool_response>"
    assert [m for i, m in enumerate(prompt) if i != 3] == [m for i, m in enumerate(plain) if i != 3]
    assert all(set(m) == {"role", "content"} for m in plain + prompt)


def test_malformed_calls():
    truncated = {"role": "assistant", "tool_calls": [openai_tool_call("lookup", '{"q": "ca')]}
    with pytest.raises(ValueError, match="not valid JSON"):
        messages_to_text([truncated])  # training data: refused
    (echoed,) = messages_to_text([truncated], tool_response=True, parse_arguments=False)
    assert echoed["content"] == '<tool_call>{"name": "lookup", "arguments": {"q": "ca}</tool_call>'
    with pytest.raises(ActionParseError, match="JSON object"):
        message_to_text({"tool_calls": [openai_tool_call("lookup", "[1]")]}, parse_arguments=True)
    with pytest.raises(ValueError, match="role"):
        messages_to_text([{"content": "x"}])
    for bad in ["<tool_call>{not json}</tool_call>", '<tool_call>{"name": 3}</tool_call>', "hello"]:
        assert text_to_message(bad) == (bad, [])  # handed back as content, nothing raised


def test_demonstrations_use_native_calls_only_when_the_text_comes_back_exactly():
    call = _block("lookup", {"q": "Café"})
    assert tool_call_of(call) == ("lookup", {"q": "Café"})
    assert tool_call_of(f"  {call}\n") == ("lookup", {"q": "Café"})
    compact = '<tool_call>{"name":"lookup","arguments":{"q":"x"}}</tool_call>'
    for not_exact in [
        compact,
        "thinking " + call,
        call + call,
        '{"name": "lookup", "arguments": {}}',
    ]:
        assert tool_call_of(not_exact) is None
    messages = demonstration_messages(
        "", ["find", "[lookup]\nfeline", "go on"], [call, compact, "<answer>x</answer>"]
    )
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[1]["tool_calls"][0]["id"] == messages[2]["tool_call_id"] == "call_1"
    assert [m["content"] for m in messages_to_text(messages) if m["role"] == "assistant"] == [
        call,
        compact,
        "<answer>x</answer>",
    ]


def test_deeply_nested_json_is_an_action_error_not_a_recursion_error():
    # json.loads recurses once per level: 1000 nested lists raised RecursionError out of step()
    deep = "[" * 4000 + "]" * 4000
    for reply in (
        f"<tool_call>{deep}</tool_call>",
        f'<tool_call>{{"name": "lookup", "arguments": "{deep}"}}</tool_call>',
        '<tool_call>{"name": "lookup", "arguments": {"q": ' + deep + "}}</tool_call>",
    ):
        with pytest.raises(ActionParseError, match="nests deeper than"):
            parse_reply(reply, [LOOKUP], max_length=1 << 16)
    with pytest.raises(ActionParseError, match="nests deeper than"):
        message_to_text({"tool_calls": [openai_tool_call("lookup", deep)]}, parse_arguments=True)
    # brackets inside a string are text, not nesting
    call = parse_reply(_block("lookup", {"q": "[" * 500}), [LOOKUP], max_length=1 << 16)
    assert call == ToolCall("lookup", {"q": "[" * 500})


def test_message_arguments_json_cannot_encode_are_an_action_error():
    deep: dict = {}
    inner = deep
    for _ in range(3000):  # json.dumps raised RecursionError out of parse_reply
        inner["a"] = inner = {}
    for arguments in (deep, {"q": object()}, {"q": float("nan")}):  # and TypeError, NaN
        message = {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "lookup", "arguments": arguments}}],
        }
        with pytest.raises(ActionParseError, match="not JSON"):
            parse_reply(message, [LOOKUP], max_length=1 << 16)
    message = {
        "role": "assistant",
        "tool_calls": [{"function": {"name": "lookup", "arguments": {"q": "x"}}}],
    }
    assert parse_reply(message, [LOOKUP], max_length=1 << 16) == ToolCall("lookup", {"q": "x"})
