"""Supervised fine-tuning (SFT) of a local LLM on chat demonstrations, with LoRA or in full.

The data is JSON Lines of chat records (``{"messages": [...], "tools": [...]}``), as
``verigym export --format sft`` writes them (:mod:`verigym.leaderboards.demonstrations`): the
oracle's successful episodes on training seeds. The loss is the cross-entropy of the assistant
tokens only (the demonstrated replies and their end-of-turn token); system, user and tool tokens
are context. ``verigym train sft --model M --data D --out DIR`` runs it
(:mod:`verigym.commands.train_llm`).

Why our own loop and not TRL's ``SFTTrainer``: (1) TRL's assistant-only loss needs a chat template
with ``{% generation %}`` markers, which SmolLM2's (and most small models') templates lack; (2) the
tokens trained on must be the tokens the agent is shown when it plays, and verigym's agent renders
its prompts with :class:`~verigym.agents.llm.chat.ChatFormat` (the tokenizer's template, or the plain
layout without one) and speaks the tool envs' text protocol through the text view -- so each
episode is encoded here exactly as :class:`~verigym.agents.llm.grpo.GRPOTrainer` encodes a rollout:
the prompt up to the first reply, then per turn the reply's tokens plus the end-of-turn token
(trained) and the template's continuation to the next reply (not trained). One protocol per
path: records with native ``tool_calls`` are turned into that text protocol
(:func:`~verigym.toolcalls.messages_to_text`). The loop is ~100 lines: batches sorted
by length, AdamW, linear warm-up, gradient clipping, a token-mean loss.

LoRA (Hu et al. 2021) through ``peft``: ``lora_r > 0`` trains low-rank adapters on the attention
and MLP projections and saves only them (``adapter_config.json``, ``adapter_model.safetensors``);
``lora_r = 0`` fine-tunes every weight and saves the whole model. Load the result with
``TransformersPolicy.from_pretrained(base, adapter=DIR)`` or the agent spec
``llm:<base>?adapter=DIR``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from verigym.agents.llm.chat import ChatFormat
from verigym.agents.llm.configs import SFTConfig
from verigym.agents.llm.policy import TransformersPolicy, enable_activation_checkpointing
from verigym.toolcalls import messages_to_text

__all__ = [
    "MAX_DATA_BYTES",
    "MAX_RECORD_BYTES",
    "Example",
    "SFTConfig",
    "SupervisedTrainer",
    "encode_example",
    "load_records",
]

logger = logging.getLogger(__name__)

MAX_DATA_BYTES = 1 << 30
"""A data file larger than this (bytes) is refused."""
MAX_RECORD_BYTES = 1 << 20
"""A JSON line longer than this (bytes) is refused."""
_ROLES = ("system", "user", "assistant", "tool")


@dataclass
class Example:
    """One encoded episode.

    Attributes:
        token_ids: the episode's token ids (int).
        loss_mask: 1 where the token is a demonstrated assistant token (trained on), else 0; same
            length as ``token_ids``.
    """

    token_ids: list[int]
    loss_mask: list[int]


def load_records(path: str | Path, *, max_records: int = 100_000) -> list[dict[str, Any]]:
    """Read chat records from a JSON Lines file, bounded and checked.

    Args:
        path: the file (``verigym export --format sft``).
        max_records: read at most this many records.

    Returns:
        the records (each has a list ``messages`` of ``{"role", "content"}`` with optional
        ``tool_calls``/``tool_call_id``, at least one assistant message).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is over :data:`MAX_DATA_BYTES`, a line over :data:`MAX_RECORD_BYTES`
            or not JSON, a record without messages, a message with an unknown role or non-text
            content, or no record at all (the message names the line).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no data file {str(path)!r}")
    if path.stat().st_size > MAX_DATA_BYTES:
        raise ValueError(f"{path} is over {MAX_DATA_BYTES} bytes")
    records: list[dict[str, Any]] = []
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if len(records) >= max_records:
                break
            if len(line) > MAX_RECORD_BYTES:
                raise ValueError(f"{path}:{number}: a line over {MAX_RECORD_BYTES} bytes")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
            messages = record.get("messages") if isinstance(record, dict) else None
            if not isinstance(messages, list) or not messages:
                raise ValueError(f"{path}:{number}: a record needs a non-empty list 'messages'")
            for message in messages:
                if (
                    not isinstance(message, dict)
                    or message.get("role") not in _ROLES
                    or not isinstance(message.get("content") or "", str)
                ):
                    raise ValueError(
                        f"{path}:{number}: a message needs a role in {_ROLES} and text content: {str(message)[:200]}"
                    )
            if not any(m["role"] == "assistant" for m in messages):
                raise ValueError(f"{path}:{number}: a record without an assistant message")
            if record.get("protocol") == "tools":  # one protocol per path (issue 42)
                raise ValueError(
                    f"{path}:{number}: a tool-calling-protocol record (verigym export --protocol "
                    "tools, for TRL's SFTTrainer with a tool-aware chat template); verigym train sft "
                    "trains on the text view's protocol the agent plays in: export with --protocol text"
                )
            records.append(record)
    if not records:
        raise ValueError(f"{path} holds no records")
    return records


