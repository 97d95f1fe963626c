"""Generation overhead of ``TransformersPolicy.generate`` against a bare ``model.generate``, in one run.

Both sample the same batch of left-padded prompts with the same model, temperature 1, no top-k /
top-p truncation and exactly ``--new-tokens`` new tokens (EOS is disabled on both sides so the
lengths match). verigym also returns every sampled token's log-prob and handles stop strings;
``model.generate`` returns token ids only. Prints seconds per batch and the ratio verigym /
transformers (target of issue 10: <= 1.1x). The same script runs on a CUDA machine (``--device
auto`` picks it, bf16 weights).

``--static`` also times GRPO's static-shape engine
(:class:`~verigym.agents.llm.static_rollout.StaticRollout`, one row per prompt, the batch fixed
at ``--batch``), compiled into CUDA graphs on CUDA (``--static-warmup`` calls of the same shapes
first: compilation and graph capture, timed apart), eager elsewhere, and prints its throughput
against ``model.generate``'s (target of issue 42: >= 3x at batch 32) and, on CUDA, the peak GPU
memory of each side.

Usage::

    python benchmarks/llm_generate.py [--model DIR] [--batch 16] [--new-tokens 64] [--repeats 5] [--static]

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


def peak_gib(device: torch.device) -> str:
    """The peak GPU memory since the last reset, then a reset (``""`` off CUDA)."""
    if device.type != "cuda":
        return ""
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return f", peak GPU memory {peak:.2f} GiB"


def timed(fn, repeats: int, device: torch.device, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
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
    parser.add_argument(
        "--static",
        action="store_true",
        help="also time StaticRollout (CUDA graphs on CUDA) against model.generate",
    )
    parser.add_argument(
        "--static-warmup",
        type=int,
        default=3,
        help="StaticRollout calls before timing (compilation, CUDA graph capture)",
    )
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

    peak_gib(device)
    peer_s = timed(peer, args.repeats, device)
    peer_peak = peak_gib(device)
    ours_s = timed(ours, args.repeats, device)
    ours_peak = peak_gib(device)
    print(
        f"device {device}, batch {args.batch}, prompt <= {args.prompt_tokens} tokens, {args.new_tokens} new tokens, "
        f"model {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params"
    )
    print(f"transformers model.generate   {peer_s * 1e3:9.1f} ms/batch{peer_peak}")
    print(f"verigym TransformersPolicy    {ours_s * 1e3:9.1f} ms/batch (with log-probs){ours_peak}")
    print(f"ratio verigym / transformers  {ours_s / peer_s:9.2f}x  (target <= 1.1x)")
    if args.static:
        time_static(policy, prompts, args, device, peer_s)


def time_static(
    policy: TransformersPolicy,
    prompts: list[list[int]],
    args: argparse.Namespace,
    device: torch.device,
    peer_s: float,
) -> None:
    """Time StaticRollout on ``prompts`` (one row each) and print its throughput against
    ``model.generate``'s ``peer_s`` seconds for the same rows and new tokens."""
    from verigym.agents.llm.static_rollout import StaticRollout

    compiled = device.type == "cuda"
    engine = StaticRollout(policy, batch_size=len(prompts), compile=compiled)

    def static() -> None:
        out = engine.generate(prompts, max_new_tokens=args.new_tokens, temperature=1.0)
        assert all(len(o.token_ids) == args.new_tokens for o in out)

    _sync(device)
    started = time.perf_counter()
    try:
        for _ in range(args.static_warmup):
            static()
    except Exception as error:  # noqa: BLE001 - a failed compilation still leaves eager timings
        if not compiled:
            raise
        first = (str(error).strip().splitlines() or [""])[0][:300]
        print(f"COMPILE FAILED ({type(error).__name__}: {first}); timing the eager engine")
        compiled = False
        engine = StaticRollout(policy, batch_size=len(prompts))
        static()
    _sync(device)
    warmup_s = time.perf_counter() - started
    static_s = timed(static, args.repeats, device, warmup=0)
    how = "CUDA graphs" if compiled else "eager"
    print(
        f"verigym StaticRollout         {static_s * 1e3:9.1f} ms/batch ({how}, with log-probs; "
        f"{args.static_warmup} warm-up calls {warmup_s:.1f} s){peak_gib(device)}"
    )
    print(
        f"throughput static / model.generate {peer_s / static_s:6.2f}x  (target >= 3x at batch 32)"
    )


if __name__ == "__main__":
    main()
