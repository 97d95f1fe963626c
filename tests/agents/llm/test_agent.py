"""LLMAgent: a local model plays any env's text view; learn (GRPO), save and load."""

from __future__ import annotations

import gymnasium as gym
import pytest

import verigym  # noqa: F401
import verigym.agents
from verigym.agents.llm.agent import LLMAgent, LLMConfig
from verigym.agents.llm.tiny import EchoLetterEnv
from verigym.wrappers.language import LanguageWrapper


def test_llm_agent_plays_a_tensor_env_through_the_text_view(tiny_model_dir):
    env = LanguageWrapper(gym.make("verigym/Treasure-7x7-v0"))
    agent = verigym.agents.make(
        "llm",
        env,
        model_path=str(tiny_model_dir),
        device="cpu",
        max_new_tokens=4,
        max_context_tokens=768,
    )
    observation, info = env.reset(seed=1)
    agent.reset(seed=1)
    replies = []
    for _ in range(4):
        reply = agent.act(observation, info, deterministic=True)
        replies.append(reply)
        observation, reward, terminated, truncated, info = env.step(reply)
        if terminated or truncated:
            break
    assert all(isinstance(r, str) for r in replies)
    # the prompt never outgrows the budget: old turns are dropped
    assert len(agent.policy.encode_messages(agent.history.messages)) <= 768
    env.close()


def test_deterministic_act_is_repeatable(tiny_model_dir):
    agent = LLMAgent.from_env(None, model_path=str(tiny_model_dir), device="cpu", max_new_tokens=5)
    first = agent.act("say a", {"instructions": "reply with a letter"}, deterministic=True)
    agent.reset()
    assert agent.act("say a", {"instructions": "reply with a letter"}, deterministic=True) == first


def test_config_is_validated():
    with pytest.raises(ValueError, match="model_path"):
        LLMConfig()
    with pytest.raises(TypeError, match="unknown"):
        LLMConfig.from_dict({"model_path": "x", "temprature": 1.0})


def test_learn_save_load(tmp_path, learn_model_dir):
    agent = LLMAgent.from_env(None, model_path=str(learn_model_dir), device="cpu", max_new_tokens=2)
    seen = []
    agent.learn(
        EchoLetterEnv,
        total_steps=2,
        callbacks=[seen.append],
        num_generations=4,
        groups_per_step=2,
        learning_rate=1e-3,
        dynamic_sampling=False,
    )
    assert len(seen) == 2 and "loss" in seen[-1]
    agent.save(tmp_path / "agent")
    loaded = verigym.agents.load("llm", tmp_path / "agent", device="cpu")
    assert loaded.config.max_new_tokens == 2
    assert loaded.act("say b", deterministic=True) == agent.act("say b", deterministic=True)