def encode_example(chat: ChatFormat, messages: Sequence[Mapping[str, Any]]) -> Example:
    """Token ids and loss mask of one episode, laid out as the agent sees it (see the module docstring).

    Args:
        chat: the model's :class:`~verigym.agents.llm.chat.ChatFormat`.
        messages: OpenAI chat messages (native tool calls are turned into the text protocol).

    Raises:
        ValueError: a malformed tool call (:func:`~verigym.toolcalls.messages_to_text`)
            or no assistant message.
    """
    plain = messages_to_text(messages)
    replies = [i for i, m in enumerate(plain) if m["role"] == "assistant"]
    if not replies:
        raise ValueError("an episode without an assistant message")
    eos = chat.tokenizer.eos_token if chat.use_template else None
    eos_ids = chat.encode(eos) if eos else []
    ids: list[int] = []
    mask: list[int] = []

    def add(tokens: list[int], trained: int) -> None:
        ids.extend(tokens)
        mask.extend([trained] * len(tokens))

    add(chat.encode(chat.render(plain[: replies[0]], add_generation_prompt=True)), 0)
    for k, index in enumerate(replies):
        add(chat.encode(plain[index]["content"]) + eos_ids, 1)
        if k + 1 == len(replies):
            break
        add(chat.encode(_between(chat, plain, index, replies[k + 1], bool(eos))), 0)
    return Example(ids, mask)


def _between(
    chat: ChatFormat, messages: list[dict[str, str]], reply: int, nxt: int, ended: bool
) -> str:
    """The prompt text after assistant message ``reply`` up to the header of assistant message ``nxt``."""
    if chat.use_template:
        before = chat.render(messages[: reply + 1], add_generation_prompt=False)
        after = chat.render(messages[:nxt], add_generation_prompt=True)
        if after.startswith(before):
            tail = after[len(before) :]
            cut = before.rfind(messages[reply]["content"]) + len(messages[reply]["content"])
            end_of_reply = before[cut:]  # the template's end-of-turn text after the reply
            tail = end_of_reply + tail
            eos = chat.tokenizer.eos_token
            if ended and eos and tail.startswith(eos):
                tail = tail[len(eos) :]
            return tail
    # a template that rewrites earlier turns: one user message at a time, as the GRPO rollout does
    text = ""
    for message in messages[reply + 1 : nxt]:
        text += chat.continuation(message["content"], reply_ended=ended)
        ended = False
    return text


def _selected_logits(
    model: Any, ids: torch.Tensor, attention: torch.Tensor, chosen: torch.Tensor
) -> torch.Tensor:
    """Logits ``(n, vocab)`` of the positions ``chosen`` (``(batch, length - 1)``, True where the
    next token is trained on): the decoder runs on every token, the LM head only on those (on a
    49k-token vocabulary the head is a fifth of a small model's work). Models whose head is not a
    plain linear layer over the decoder's output (logit soft-capping) get the full forward pass."""
    inner = model.get_base_model() if callable(getattr(model, "get_base_model", None)) else model
    decoder = inner.get_decoder() if callable(getattr(inner, "get_decoder", None)) else None
    head = inner.get_output_embeddings()
    plain = (
        decoder is not None
        and isinstance(head, torch.nn.Linear)
        and not getattr(inner.config, "final_logit_softcapping", None)
        and getattr(inner.config, "logit_scale", None) is None
    )
    if not plain:
        logits = model(input_ids=ids, attention_mask=attention, use_cache=False).logits
        return logits[:, :-1][chosen]
    hidden = decoder(input_ids=ids, attention_mask=attention, use_cache=False).last_hidden_state
    return head(hidden[:, :-1][chosen])


