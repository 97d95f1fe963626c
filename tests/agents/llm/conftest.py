"""Tiny local models for the LLM tests (built once per session, no hub access)."""

from __future__ import annotations

import pytest

LEARN_ALPHABET = "abcdefghijklmnopqrstuvwxyz .\n"


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every LLM test runs torch on one thread (``one_torch_thread``, tests/conftest.py)."""


@pytest.fixture(scope="session")
def tiny_plain_dir(tmp_path_factory):
    """The same kind of model with no chat template (the plain User:/Assistant: layout)."""
    from verigym.agents.llm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-plain"), chat_template=None, seed=1)


@pytest.fixture(scope="session")
def learn_model_dir(tmp_path_factory):
    """A tiny model over a 33-token vocabulary, for the GRPO learning test."""
    from verigym.agents.llm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-learn"), alphabet=LEARN_ALPHABET)


@pytest.fixture
def policy(tiny_model_dir):
    from verigym.agents.llm.policy import TransformersPolicy

    return TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
