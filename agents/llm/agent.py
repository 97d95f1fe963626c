"""Chat agents that play any verigym env through its text view.

* :class:`LLMAgent` (registered as ``"llm"``): a local transformers model
  (:class:`~verigym.agents.llm.policy.TransformersPolicy`); ``learn`` trains it with GRPO.
* :class:`~verigym.agents.llm.openai_agent.OpenAIAgent` (``"openai"``): a model served over
  HTTP.

Both keep the episode's conversation -- the rules as a system message, observations as user
messages, their own replies as assistant messages -- and drop the oldest turns when it outgrows
the context budget (the first observation and the latest one are always kept). Use them on a
Text -> Text env: a natively text env, or any env under
:class:`verigym.wrappers.LanguageWrapper`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigym.agents.common.config import AgentConfig, require
from verigym.agents.llm.chat import feedback_text, initial_messages

__all__ = ["ChatHistory", "LLMAgent", "LLMConfig"]


class ChatHistory:
    """The messages of one episode, trimmed to a budget.

    Args:
        measure: size of a message list in budget units (tokens for a local model, characters
            for a served one).
        budget: the largest size kept; the oldest (user, assistant) pairs after the first
            observation are dropped to fit.
    """

    def __init__(self, measure: Callable[[Sequence[Mapping[str, str]]], int], budget: int):
        self.measure = measure
        self.budget = budget
        self.messages: list[dict[str, str]] = []
        self._instructions = ""

    def reset(self) -> None:
        self.messages = []
        self._instructions = ""

    def observe(self, observation: Any, info: Mapping[str, Any] | None) -> list[dict[str, str]]:
        """Add an observation (the first one of an episode opens it) and return the trimmed messages."""
        text = str(observation)
        if not self.messages:
            self._instructions = str((info or {}).get("instructions", ""))
            self.messages = initial_messages(self._instructions, text)
        else:
            self.messages.append({"role": "user", "content": feedback_text(text, info)})
        self._trim()
        return list(self.messages)

    def reply(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def _trim(self) -> None:
        head = 2 if self.messages and self.messages[0]["role"] == "system" else 1
        while self.measure(self.messages) > self.budget and len(self.messages) > head + 2:
            del self.messages[head : head + 2]


@dataclass(frozen=True)
class LLMConfig(AgentConfig):
    """Options of :class:`LLMAgent`."""

    model_path: str = ""
    """a Hugging Face causal LM folder (save_pretrained layout), a .gguf file, or a short name (smollm2)"""
    max_new_tokens: int = 256
    """token budget of one reply"""
    temperature: float = 0.7
    """sampling temperature (act(deterministic=True) is greedy)"""
    top_p: float = 1.0
    """nucleus sampling mass"""
    max_context_tokens: int = 4096
    """prompt tokens at most; older turns are dropped to fit"""
    stop: tuple[str, ...] = ()
    """extra strings that end a reply"""
    use_chat_template: bool = True
    """use the tokenizer's chat template when it has one (else a plain User:/Assistant: layout)"""
    adapter: str = ""
    """a LoRA adapter folder applied to the model (peft save_pretrained: adapter_config.json and
    adapter_model.safetensors), e.g. verigym train sft --out DIR; "" for none"""

    def check(self) -> None:
        require(
            bool(self.model_path),
            "model_path must be a local model directory, a .gguf file or a short name, e.g. model_path='smollm2'",
        )
        require(self.max_new_tokens >= 1, f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        require(self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}")
        require(0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}")
        require(
            self.max_context_tokens > self.max_new_tokens,
            "max_context_tokens must exceed max_new_tokens",
        )
        if self.adapter:
            from verigym.agents.llm.models import check_adapter

            try:
                check_adapter(self.adapter)
            except FileNotFoundError as exc:
                raise ValueError(str(exc)) from None


class LLMAgent:
    """A local transformers model as a verigym agent (``verigym.agents.make("llm", env, model_path=DIR)``).

    ``act(observation, info)`` returns the reply text. ``learn(env, total_steps)`` trains the model
    with :class:`~verigym.agents.llm.grpo.GRPOTrainer` (``total_steps`` counts GRPO steps).

    Args:
        config: an :class:`LLMConfig`.
        policy: an already loaded policy (else ``config.model_path`` is loaded).
    """

    def __init__(self, config: LLMConfig, *, policy: Any = None):
        import torch

        from verigym.agents.llm.policy import TransformersPolicy

        self.config = config
        self.policy = policy or TransformersPolicy.from_pretrained(
            config.model_path,
            device=config.device,
            use_chat_template=None if config.use_chat_template else False,
            adapter=config.adapter or None,
        )
        self.generator = torch.Generator(device=self.policy.device)
        self.generator.manual_seed(config.seed)
        budget = (
            min(config.max_context_tokens, self.policy.max_context_tokens) - config.max_new_tokens
        )
        self.history = ChatHistory(
            lambda messages: len(self.policy.encode_messages(messages)), budget
        )
        self.last_generation: Any = (
            None  # the last reply's tokens/usage, read by the trajectory recorder
        )

    @classmethod
    def from_env(cls, env: Any = None, **config: Any) -> LLMAgent:
        """Build from config overrides (``model_path=DIR`` is required); ``env`` is not needed."""
        return cls(LLMConfig.from_dict(config))

    def reset(self, *, seed: int | None = None) -> None:
        self.history.reset()
        if seed is not None:
            self.generator.manual_seed(seed)

    def act(
        self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False
    ) -> str:
        """The reply to ``obs`` (a str) given the episode so far."""
        messages = self.history.observe(obs, info)
        cfg = self.config
        reply = self.policy.chat_complete(
            [messages],
            max_new_tokens=cfg.max_new_tokens,
            temperature=0.0 if deterministic else cfg.temperature,
            top_p=cfg.top_p,
            stop=cfg.stop,
            generator=self.generator,
        )[0]
        self.last_generation = reply  # its token_ids go into the recorded trajectory
        self.history.reply(reply.text)
        return reply.text

    def learn(
        self, env: Any, total_steps: int, *, callbacks: Sequence[Any] = (), **grpo: Any
    ) -> LLMAgent:
        """Train with GRPO on ``env`` (an env, an id or a factory) for ``total_steps`` GRPO steps.

        ``grpo`` holds :class:`~verigym.agents.llm.grpo.GRPOConfig` overrides.
        """
        from verigym.agents.llm.grpo import GRPOTrainer

        trainer = GRPOTrainer(
            self.policy,
            env,
            callbacks=callbacks,
            seed=self.config.seed,
            max_new_tokens=self.config.max_new_tokens,
            max_context_tokens=self.config.max_context_tokens,
            **grpo,
        )
        try:
            trainer.train(total_steps)
        finally:
            trainer.close()
        return self

    def save(self, path: str | Path) -> None:
        """Write the model and tokenizer (HF format) and ``agent_config.json`` to ``path``."""
        path = Path(path)
        self.policy.save_pretrained(path)
        (path / "agent_config.json").write_text(
            self.config.replace(model_path=str(path)).to_json() + "\n"
        )

    @classmethod
    def load(cls, path: str | Path, *, device: str = "auto") -> LLMAgent:
        """Load an agent saved by :meth:`save` (or any model directory, with default options)."""
        path = Path(path)
        saved = path / "agent_config.json"
        options = json.loads(saved.read_text()) if saved.exists() else {}
        return cls(LLMConfig.from_dict({**options, "model_path": str(path), "device": device}))
