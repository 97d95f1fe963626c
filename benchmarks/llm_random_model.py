"""A randomly initialised model of a real LLM's shape, built locally (no download), for GPU checks.

``scripts/gpu_check.sh`` runs on a machine that can download nothing and receives at most 64 MiB,
so a real checkpoint cannot travel there: this builds one of Qwen2.5-0.5B's shape on the spot --
its published architecture (24 layers, hidden 896, MLP 4864, 14 query / 2 key-value heads,
vocabulary 151,936, tied embeddings, RoPE theta 1e6) with random weights -- so every matrix the GPU
multiplies has the real size. The tokenizer is character-level (one token per code point, as
:func:`verigym.agents.llm.tiny.build_tiny_model` writes it, with a ChatML template) over exactly
the model's vocabulary size, so any sampled id decodes. ``shape="tiny"`` gives the same layout at a
CPU-test size (the CPU side of the GPU tests).

Usage::

    python benchmarks/llm_random_model.py OUT_DIR [--shape qwen2.5-0.5b|tiny]
"""

from __future__ import annotations

import argparse
import string
from pathlib import Path

SHAPES = {
    # Qwen2.5-0.5B's config.json (architecture fields only)
    "qwen2.5-0.5b": dict(
        vocab_size=151_936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32_768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
    "tiny": dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        rope_theta=10_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
}


def _alphabet(size: int) -> str:
    """``size`` distinct characters: printable ASCII first, then code points from U+00A1 on
    (surrogates skipped)."""
    chars = list(dict.fromkeys(string.printable))
    code = 0xA1
    while len(chars) < size:
        if not 0xD800 <= code <= 0xDFFF:
            chars.append(chr(code))
        code += 1
    return "".join(chars[:size])


def build_random_model(path: str | Path, shape: str = "qwen2.5-0.5b", *, seed: int = 0) -> Path:
    """Write a random Qwen2-architecture causal LM of ``shape`` and a matching tokenizer to ``path``.

    Args:
        path: output folder (created; ``save_pretrained`` layout, safetensors).
        shape: a key of :data:`SHAPES`.
        seed: torch seed of the initialisation.

    Returns:
        the folder.

    Raises:
        KeyError: an unknown shape.
    """
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from verigym.agents.llm.tiny import build_tiny_model

    fields = SHAPES[shape]
    out = Path(path)
    specials = 4  # <pad>, <unk>, <|im_start|>, <|im_end|> (build_tiny_model's)
    build_tiny_model(
        out,
        alphabet=_alphabet(fields["vocab_size"] - specials),
        hidden_size=8,
        num_layers=1,
        num_heads=1,
    )
    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert len(tokenizer) == fields["vocab_size"], (len(tokenizer), fields["vocab_size"])
    config = Qwen2Config(
        **fields,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    for stale in out.glob("model*.safetensors"):
        stale.unlink()
    model.save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-0.5b")
    args = parser.parse_args()
    path = build_random_model(args.out, args.shape)
    print(f"built a random {args.shape}-shaped model in {path}")


if __name__ == "__main__":
    main()
