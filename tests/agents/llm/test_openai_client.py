"""``verigym serve-model`` against the official ``openai`` client, for real over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time

import gymnasium as gym
import pytest

import verigym  # noqa: F401 - registers the ids
from tests.scripted_decoder import ScriptedDecoder
from verigym.agents.llm.policy import TransformersPolicy
from verigym.leaderboards.agent_spec import parse_agent_spec
from verigym.serve.model.server import make_server

openai = pytest.importorskip("openai")


class ScriptedPolicy(TransformersPolicy):
    """The tiny model, whose replies are a fixed text (to drive the tool-call path), and which keeps
    the last prompt it rendered."""

    reply = ""
    delay = 0.0
    generated = 0

    def decoder(self):
        return ScriptedDecoder(self)

    def encode_messages(self, messages):
        self.prompts = [
            self.chat.render(messages)
        ]  # the tiny vocabulary cannot spell JSON: keep the text
        return super().encode_messages(messages)


def _serve(policy):
    httpd = make_server(policy, port=0, model_name="tiny")
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    return httpd, thread


@pytest.fixture(scope="module")
def client(tiny_model_dir):
    httpd, thread = _serve(TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu"))
    yield openai.OpenAI(base_url=httpd.base_url, api_key="unused", timeout=60, max_retries=0)
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def scripted(tiny_model_dir):
    base = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    policy = ScriptedPolicy(base.model, base.tokenizer)
    policy.max_context_tokens = 1 << 16  # replies are scripted: the tool envs' long prompts fit
    httpd, thread = _serve(policy)
    yield policy, httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


def test_usage_counts_the_prompt_once(client):
    one = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    three = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=3,
        n=3,
        temperature=0.7,
    )
    assert len(three.choices) == 3 and three.usage.prompt_tokens == one.usage.prompt_tokens
    assert three.usage.completion_tokens == sum(
        len(c.model_extra["token_ids"]) for c in three.choices
    )
    assert three.usage.total_tokens == three.usage.prompt_tokens + three.usage.completion_tokens


def test_unknown_model_is_refused_as_openai_does(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(
            model="gpt-9", messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
    assert caught.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2, top_logprobs=3
        )


def test_list_of_parts_logprobs_and_token_ids(client):
    parts = [{"type": "text", "text": "h"}, {"type": "text", "text": "i"}]
    answer = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": parts}],
        max_tokens=5,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
    )
    same = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=5, temperature=0
    )
    choice = answer.choices[0]
    assert choice.message.content == same.choices[0].message.content
    ids = choice.model_extra["token_ids"]
    assert len(choice.logprobs.content) == len(ids) == answer.usage.completion_tokens
    for entry in choice.logprobs.content:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[-1].logprob
        assert entry.logprob == pytest.approx(
            entry.top_logprobs[0].logprob, abs=1e-4
        )  # greedy picks the top token


def test_stream_matches_the_plain_answer(client):
    kwargs = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "stream"}],
        "max_tokens": 6,
        "temperature": 0,
    }
    plain = client.chat.completions.create(**kwargs)
    chunks = list(
        client.chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **kwargs
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == plain.choices[
        0
    ].finish_reason
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_legacy_completions(client):
    answer = client.completions.create(
        model="tiny", prompt=["ab", "cd"], max_tokens=4, temperature=0, logprobs=2
    )
    assert [c.index for c in answer.choices] == [0, 1] and answer.object == "text_completion"
    for choice in answer.choices:
        assert (
            len(choice.logprobs.tokens)
            == len(choice.logprobs.token_logprobs)
            == len(choice.model_extra["token_ids"])
        )
        assert all(len(top) <= 2 for top in choice.logprobs.top_logprobs)
    assert answer.usage.completion_tokens == sum(
        len(c.model_extra["token_ids"]) for c in answer.choices
    )


def test_tools_in_tool_calls_out(scripted):
    policy, httpd = scripted
    client = openai.OpenAI(base_url=httpd.base_url, api_key="unused", timeout=60, max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "calculate",
                "description": "evaluate",
                "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
            },
        }
    ]
    policy.reply = 'Let me compute.\n<tool_call>[{"name": "calculate", "arguments": {"expression": "6*7"}}]</tool_call>'
    answer = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "6*7?"}], tools=tools, max_tokens=16
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me compute."
    call = choice.message.tool_calls[0]
    assert call.function.name == "calculate" and call.function.arguments == '{"expression": "6*7"}'
    assert "<tools>" in policy.prompts[0] and '"calculate"' in policy.prompts[0]
    # the call and its result go back in; the template sees them in the Hermes form
    follow = [
        {"role": "user", "content": "6*7?"},
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "42"},
    ]
    policy.reply = "<answer>42</answer>"
    answer = client.chat.completions.create(
        model="tiny", messages=follow, tools=tools, max_tokens=16
    )
    assert (
        answer.choices[0].message.content == "<answer>42</answer>"
        and answer.choices[0].finish_reason == "stop"
    )
    assert (
        "<tool_response>\n42\n</tool_response>" in policy.prompts[0]
        and '<tool_call>{"name": "calculate"' in policy.prompts[0]
    )
    answer = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "x"}],
        tools=tools,
        tool_choice="none",
        max_tokens=16,
    )
    assert "<tools>" not in policy.prompts[0]


def test_openai_agent_sends_tools_and_plays_tool_calls(scripted):
    policy, httpd = scripted
    env = gym.make("verigym/Calculator-v0")
    spec = parse_agent_spec(
        f"openai:{httpd.base_url}#tiny?max_tokens=32&temperature=0&timeout=20&families=tool"
    )
    assert dict(spec.options) == {"max_tokens": 32, "temperature": 0, "timeout": 20}
    assert spec.covers("verigym/Calculator-v0") and not spec.covers("verigym/GuessNumber-v0")
    agent = spec.build(env)
    assert agent.config.timeout == 20 and agent.config.max_tokens == 32
    observation, info = env.reset(seed=1)
    agent.reset(seed=1)
    policy.reply = (
        '<tool_call>{"name": "calculate", "arguments": {"expression": "2+2"}}</tool_call>'
    )
    action = agent.act(observation, info)
    assert '"tool_calls"' in action and '"calculate"' in policy.prompts[0]
    observation, _, terminated, _, info = env.step(action)
    assert "action_error" not in info and not terminated and "[calculate result]\n4" in observation
    env.close()


def test_a_request_whose_client_left_is_not_generated(scripted):
    policy, httpd = scripted
    policy.reply, policy.delay, policy.generated = "ok", 2.0, 0
    client = openai.OpenAI(base_url=httpd.base_url, api_key="unused", timeout=60, max_retries=0)
    first = threading.Thread(
        target=client.chat.completions.create,
        kwargs={"model": "tiny", "messages": [{"role": "user", "content": "a"}], "max_tokens": 2},
    )
    first.start()
    time.sleep(0.5)  # the first request's batch is generating (2 s)
    body = json.dumps(
        {"model": "tiny", "messages": [{"role": "user", "content": "b"}], "max_tokens": 2}
    ).encode()
    host, port = httpd.server_address[:2]
    with socket.create_connection((host, port)) as raw:  # a client that leaves before its answer
        raw.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
    first.join(timeout=30)
    time.sleep(3.0)
    policy.delay = 0.0
    assert policy.generated == 1  # only the first request was sampled
