"""Demonstrations -> SFT -> LoRA adapters: export format, encoding, learning, adapter save/load, specs."""

from __future__ import annotations

import json

import pytest
import torch

from verigym.agents.llm.policy import TransformersPolicy
from verigym.agents.llm.sft import SFTConfig, SupervisedTrainer, encode_example, load_records
from verigym.leaderboards.demonstrations import (
    demonstration_messages,
    play_demonstrations,
    tool_call_of,
)
from verigym.toolcalls import messages_to_text

CALL = '<tool_call>{"name": "calculate", "arguments": {"expression": "1 + 2"}}</tool_call>'


def test_demonstration_messages_use_native_tool_calls_and_invert_to_the_text_protocol():
    messages = demonstration_messages(
        "rules", ["Compute: 1 + 2", "[calculate result]\n3"], [CALL, "<answer>3</answer>"]
    )
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    call = messages[2]["tool_calls"][0]
    assert call["function"] == {"name": "calculate", "arguments": '{"expression": "1 + 2"}'}
    assert messages[3]["tool_call_id"] == call["id"] and messages[2]["content"] == ""
    plain = messages_to_text(messages)
    assert plain[2] == {"role": "assistant", "content": CALL}  # what the env parses, exactly
    assert plain[3] == {"role": "user", "content": "[calculate result]\n3"}
    assert tool_call_of("say <tool_call>{}</tool_call>") is None
    assert tool_call_of('<tool_call>{"name": 3}</tool_call>') is None
    with pytest.raises(ValueError):
        messages_to_text(
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]
        )


def test_oracle_demonstrations_are_training_seeds_only_and_replay_as_text():
    records = list(play_demonstrations(["verigym/Calculator-v0"], range(2), protocol="tools"))
    assert len(records) == 2 and all(r["seed"] < 1_000_000 for r in records)
    assert records[0]["tools"][0]["function"]["name"] == "calculate"
    roles = [m["role"] for m in records[0]["messages"]]
    assert roles[:2] == ["system", "user"] and "tool" in roles and roles[-1] == "assistant"
    # the default, text protocol: the text view's messages, the schemas in the system text only
    (text,) = play_demonstrations(["verigym/Calculator-v0"], range(1))
    assert text["protocol"] == "text" and text["tools"] == []
    assert {m["role"] for m in text["messages"]} == {"system", "user", "assistant"}
    with pytest.raises(ValueError, match="training seeds"):
        list(play_demonstrations(["verigym/Calculator-v0"], [1_000_000]))


def test_export_sft_command_plays_the_oracle_and_refuses_evaluation_seeds(tmp_path, capsys):
    from verigym.cli import main

    out = tmp_path / "demos.jsonl"
    code = main(
        ["export", "--format", "sft", "--play", "oracle", "--env", "verigym/GuessNumber-v0"]
        + ["--seeds", "6:8", "--path", str(out)]  # seeds 0-2 draw evaluation tasks (held out)
    )
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 2 and lines[0]["messages"][-1]["role"] == "assistant"
    assert load_records(out)[0]["env_id"] == "verigym/GuessNumber-v0"
    bad = main(
        ["export", "--format", "sft", "--play", "oracle", "--env", "verigym/GuessNumber-v0"]
        + ["--seeds", "999999:1000001", "--path", str(tmp_path / "x.jsonl")]
    )
    assert bad == 2 and not (tmp_path / "x.jsonl").exists()
    assert "evaluation seeds" in capsys.readouterr().err


def test_load_records_refuses_malformed_data(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "robot", "content": "x"}]}) + "\n")
    with pytest.raises(ValueError, match="role"):
        load_records(path)
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}]}) + "\n")
    with pytest.raises(ValueError, match="assistant"):
        load_records(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match="not JSON"):
        load_records(path)


@pytest.fixture(scope="module")
def json_model_dir(tmp_path_factory):
    """A tiny model whose alphabet spells JSON tool calls."""
    from verigym.agents.llm.tiny import DEFAULT_ALPHABET, build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("tiny-json"), alphabet=DEFAULT_ALPHABET + '_{}"[]'
    )


def test_only_assistant_tokens_carry_loss(json_model_dir):
    policy = TransformersPolicy.from_pretrained(json_model_dir, device="cpu")
    chat = policy.chat
    messages = demonstration_messages(
        "rules", ["compute: 1 + 2", "result 3"], [CALL, "<answer>3</answer>"]
    )
    example = encode_example(chat, messages)
    trained = [t for t, m in zip(example.token_ids, example.loss_mask) if m]
    eos = policy.tokenizer.eos_token
    assert policy.tokenizer.decode(trained) == f"{CALL}{eos}<answer>3</answer>{eos}"
    # the whole sequence is the conversation as the agent renders it
    whole = chat.render(messages_to_text(messages), add_generation_prompt=False)
    assert policy.tokenizer.decode(example.token_ids) == whole.rstrip("\n")


