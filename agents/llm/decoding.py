"""The decoding step, written once: a running batch that rows join and leave between steps.

:class:`Decoder` holds the rows being sampled: their KV cache (one left-padded batch, a per-row
attention mask and position), their sampling options and the tokens sampled so far. A row joins
with :meth:`Decoder.add` (its prompt is prefilled, its cache rows merged into the batch), every
:meth:`Decoder.step` samples one token for every row, and a row leaves as soon as it is done (EOS,
a stop string, its token budget) or is dropped (:meth:`Decoder.drop`, a client that left).
:meth:`TransformersPolicy.generate <verigym.agents.llm.policy.TransformersPolicy.generate>` is one
``add`` and steps until every row is done; the model server (:mod:`verigym.serve.model.batcher`)
adds requests between steps as they arrive (continuous, iteration-level batching), so a short reply
never waits for a long one.

Why the tokens are those a prompt gets alone: a row's keys and values are its own prompt's and
replies' (padding columns carry attention mask 0), its positions count its own tokens only, and its
first token is sampled from its prompt's prefill logits. A row that joins while others decode
feeds a padding token (mask 0, ignored) in the step it joins, so the batch's step stays one
forward pass.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from verigym.agents.llm.policy import Generation, TransformersPolicy

__all__ = ["Decoder", "sample"]

_HEADROOM = 64
"""Positions a running batch's cache layer reserves past its length, so the next steps write their
keys and values in place (Hugging Face's ``DynamicLayer`` concatenates, copying the whole batch's
cache every step: at 20 rows of ~1,500 positions that copy was most of a step on a CPU)."""


def _growing_layer_class() -> type:
    """``DynamicLayer`` whose storage has headroom: ``update`` writes into a preallocated buffer and
    returns views of its first ``length`` positions. Setting ``keys``/``values`` (the decoder's
    merge and trim) stores the tensor as is; the next ``update`` moves it into a buffer with
    :data:`_HEADROOM` free positions. Built on first use (transformers is imported lazily)."""
    global _GrowingLayer
    if _GrowingLayer is not None:
        return _GrowingLayer
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        def _get(self, name: str) -> torch.Tensor | None:
            buffer = self.__dict__.get("_" + name)
            if buffer is None or buffer.dim() < 3:
                return buffer
            return buffer[..., : self.__dict__["_length_" + name], :]

        def _set(self, name: str, tensor: torch.Tensor | None) -> None:
            self.__dict__["_" + name] = tensor
            if tensor is not None and tensor.dim() >= 3:
                self.__dict__["_length_" + name] = tensor.shape[-2]

        keys = property(lambda self: self._get("keys"), lambda self, t: self._set("keys", t))
        values = property(lambda self: self._get("values"), lambda self, t: self._set("values", t))

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized or self.__dict__.get("_keys") is None:
                return super().update(key_states, value_states, *args, **kwargs)
            length, new = self.__dict__.get("_length_keys", 0), key_states.shape[-2]
            buffers = self.__dict__["_keys"], self.__dict__["_values"]
            if self.__dict__.get("_length_values") != length:
                raise RuntimeError("a cache layer's keys and values were set to different lengths")
            if buffers[0].dim() < 3 or length + new > min(b.shape[-2] for b in buffers):
                grown = []
                for buffer in buffers:
                    shape = list(buffer.shape) if buffer.dim() >= 3 else list(key_states.shape)
                    shape[-2] = length + new + _HEADROOM
                    bigger = key_states.new_empty(shape)
                    if length:
                        bigger[..., :length, :] = buffer[..., :length, :]
                    grown.append(bigger)
                self.__dict__["_keys"], self.__dict__["_values"] = buffers = tuple(grown)
            buffers[0][..., length : length + new, :] = key_states
            buffers[1][..., length : length + new, :] = value_states
            self.__dict__["_length_keys"] = self.__dict__["_length_values"] = length + new
            return self.keys, self.values

    _GrowingLayer = GrowingLayer
    return GrowingLayer


_GrowingLayer: type | None = None


def _with_headroom(cache: Any) -> None:
    """Swap ``cache``'s plain dynamic layers for growing ones (same tensors, no copy)."""
    layers = getattr(cache, "layers", None)
    if not layers:
        return
    from transformers.cache_utils import DynamicLayer

    growing = _growing_layer_class()
    for i, layer in enumerate(layers):
        if type(layer) is DynamicLayer and layer.is_initialized:
            swapped = growing.__new__(growing)
            swapped.__dict__.update(
                {k: v for k, v in layer.__dict__.items() if k not in ("keys", "values")}
            )
            swapped.keys, swapped.values = layer.keys, layer.values
            layers[i] = swapped


