"""GRPO rollouts with static shapes: a decoding path meant for GPUs (CUDA graphs), tested on CPU.

:class:`StaticRollout` samples one reply per row of a batch of prompts (:meth:`StaticRollout.generate`;
calling the engine samples ``group_size`` replies per prompt, GRPO groups):

1. the distinct prompts are prefilled once each (a GRPO group's G rows share one prefill), in
   left-padded batches, and their keys and values are copied into their rows of the KV cache;
2. the KV cache is a transformers ``StaticCache`` preallocated once per shape and kept by the
   :class:`StaticRollout` for its later calls. Prompts are left-padded to ``bucket``, the longest
   prompt rounded up to a multiple of ``bucket_size``; the cache holds the next power of two >=
   ``bucket + max_new_tokens`` positions, so the calls of a multi-turn episode, whose prompts grow,
   share a few shapes (one per doubling) instead of one per bucket;
3. the batch is padded to ``batch_size`` rows (spare rows repeat the first row and are dropped),
   so the decode step sees the same shapes on every call with the same batch and cache length;
4. the single-token decode step is one function, wrapped in
   ``torch.compile(mode="reduce-overhead")`` (CUDA graphs) when ``compile=True``; ``compile=True``
   on a non-CUDA device raises ``ValueError`` (the CPU runs the same step eagerly);
5. ``bf16=True`` runs the forwards under ``torch.autocast(dtype=torch.bfloat16)`` (off by default).

A row ends at EOS, at a stop string or at its token budget, exactly as in
:meth:`TransformersPolicy.generate <verigym.agents.llm.policy.TransformersPolicy.generate>` (the
same :class:`~verigym.agents.llm.policy.Generation`: tokens up to and including the EOS or the
token that completed the stop string, the text cut before the stop string). Finished rows keep
stepping so the shapes never change, and what they sample after their end is discarded. Ends are
found on the host every ``check_every`` steps (default 8 on CUDA, 1 elsewhere): one copy of the
block of tokens sampled since the last check, then the stop-string test per token (which needs
the text, so the host) and the early exit once every row has ended. Between checks the GPU runs
ahead without a host sync; the price is at most ``check_every - 1`` steps past the last row's end.

GRPO rolls out with it under ``GRPOConfig(rollout_engine="static")`` (``compile_rollout=True`` for
the CUDA graphs), every turn of every episode. So far it has run on CPU only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from verigym.agents.llm.decoding import check_sampling, extend_tail, reply_text, sample
from verigym.agents.llm.policy import Generation, TransformersPolicy, output_cache, with_cache

__all__ = ["StaticRollout"]


def _bucket(length: int, size: int) -> int:
    """``length`` rounded up to a multiple of ``size``."""
    return -(-length // size) * size


def _cache_length(needed: int) -> int:
    """The cache positions for ``needed``: the next power of two (at least 64)."""
    return max(64, 1 << (needed - 1).bit_length())


_KEPT_ENGINES = 4
"""Static caches (and their decode steps) a :class:`StaticRollout` keeps, one per shape."""

_PREFILL_TOKENS = 32_768
"""Prompt tokens (padding included) per prefill forward at most; more rows are prefilled in turns."""


class StaticRollout:
    """Samples GRPO rollouts with static shapes; keeps its static caches and decode steps between
    calls, so a call whose shapes (batch, cache length) were seen before reuses them (with
    ``compile=True``: replays the captured CUDA graphs).

    Args:
        policy: the model (sampled as it is; served adapters are not used) and tokenizer.
        bucket_size: prompts are left-padded to the next multiple of it (>= 1).
        batch_size: rows of the decode batch (>= the rows of every call); ``None``: exactly the
            rows each call needs.
        compile: wrap the decode step in ``torch.compile(mode="reduce-overhead")``; CUDA only.
        bf16: run the forwards under bfloat16 autocast (default off). Inside an autocast region
            (GRPO's rollouts) give the region's setting: the engine's own region replaces it.
        check_every: decode steps between two host checks for ended rows (>= 1); ``None``: 8 on
            CUDA (fewer host syncs), 1 elsewhere (no step past the last end).

    Raises:
        ValueError: ``bucket_size``, ``batch_size`` or ``check_every`` below 1, or
            ``compile=True`` on a device that is not CUDA (the CPU runs the same step eagerly with
            ``compile=False``).
    """

    def __init__(
        self,
        policy: TransformersPolicy,
        *,
        bucket_size: int = 64,
        batch_size: int | None = None,
        compile: bool = False,
        bf16: bool = False,
        check_every: int | None = None,
    ):
        if bucket_size < 1 or (batch_size is not None and batch_size < 1):
            raise ValueError("bucket_size and batch_size must be >= 1")
        if check_every is not None and check_every < 1:
            raise ValueError(f"check_every must be >= 1, got {check_every}")
        if compile and policy.device.type != "cuda":
            raise ValueError(f"compile=True needs a CUDA device (CUDA graphs), got {policy.device}")
        self.policy = policy
        self.bucket_size, self.batch_size = int(bucket_size), batch_size
        self.compile, self.bf16 = bool(compile), bool(bf16)
        if check_every is None:
            check_every = 8 if policy.device.type == "cuda" else 1
        self.check_every = int(check_every)
        self._engines: dict[tuple[int, int], tuple[Any, Callable[..., torch.Tensor]]] = {}

    def _compiled(self, step: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        """The decode step as run: under ``torch.compile`` (CUDA graphs) with ``compile=True``."""
        if not self.compile:
            return step
        compiled = torch.compile(step, mode="reduce-overhead")

        def replay(*args: torch.Tensor) -> torch.Tensor:
            torch.compiler.cudagraph_mark_step_begin()  # the last step's outputs were consumed
            return compiled(*args)

        return replay

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

        while len(self._engines) >= _KEPT_ENGINES:
            self._engines.pop(next(iter(self._engines)))
        self._engines[key] = cache, self._compiled(step)
        return self._engines[key]

    def __call__(
        self, prompts: Sequence[Sequence[int]], group_size: int, **options: Any
    ) -> list[list[Generation]]:
        """Sample ``group_size`` replies to each prompt (one GRPO group each); ``options`` as in
        :meth:`generate`.

        Returns:
            per prompt, its ``group_size`` replies.

        Raises:
            ValueError: ``group_size`` below 1, or as :meth:`generate`.
        """
        if group_size < 1:
            raise ValueError("group_size must be >= 1")
        rows = [prompt for prompt in prompts for _ in range(group_size)]
        replies = self.generate(rows, **options)
        return [replies[g * group_size : (g + 1) * group_size] for g in range(len(prompts))]

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        generator: torch.Generator | None = None,
    ) -> list[Generation]:
        """Sample one reply per prompt (a row each; equal prompts share one prefill), as
        :meth:`TransformersPolicy.generate
        <verigym.agents.llm.policy.TransformersPolicy.generate>` does.

        Args:
            prompts: token ids of each row's prompt.
            max_new_tokens: budget of sampled tokens per reply (>= 1).
            temperature: ``0`` is greedy; otherwise logits are divided by it (as
                :func:`~verigym.agents.llm.decoding.sample`).
            top_p: nucleus sampling mass in (0, 1].
            stop: strings that end a reply (besides EOS); the text is cut before them.
            generator: a seeded ``torch.Generator`` on the model's device, for reproducible
                samples (the draws equal ``generate``'s while no row has ended: ``generate``
                drops ended rows from its batch, this engine keeps them).

        Returns:
            one :class:`~verigym.agents.llm.policy.Generation` per prompt, in order:
            ``token_ids`` (ending with EOS, or with the token that completed a stop string, when
            one ended the reply), float32 ``log_probs`` (one per token, under
            ``softmax(logits / T)``), ``text`` (without EOS, cut before a stop string) and
            ``finish_reason`` (``"stop"`` at EOS or a stop string, else ``"length"``).

        Raises:
            ValueError: an empty prompt, out-of-range options, more rows than ``batch_size``, or
                a model with sliding-window layers.
        """
        check_sampling(max_new_tokens, temperature, top_p)
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("give at least one prompt, each of at least one token")
        rows = len(prompts)
        batch = rows if self.batch_size is None else int(self.batch_size)
        if batch < rows:
            raise ValueError(f"batch_size {batch} is below the {rows} rows needed")
        bucket = _bucket(max(len(p) for p in prompts), self.bucket_size)
        cache, decode = self._engine(batch, _cache_length(bucket + max_new_tokens))
        logits, attention, positions = self._prefill(cache, prompts, batch, bucket)

        device = self.policy.device
        # time-major, so the token a step feeds (its row of the last step) is contiguous
        sampled = torch.empty((max_new_tokens, batch), dtype=torch.long, device=device)
        log_probs = torch.empty((max_new_tokens, batch), dtype=torch.float32, device=device)
        ends = _Ends(self.policy, rows, max_new_tokens, stop)
        checked = 0
        for t in range(max_new_tokens):
            if t:  # every row feeds its last token (an ended row's is discarded with its reply)
                attention[:, bucket + t - 1] = 1
                logits = decode(sampled[t - 1], positions, attention)
                positions += 1
            sampled[t], log_probs[t] = sample(logits, temperature, top_p, generator)
            if t + 1 - checked == self.check_every or t + 1 == max_new_tokens:
                ends.scan(sampled[checked : t + 1, :rows].T.tolist(), checked)  # the host sync
                checked = t + 1
                if ends.all_ended():
                    break

        # -- back to Python: per row, its tokens up to its end
        sampled_rows = sampled[:checked, :rows].T.tolist()
        log_prob_rows = log_probs[:checked, :rows].T.tolist()
        return [
            ends.generation(r, sampled_rows[r], log_prob_rows[r][: ends.length(r)])
            for r in range(rows)
        ]

    def _prefill(
        self, cache: Any, prompts: Sequence[Sequence[int]], batch: int, bucket: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Prefill each distinct prompt once (left-padded to ``bucket``) into its rows of ``cache``
        (spare rows repeat row 0); returns the rows' float32 ``[batch, vocab]`` first logits, the
        long ``[batch, length]`` attention mask and the long ``[batch]`` next positions."""
        policy, device, model = self.policy, self.policy.device, self.policy.model
        distinct: dict[tuple[int, ...], int] = {}
        index = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
        index += [index[0]] * (batch - len(prompts))
        unique = list(distinct)
        ids = torch.full((len(unique), bucket), policy.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(unique), bucket), dtype=torch.long)
        for u, prompt in enumerate(unique):
            ids[u, bucket - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[u, bucket - len(prompt) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        first_logits = []
        per_forward = max(1, _PREFILL_TOKENS // bucket)
        for start in range(0, len(unique), per_forward):
            part = slice(start, start + per_forward)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16):
                out = model(
                    input_ids=ids[part],
                    attention_mask=mask[part],
                    position_ids=(mask[part].cumsum(-1) - 1).clamp(min=0),
                    use_cache=True,
                    **policy._keep_last,
                )
            prefilled = output_cache(out)
            members = [r for r, u in enumerate(index) if start <= u < start + per_forward]
            rows = torch.tensor(members, device=device)
            source = torch.tensor([index[r] - start for r in members], device=device)
            for mine, theirs in zip(cache.layers, prefilled.layers):
                if not mine.is_initialized:  # its dtypes are the prefill's (autocast may mix them)
                    size = (batch, -1, -1, -1)  # it reads batch, heads, head_dim
                    mine.lazy_initialization(
                        theirs.keys[:1].expand(size), theirs.values[:1].expand(size)
                    )
                mine.keys[rows, :, :bucket] = theirs.keys.index_select(0, source)
                mine.values[rows, :, :bucket] = theirs.values.index_select(0, source)
            first_logits.append(out.logits[:, -1].float())
        for layer in cache.layers:
            layer.cumulative_length.fill_(bucket)
        spread = torch.tensor(index, device=device)
        attention = torch.zeros((batch, cache.layers[0].max_cache_len), dtype=torch.long)
        attention = attention.to(device)
        attention[:, :bucket] = mask.index_select(0, spread)
        positions = mask.sum(-1).index_select(0, spread)
        return torch.cat(first_logits).index_select(0, spread), attention, positions


class _Ends:
    """Where each row's reply ends, found from its sampled tokens as the decoder finds it
    (:meth:`verigym.agents.llm.decoding.Decoder.step`): at an EOS token, at the token whose text
    completes a stop string (tested on a tail of the per-token texts), or at the budget."""

    def __init__(self, policy: TransformersPolicy, rows: int, budget: int, stop: Sequence[str]):
        self.policy, self.budget = policy, budget
        self.stop = tuple(s for s in stop if s)
        self.ends: list[int | None] = [None] * rows
        self.stop_hit = [False] * rows
        self.tails = [""] * rows

    def scan(self, block: list[list[int]], offset: int) -> None:
        """Look at the tokens ``block[r]`` that row ``r`` sampled from step ``offset`` on."""
        eos, decode = self.policy.eos_token_ids, self.policy.tokenizer.decode
        for r, tokens in enumerate(block):
            if self.ends[r] is not None:
                continue
            for j, token in enumerate(tokens):
                ended = token in eos
                if self.stop and not ended:
                    self.tails[r], self.stop_hit[r] = extend_tail(
                        self.tails[r], decode([token]), self.stop
                    )
                    ended = self.stop_hit[r]
                if ended or offset + j + 1 >= self.budget:
                    self.ends[r] = offset + j + 1
                    break

    def all_ended(self) -> bool:
        return all(end is not None for end in self.ends)

    def length(self, row: int) -> int:
        end = self.ends[row]
        return self.budget if end is None else end

    def generation(self, row: int, tokens: list[int], log_probs: list[float]) -> Generation:
        """Row ``row``'s reply from its sampled ``tokens`` (cut at its end) and their log-probs."""
        ids = tokens[: self.length(row)]
        text, reason = reply_text(self.policy, ids, self.stop, self.stop_hit[row])
        return Generation(text, ids, log_probs, reason)