def _records(n=12):
    letters = "abcd"
    return [
        {
            "messages": [
                {"role": "user", "content": f"say {letters[i % 4]}"},
                {"role": "assistant", "content": letters[i % 4]},
            ]
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("lora_r", [0, 4])
def test_sft_steps_lower_the_loss(tiny_model_dir, lora_r):
    policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    trainer = SupervisedTrainer(
        policy,
        _records(),
        SFTConfig(
            batch_size=4, learning_rate=1e-2 if lora_r else 3e-3, lora_r=lora_r, warmup_steps=0
        ),
    )
    before = trainer.mean_loss()
    for _ in range(4):
        for batch in trainer.batches():
            trainer.step(batch, total_steps=1000)
    assert trainer.mean_loss() < before - 0.5
    assert policy.has_adapter == bool(lora_r)
    if lora_r:  # only the adapters trained
        trainable = [n for n, p in policy.model.named_parameters() if p.requires_grad]
        assert trainable and all("lora_" in n for n in trainable)


def test_activation_checkpointing_trains_the_same_adapter(tiny_model_dir):
    """Recomputing activations changes memory, not the result: the same LoRA steps with and
    without it give the same weights (and the LoRA weights do move: gradients reach them through
    the checkpointed layers, whose frozen inputs need no gradient of their own)."""
    trained = []
    for checkpointing in (False, True):
        policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
        config = SFTConfig(batch_size=4, learning_rate=1e-2, lora_r=4, warmup_steps=0, seed=3)
        trainer = SupervisedTrainer(
            policy, _records(), config, gradient_checkpointing=checkpointing
        )
        layers = [m for m in policy.model.modules() if hasattr(m, "gradient_checkpointing")]
        assert layers and any(m.gradient_checkpointing for m in layers) == checkpointing
        start = {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_B" in n}
        for batch in trainer.batches():
            trainer.step(batch, total_steps=1000)
        weights = {n: p.detach().clone() for n, p in policy.model.named_parameters() if n in start}
        assert any(not torch.equal(weights[n], start[n]) for n in start)
        trained.append(weights)
    assert trained[0].keys() == trained[1].keys()
    for name, weight in trained[0].items():
        torch.testing.assert_close(trained[1][name], weight, rtol=1e-4, atol=1e-6)


def test_lora_save_writes_only_the_adapter_and_the_policy_loads_it(tmp_path, tiny_model_dir):
    policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    out = tmp_path / "adapter"
    trainer = SupervisedTrainer(
        policy,
        _records(8),
        SFTConfig(batch_size=4, epochs=2, learning_rate=1e-2, lora_r=4, output_dir=str(out)),
    )
    trainer.train()
    names = {p.name for p in out.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "train_log.jsonl"} <= names
    assert not names & {"model.safetensors", "config.json", "tokenizer.json"}
    assert (out / "adapter_model.safetensors").stat().st_size < 200_000
    loaded = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu", adapter=out)
    assert not loaded.has_adapter  # merged for inference
    prompt = policy.encode_messages([{"role": "user", "content": "say b"}])
    with torch.no_grad():
        ids = torch.tensor([prompt])
        assert torch.allclose(
            policy.model(input_ids=ids).logits, loaded.model(input_ids=ids).logits, atol=1e-4
        )
    base = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    with torch.no_grad():
        assert not torch.allclose(
            base.model(input_ids=ids).logits, loaded.model(input_ids=ids).logits, atol=1e-4
        )


def test_adapter_folders_are_checked(tmp_path, tiny_model_dir):
    from verigym.agents.llm.models import check_adapter

    with pytest.raises(FileNotFoundError, match="not a directory"):
        check_adapter(tmp_path / "missing")
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "adapter_model.bin").write_bytes(b"pickle")
    (folder / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    with pytest.raises(FileNotFoundError, match="pickled"):
        check_adapter(folder)
    (folder / "adapter_model.safetensors").write_bytes(b"")
    (folder / "adapter_config.json").write_text('{"peft_type": "PREFIX_TUNING"}')
    with pytest.raises(ValueError, match="LoRA"):
        check_adapter(folder)
    (folder / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 2}')
    with pytest.raises(ValueError, match="safetensors"):  # an empty weights file holds no rank
        check_adapter(folder)  # (test_adapter_checks.py has the well-formed folders)


def test_agent_spec_adapter_option_is_validated_and_hashed(tmp_path, tiny_model_dir):
    from verigym.leaderboards.agent_spec import parse_agent_spec

    with pytest.raises(ValueError, match="adapter"):
        parse_agent_spec(f"llm:{tiny_model_dir}?adapter={tmp_path / 'nope'}")
    policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    policy.add_lora(2)
    out = tmp_path / "ad"
    policy.save_pretrained(out)
    spec = parse_agent_spec(f"llm:{tiny_model_dir}?adapter={out}&max_new_tokens=4")
    assert dict(spec.options)["adapter"] == str(out)
    first = spec.config_hash()
    (out / "README.md").write_text("changed")
    assert parse_agent_spec(spec.text).config_hash() != first
    agent = spec.build(None, device="cpu")
    assert isinstance(agent.act("say a", {}), str)


def test_train_sft_command_line(tmp_path, tiny_model_dir, capsys):
    from verigym.cli import main

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _records(4)))
    out = tmp_path / "run"
    code = main(
        ["train", "sft", "--model", str(tiny_model_dir), "--data", str(data), "--out", str(out)]
        + ["--lora-r", "2", "--lora-target-modules", "q_proj,v_proj", "--epochs", "1"]
        + ["--device", "cpu", "--log-every", "1"]
    )
    assert code == 0
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["r"] == 2 and set(config["target_modules"]) == {"q_proj", "v_proj"}
    assert "adapter=" in capsys.readouterr().out
    assert (
        main(["train", "sft", "--model", str(tiny_model_dir), "--data", str(tmp_path / "no")]) == 2
    )
    # GRPO continues the SFT adapter and saves only the adapter
    grpo = tmp_path / "grpo"
    code = main(
        ["train", "grpo", "--model", str(tiny_model_dir), "--adapter", str(out)]
        + ["--env", "verigym/GuessNumber-v0", "--steps", "1", "--num-generations", "2"]
        + ["--groups-per-step", "1", "--max-new-tokens", "3", "--no-dynamic-sampling"]
        + ["--device", "cpu", "--out", str(grpo)]
    )
    assert code == 0
    names = {p.name for p in grpo.iterdir()}
    assert "adapter_model.safetensors" in names and "model.safetensors" not in names
    assert json.loads((grpo / "adapter_config.json").read_text())["r"] == 2
    bad = ["train", "grpo", "--model", str(tiny_model_dir), "--adapter", str(tmp_path)]
    assert main(bad + ["--env", "verigym/GuessNumber-v0"]) == 2


def test_grpo_with_lora_trains_only_adapters_and_saves_only_them(tmp_path, tiny_model_dir):
    from tests.agents.llm.tasks import EchoLetterEnv
    from verigym.agents.llm.grpo import GRPOTrainer

    policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    policy.add_lora(4)
    frozen = {
        n: p.detach().clone() for n, p in policy.model.named_parameters() if not p.requires_grad
    }
    trainer = GRPOTrainer(
        policy,
        EchoLetterEnv,
        num_generations=2,
        groups_per_step=1,
        max_new_tokens=2,
        learning_rate=1e-2,
        dynamic_sampling=False,
        output_dir=str(tmp_path / "g"),
    )
    trainer.train(1)
    trainer.close()
    for name, param in policy.model.named_parameters():
        if name in frozen:
            assert torch.equal(param, frozen[name]), name
    names = {p.name for p in (tmp_path / "g").iterdir()}
    assert "adapter_model.safetensors" in names and "model.safetensors" not in names


def test_stored_episodes_become_demonstrations_only_on_training_seeds():
    from types import SimpleNamespace

    from verigym.leaderboards.demonstrations import stored_demonstrations
    from verigym.leaderboards.episode import make_env, run_episode
    from verigym.leaderboards.store import trajectory_digest
    from verigym.leaderboards.trajectories import Recorder

    env_id = "verigym/GuessNumber-v0"
    blobs, rows = {}, []
    for seed in (3, 1_000_003):
        env = make_env(env_id, {}, False)  # the oracle plays the env itself (text_view False)
        agent = SimpleNamespace(
            act=lambda obs, info, deterministic=True, env=env: env.unwrapped.oracle_action()
        )
        recorder = Recorder(env, agent, env_id=env_id, env_kwargs={}, seed=seed, text_view=False)
        result = run_episode(agent, env, seed, recorder=recorder)
        env.close()
        row = SimpleNamespace(
            env_id=env_id,
            seed=seed,
            status="ok",
            success=result["success"],
            score=1.0,
            agent_spec="oracle",
            env_version=0,
            config_hash="c",
            env_kwargs="{}",
        )
        blobs[seed] = recorder.finish()[0]
        row.trajectory_digest = trajectory_digest(row, blobs[seed])  # bound, as the store writes it
        rows.append(row)
    store = SimpleNamespace(trajectory=lambda row: blobs[row.seed])
    refused: list = []
    records = list(stored_demonstrations(store, rows, refused))
    assert [r["seed"] for r in records] == [3]
    assert len(refused) == 1 and "evaluation seed" in refused[0][1]
    played = next(play_demonstrations([env_id], [3]))
    assert records[0]["messages"] == played["messages"]  # the same episode, the same chat
    with pytest.raises(ValueError, match="evaluation seed"):
        list(stored_demonstrations(store, rows[1:]))