@dataclass(eq=False)
class _Row:
    """One reply being sampled."""

    key: int
    max_new_tokens: int
    temperature: float
    top_p: float
    stop: tuple[str, ...]
    top_logprobs: int
    generator: torch.Generator | None
    position: int
    """the position of the next token fed for this row (its tokens so far)"""
    adapter: str | None = None
    """the served LoRA adapter it samples under (``None``: the base model)"""
    fresh: bool = True
    """just prefilled: its first token comes from the prefill logits, no forward"""
    tokens: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    tops: list[list[tuple[int, float]]] = field(default_factory=list)
    tail: str = ""
    stop_hit: bool = False


class Decoder:
    """A batch of replies being sampled, which rows join (:meth:`add`) and leave between steps.

    Args:
        policy: the model, tokenizer and prefill (:class:`~verigym.agents.llm.policy.TransformersPolicy`).

    Only one thread may use a decoder (and the policy's model) at a time.
    """

    def __init__(self, policy: TransformersPolicy):
        self.policy = policy
        self.device = policy.device
        self.pad = policy.tokenizer.pad_token_id
        self.rows: list[_Row] = []
        self.cache: Any = None
        self.attention: torch.Tensor | None = None  # [rows, width] long, 1 where a key is real
        self.last: torch.Tensor | None = None  # [rows] the token each row feeds next
        self.pending: dict[int, torch.Tensor] = {}  # key -> float32 [vocab] prefill logits
        self._keys = itertools.count()
        from verigym.agents.llm import policy as module  # policy.py imports this module

        self._policy_module = module

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def joinable(self) -> bool:
        """Whether rows may join while others decode: the cache's layers are plain ones (a
        sliding-window layer keeps only its window, so padded rows cannot be merged into it)."""
        return self.cache is None or not any(
            getattr(layer, "is_sliding", False) for layer in getattr(self.cache, "layers", ())
        )

    # -- joining ----------------------------------------------------------------------------------------
    @torch.no_grad()
    def add(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        top_logprobs: int = 0,
        generator: torch.Generator | None = None,
        adapter: str | None = None,
    ) -> list[int]:
        """Prefill ``prompts`` and add one row per prompt; their first tokens are sampled by the
        next :meth:`step`. Options as in ``TransformersPolicy.generate``; ``adapter`` names a LoRA
        adapter the policy serves (``TransformersPolicy.serve_adapter``): these rows run under it
        while the batch's other rows run under theirs, in the same forward pass.

        Returns:
            one key per prompt (the key :meth:`step` and :meth:`drop` report it under).

        Raises:
            ValueError: an empty prompt, out-of-range options, or rows joining a running batch
                whose cache cannot take them (:attr:`joinable` is false).
        """
        check_sampling(max_new_tokens, temperature, top_p)
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        if not prompts:
            return []
        if self.rows and not self.joinable:
            raise ValueError("this model's cache (sliding-window layers) takes no rows mid-batch")
        policy, device = self.policy, self.device
        if adapter is not None and adapter not in policy.served_adapters:
            raise ValueError(f"no adapter {str(adapter)[:80]!r} is served")
        width = max(len(p) for p in prompts)
        attention = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
        for i, p in enumerate(prompts):
            attention[i, width - len(p) :] = 1
        if policy.prefix_cache is not None:
            cache, logits = policy._prefill_cached(prompts, width, adapter)
        else:
            input_ids = torch.full((len(prompts), width), self.pad, dtype=torch.long, device=device)
            for i, p in enumerate(prompts):
                input_ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            positions = (attention.cumsum(-1) - 1).clamp(min=0)
            cache, logits = policy._prefill(prompts, input_ids, attention, positions, adapter)
        stop = tuple(s for s in stop if s)
        keys = [next(self._keys) for _ in prompts]
        new_rows = [
            _Row(
                key,
                int(max_new_tokens),
                float(temperature),
                float(top_p),
                stop,
                int(top_logprobs),
                generator,
                len(p),
                adapter,
            )
            for key, p in zip(keys, prompts)
        ]
        last = torch.full((len(prompts),), self.pad, dtype=torch.long, device=device)
        if self.cache is None:
            _with_headroom(cache)
            self.cache, self.attention, self.last = cache, attention, last
        else:
            self._merge(cache, attention, last)
        self.rows.extend(new_rows)
        for key, row_logits in zip(keys, logits):
            self.pending[key] = row_logits
        return keys

    def _merge(self, cache: Any, attention: torch.Tensor, last: torch.Tensor) -> None:
        """Append new rows' cache (left-padded to their own width) to the batch: the narrower side
        is padded on the left with masked zero columns."""
        assert self.attention is not None and self.last is not None
        old, new = self.attention.shape[1], attention.shape[1]
        width = max(old, new)
        for mine, theirs in zip(self.cache.layers, cache.layers):
            mine.keys = torch.cat([_pad_left(mine.keys, width), _pad_left(theirs.keys, width)])
            mine.values = torch.cat(
                [_pad_left(mine.values, width), _pad_left(theirs.values, width)]
            )
        self.attention = torch.cat([_pad_left(self.attention, width), _pad_left(attention, width)])
        self.last = torch.cat([self.last, last])

    # -- leaving ---------------------------------------------------------------------------------------
    def drop(self, keys: Sequence[int]) -> list[tuple[int, Generation]]:
        """Stop the rows ``keys`` now (unknown keys are ignored).

        Returns:
            ``(key, reply so far)`` per dropped row (``finish_reason`` ``"length"``).
        """
        wanted = set(keys)
        gone = [row for row in self.rows if row.key in wanted]
        self._keep([row for row in self.rows if row.key not in wanted])
        return [(row.key, self._generation(row)) for row in gone]

    def _keep(self, rows: list[_Row]) -> None:
        """Keep only ``rows`` (in batch order) and trim the padding columns no row uses."""
        if len(rows) == len(self.rows):
            return
        kept = {row.key for row in rows}
        for row in self.rows:
            if row.key not in kept:
                self.pending.pop(row.key, None)
        if not rows:
            self.rows, self.cache, self.attention, self.last = [], None, None, None
            return
        where = {id(row): i for i, row in enumerate(self.rows)}
        index = torch.tensor([where[id(row)] for row in rows], device=self.device)
        assert self.attention is not None and self.last is not None
        attention = self.attention.index_select(0, index)
        used = attention.any(dim=0).nonzero()
        start = int(used[0, 0]) if len(used) and self.joinable else 0
        self.attention = attention[:, start:]
        self.last = self.last.index_select(0, index)
        for layer in self.cache.layers:
            if getattr(layer, "is_sliding", False):
                layer.batch_select_indices(index)
                continue
            layer.keys = layer.keys.index_select(0, index)[:, :, start:]
            layer.values = layer.values.index_select(0, index)[:, :, start:]
        self.rows = rows

    # -- the step ---------------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self) -> list[tuple[int, Generation]]:
        """Sample one token for every row: a forward pass over the rows' last tokens (none when
        every row has just joined), then each row's sampling; rows that are done leave.

        Returns:
            ``(key, reply)`` for every row that finished in this step.
        """
        if not self.rows:
            return []
        policy, device = self.policy, self.device
        assert self.attention is not None and self.last is not None
        fresh = [row.fresh for row in self.rows]
        if all(fresh):
            logits = torch.stack([self.pending[row.key] for row in self.rows])
        else:
            fed = torch.tensor([not f for f in fresh], dtype=torch.long, device=device)
            self.attention = torch.cat([self.attention, fed[:, None]], dim=1)
            positions = torch.tensor([[row.position] for row in self.rows], device=device)
            model, module = policy.model, self._policy_module
            out = model(
                input_ids=self.last[:, None],
                attention_mask=self.attention,
                position_ids=positions,
                use_cache=True,
                **module.with_cache(model, self.cache),
                **policy._keep_last,
                **policy.adapter_arguments([row.adapter for row in self.rows]),
            )
            self.cache = module.output_cache(out)
            logits = out.logits[:, -1, :].float()
            if any(fresh):
                for i, row in enumerate(self.rows):
                    if row.fresh:
                        logits[i] = self.pending[row.key]
            for row, f in zip(self.rows, fresh):
                row.position += 0 if f else 1
        for row in self.rows:
            if row.fresh:
                row.fresh = False
                self.pending.pop(row.key, None)
        tokens = torch.empty(len(self.rows), dtype=torch.long, device=device)
        token_log_probs = torch.empty(len(self.rows), dtype=torch.float32, device=device)
        groups: dict[tuple[float, float, int], list[int]] = {}
        for i, row in enumerate(self.rows):
            groups.setdefault((row.temperature, row.top_p, id(row.generator)), []).append(i)
        for indices in groups.values():
            first = self.rows[indices[0]]
            pick = (
                slice(None)
                if len(indices) == len(self.rows)
                else torch.tensor(indices, device=device)
            )
            token, log_prob = sample(logits[pick], first.temperature, first.top_p, first.generator)
            tokens[pick] = token
            token_log_probs[pick] = log_prob
        top_k = max(row.top_logprobs for row in self.rows)
        top: tuple[list[list[float]], list[list[int]]] | None = None
        if top_k:
            values, indices = torch.log_softmax(logits, dim=-1).topk(top_k, dim=-1)
            top = (values.tolist(), indices.tolist())
        self.last = tokens
        eos = policy.eos_token_ids
        decode = policy.tokenizer.decode
        done: list[tuple[int, Generation]] = []
        keep: list[_Row] = []
        for i, (row, token_id, log_prob) in enumerate(
            zip(self.rows, tokens.tolist(), token_log_probs.tolist())
        ):
            row.tokens.append(token_id)
            row.log_probs.append(log_prob)
            if row.top_logprobs and top is not None:
                k = row.top_logprobs
                row.tops.append(list(zip(top[1][i][:k], top[0][i][:k])))
            ended = token_id in eos
            if row.stop and not ended:
                row.tail, row.stop_hit = extend_tail(row.tail, decode([token_id]), row.stop)
                ended = row.stop_hit
            if ended or len(row.tokens) >= row.max_new_tokens:
                done.append((row.key, self._generation(row)))
            else:
                keep.append(row)
        self._keep(keep)
        return done

    def _generation(self, row: _Row) -> Generation:
        """The reply of ``row`` so far."""
        ids = list(row.tokens)
        text, reason = reply_text(self.policy, ids, row.stop, row.stop_hit)
        generation = self._policy_module.Generation(text, ids, list(row.log_probs), reason)
        if row.top_logprobs:
            generation.top_log_probs = list(row.tops)
        return generation


