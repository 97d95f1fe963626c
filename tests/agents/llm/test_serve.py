"""``verigym serve`` and the OpenAI-compatible agent, for real over HTTP on 127.0.0.1."""

from __future__ import annotations

import argparse
import json
import threading
import urllib.error
import urllib.request

import gymnasium as gym
import pytest

import verigym  # noqa: F401
import verigym.agents
from verigym.agents.llm.agent import ChatHistory
from verigym.agents.llm.openai_agent import ChatCompletionError, OpenAIAgent, chat_completion
from verigym.commands import serve
from verigym.wrappers.language import LanguageWrapper


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    args = parser.parse_args([str(tiny_model_dir), "--port", "0", "--device", "cpu", "--model-name", "tiny"])
    httpd = serve.build(args)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def test_models_and_health(server):
    assert _get(server.base_url + "/models")["data"][0]["id"] == "tiny"
    assert _get(server.base_url.removesuffix("/v1") + "/health") == {"status": "ok"}


def test_chat_completion_shape_and_n(server):
    answer = chat_completion(server.base_url, {"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                                               "max_tokens": 4, "temperature": 0.5, "n": 3})
    assert answer["object"] == "chat.completion" and len(answer["choices"]) == 3
    for i, choice in enumerate(answer["choices"]):
        assert choice["index"] == i and choice["message"]["role"] == "assistant"
        assert isinstance(choice["message"]["content"], str) and choice["finish_reason"] in ("stop", "length")
    assert 0 < answer["usage"]["completion_tokens"] <= 12


def test_bad_requests_get_400_without_retries(server):
    for payload in ({"messages": []}, {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
                    {"messages": [{"role": "user", "content": 3}]}):
        with pytest.raises(ChatCompletionError, match="HTTP 400"):
            chat_completion(server.base_url, payload, max_retries=0)
    with pytest.raises(urllib.error.HTTPError):
        _get(server.base_url + "/nothing")


def test_concurrent_requests_are_all_answered(server):
    results, errors = [], []

    def ask(i):
        try:
            out = chat_completion(server.base_url, {"messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 3})
            results.append(out["choices"][0]["message"]["content"])
        except Exception as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(results) == 6


def test_openai_agent_plays_an_env_through_serve(server):
    env = LanguageWrapper(gym.make("verigym/GuessNumber-v0"))
    agent = verigym.agents.make("openai", env, base_url=server.base_url, model="tiny", max_tokens=4, timeout=30,
                                max_context_chars=700)
    assert isinstance(agent, OpenAIAgent)
    observation, info = env.reset(seed=0)
    agent.reset(seed=0)
    done, turns = False, 0
    while not done:
        action = agent.act(observation, info)
        assert isinstance(action, str)
        observation, reward, terminated, truncated, info = env.step(action)
        done, turns = terminated or truncated, turns + 1
    assert "success" in info and 0.0 <= info["score"] <= 1.0
    # the conversation alternates user/assistant, trimmed to the budget around the first observation
    roles = [m["role"] for m in agent.history.messages]
    assert 1 <= roles.count("assistant") <= turns and roles[-1] == "assistant"
    assert roles[:2] == ["system", "user"] and "Turn 0/" in agent.history.messages[1]["content"]
    env.close()


def test_agent_retries_then_fails_on_a_dead_server():
    agent = OpenAIAgent.from_env(None, base_url="http://127.0.0.1:9/v1", timeout=1, max_retries=1)
    with pytest.raises(ChatCompletionError, match="2 attempts"):
        agent.act("hello")


def test_history_trims_oldest_turns_to_the_budget():
    history = ChatHistory(lambda messages: sum(len(m["content"]) for m in messages), budget=30)
    history.observe("first observation", {"instructions": "rules"})
    for i in range(5):
        history.reply(f"reply {i}")
        messages = history.observe(f"obs {i}", {})
    assert messages[0] == {"role": "system", "content": "rules"}
    assert messages[1]["content"] == "first observation" and messages[-1]["content"] == "obs 4"
    assert sum(len(m["content"]) for m in messages) <= 30 or len(messages) == 4


def test_dtype_option_loads_bfloat16_weights_and_answers(tiny_model_dir):
    """``serve --dtype bfloat16`` holds the weights (and so the KV cache) in bfloat16; float32 by default on CPU."""
    import torch

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    for option, expected in (([], torch.float32), (["--dtype", "bfloat16"], torch.bfloat16)):
        httpd = serve.build(parser.parse_args([str(tiny_model_dir), "--port", "0", "--device", "cpu", *option]))
        try:
            policy = httpd.policy
            assert next(policy.model.parameters()).dtype == expected
            [reply] = policy.generate([[1, 2, 3]], max_new_tokens=3, temperature=0)
            assert len(reply.token_ids) >= 1
        finally:
            httpd.batcher.stop()
            httpd.server_close()
