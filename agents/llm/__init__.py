"""LLM agents and GRPO (``verigym.agents.llm``).

* :class:`TransformersPolicy` -- a local Hugging Face causal LM sampling replies with log-probs.
* :class:`LLMAgent` (``"llm"``) and :class:`OpenAIAgent` (``"openai"``) -- chat agents for any
  verigym env's text view; the second talks to any OpenAI-compatible server, e.g. ``verigym serve``.
* :class:`GRPOTrainer` / :class:`GRPOConfig` -- multi-turn GRPO with DAPO/Dr. GRPO options.
* :mod:`~verigym.agents.llm.trl_adapter` -- verigym envs as TRL ``GRPOTrainer`` reward functions.

Names are imported lazily: ``import verigym.agents.llm`` does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "GRPOConfig",
    "GRPOTrainer",
    "Generation",
    "LLMAgent",
    "LLMConfig",
    "OpenAIAgent",
    "OpenAIConfig",
    "TransformersPolicy",
    "UCBCurriculum",
    "build_tiny_model",
    "make_server",
]

_WHERE = {
    "GRPOConfig": "grpo",
    "GRPOTrainer": "grpo",
    "Generation": "policy",
    "LLMAgent": "agent",
    "LLMConfig": "agent",
    "OpenAIAgent": "openai_agent",
    "OpenAIConfig": "openai_agent",
    "TransformersPolicy": "policy",
    "UCBCurriculum": "curriculum",
    "build_tiny_model": "tiny",
    "make_server": "server",
}


def doctor_probe() -> Any:
    """``verigym doctor`` line: transformers for the LLM agents, TRL for the adapter, TensorBoard."""
    from importlib.metadata import PackageNotFoundError, version

    from verigym.doctor import Probe

    found = {}
    for package in ("transformers", "trl", "tensorboard"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    detail = ", ".join(f"{k} {v or 'missing'}" for k, v in found.items())
    if found["transformers"] is None:
        return Probe("LLM agents and GRPO", False, detail, "pip install transformers")
    if found["trl"] is None:
        return Probe("LLM agents and GRPO", False, detail + " (the TRL adapter needs trl)", 'pip install "verigym[trl]"')
    return Probe("LLM agents and GRPO", True, detail)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'verigym.agents.llm' has no attribute {name!r}")
    return getattr(importlib.import_module(f"verigym.agents.llm.{_WHERE[name]}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