class SupervisedTrainer:
    """Fine-tune ``policy`` on chat records (assistant tokens only), with LoRA or in full.

    Args:
        policy: the model to train (a :class:`~verigym.agents.llm.policy.TransformersPolicy`).
            With ``lora_r > 0`` and no adapter yet, new LoRA layers are added
            (:meth:`~verigym.agents.llm.policy.TransformersPolicy.add_lora`); a policy that already
            has trainable LoRA layers trains those.
        records: chat records (:func:`load_records`).
        config: an :class:`SFTConfig`; keyword overrides are applied on top.
        callbacks: called with each logged metrics dict (``step``, ``epoch``, ``loss``,
            ``tokens``, ``lr``, ``seconds``).

    Raises:
        ValueError: no record has an assistant token within ``max_length``.
    """

    def __init__(
        self,
        policy: TransformersPolicy,
        records: Sequence[Mapping[str, Any]],
        config: SFTConfig | None = None,
        *,
        callbacks: Sequence[Callable[[Mapping[str, float]], Any]] = (),
        **overrides: Any,
    ):
        config = SFTConfig.from_dict(overrides) if config is None else config.replace(**overrides)
        self.config = config
        self.policy = policy
        self.callbacks = list(callbacks)
        torch.manual_seed(config.seed)
        if policy.model.dtype != torch.float32:
            policy.model.float()  # fp32 master weights: small AdamW steps vanish in bf16
        if config.lora_r > 0 and not policy.has_adapter:
            policy.add_lora(
                config.lora_r,
                alpha=config.lora_alpha,
                target_modules=config.lora_target_modules,
            )
        if config.gradient_checkpointing:
            enable_activation_checkpointing(policy.model)
        self.examples: list[Example] = []
        for record in records:
            example = encode_example(policy.chat, record["messages"])
            example.token_ids = example.token_ids[: config.max_length]
            example.loss_mask = example.loss_mask[: config.max_length]
            if any(example.loss_mask[1:]):
                self.examples.append(example)
        if not self.examples:
            raise ValueError(f"no record has an assistant token within {config.max_length} tokens")
        parameters = [p for p in policy.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            parameters,
            lr=config.learning_rate,
            weight_decay=config.weight_decay,
            fused=policy.device.type == "cuda",  # one kernel for every parameter's update
        )
        self.rng = np.random.default_rng(config.seed)
        self.global_step = 0
        self.log: list[dict[str, float]] = []

    # -- batches and loss -----------------------------------------------------------------------------
    def batches(self) -> list[list[Example]]:
        """One epoch's batches: shuffled, then sorted by length within windows of 16 batches
        (little padding), the batches in random order."""
        size = self.config.batch_size
        order = self.rng.permutation(len(self.examples))
        window = size * 16
        batches = []
        for start in range(0, len(order), window):
            chunk = sorted(
                order[start : start + window], key=lambda i: len(self.examples[i].token_ids)
            )
            batches += [
                [self.examples[i] for i in chunk[j : j + size]] for j in range(0, len(chunk), size)
            ]
        return [batches[i] for i in self.rng.permutation(len(batches))]

    def loss(self, batch: Sequence[Example]) -> tuple[torch.Tensor, int]:
        """Token-mean cross-entropy of the batch's assistant tokens, and their count.

        Returns:
            ``(loss, tokens)``: a scalar float32 tensor (with grad when enabled) and the number
            of trained tokens.
        """
        device = self.policy.device
        pad = int(self.policy.tokenizer.pad_token_id)
        width = max(len(e.token_ids) for e in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, example in enumerate(batch):
            n = len(example.token_ids)
            ids[row, :n] = torch.tensor(example.token_ids)
            mask[row, :n] = torch.tensor(example.loss_mask)
            attention[row, :n] = 1
        ids, mask, attention = ids.to(device), mask.to(device), attention.to(device)
        chosen = mask[:, 1:].bool()  # position t predicts token t + 1
        targets = ids[:, 1:][chosen]
        logits = _selected_logits(self.policy.model, ids, attention, chosen)
        tokens = int(targets.numel())
        loss = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="sum")
        return loss / max(tokens, 1), tokens

    @torch.no_grad()
    def mean_loss(self, examples: Sequence[Example] | None = None) -> float:
        """Token-mean loss over ``examples`` (default: the training set), without training."""
        examples = list(self.examples if examples is None else examples)
        model = self.policy.model
        was_training = model.training
        model.eval()
        total, count = 0.0, 0
        size = self.config.batch_size
        for start in range(0, len(examples), size):
            with self._autocast():
                loss, tokens = self.loss(examples[start : start + size])
            total += float(loss) * tokens
            count += tokens
        model.train(was_training)
        return total / max(count, 1)

    def _autocast(self) -> Any:
        device = self.policy.device
        enabled = self.config.bf16 if self.config.bf16 is not None else device.type == "cuda"
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bool(enabled))

    # -- the loop -------------------------------------------------------------------------------------
    def _lr(self, step: int, total: int) -> float:
        cfg = self.config
        if step < cfg.warmup_steps:
            return cfg.learning_rate * (step + 1) / (cfg.warmup_steps + 1)
        progress = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
        return cfg.learning_rate * max(0.0, 1.0 - progress)  # linear decay to 0

    def step(self, batch: Sequence[Example], total_steps: int) -> dict[str, float]:
        """One optimizer step on ``batch``; returns ``loss``, ``tokens``, ``lr``, ``grad_norm``."""
        model = self.policy.model
        model.train()
        lr = self._lr(self.global_step, total_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            loss, tokens = self.loss(batch)
        loss.backward()
        params = [p for p in model.parameters() if p.requires_grad]
        norm = torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        self.optimizer.step()
        self.global_step += 1
        return {"loss": loss.item(), "tokens": tokens, "lr": lr, "grad_norm": norm.item()}

    def train(self) -> list[dict[str, float]]:
        """Run ``epochs`` passes; log every ``log_every`` steps; save to ``output_dir`` when set.

        Returns:
            the logged metrics (one dict per logged step).
        """
        cfg = self.config
        per_epoch = math.ceil(len(self.examples) / cfg.batch_size)
        total = per_epoch * cfg.epochs
        start = time.perf_counter()
        window: list[dict[str, float]] = []
        for epoch in range(cfg.epochs):
            for batch in self.batches():
                window.append(self.step(batch, total))
                if self.global_step % cfg.log_every == 0 or self.global_step == total:
                    tokens = sum(m["tokens"] for m in window)
                    entry = {
                        "step": self.global_step,
                        "epoch": epoch + 1,
                        "loss": sum(m["loss"] * m["tokens"] for m in window) / max(tokens, 1),
                        "tokens": tokens,
                        "lr": window[-1]["lr"],
                        "grad_norm": window[-1]["grad_norm"],
                        "seconds": round(time.perf_counter() - start, 2),
                    }
                    window = []
                    self.log.append(entry)
                    logger.info("sft %s", entry)
                    for callback in self.callbacks:
                        callback(entry)
        self.policy.model.eval()
        self.policy._clear_cache()
        if cfg.output_dir:
            self.save(cfg.output_dir)
        return self.log

    def save(self, path: str | Path) -> None:
        """Write the adapter (LoRA) or the model (full fine-tuning), ``sft_config.json`` and
        ``train_log.jsonl`` to ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.policy.save_pretrained(path)
        (path / "sft_config.json").write_text(self.config.to_json() + "\n")
        with (path / "train_log.jsonl").open("w") as handle:
            for entry in self.log:
                handle.write(json.dumps(entry) + "\n")
