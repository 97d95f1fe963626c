"""The TRL adapter: verigym tasks as a prompt dataset and a verifier reward; one GRPOTrainer step."""

from __future__ import annotations

import pytest

from tests.agents.llm.tasks import EchoLetterEnv
from verigym.agents.llm.trl_adapter import VerigymReward, verigym_dataset

pytest.importorskip(
    "datasets", reason="the TRL adapter needs the trl extra: pip install 'verigym[trl]'"
)


def test_dataset_and_reward_agree_with_the_env():
    data = verigym_dataset([EchoLetterEnv], seeds=range(6))
    assert len(data) == 6 and set(data.column_names) == {"prompt", "verigym_seed", "verigym_task"}
    reward = VerigymReward([EchoLetterEnv])
    targets = [row["prompt"][-1]["content"][-1] for row in data]
    right = reward(
        data["prompt"],
        [[{"role": "assistant", "content": t}] for t in targets],
        verigym_seed=data["verigym_seed"],
        verigym_task=data["verigym_task"],
    )
    wrong = reward(
        data["prompt"],
        ["?" for _ in targets],
        verigym_seed=data["verigym_seed"],
        verigym_task=data["verigym_task"],
    )
    assert right == [1.0] * 6 and wrong == [0.0] * 6
    with pytest.raises(KeyError, match="verigym_dataset"):
        reward(data["prompt"], targets)
    reward.close()


def test_trl_grpo_trainer_runs_a_step(tmp_path, learn_model_dir):
    trl = pytest.importorskip("trl", reason="TRL is not installed: pip install 'verigym[trl]'")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(learn_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(learn_model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=3,
        max_steps=1,
        learning_rate=1e-2,
        use_cpu=True,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        dataloader_num_workers=0,
        seed=0,
    )
    reward = VerigymReward([EchoLetterEnv])
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        processing_class=tokenizer,
        train_dataset=verigym_dataset([EchoLetterEnv], seeds=range(16)),
    )
    result = trainer.train()
    assert result.global_step == 1
    assert any(k.startswith("rewards/verigym_score") for k in trainer.state.log_history[0])
    changed = any(not (before[k] == v).all() for k, v in model.state_dict().items())
    rewards_std = trainer.state.log_history[0].get("reward_std", 0.0)
    assert changed or rewards_std == 0.0


# -- multi-turn: environment_factory ------------------------------------------------------------------
PRINTABLE = "".join(chr(c) for c in range(32, 127)) + "\n"


def test_environment_factory_plays_tools_and_scores():
    from transformers.utils import get_json_schema

    from verigym.agents.llm.trl_adapter import environment_factory

    calculator = environment_factory("verigym/Calculator-v0")()
    assert get_json_schema(calculator.calculate)["function"]["parameters"]["required"] == [
        "expression"
    ]
    assert get_json_schema(calculator.answer)["function"]["name"] == "answer"
    first = calculator.reset(verigym_seed=4)
    assert "Compute:" in first and "answer tool" in first
    # one protocol: TRL offers the tools natively, so no text tool-call format and no answer tags
    assert "<tool_call>" not in first and "<answer>" not in first and "schemas" not in first
    expression = first.rsplit("Compute:", 1)[1].split("\n")[0].strip()
    result = calculator.calculate(expression=expression)
    value = result.split("]", 1)[1].strip().splitlines()[0]
    assert calculator.get_reward() == 0.0  # unfinished
    assert "Correct." in calculator.answer(answer=value) and calculator.get_reward() == 1.0
    assert (
        "ended" in calculator.answer(answer="0") and calculator.get_reward() == 1.0
    )  # the verdict stays
    game = environment_factory("verigym/GuessNumber-v0")()
    assert not hasattr(game, "answer") and "integer from 1 to" in game.reset()
    assert "Turn 1/" in game.act(action="50")


def test_trl_grpo_runs_on_a_multi_turn_env(tmp_path):
    trl = pytest.importorskip("trl", reason="TRL is not installed: pip install 'verigym[trl]'")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    from verigym.agents.llm.tiny import build_tiny_model
    from verigym.agents.llm.trl_adapter import environment_factory

    # a tiny model with the Qwen2.5 template, which TRL knows how to parse tool calls from
    path = build_tiny_model(
        tmp_path / "model",
        alphabet=PRINTABLE,
        chat_template=qwen2_5_chat_template,
        max_position_embeddings=4096,
    )
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16,
        max_steps=1,
        learning_rate=1e-3,
        use_cpu=True,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        dataloader_num_workers=0,
        seed=0,
        max_tool_calling_iterations=2,
    )
    factory = environment_factory("verigym/GuessNumber-v0")
    trainer = trl.GRPOTrainer(
        model=model, args=args, processing_class=tokenizer, environment_factory=factory
    )
    result = trainer.train()
    assert result.global_step == 1
    logged = trainer.state.log_history[0]
    assert any(k.startswith(f"rewards/{factory.__name__}") for k in logged)
    assert len(trainer.environments) == 4 and all(type(e) is factory for e in trainer.environments)
    assert all(e._env.unwrapped._turn >= 0 for e in trainer.environments)


def test_single_turn_adapter_without_chat_template(tmp_path, tiny_plain_dir):
    trl = pytest.importorskip("trl", reason="TRL is not installed: pip install 'verigym[trl]'")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verigym.agents.llm.chat import ChatFormat, initial_messages

    tokenizer = AutoTokenizer.from_pretrained(tiny_plain_dir)
    data = verigym_dataset([EchoLetterEnv], seeds=range(4), tokenizer=tokenizer)
    assert isinstance(data[0]["prompt"], str) and data[0]["prompt"].endswith("Assistant: ")
    env = EchoLetterEnv()
    observation, info = env.reset(seed=0)
    assert data[0]["prompt"] == ChatFormat(tokenizer).render(
        initial_messages(info.get("instructions", ""), observation)
    )
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=3,
        max_steps=1,
        learning_rate=1e-2,
        use_cpu=True,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_plain_dir),
        reward_funcs=VerigymReward([EchoLetterEnv]),
        args=args,
        processing_class=tokenizer,
        train_dataset=data,
    )
    assert trainer.train().global_step == 1


def test_native_tool_instructions_keep_other_texts():
    from verigym.agents.llm.trl_adapter import native_tool_instructions

    assert native_tool_instructions("Guess a number.") == "Guess a number."
    text = (
        "Find it. Answer like <answer>7</answer>.\n\nTools (OpenAI function-calling schemas):\n{}\n\n"
        'Each turn, reply with exactly one tool call, <tool_call>{"name": "<tool>", "arguments": {...}}'
        "</tool_call>, or with your final answer, <answer>...</answer>. You have 5 replies; the "
        "episode ends at your answer.\nEpisode end: after 5 replies."
    )
    out = native_tool_instructions(text)
    assert out.startswith("Find it. Answer like 7.") and "You have 5 replies" in out
    assert out.endswith("\nEpisode end: after 5 replies.") and "<" not in out
