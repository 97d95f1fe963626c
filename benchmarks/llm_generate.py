"""Generation overhead of ``TransformersPolicy.generate`` against a bare ``model.generate``, in one run.

Both sample the same batch of left-padded prompts with the same model, temperature 1, no top-k /
top-p truncation and exactly ``--new-tokens`` new tokens (EOS is disabled on both sides so the
lengths match). verigym also returns every sampled token's log-prob and handles stop strings;
``model.generate`` returns token ids only. Prints seconds per batch and the ratio verigym /
transformers (target of issue 10: <= 1.1x). The same script runs on a CUDA machine (``--device
auto`` picks it, bf16 weights).

Usage::

    python benchmarks/llm_generate.py [--model DIR] [--batch 16] [--new-tokens 64] [--repeats 5]

Without ``--model`` a tiny random model (``--hidden-size``, ``--layers``) is built in a temp dir.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from verigym.agents.llm.policy import TransformersPolicy, resolve_device
from verigym.agents.llm.tiny import build_tiny_model


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, repeats: int, device: torch.device) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=None, help="local model directory (default: a tiny random model)"
    )
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        default=48,
        help="longest prompt; others are shorter (left padding)",
    )
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or build_tiny_model(
            tmp,
            hidden_size=args.hidden_size,
            num_layers=args.layers,
            num_heads=max(1, args.hidden_size // 64),
        )
        policy = TransformersPolicy.from_pretrained(path, device=str(device))
    model, tokenizer = policy.model, policy.tokenizer
    policy.eos_token_ids = frozenset()
    model.generation_config.eos_token_id = None
    vocab = int(model.config.vocab_size)
    g = torch.Generator().manual_seed(0)
    prompts = [
        torch.randint(4, vocab, (args.prompt_tokens - (i % 8),), generator=g).tolist()
        for i in range(args.batch)
    ]
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    for i, p in enumerate(prompts):
        input_ids[i, width - len(p) :] = torch.tensor(p)
        attention[i, width - len(p) :] = 1
    input_ids, attention = input_ids.to(device), attention.to(device)

    def ours() -> None:
        out = policy.generate(prompts, max_new_tokens=args.new_tokens, temperature=1.0)
        assert all(len(o.token_ids) == args.new_tokens for o in out)

    @torch.no_grad()
    def peer() -> None:
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=args.new_tokens,
            pad_token_id=tokenizer.pad_token_id,
        )
        assert out.shape[1] == width + args.new_tokens

    peer_s = timed(peer, args.repeats, device)
    ours_s = timed(ours, args.repeats, device)
    print(
        f"device {device}, batch {args.batch}, prompt <= {args.prompt_tokens} tokens, {args.new_tokens} new tokens, "
        f"model {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params"
    )
    print(f"transformers model.generate   {peer_s * 1e3:9.1f} ms/batch")
    print(f"verigym TransformersPolicy    {ours_s * 1e3:9.1f} ms/batch (with log-probs)")
    print(f"ratio verigym / transformers  {ours_s / peer_s:9.2f}x  (target <= 1.1x)")


if __name__ == "__main__":
    main()
