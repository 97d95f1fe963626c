"""GRPO rollouts with static shapes: a decoding path meant for GPUs (CUDA graphs), tested on CPU.

:class:`StaticRollout` samples ``group_size`` replies for each of a few prompts (GRPO groups):

1. each prompt is prefilled once, at batch 1, and its keys and values are copied into the
   ``group_size`` rows of its group;
2. the KV cache is a transformers ``StaticCache`` preallocated once per shape and kept by the
   :class:`StaticRollout` for its later calls, ``bucket + max_new_tokens`` positions long, where
   ``bucket`` is the longest prompt rounded up to a multiple of ``bucket_size`` (prompts are
   left-padded to it);
3. the batch is padded to ``batch_size`` rows (spare rows repeat the first group and are dropped),
   so the decode step sees the same shapes on every call with the same bucket and budget;
4. the single-token decode step is one function, wrapped in
   ``torch.compile(mode="reduce-overhead")`` (CUDA graphs) when ``compile=True``; ``compile=True``
   on a non-CUDA device raises ``ValueError`` (the CPU runs the same step eagerly);
5. ``bf16=True`` runs the forwards under ``torch.autocast(dtype=torch.bfloat16)`` (off by default).

A row ends at EOS or its token budget; finished rows keep stepping (they feed the pad token) so the
shapes never change, and what they sample after their end is discarded. Stop strings are not
supported (GRPO's default path, :meth:`TransformersPolicy.generate`, handles them).
So far this path has run on CPU only; it is not wired into GRPO.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from verigym.agents.llm.decoding import sample
from verigym.agents.llm.policy import Generation, TransformersPolicy, output_cache, with_cache

__all__ = ["StaticRollout"]


def _bucket(length: int, size: int) -> int:
    """``length`` rounded up to a multiple of ``size``."""
    return -(-length // size) * size


_KEPT_ENGINES = 4
"""Static caches (and their decode steps) a :class:`StaticRollout` keeps, one per shape."""


class StaticRollout:
    """Samples GRPO groups with static shapes; keeps its static caches and decode steps between
    calls, so a call whose shapes (batch, bucket + budget) were seen before reuses them (with
    ``compile=True``: replays the captured CUDA graphs).

    Args:
        policy: the model (sampled as it is; served adapters are not used) and tokenizer.
        bucket_size: prompts are left-padded to the next multiple of it (>= 1).
        batch_size: rows of the decode batch (>= prompts x group size of every call); ``None``:
            exactly the rows each call needs.
        compile: wrap the decode step in ``torch.compile(mode="reduce-overhead")``; CUDA only.
        bf16: run the forwards under bfloat16 autocast (default off).

    Raises:
        ValueError: ``bucket_size`` or ``batch_size`` below 1, or ``compile=True`` on a device that
            is not CUDA (the CPU runs the same step eagerly with ``compile=False``).
    """

    def __init__(
        self,
        policy: TransformersPolicy,
        *,
        bucket_size: int = 64,
        batch_size: int | None = None,
        compile: bool = False,
        bf16: bool = False,
    ):
        if bucket_size < 1 or (batch_size is not None and batch_size < 1):
            raise ValueError("bucket_size and batch_size must be >= 1")
        if compile and policy.device.type != "cuda":
            raise ValueError(f"compile=True needs a CUDA device (CUDA graphs), got {policy.device}")
        self.policy = policy
        self.bucket_size, self.batch_size = int(bucket_size), batch_size
        self.compile, self.bf16 = bool(compile), bool(bf16)
        self._engines: dict[tuple[int, int], tuple[Any, Callable[..., torch.Tensor]]] = {}

    def _engine(self, batch: int, length: int) -> tuple[Any, Callable[..., torch.Tensor]]:
        """The static cache of ``batch`` rows x ``length`` positions and the decode step over it."""
        key = (batch, length)
        if key in self._engines:
            return self._engines[key]
        from transformers import StaticCache

        model, device, bf16 = self.policy.model, self.policy.device, self.bf16
        cache = StaticCache(config=model.config, max_cache_len=length)
        if any(getattr(layer, "is_sliding", False) for layer in cache.layers):
            raise ValueError("models with sliding-window layers are not supported")
        cache_kwargs = with_cache(model, cache)

        def step(tokens: torch.Tensor, position: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            """One forward of long ``[batch]`` tokens at long ``[batch]`` positions under the long
            ``[batch, length]`` mask (1: a real key); returns float32 ``[batch, vocab]`` logits."""
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                out = model(
                    input_ids=tokens[:, None],
                    attention_mask=mask,
                    position_ids=position[:, None],
                    use_cache=True,
                    **cache_kwargs,
                )
            return out.logits[:, -1].float()

        decode = torch.compile(step, mode="reduce-overhead") if self.compile else step
        while len(self._engines) >= _KEPT_ENGINES:
            self._engines.pop(next(iter(self._engines)))
        self._engines[key] = cache, decode
        return cache, decode

    @torch.no_grad()
    def __call__(
        self,
        prompts: Sequence[Sequence[int]],
        group_size: int,
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> list[list[Generation]]:
        """Sample ``group_size`` replies to each prompt (see the module docstring).

        Args:
            prompts: token ids of each prompt (one GRPO group each).
            group_size: replies per prompt (G >= 1).
            max_new_tokens: budget of sampled tokens per reply (>= 1).
            temperature: ``0`` is greedy; otherwise logits are divided by it (as
                :func:`~verigym.agents.llm.decoding.sample`).
            top_p: nucleus sampling mass in (0, 1].
            generator: a seeded ``torch.Generator`` on the model's device, for reproducible
                samples.

        Returns:
            per prompt, its ``group_size`` :class:`~verigym.agents.llm.policy.Generation` objects:
            ``token_ids`` (ending with EOS when it ended the reply), float32 ``log_probs`` (one per
            token, under ``softmax(logits / T)``), ``text`` (without EOS) and ``finish_reason``
            (``"stop"`` at EOS, else ``"length"``).

        Raises:
            ValueError: an empty prompt, out-of-range options, more rows than ``batch_size``, or
                a model with sliding-window layers.
        """
        if group_size < 1 or max_new_tokens < 1:
            raise ValueError("group_size and max_new_tokens must be >= 1")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("give at least one prompt, each of at least one token")
        policy, device, bf16 = self.policy, self.policy.device, self.bf16
        rows = len(prompts) * group_size
        batch = rows if self.batch_size is None else int(self.batch_size)
        if batch < rows:
            raise ValueError(f"batch_size {batch} is below the {rows} rows needed")
        model, pad = policy.model, policy.tokenizer.pad_token_id
        bucket = _bucket(max(len(p) for p in prompts), self.bucket_size)
        length = bucket + max_new_tokens
        cache, decode = self._engine(batch, length)

        # -- prefill: once per prompt, at batch 1, into its group's rows of the static cache
        attention = torch.zeros((batch, length), dtype=torch.long, device=device)
        positions = torch.zeros(batch, dtype=torch.long, device=device)
        first_logits = []
        for g, prompt in enumerate(prompts):
            ids = torch.full((1, bucket), pad, dtype=torch.long, device=device)
            ids[0, bucket - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            mask = torch.zeros((1, bucket), dtype=torch.long, device=device)
            mask[0, bucket - len(prompt) :] = 1
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                out = model(
                    input_ids=ids,
                    attention_mask=mask,
                    position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                    use_cache=True,
                    **policy._keep_last,
                )
            prefilled = output_cache(out)
            for mine, theirs in zip(cache.layers, prefilled.layers):
                if not mine.is_initialized:  # its dtypes are the prefill's (autocast may mix them)
                    size = (batch, -1, -1, -1)  # it reads batch, heads, head_dim
                    mine.lazy_initialization(theirs.keys.expand(size), theirs.values.expand(size))
            members = range(g * group_size, (g + 1) * group_size)
            if g == 0:  # spare rows repeat the first group (dropped at the end)
                members = [*members, *range(rows, batch)]
            index = torch.tensor(list(members), device=device)
            for mine, theirs in zip(cache.layers, prefilled.layers):
                mine.keys[index, :, :bucket] = theirs.keys[0]
                mine.values[index, :, :bucket] = theirs.values[0]
            attention[index, :bucket] = mask[0]
            positions[index] = len(prompt)
            first_logits.append(out.logits[0, -1].float())
        for layer in cache.layers:
            layer.cumulative_length.fill_(bucket)
        logits = torch.stack(first_logits).repeat_interleave(group_size, dim=0)
        logits = torch.cat([logits, logits[:1].expand(batch - rows, -1)])

        eos = torch.tensor(sorted(policy.eos_token_ids), dtype=torch.long, device=device)
        sampled = torch.full((batch, max_new_tokens), pad, dtype=torch.long, device=device)
        log_probs = torch.zeros((batch, max_new_tokens), dtype=torch.float32, device=device)
        done = torch.zeros(batch, dtype=torch.bool, device=device)
        lengths = torch.full((batch,), max_new_tokens, dtype=torch.long, device=device)
        for t in range(max_new_tokens):
            if t:
                tokens = torch.where(
                    done, torch.full_like(sampled[:, t - 1], pad), sampled[:, t - 1]
                )
                attention[:, bucket + t - 1] = 1
                logits = decode(tokens, positions, attention)
                positions += 1
            token, log_prob = sample(logits, temperature, top_p, generator)
            sampled[:, t] = torch.where(done, pad, token)
            log_probs[:, t] = torch.where(done, 0.0, log_prob)
            ended = torch.isin(token, eos) & ~done
            lengths = torch.where(ended, t + 1, lengths)
            done |= ended
            if bool(done[:rows].all()):
                break

        # -- back to Python: per row, its tokens up to its end
        decode_text = policy.tokenizer.decode
        eos_ids = policy.eos_token_ids
        sampled_rows, log_prob_rows = sampled.tolist(), log_probs.tolist()
        replies = []
        for r, (n, finished) in enumerate(zip(lengths.tolist()[:rows], done.tolist())):
            ids = sampled_rows[r][:n]
            ended = finished and ids[-1] in eos_ids
            text = decode_text(ids[:-1] if ended else ids, skip_special_tokens=True)
            replies.append(
                Generation(text, ids, log_prob_rows[r][:n], "stop" if ended else "length")
            )
        return [replies[g * group_size : (g + 1) * group_size] for g in range(len(prompts))]
