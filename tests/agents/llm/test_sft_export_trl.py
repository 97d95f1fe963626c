"""``verigym export --format sft --protocol tools`` records train under TRL's ``SFTTrainer`` with a
tool-aware chat template (issue 42 §4): one protocol per record, ``arguments`` a mapping (rendered
once as JSON, never a JSON string inside JSON), the schemas once, no text-protocol instructions in
the system text, and the tool calls' tokens inside the loss mask."""

from __future__ import annotations

import json
import math

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed: pip install 'verigym[trl]'")
datasets = pytest.importorskip("datasets")

PRINTABLE = "".join(chr(c) for c in range(32, 127)) + "\n"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Oracle demonstrations of two tool envs, exported by the command a user runs."""
    from verigym.cli import main

    path = tmp_path_factory.mktemp("export") / "demos.jsonl"
    code = main(
        ["export", "--format", "sft", "--play", "oracle", "--protocol", "tools"]
        + ["--env", "verigym/Calculator-v0", "--env", "verigym/SQL-v0", "--seeds", "0:2"]
        + ["--path", str(path)]
    )
    assert code == 0
    return path


def test_tools_protocol_records_are_native_and_say_each_thing_once(exported):
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert {r["env_id"] for r in records} == {"verigym/Calculator-v0", "verigym/SQL-v0"}
    for record in records:
        assert record["protocol"] == "tools"
        system = record["messages"][0]
        assert system["role"] == "system"
        for text_protocol in ("<tool_call>", "<answer>", "Tools (OpenAI function-calling schemas)"):
            assert text_protocol not in system["content"]
        names = [t["function"]["name"] for t in record["tools"]]
        assert names[-1] == "answer" and len(set(names)) == len(names)
        calls = [c for m in record["messages"] for c in m.get("tool_calls") or []]
        assert calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)
        assert calls[-1]["function"]["name"] == "answer"
        assert not any("<tool_call>" in (m.get("content") or "") for m in record["messages"])


def test_protocol_record_writes_one_protocol_or_says_why_not():
    from verigym.leaderboards.demonstrations import demonstration_messages, protocol_record

    tool = {"type": "function", "function": {"name": "calculate", "parameters": {}}}
    call = '<tool_call>{"name": "calculate", "arguments": {"expression": "1 + 2"}}</tool_call>'
    messages = demonstration_messages("Compute.", ["1 + 2?", "3"], [call, "<answer>3</answer>"])
    text = protocol_record("e", 0, "oracle", 1.0, messages, [tool])
    assert text["tools"] == [] and all(set(m) == {"role", "content"} for m in text["messages"])
    assert text["messages"][2]["content"] == call and text["messages"][3]["role"] == "user"
    native = protocol_record("e", 0, "oracle", 1.0, messages, [tool], "tools")
    assert [c["function"] for m in native["messages"] for c in m.get("tool_calls") or []] == [
        {"name": "calculate", "arguments": {"expression": "1 + 2"}},
        {"name": "answer", "arguments": {"answer": "3"}},
    ]
    assert native["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "3"}
    chatty = demonstration_messages("Compute.", ["1 + 2?", "3"], [call, "It is <answer>3</answer>"])
    assert "beside its <answer>" in protocol_record("e", 0, "o", 1.0, chatty, [tool], "tools")
    clash = {"type": "function", "function": {"name": "answer", "parameters": {}}}
    assert "named 'answer'" in protocol_record("e", 0, "o", 1.0, messages, [clash], "tools")
    with pytest.raises(ValueError, match="protocol"):
        protocol_record("e", 0, "o", 1.0, messages, [tool], "hermes")


def test_verigym_train_sft_refuses_tools_protocol_records(exported):
    """verigym's trainer trains on the text view's protocol the agent plays in: a tools-protocol
    record would train it on a system text the agent never sees."""
    from verigym.agents.llm.sft import load_records

    with pytest.raises(ValueError, match="--protocol text"):
        load_records(exported)


@pytest.mark.slow
def test_sft_trainer_trains_three_steps_with_tool_calls_in_the_loss_mask(exported, tmp_path):
    """3 real SFTTrainer steps on a tiny model with TRL's qwen2_5 template, the export loaded with
    ``datasets`` (mixed tools: Calculator's and SQL's arguments differ)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    from verigym.agents.llm.tiny import build_tiny_model

    path = build_tiny_model(
        tmp_path / "model",
        alphabet=PRINTABLE,
        chat_template=qwen2_5_chat_template,
        max_position_embeddings=4096,
    )
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    dataset = datasets.load_dataset("json", data_files=str(exported), split="train")
    args = trl.SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=3,
        per_device_train_batch_size=1,
        max_length=4096,  # one token a character: a record is ~2,600
        learning_rate=1e-3,
        assistant_only_loss=True,  # TRL swaps in qwen2_5's training template (generation markers)
        use_cpu=True,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = trl.SFTTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    assert len(trainer.train_dataset) == 4
    for example in trainer.train_dataset:
        ids = example["input_ids"]
        mask = [label != -100 for label in example["labels"]]  # the loss mask
        whole = tokenizer.decode(ids)
        trained = tokenizer.decode([t for t, m in zip(ids, mask) if m])
        context = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
        # the env tool's call and the answer call: rendered by the template, trained on
        assert '<tool_call>\n{"name": "' in trained
        assert '{"name": "answer", "arguments": {"answer": "' in trained
        assert '"arguments": "' not in whole  # no JSON string inside JSON
        assert ": null" not in whole  # no struct filled in by datasets
        # after the system turn (whose tools section names the format), tool calls are never context
        assert "<tool_call>" not in context.split("<|im_end|>", 1)[1]
        assert whole.count('"name": "answer", "description"') == 1  # the schema once
        assert "<answer>" not in whole
    result = trainer.train()
    assert result.global_step == 3
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 3 and all(math.isfinite(x) and x > 0 for x in losses)
