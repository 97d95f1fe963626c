"""``verigym serve-model``: tool_choice enforced, response_format refused, the Starlette app's
shared error shape, token and concurrency (issue 33 §3d), over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.scripted_decoder import ScriptedDecoder
from tests.serve import post_json
from tests.serve.model_servers import running
from verigym.agents.llm.policy import TransformersPolicy
from verigym.serve.model.server import make_server
from verigym.serve.model.tool_choice import draw, tool_call_opening

openai = pytest.importorskip("openai")

TOOLS = [
    {"type": "function", "function": {"name": name}} for name in ("calculate", "search", "lookup")
]
"""Three tools without schemas: the Hermes section of three full ones overflows the tiny model's
1024-token context (one token a character)."""
HI = [{"role": "user", "content": "hi"}]


class RecordingPolicy(TransformersPolicy):
    """The tiny model, keeping the prompts it was asked to continue; with ``reply`` set, that text
    is the continuation (the tiny vocabulary cannot spell JSON); with ``hold`` set, generation
    waits for it."""

    reply: str | None = None
    hold: threading.Event | None = None

    def decoder(self):
        return ScriptedDecoder(self)


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    base = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    policy = RecordingPolicy(base.model, base.tokenizer)
    with running(make_server(policy, port=0, model_name="tiny")) as httpd:
        client = openai.OpenAI(base_url=httpd.base_url, api_key="unused", timeout=60, max_retries=0)
        yield policy, httpd, client


@pytest.fixture
def policy(served):
    policy = served[0]
    policy.reply, policy.hold = None, None
    return policy


def _post(base_url, path, payload, headers=None):
    return post_json(base_url + path, payload, headers)


def test_named_function_forces_a_call_of_it_from_the_real_model(served, policy):
    _, _, client = served
    opening = policy.chat.encode(tool_call_opening("search"))
    answer = client.chat.completions.create(
        model="tiny",
        messages=HI,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "search"}},
        max_tokens=8,
        temperature=1.0,
        n=2,
    )
    assert len(answer.choices) == 2
    for choice in answer.choices:
        assert choice.message.content is None
        assert choice.finish_reason in ("tool_calls", "length")
        [call] = choice.message.tool_calls
        assert call.type == "function" and call.function.name == "search"
        assert isinstance(call.function.arguments, str)
    # the model continued the Hermes opening (up to the arguments' brace): the prompt ends with it
    assert all(p[-len(opening) :] == opening for p in policy.seen)
    sampled = sum(len(c.model_extra["token_ids"]) for c in answer.choices)
    assert answer.usage.completion_tokens == sampled + 2 * len(opening)


def test_forced_call_arguments_are_the_json_the_model_wrote(served, policy):
    _, _, client = served
    named = {"type": "function", "function": {"name": "calculate"}}
    policy.reply = '"expression": "6*7"}}\n</tool_call>'
    answer = client.chat.completions.create(
        model="tiny", messages=HI, tools=TOOLS, tool_choice=named, max_tokens=16
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.function.name == "calculate"
    assert json.loads(call.function.arguments) == {"expression": "6*7"}
    # not JSON: the raw text comes back (the call's closing brace dropped), still a call of it
    policy.reply = "expression: 6*7}}</tool_call>"
    answer = client.chat.completions.create(
        model="tiny", messages=HI, tools=TOOLS, tool_choice=named, max_tokens=16
    )
    [call] = answer.choices[0].message.tool_calls
    assert call.function.name == "calculate" and call.function.arguments == "{expression: 6*7}"
    # streamed: the call arrives as a tool_calls delta
    policy.reply = '"expression": "1+1"}}'
    chunks = list(
        client.chat.completions.create(
            model="tiny", messages=HI, tools=TOOLS, tool_choice=named, max_tokens=16, stream=True
        )
    )
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta]
    [[streamed]] = [d for d in deltas if d]
    assert streamed.function.name == "calculate"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_required_keeps_further_calls_unless_parallel_tool_calls_is_false(served, policy):
    _, _, client = served
    policy.reply = (
        '"expression": "1"}}\n</tool_call>\n<tool_call>\n'
        '{"name": "lookup", "arguments": {"expression": "2"}}\n</tool_call>'
    )
    one_tool = TOOLS[2:]
    answer = client.chat.completions.create(
        model="tiny", messages=HI, tools=one_tool, tool_choice="required", max_tokens=16
    )
    calls = answer.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["lookup", "lookup"]
    assert json.loads(calls[1].function.arguments) == {"expression": "2"}
    answer = client.chat.completions.create(
        model="tiny",
        messages=HI,
        tools=one_tool,
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=16,
    )
    assert len(answer.choices[0].message.tool_calls) == 1


def test_required_with_several_tools_calls_the_most_likely_opening_at_temperature_0(served, policy):
    import torch

    _, _, client = served
    answer = client.chat.completions.create(
        model="tiny",
        messages=HI,
        tools=TOOLS,
        tool_choice="required",
        max_tokens=4,
        temperature=0,
        n=2,
    )
    names = {c.message.tool_calls[0].function.name for c in answer.choices}
    assert len(names) == 1  # greedy: every choice calls the same function
    [name] = names
    # the chosen function's opening is the most likely after the prompt (a plain forward pass)
    prompt = policy.seen[0][: -len(policy.chat.encode(tool_call_opening(name)))]
    scores = {}
    for tool in ("calculate", "search", "lookup"):
        opening = policy.chat.encode(tool_call_opening(tool))
        with torch.no_grad():
            logits = policy.model(torch.tensor([prompt + opening])).logits[0].float()
        log_p = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
        scores[tool] = float(log_p.gather(-1, torch.tensor(opening)[:, None]).sum())
    assert name == max(scores, key=scores.get), scores


def test_draw_follows_the_scores():
    names = ["a", "b", "c"]
    assert draw(names, [-3.0, -1.0, -2.0], 0.0, 4) == ["b"] * 4
    assert draw(names, [-500.0, -1.0, -400.0], 1.0, 20) == ["b"] * 20
    assert set(draw(names, [-1.0, -1.0, -1.0], 1.0, 200)) == set(names)


@pytest.mark.parametrize(
    ("options", "param", "code"),
    [
        ({"response_format": {"type": "json_object"}}, "response_format", "unsupported_value"),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {}},
                }
            },
            "response_format",
            "unsupported_value",
        ),
        ({"response_format": {"type": "yaml"}}, "response_format", None),
        ({"tool_choice": "required"}, "tool_choice", None),  # no tools
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice",
            None,
        ),
        ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", None),
        ({"tools": TOOLS * 50}, "tools", None),
        (  # a control character: no name can pass for the "required" marker
            {"tools": [{"type": "function", "function": {"name": "\x00required"}}]},
            "tools",
            None,
        ),
        ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls", None),
        # sampling fields the server does not implement: refused, never silently ignored (issue 42)
        ({"logit_bias": {"5": 100}}, "logit_bias", "unsupported_value"),
        ({"logit_bias": [5]}, "logit_bias", None),
        ({"frequency_penalty": 0.5}, "frequency_penalty", "unsupported_value"),
        ({"frequency_penalty": 3}, "frequency_penalty", None),
        ({"presence_penalty": -1}, "presence_penalty", "unsupported_value"),
        ({"presence_penalty": "1"}, "presence_penalty", None),
        (
            {"tools": [TOOLS[0], {"type": "function", "function": {"name": "f", "strict": True}}]},
            "tools[1].function.strict",
            "unsupported_value",
        ),
    ],
)
def test_unenforceable_or_bad_options_are_400_in_the_shared_error_shape(
    served, options, param, code
):
    _, httpd, _ = served
    status, body = _post(
        httpd.base_url,
        "/chat/completions",
        {"model": "tiny", "messages": HI, "max_tokens": 2, **options},
    )
    assert status == 400, body
    error = body["error"]
    assert (
        error["param"] == param
        and error["code"] == code
        and error["type"] == "invalid_request_error"
    )
    assert body["detail"] == error["message"] and body["code"] == (code or "invalid_request_error")
    if code:
        assert "not supported" in error["message"]


def test_unsupported_sampling_fields_are_refused_on_both_endpoints_and_neutral_values_pass(served):
    """logit_bias, frequency_penalty, presence_penalty and a strict tool: what the sampler does not
    apply is a 400 naming the field (also on /v1/completions, through the OpenAI client); the
    neutral values some clients always send are accepted."""
    _, httpd, client = served
    for field, value in (
        ("logit_bias", {"5": -100}),
        ("frequency_penalty", 1.0),
        ("presence_penalty", 0.5),
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            client.completions.create(model="tiny", prompt="hi", max_tokens=2, **{field: value})
        assert caught.value.param == field and caught.value.code == "unsupported_value"
        assert field in caught.value.body["message"]
    tool = {"type": "function", "function": {"name": "calculate", "parameters": {}, "strict": True}}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="tiny", messages=HI, max_tokens=2, tools=[tool])
    assert caught.value.param == "tools[0].function.strict" and "strict" in caught.value.message
    neutral = {"logit_bias": {}, "frequency_penalty": 0, "presence_penalty": 0.0}
    tool["function"]["strict"] = False
    answer = client.chat.completions.create(
        model="tiny", messages=HI, max_tokens=2, tools=[tool], **neutral
    )
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert client.completions.create(model="tiny", prompt="hi", max_tokens=2, **neutral).choices


def test_response_format_is_refused_through_the_openai_client(served):
    _, _, client = served
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="tiny", messages=HI, max_tokens=2, response_format={"type": "json_object"}
        )
    assert caught.value.code == "unsupported_value" and caught.value.param == "response_format"
    answer = client.chat.completions.create(
        model="tiny", messages=HI, max_tokens=2, response_format={"type": "text"}
    )
    assert answer.choices[0].message.tool_calls is None


def test_unknown_route_wrong_method_and_oversized_body(served):
    _, httpd, _ = served
    root = httpd.base_url.removesuffix("/v1")
    for url, data, status in (
        (root + "/nothing", None, 404),
        (httpd.base_url + "/chat/completions", None, 405),  # a GET
    ):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=30)
        body = json.loads(caught.value.read())
        assert caught.value.code == status and body["detail"] == body["error"]["message"]
    request = urllib.request.Request(
        httpd.base_url + "/chat/completions",
        data=b"{}",
        headers={"Content-Length": str(64 << 20)},
        method="POST",
    )
    status, body = _post_raw(request)  # refused by the front door before the body is read
    assert status == 413 and f"at most {8 << 20} bytes" in body["detail"]


def _post_raw(request):
    import http.client

    url = urllib.parse.urlsplit(request.full_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.putrequest("POST", url.path)
        for name, value in request.header_items():
            connection.putheader(name, value)
        connection.endheaders()
        connection.send(request.data)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_health_is_answered_while_a_batch_generates(served, policy):
    _, httpd, client = served
    policy.reply, policy.hold, policy.started = "ok", threading.Event(), threading.Event()
    results = []
    asker = threading.Thread(
        target=lambda: results.append(
            client.chat.completions.create(model="tiny", messages=HI, max_tokens=2)
        )
    )
    asker.start()
    try:
        assert policy.started.wait(30)  # the batcher thread is inside generate()
        with urllib.request.urlopen(
            httpd.base_url.removesuffix("/v1") + "/health", timeout=10
        ) as response:
            assert json.loads(response.read()) == {"status": "ok"}
        assert not results  # still generating
    finally:
        policy.hold.set()
        asker.join(timeout=30)
    assert results and results[0].choices[0].message.content == "ok"


def test_a_token_is_required_on_every_request_when_set(policy):
    with running(make_server(policy, port=0, model_name="tiny", token="s3cret")) as httpd:
        status, body = _post(httpd.base_url, "/chat/completions", {"messages": HI})
        assert status == 401 and "token" in body["detail"]
        status, _ = _post(
            httpd.base_url,
            "/chat/completions",
            {"messages": HI, "max_tokens": 2},
            headers={"Authorization": "Bearer s3cret"},
        )
        assert status == 200
        client = openai.OpenAI(base_url=httpd.base_url, api_key="s3cret", max_retries=0)
        assert client.models.list().data[0].id == "tiny"
    with pytest.raises(ValueError, match="without a token"):
        make_server(policy, host="0.0.0.0", port=0)