def check_sampling(max_new_tokens: int, temperature: float, top_p: float) -> None:
    """Refuse sampling options out of range: a token budget below 1, a negative temperature, a
    nucleus mass outside (0, 1].

    Raises:
        ValueError: naming the option and its value.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def extend_tail(tail: str, piece: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    """A reply's rolling text tail after ``piece`` (its next token's text), kept four times the
    longest of the non-empty ``stop`` strings long, and whether one of them is in it: a reply
    ends at the token whose text completes a stop string."""
    tail = (tail + piece)[-4 * max(len(s) for s in stop) :]
    return tail, any(s in tail for s in stop)


def reply_text(
    policy: TransformersPolicy, ids: Sequence[int], stop: Sequence[str], stop_hit: bool
) -> tuple[str, str]:
    """The text and finish reason of a reply of token ``ids``: decoded without a final EOS token
    and special tokens, cut before its first stop string when one ended it (``stop_hit``);
    ``"stop"`` when it ended at EOS or a stop string, else ``"length"``."""
    last_is_eos = bool(ids) and ids[-1] in policy.eos_token_ids
    text = policy.tokenizer.decode(ids[:-1] if last_is_eos else ids, skip_special_tokens=True)
    if stop_hit:
        text = text[: min((text.find(s) for s in stop if s in text), default=len(text))]
    return text, "stop" if last_is_eos or stop_hit else "length"


def _pad_left(tensor: torch.Tensor, width: int) -> torch.Tensor:
    """``tensor`` (keys/values ``[batch, heads, length, dim]`` or a mask ``[batch, length]``) with
    zero columns prepended up to ``width`` along its length dimension."""
    dim = 2 if tensor.dim() == 4 else 1
    missing = width - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)


def sample(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row of ``logits`` (float32 ``[rows, vocab]``); return the tokens
    (long ``[rows]``) and their log-probs under ``softmax(logits / T)`` (float32 ``[rows]``).

    A temperature so small that ``logits / T`` overflows (or underflows to 0 in float32, e.g.
    ``1e-300``) samples greedily, its limit; the most likely token is always in the top-p nucleus,
    however small ``top_p`` is.
    """
    scaled = logits / temperature if temperature else logits
    if temperature == 0 or (
        temperature < 1 and not bool(torch.isfinite(scaled[torch.isfinite(logits)]).all())
    ):
        log_p = torch.log_softmax(logits, dim=-1)
        token = logits.argmax(dim=-1)
        return token, log_p.gather(-1, token[:, None])[:, 0]
    log_p = torch.log_softmax(scaled, dim=-1)
    probs = log_p.exp()
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < top_p
        keep[:, 0] = True
        sorted_p = sorted_p * keep
        choice = torch.multinomial(sorted_p, 1, generator=generator)
        token = order.gather(-1, choice)[:, 0]
    else:
        token = torch.multinomial(probs, 1, generator=generator)[:, 0]
    return token, log_p.gather(-1, token[:, None])[:, 0]
