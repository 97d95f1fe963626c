"""LoRA adapters served beside the base model (``verigym serve-model --lora NAME=DIR``, issue 42):
the base model's rows and an adapter's share one running batch, and each gets the tokens it gets
alone (the adapter's: those of the adapter merged into the weights, as the in-process ``llm:``
agent plays it)."""

from __future__ import annotations

import argparse
import json
import urllib.request

import pytest
import torch

from tests.serve.model_servers import built, running
from verigym.agents.llm.openai_agent import (
    ChatCompletionError,
    OpenAIAgent,
    OpenAIConfig,
    chat_completion,
)
from verigym.commands import serve_model as serve


@pytest.fixture(scope="module")
def adapter_dir(tiny_model_dir, tmp_path_factory):
    """A LoRA adapter of the tiny model whose B matrices are random (a fresh adapter is the base
    model: B starts at zero), so its replies differ from the base model's."""
    from verigym.agents.llm.policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    policy.add_lora(4)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, weight in policy.model.named_parameters():
            if "lora_B" in name:
                weight.copy_(torch.randn(weight.shape, generator=generator) * 0.5)
    folder = tmp_path_factory.mktemp("tiny-lora")
    policy.save_pretrained(folder)
    return folder


def _alone(model_dir, adapter, prompts, **sampling):
    from verigym.agents.llm.policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(model_dir, device="cpu", adapter=adapter)
    return [policy.generate([p], **sampling)[0] for p in prompts]


def test_base_and_adapter_rows_share_a_batch_with_their_own_tokens(tiny_model_dir, adapter_dir):
    from verigym.agents.llm.policy import TransformersPolicy

    served = TransformersPolicy.from_pretrained(
        tiny_model_dir, device="cpu", prefix_cache_bytes=1 << 24
    )
    digest = served.serve_adapter("sft", adapter_dir)
    assert len(digest) == 64 and served.served_adapters == {"sft": digest}
    prompts = [
        served.encode_messages([{"role": "user", "content": text}])
        for text in ("hello there", "what is 2+2?")
    ]
    sampling = {"max_new_tokens": 10, "temperature": 0.0}
    base = _alone(tiny_model_dir, None, prompts, **sampling)
    merged = _alone(tiny_model_dir, adapter_dir, prompts, **sampling)
    assert [b.token_ids for b in base] != [m.token_ids for m in merged]  # the adapter matters
    decoder = served.decoder()
    replies = {}
    adapter_keys = decoder.add(prompts, adapter="sft", **sampling)
    replies.update(decoder.step())
    replies.update(decoder.step())
    # base rows join the adapter's running batch; the same prompts again under the adapter reuse
    # its cached keys/values, never the base model's (and the base rows never the adapter's)
    base_keys = decoder.add(prompts, **sampling)
    again = decoder.add(prompts[:1], adapter="sft", **sampling)
    while len(decoder):
        replies.update(decoder.step())
    for keys, expected in ((adapter_keys, merged), (base_keys, base), (again, merged[:1])):
        for key, alone in zip(keys, expected):
            assert replies[key].token_ids == alone.token_ids
            assert replies[key].text == alone.text
            assert max(abs(a - b) for a, b in zip(replies[key].log_probs, alone.log_probs)) < 1e-4
    with pytest.raises(ValueError, match="no adapter"):
        decoder.add(prompts, adapter="other", **sampling)
    # a whole-model pass (tool_choice "required" scores each tool's opening) runs under the
    # request's adapter too, and leaves the model as it found it
    from verigym.agents.llm.policy import TransformersPolicy
    from verigym.serve.model.tool_choice import score_openings

    openings = [[5, 6, 7], [8, 9]]
    for adapter, folder in (("sft", adapter_dir), (None, None)):
        alone = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu", adapter=folder)
        got = score_openings(served, prompts[0], openings, adapter)
        want = score_openings(alone, prompts[0], openings)
        assert max(abs(a - b) for a, b in zip(got, want)) < 1e-4, (adapter, got, want)
    assert served.model.active_adapter == "sft"


def test_an_adapter_is_served_as_its_own_model(tiny_model_dir, adapter_dir):
    from verigym.agents.llm.policy import TransformersPolicy

    messages = [{"role": "user", "content": "hello there"}]

    merged = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu", adapter=adapter_dir)
    base = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    expected = {
        "sft": merged.chat_complete([messages], max_new_tokens=8, temperature=0.0)[0],
        "tiny": base.chat_complete([messages], max_new_tokens=8, temperature=0.0)[0],
    }
    with running(
        built(tiny_model_dir, "--model-name", "tiny", "--lora", f"sft={adapter_dir}")
    ) as s:
        with urllib.request.urlopen(s.base_url + "/models", timeout=30) as response:
            models = {m["id"]: m for m in json.loads(response.read())["data"]}
        assert set(models) == {"tiny", "sft"} and models["sft"]["parent"] == "tiny"
        assert models["sft"]["adapter_sha256"] == s.policy.served_adapters["sft"]
        for model in ("sft", "tiny", "sft"):
            answer = chat_completion(
                s.base_url,
                {"model": model, "messages": messages, "max_tokens": 8, "temperature": 0},
                max_retries=0,
            )
            assert answer["model"] == model
            assert answer["choices"][0]["token_ids"] == expected[model].token_ids
        with pytest.raises(ChatCompletionError, match="404"):
            chat_completion(s.base_url, {"model": "other", "messages": messages}, max_retries=0)
        # the openai agent with adapter=DIR plays only a model the server serves with that adapter
        config = {"base_url": s.base_url, "adapter": str(adapter_dir), "max_tokens": 4}
        agent = OpenAIAgent(OpenAIConfig(model="sft", **config))
        assert isinstance(agent.act("hello there", {}, deterministic=True), str)
        with pytest.raises(ChatCompletionError, match="adapter digest None"):
            OpenAIAgent(OpenAIConfig(model="tiny", **config)).act("hello there", {})


def test_an_openai_row_with_an_adapter_is_keyed_by_its_contents(adapter_dir, tmp_path):
    import shutil

    from verigym.leaderboards.agent_spec import parse_agent_spec

    copy = shutil.copytree(adapter_dir, tmp_path / "copy")
    spec = "openai:http://127.0.0.1:1/v1#sft?adapter={}&native_tools=false"
    before = parse_agent_spec(spec.format(copy)).config_hash()
    config = copy / "adapter_config.json"
    config.write_text(config.read_text().replace('"lora_dropout": 0.0', '"lora_dropout": 0.1'))
    assert parse_agent_spec(spec.format(copy)).config_hash() != before


@pytest.mark.parametrize("spec", ["sft", "=DIR", "bad name=DIR", "__base__=DIR", "sft=missing"])
def test_bad_lora_flags_are_one_line_errors(tiny_model_dir, adapter_dir, spec, capsys):
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    spec = spec.replace("DIR", str(adapter_dir))
    args = parser.parse_args([str(tiny_model_dir), "--port", "0", "--lora", spec])
    assert serve.run(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("verigym serve-model: ") and "\n" not in err
