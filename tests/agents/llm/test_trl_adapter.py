"""The TRL adapter: verigym tasks as a prompt dataset and a verifier reward; one GRPOTrainer step."""

from __future__ import annotations

import pytest

from tests.agents.llm.tasks import EchoLetterEnv
from verigym.agents.llm.trl_adapter import VerigymReward, verigym_dataset

pytest.importorskip("datasets", reason="the TRL adapter needs the trl extra: pip install 'verigym[trl]'")


def test_dataset_and_reward_agree_with_the_env():
    data = verigym_dataset([EchoLetterEnv], seeds=range(6))
    assert len(data) == 6 and set(data.column_names) == {"prompt", "verigym_seed", "verigym_task"}
    reward = VerigymReward([EchoLetterEnv])
    targets = [row["prompt"][-1]["content"][-1] for row in data]
    right = reward(data["prompt"], [[{"role": "assistant", "content": t}] for t in targets],
                   verigym_seed=data["verigym_seed"], verigym_task=data["verigym_task"])
    wrong = reward(data["prompt"], ["?" for _ in targets], verigym_seed=data["verigym_seed"], verigym_task=data["verigym_task"])
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
        output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=8, max_completion_length=3,
        max_steps=1, learning_rate=1e-2, use_cpu=True, report_to="none", logging_steps=1, save_strategy="no",
        bf16=False, dataloader_num_workers=0, seed=0,
    )
    reward = VerigymReward([EchoLetterEnv])
    trainer = trl.GRPOTrainer(model=model, reward_funcs=reward, args=args, processing_class=tokenizer,
                              train_dataset=verigym_dataset([EchoLetterEnv], seeds=range(16)))
    result = trainer.train()
    assert result.global_step == 1
    assert any(k.startswith("rewards/verigym_score") for k in trainer.state.log_history[0])
    changed = any(not (before[k] == v).all() for k, v in model.state_dict().items())
    rewards_std = trainer.state.log_history[0].get("reward_std", 0.0)
    assert changed or rewards_std == 0.0
