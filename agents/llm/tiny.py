"""Tiny local language models for tests, benchmarks and smoke runs (no hub access).

:func:`build_tiny_model` writes a character-level tokenizer (a ``tokenizers`` BPE model with no
merges, wrapped as a ``PreTrainedTokenizerFast`` with a ChatML chat template) and a randomly
initialised 2-layer Llama-architecture model with ``save_pretrained`` into a directory, which
:meth:`TransformersPolicy.from_pretrained` then loads like any real checkpoint, and
:class:`EchoLetterEnv`, a one-turn task such a model can learn in a minute.
"""

from __future__ import annotations

import os
import string
from pathlib import Path
from typing import Any

import gymnasium as gym

from verigym.core import ActionParseError, UnicodeText, action_error_info, episode_end

__all__ = ["CHATML_TEMPLATE", "DEFAULT_ALPHABET", "EchoLetterEnv", "build_tiny_model"]

DEFAULT_ALPHABET = (
    string.ascii_lowercase + string.digits + " .,:;?!'-=+*/()<>\n" + string.ascii_uppercase
)
"""The characters the default tiny tokenizer knows (others become ``<unk>``)."""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""A ChatML chat template (the layout of Qwen models)."""

_SPECIALS = ("<pad>", "<unk>", "<|im_start|>", "<|im_end|>")


def build_tiny_model(
    path: str | os.PathLike[str],
    *,
    alphabet: str = DEFAULT_ALPHABET,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    max_position_embeddings: int = 1024,
    chat_template: str | None = CHATML_TEMPLATE,
    seed: int = 0,
) -> Path:
    """Write a character-level tokenizer and a random tiny Llama-architecture causal LM to ``path``.

    Args:
        path: output directory (created).
        alphabet: the characters of the vocabulary, one token each.
        hidden_size: model width; ``num_heads`` must divide it.
        num_layers: transformer blocks.
        num_heads: attention heads (and key/value heads).
        max_position_embeddings: context length in tokens.
        chat_template: the tokenizer's chat template; ``None`` leaves it without one (the
            policy then uses its plain layout).
        seed: torch seed of the weight initialisation.

    Returns:
        the directory.

    Raises:
        ValueError: ``num_heads`` does not divide ``hidden_size`` or the alphabet repeats a character.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    if hidden_size % num_heads:
        raise ValueError(f"num_heads ({num_heads}) must divide hidden_size ({hidden_size})")
    if len(set(alphabet)) != len(alphabet):
        raise ValueError("alphabet repeats a character")
    vocab = {tok: i for i, tok in enumerate(_SPECIALS)}
    for ch in alphabet:
        vocab[ch] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=vocab["<|im_end|>"],
        pad_token_id=vocab["<pad>"],
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = vocab["<|im_end|>"]
    model.generation_config.pad_token_id = vocab["<pad>"]
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


_LETTERS = "abcd"


class EchoLetterEnv(gym.Env):
    """A one-turn smoke task for tiny models: reply with the letter shown.

    Not a registered verigym env (it tests learners, not agents): a 2-layer character-level
    model learns it with GRPO in about a hundred steps on a CPU.

    Observation ``"say x"`` with ``x`` drawn uniformly from ``letters``. Reward and score 1 iff the
    reply's first non-space character is ``x``, else 0; an empty reply also gets
    ``info["action_error"]``. The episode always terminates after one step.
    """

    metadata = {"render_modes": [], "family": "text"}

    def __init__(self, *, letters: str = _LETTERS):
        self.letters = letters
        self.observation_space = UnicodeText(64)
        self.action_space = UnicodeText(4096)
        self._target = letters[0]

    def instructions(self) -> str:
        return ""

    def observation_text(self, observation: str) -> str:
        return observation

    def parse_action(self, text: str) -> str:
        stripped = text.strip()
        if not stripped:
            raise ActionParseError("empty reply; reply with one letter")
        return stripped[0]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._target = self.letters[int(self.np_random.integers(len(self.letters)))]
        return f"say {self._target}", {}

    def step(self, action: str):
        info: dict[str, Any] = {}
        try:
            success = self.parse_action(action) == self._target
        except ActionParseError as exc:
            action_error_info(str(exc), info)
            success = False
        episode_end(info, success=success, score=float(success))
        return "done", float(success), True, False, info
