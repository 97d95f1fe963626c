"""TransformersPolicy: a local Hugging Face causal LM that samples replies with their log-probs.

Loads a model and tokenizer from a local directory (never from a hub), samples a batch of
prompts with left padding, temperature, top-p, stop strings and a new-token budget, and returns for
each prompt the reply text, its token ids and the log-prob of every sampled token. The log-probs
are ``log_softmax(logits / temperature)`` of the unmodified logits -- the same quantity
:func:`verigym.agents.llm.grpo.token_log_probs` computes in a training forward pass, so the GRPO
trainer can use them as the "old" policy log-probs.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from verigym.agents.llm.chat import ChatFormat, Message
from verigym.agents.llm.configs import DEFAULT_LORA_TARGETS  # defined without torch
from verigym.agents.llm.decoding import Decoder

__all__ = [
    "DEFAULT_LORA_TARGETS",
    "Generation",
    "ADAPTER_FILES",
    "PrefixCache",
    "TransformersPolicy",
    "adapter_digest",
    "load_adapter",
    "load_trainable_policy",
    "resolve_device",
]

logger = logging.getLogger(__name__)


def load_adapter(model: Any, adapter: str | os.PathLike[str], *, trainable: bool = False) -> Any:
    """``model`` with the LoRA adapter folder ``adapter`` applied (the loader ``serve-model
    --adapter`` needs too).

    Args:
        model: a ``transformers`` causal LM (the adapter's base model).
        adapter: a folder checked by :func:`~verigym.agents.llm.models.adapter_config` (its
            checked config is what peft gets).
        trainable: return the ``peft`` model with trainable LoRA layers; otherwise the adapter is
            merged into the weights and a plain ``transformers`` model is returned.

    Raises:
        FileNotFoundError, ValueError: as :func:`~verigym.agents.llm.models.adapter_config` (a
            refused field: one line naming it).
        ImportError: ``peft`` is not installed.
    """
    folder, config = _checked_lora_config(adapter, "loading")
    from peft import PeftModel

    # peft is given the checked config, not a second read of the file (which could have changed)
    wrapped = PeftModel.from_pretrained(model, str(folder), is_trainable=trainable, config=config)
    return wrapped if trainable else wrapped.merge_and_unload()


def _checked_lora_config(adapter: str | os.PathLike[str], use: str) -> tuple[Path, Any]:
    """The adapter folder, resolved, and a ``peft.LoraConfig`` built from its checked config
    (:func:`~verigym.agents.llm.models.adapter_config` bounds it field by field before peft sees
    it; fields peft does not know are dropped).

    Raises:
        FileNotFoundError, ValueError: as ``adapter_config``.
        ImportError: ``peft`` is not installed (the message says what ``use`` needed it).
    """
    import dataclasses

    from verigym.agents.llm.models import adapter_config

    checked = adapter_config(adapter)
    try:
        from peft import LoraConfig
    except ImportError:
        raise ImportError(f"{use} a LoRA adapter needs peft: pip install peft") from None
    known = {field.name for field in dataclasses.fields(LoraConfig)}
    config = LoraConfig(**{key: value for key, value in checked.items() if key in known})
    return Path(adapter).expanduser().resolve(), config


ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""The files of a LoRA adapter folder that :func:`adapter_digest` hashes, in that order."""


def adapter_digest(adapter: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a LoRA adapter folder's :data:`ADAPTER_FILES`, each prefixed by its byte
    length: what ``verigym serve-model --lora`` reports as a served adapter's ``adapter_sha256``.

    Raises:
        OSError: a file cannot be read.
    """
    folder = Path(adapter).expanduser()
    return _digest([(folder / name).read_bytes() for name in ADAPTER_FILES])


def _digest(files: Sequence[bytes]) -> str:
    import hashlib

    digest = hashlib.sha256()
    for data in files:
        digest.update(f"{len(data)}:".encode() + data)
    return digest.hexdigest()


def load_trainable_policy(
    model: str | os.PathLike[str],
    *,
    device: str = "auto",
    adapter: str | os.PathLike[str] | None = None,
    lora_r: int = 0,
    lora_alpha: float | None = None,
    target_modules: Sequence[str] = DEFAULT_LORA_TARGETS,
) -> TransformersPolicy:
    """The policy a trainer (GRPO, SFT) starts from: ``model`` with ``adapter`` kept trainable,
    or with new LoRA layers of rank ``lora_r`` when it has none (``lora_r`` 0: every weight trains).

    The model and adapter folders are checked first (:func:`~verigym.agents.llm.models.check_model`,
    :func:`~verigym.agents.llm.models.check_adapter`), so a missing file is one line before any
    weights load.

    Raises:
        FileNotFoundError, ImportError, OSError, ValueError: the model or adapter cannot be loaded,
            or ``lora_r`` < 0.
    """
    from verigym.agents.llm.models import check_adapter, check_model

    if lora_r < 0:
        raise ValueError(f"lora_r must be >= 0, got {lora_r}")
    check_model(model)  # before the model loads: one line saying what is missing
    if adapter:
        check_adapter(adapter)
    policy = TransformersPolicy.from_pretrained(
        model, device=device, adapter=adapter, trainable_adapter=True
    )
    if lora_r > 0 and not policy.has_adapter:
        policy.add_lora(lora_r, alpha=lora_alpha, target_modules=tuple(target_modules))
    return policy


def enable_activation_checkpointing(model: Any) -> None:
    """Recompute each decoder layer's activations in the backward pass instead of keeping them
    (``transformers``' activation checkpointing, non-reentrant): memory per trained token drops from
    every layer's activations to one layer's, for a second forward of each layer. SFT of
    SmolLM2-135M on 16 ~620-token episodes in batches of 8 peaked at 1.8 GB with it, 7.8 GB
    without (both with ``MALLOC_MMAP_THRESHOLD_=1048576``, see scripts/train_llm_agent.sh)."""
    enable = (
        getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5.2x
        or model.gradient_checkpointing_enable
    )
    enable()


def base_model_class(model: Any) -> type:
    """The class of the ``transformers`` model under a ``peft`` wrapper (its own class otherwise):
    whose ``forward`` signature says which arguments the model takes."""
    get_base = getattr(model, "get_base_model", None)
    return type(get_base() if callable(get_base) else model)


@functools.cache
def _cache_argument(forward: Any) -> str:
    """The forward argument that takes the KV cache: ``cache`` (transformers >= 5.2x) or
    ``past_key_values`` (earlier; a deprecated alias later)."""
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def with_cache(model: Any, cache: Any) -> dict[str, Any]:
    """Keyword arguments passing the KV cache ``cache`` to ``model``'s forward, under the name its
    transformers version uses."""
    return {_cache_argument(base_model_class(model).forward): cache}


def output_cache(output: Any) -> Any:
    """The KV cache of a model output (``output.cache``, or ``output.past_key_values`` before)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA when present, else CPU; anything else is passed to :class:`torch.device`."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass
class Generation:
    """One sampled reply.

    Attributes:
        text: the reply, cut before the first stop string (the EOS token is not in the text).
        token_ids: the sampled token ids, including the EOS token when it ended the reply and the
            tokens of a stop string (they were sampled).
        log_probs: float32 list, one log-prob per entry of ``token_ids``.
        finish_reason: ``"stop"`` (EOS or a stop string) or ``"length"`` (budget spent).
        top_log_probs: when asked for (``generate(top_logprobs=k)``), per sampled token the ``k``
            most likely ``(token_id, log_prob)`` pairs under ``softmax(logits)`` (temperature 1).
    """

    text: str
    token_ids: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    finish_reason: str = "length"
    top_log_probs: list[list[tuple[int, float]]] | None = None


class PrefixCache:
    """A bounded LRU of per-prompt KV caches, looked up by longest token-id prefix.

    A multi-turn episode's next prompt starts with its previous prompt (the conversation so far),
    so keeping each prompt's keys/values lets the next turn prefill only its new tokens; a prompt
    that shares a long start with a stored one (another episode of the task: the same system prompt
    and tools) prefills only what follows that start. Entries are
    one prompt each: per layer a ``(keys, values)`` pair of shape ``[kv_heads, length, head_dim]``
    in the model's dtype. The least recently used entries are dropped once the entries hold more than
    ``max_bytes``; storing a prompt drops the entries (of at least :attr:`MIN_SHARED` tokens) that
    are a start of it, so a conversation holds one entry, its latest turn.

    Args:
        max_bytes: memory bound of the stored tensors, in bytes (> 0).

    Raises:
        ValueError: ``max_bytes`` <= 0.
    """

    MIN_SHARED = 32
    """Tokens a stored prompt must share with a new one to be reused when it is not a whole prefix
    of it (fewer save nothing worth a copy)."""

    def __init__(self, max_bytes: int):
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.reused_tokens = 0
        # tokens forwarded after the reused starts (what the cache missed)
        self.prefilled_tokens = 0
        # keyed by (adapter, prompt): a served adapter's keys/values are not the base model's
        self._entries: OrderedDict[
            tuple[str, tuple[int, ...]], tuple[list[tuple[torch.Tensor, torch.Tensor]], int]
        ] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every entry (the weights changed, so every stored key/value is stale)."""
        self._entries.clear()
        self.bytes = 0

    def longest(
        self, prompt: Sequence[int], adapter: str = ""
    ) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]] | None]:
        """The longest start of ``prompt`` whose keys/values are stored (that entry is refreshed
        as recently used): a stored prompt that is a prefix of ``prompt`` (the conversation's
        earlier turn), or the common start of ``prompt`` and a stored one when it is at least
        :attr:`MIN_SHARED` tokens (episodes of one task share their system prompt and tools). Only
        entries stored under the same ``adapter`` (a served LoRA adapter's name; ``""`` the base
        model) are looked at.

        Returns:
            ``(length, layers)``, the entry's ``layers`` holding at least ``length`` positions
            (use the first ``length``); ``(0, None)`` when nothing is shared.
        """
        best: tuple[str, tuple[int, ...]] | None = None
        best_length = 0
        for entry in self._entries:
            owner, key = entry
            if owner != adapter:
                continue
            shared = _common_length(key, prompt)
            if shared > best_length and (shared == len(key) or shared >= self.MIN_SHARED):
                best, best_length = entry, shared
        if best is None:
            self.misses += 1
            return 0, None
        self._entries.move_to_end(best)
        self.hits += 1
        return best_length, self._entries[best][0]

    def put(
        self,
        prompt: Sequence[int],
        layers: list[tuple[torch.Tensor, torch.Tensor]],
        adapter: str = "",
    ) -> None:
        """Store ``prompt``'s keys/values (``[kv_heads, len(prompt), head_dim]`` per layer), computed
        under ``adapter`` (``""``: the base model)."""
        key = (adapter, tuple(prompt))
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if size > self.max_bytes:
            return
        if key in self._entries:
            self.bytes -= self._entries.pop(key)[1]
        # an entry that is a start of this prompt (the conversation's earlier turn) is superseded:
        # every lookup it served finds at least as long a start here. Dropping it keeps one entry
        # per conversation, so twice as many conversations fit before the LRU evicts (with ~20
        # episodes in flight each turn's entry crowded the others' out, and every turn re-prefilled
        # its whole conversation). Shorter starts than MIN_SHARED stay (a whole-prefix hit only).
        prompt_key = key[1]
        superseded = [
            entry
            for entry in self._entries
            if entry[0] == adapter
            and self.MIN_SHARED <= len(entry[1]) < len(prompt_key)
            and prompt_key[: len(entry[1])] == entry[1]
        ]
        for entry in superseded:
            self.bytes -= self._entries.pop(entry)[1]
        self._entries[key] = (layers, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            self.bytes -= self._entries.popitem(last=False)[1][1]


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    step = 64
    at = 0
    while at < n and tuple(a[at : at + step]) == tuple(b[at : at + step]):
        at += step
    if at >= n:
        return n
    while at < n and a[at] == b[at]:
        at += 1
    return at


class TransformersPolicy:
    """A causal LM and its tokenizer, sampling batched replies.

    Args:
        model: a ``transformers`` causal LM (``AutoModelForCausalLM``).
        tokenizer: its tokenizer; a pad token is set to EOS when it has none.
        use_chat_template: use the tokenizer's chat template (when it has one); ``False`` forces
            the plain ``User:``/``Assistant:`` layout.
        prefix_cache_bytes: keep the KV caches of recent prompts (a :class:`PrefixCache` of this
            many bytes) so a prompt that extends an earlier one (the next turn of a conversation)
            prefills only its new tokens; 0 (the default) turns it off. The cache is emptied
            whenever any weight changes in place (an optimizer step), so it is safe under training.

    Use :meth:`from_pretrained` to load from a directory.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        use_chat_template: bool | None = None,
        prefix_cache_bytes: int = 0,
    ):
        self.model = model
        self.prefix_cache: PrefixCache | None = (
            PrefixCache(prefix_cache_bytes) if prefix_cache_bytes > 0 else None
        )
        self._weights_version: int | None = None
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token is None:
                raise ValueError(
                    "the tokenizer has neither a pad nor an EOS token; set tokenizer.pad_token"
                )
            tokenizer.pad_token = tokenizer.eos_token
        self.chat = ChatFormat(tokenizer, use_template=use_chat_template)
        eos = (
            model.generation_config.eos_token_id
            if getattr(model, "generation_config", None)
            else None
        )
        eos_ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        if eos is not None:
            eos_ids |= set(eos) if isinstance(eos, (list, tuple)) else {int(eos)}
        self.eos_token_ids: frozenset[int] = frozenset(eos_ids)
        self.max_context_tokens = int(
            getattr(model.config, "max_position_embeddings", 0) or 1 << 30
        )
        accepts = inspect.signature(base_model_class(model).forward).parameters
        self._keep_last = {"logits_to_keep": 1} if "logits_to_keep" in accepts else {}
        self.served_adapters: dict[str, str] = {}
        """name -> SHA-256 of the files of each LoRA adapter served beside the base model
        (:meth:`serve_adapter`)"""

    # -- loading / saving ----------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike[str],
        *,
        device: str = "auto",
        dtype: str | torch.dtype = "auto",
        use_chat_template: bool | None = None,
        prefix_cache_bytes: int = 0,
        adapter: str | os.PathLike[str] | None = None,
        trainable_adapter: bool = False,
    ) -> TransformersPolicy:
        """Load a local model with its tokenizer, and optionally a LoRA adapter on it; no hub access.

        Args:
            path: a directory with ``config.json``, weights and tokenizer files, a ``.gguf`` file
                (dequantized once and cached, see :mod:`verigym.agents.llm.models`) or a short
                name such as ``"smollm2"``.
            device: ``"auto"`` (CUDA when present, else CPU), ``"cpu"``, ``"cuda:0"``, ...
            dtype: ``"auto"`` (bfloat16 on CUDA, float32 on CPU) or a torch dtype.
            prefix_cache_bytes: see :class:`TransformersPolicy` (0: no prefix cache).
            adapter: a LoRA adapter folder (``peft`` ``save_pretrained``: ``adapter_config.json``
                and ``adapter_model.safetensors``, checked by
                :func:`~verigym.agents.llm.models.check_adapter`) applied to the base model.
            trainable_adapter: keep the adapter as trainable LoRA layers (to train it further);
                otherwise it is merged into the weights (inference runs at the base model's speed).

        Raises:
            FileNotFoundError: ``path`` is no such directory, file or short name, or ``adapter``
                is not an adapter folder.
            ValueError: the adapter's config is not a LoRA config.
            ImportError: an adapter without the ``peft`` package.
        """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from verigym.agents.llm.models import resolve_model

        path = resolve_model(path)
        target = resolve_device(device)
        if dtype == "auto":
            dtype = torch.bfloat16 if target.type == "cuda" else torch.float32
        elif isinstance(dtype, str):
            dtype = getattr(torch, dtype)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True).to(
            target
        )
        if adapter is not None and str(adapter):
            model = load_adapter(model, adapter, trainable=trainable_adapter)
        model.eval()
        return cls(
            model,
            tokenizer,
            use_chat_template=use_chat_template,
            prefix_cache_bytes=prefix_cache_bytes,
        )

    def save_pretrained(self, path: str | os.PathLike[str]) -> None:
        """Write model and tokenizer in Hugging Face format (safetensors) to ``path``; a model
        with LoRA layers (:meth:`add_lora`, a trainable adapter) writes only its adapter
        (``adapter_config.json``, ``adapter_model.safetensors``: MBs, not the model)."""
        Path(path).mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        if not self.has_adapter:
            self.tokenizer.save_pretrained(path)

    @property
    def has_adapter(self) -> bool:
        """Whether the model is a ``peft`` model (trainable LoRA layers on a frozen base)."""
        return hasattr(self.model, "peft_config")

    def add_lora(
        self,
        r: int,
        *,
        alpha: float | None = None,
        target_modules: Sequence[str] = DEFAULT_LORA_TARGETS,
        dropout: float = 0.0,
    ) -> None:
        """Wrap the model in new LoRA layers (Hu et al. 2021, via ``peft``): only they train.

        Args:
            r: the rank (>= 1).
            alpha: the LoRA scale numerator (the update is ``alpha / r * B A``); default ``2 r``.
            target_modules: names of the linear layers that get adapters (the attention and MLP
                projections of Llama/Qwen models by default).
            dropout: dropout on the adapters' input.

        Raises:
            ValueError: ``r`` < 1, or no module of the model has one of the names.
            ImportError: ``peft`` is not installed.
        """
        if r < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {r}")
        from peft import LoraConfig, get_peft_model

        names = {name.rsplit(".", 1)[-1] for name, _ in self.model.named_modules()}
        targets = [t for t in target_modules if t in names]
        if not targets:
            raise ValueError(
                f"no module named {', '.join(target_modules)} in {type(self.model).__name__}"
            )
        config = LoraConfig(
            r=int(r),
            lora_alpha=float(alpha if alpha is not None else 2 * r),
            target_modules=targets,
            lora_dropout=float(dropout),
            bias="none",
            task_type="CAUSAL_LM",
        )
        self.model = get_peft_model(self.model, config)
        self._clear_cache()

    def serve_adapter(self, name: str, adapter: str | os.PathLike[str]) -> str:
        """Load the LoRA adapter folder ``adapter`` beside the base weights, unmerged, under
        ``name``: a batch may then mix rows of the base model and of any served adapter (peft's
        mixed-batch inference, ``adapter_names``), so one decoding step serves them all.
        :meth:`generate` and the :class:`~verigym.agents.llm.decoding.Decoder` take ``adapter=name``
        per call; without it a row is the base model's.

        Args:
            name: the adapter's name (1 to 64 characters of letters, digits and ``._-``; not
                ``__base__``), e.g. the model id a server serves it as.
            adapter: a folder checked by :func:`~verigym.agents.llm.models.adapter_config`.

        Returns:
            the adapter's :func:`adapter_digest`, which names what is served.

        Raises:
            FileNotFoundError, ValueError: as :func:`~verigym.agents.llm.models.adapter_config`,
                or a bad or taken name, or a policy that is already a trainable peft model.
            ImportError: ``peft`` is not installed.
        """
        import re

        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):
            raise ValueError(
                f"an adapter name is 1 to 64 letters, digits and ._- (a letter or digit first), "
                f"got {str(name)[:80]!r}"
            )
        if name in self.served_adapters:
            raise ValueError(f"an adapter is already served as {name!r}")
        if self.has_adapter and not self.served_adapters:
            raise ValueError("this policy's model already has (trainable) LoRA layers")
        folder, config = _checked_lora_config(adapter, "serving")
        from peft import PeftModel
        from peft.utils import set_peft_model_state_dict
        from safetensors.torch import load as load_safetensors

        config.inference_mode = True
        files = [(folder / file).read_bytes() for file in ADAPTER_FILES]
        digest = _digest(files)  # of the very bytes the weights are loaded from
        weights = {k: v.to(self.device) for k, v in load_safetensors(files[1]).items()}
        if not self.served_adapters:
            self.model = PeftModel(self.model, config, adapter_name=name)
        else:
            self.model.add_adapter(name, config)
        result = set_peft_model_state_dict(self.model, weights, adapter_name=name)
        unused = [k for k in getattr(result, "unexpected_keys", ()) if "lora_" in k]
        absent = [k for k in getattr(result, "missing_keys", ()) if f".{name}." in k]
        if unused or absent:
            raise ValueError(
                f"{folder}: its weights do not match the model's LoRA layers "
                f"({', '.join((unused + absent)[:3])})"
            )
        self.model.eval()
        self._clear_cache()
        self.served_adapters[name] = digest
        return self.served_adapters[name]

    def adapter_arguments(self, adapters: Sequence[str | None]) -> dict[str, Any]:
        """The forward keyword that runs row ``i`` under ``adapters[i]`` (``None``: the base model)
        when adapters are served; ``{}`` otherwise."""
        if not self.served_adapters:
            return {}
        return {"adapter_names": [a or "__base__" for a in adapters]}

    @contextlib.contextmanager
    def adapter_scope(self, adapter: str | None) -> Iterator[None]:
        """Within the block, a forward without ``adapter_names`` (a whole-model call such as a
        scoring pass) runs under the served ``adapter`` (``None``: the base model).

        Raises:
            ValueError: no adapter of that name is served.
        """
        if adapter is not None and adapter not in self.served_adapters:
            raise ValueError(f"no adapter {str(adapter)[:80]!r} is served")
        if not self.served_adapters:
            yield
            return
        if adapter is None:
            with self.model.disable_adapter():
                yield
            return
        before = self.model.active_adapter
        self.model.set_adapter(adapter, inference_mode=True)
        try:
            yield
        finally:
            self.model.set_adapter(before, inference_mode=True)

    def _clear_cache(self) -> None:
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        self._weights_version = None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # -- prompts ---------------------------------------------------------------------------------------
    def encode_messages(self, messages: Sequence[Message]) -> list[int]:
        """Prompt token ids of a conversation, ending with the assistant header."""
        return self.chat.encode(self.chat.render(messages))

    # -- sampling --------------------------------------------------------------------------------------
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
        top_logprobs: int = 0,
        adapter: str | None = None,
    ) -> list[Generation]:
        """Sample one reply per prompt (a batch, left-padded): one
        :class:`~verigym.agents.llm.decoding.Decoder` (the decoding step the model server shares)
        that every prompt joins at once; a row leaves the batch when its reply is done.

        Args:
            prompts: token ids of each prompt.
            max_new_tokens: budget of sampled tokens per reply (>= 1).
            temperature: ``0`` is greedy; otherwise logits are divided by it before sampling.
            top_p: nucleus sampling mass in (0, 1].
            stop: strings that end a reply (besides EOS); the text is cut before them.
            generator: a seeded ``torch.Generator`` on the model's device, for reproducible samples.
            top_logprobs: also keep the ``top_logprobs`` most likely tokens of every step
                (:attr:`Generation.top_log_probs`); 0 keeps none.
            adapter: the name of a served LoRA adapter (:meth:`serve_adapter`) to sample under;
                ``None``: the base model.

        Returns:
            one :class:`Generation` per prompt, in order.

        Raises:
            ValueError: empty prompt, or out-of-range ``max_new_tokens``/``temperature``/``top_p``.
        """
        decoder = self.decoder()
        keys = decoder.add(
            prompts,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            stop=stop,
            top_logprobs=top_logprobs,
            generator=generator,
            adapter=adapter,
        )
        results: dict[int, Generation] = {}
        while len(decoder):
            results.update(decoder.step())
        return [results[key] for key in keys]

    def decoder(self) -> Decoder:
        """A new running batch over this model (:class:`~verigym.agents.llm.decoding.Decoder`):
        the decoding step :meth:`generate` and the model server share."""
        return Decoder(self)

    def _prefill(
        self,
        prompts: Sequence[Sequence[int]],
        input_ids: torch.Tensor,
        attention: torch.Tensor,
        positions: torch.Tensor,
        adapter: str | None = None,
    ) -> tuple[Any, torch.Tensor]:
        """KV cache and last-position float32 logits of the padded prompts, under the served
        ``adapter`` (``None``: the base model).

        Identical prompts (a GRPO group: G rollouts of one task) are run once and their cache rows
        copied, so a group of G costs one prompt forward instead of G.
        """
        rows: dict[tuple[int, ...], int] = {}
        index = [rows.setdefault(tuple(p), len(rows)) for p in prompts]
        if len(rows) < len(prompts):
            firsts = [index.index(u) for u in range(len(rows))]
            pick = torch.tensor(firsts, device=input_ids.device)
            out = self.model(
                input_ids=input_ids[pick],
                attention_mask=attention[pick],
                position_ids=positions[pick],
                use_cache=True,
                **self._keep_last,
                **self.adapter_arguments([adapter] * len(firsts)),
            )
            cache = output_cache(out)
            if hasattr(cache, "reorder_cache"):
                spread = torch.tensor(index, device=input_ids.device)
                cache.reorder_cache(spread)
                return cache, out.logits[spread, -1, :].float()
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            **self._keep_last,
            **self.adapter_arguments([adapter] * len(prompts)),
        )
        return output_cache(out), out.logits[:, -1, :].float()

    def _prefill_cached(
        self, prompts: Sequence[Sequence[int]], width: int, adapter: str | None = None
    ) -> tuple[Any, torch.Tensor]:
        """Like :meth:`_prefill`, but each distinct prompt runs alone from its longest cached prefix.

        Each prompt forwards only the tokens after the longest prefix found in the
        :class:`PrefixCache` (at least its last token, for the logits), with that prefix's keys and
        values as past, and its full keys/values are stored back. The rows are then left-padded with
        zeros to ``width`` (masked out by the caller's attention mask) into one batch cache.
        """
        from transformers import DynamicCache

        cache = self.prefix_cache
        assert cache is not None
        version = sum(p._version for p in self.model.parameters())
        if version != self._weights_version:
            cache.clear()
            self._weights_version = version
        device = self.device
        rows: dict[tuple[int, ...], int] = {}
        index = [rows.setdefault(tuple(p), len(rows)) for p in prompts]
        row_layers: list[list[tuple[torch.Tensor, torch.Tensor]]] = []
        row_logits: list[torch.Tensor] = []
        for prompt in rows:
            n = len(prompt)
            start, stored = cache.longest(prompt, adapter or "")
            start = min(start, n - 1)
            past = None
            if stored is not None and start > 0:
                past = DynamicCache([(k[None, :, :start], v[None, :, :start]) for k, v in stored])
                cache.reused_tokens += start
            else:
                start = 0
            cache.prefilled_tokens += n - start
            out = self.model(
                input_ids=torch.tensor([prompt[start:]], dtype=torch.long, device=device),
                attention_mask=torch.ones((1, n), dtype=torch.long, device=device),
                position_ids=torch.arange(start, n, device=device)[None],
                use_cache=True,
                **with_cache(self.model, past),
                **self._keep_last,
                **self.adapter_arguments([adapter]),
            )
            layers = [(layer.keys[0], layer.values[0]) for layer in output_cache(out).layers]
            cache.put(prompt, layers, adapter or "")
            row_layers.append(layers)
            row_logits.append(out.logits[0, -1, :].float())
        batch = []
        for j in range(len(row_layers[0])):
            k0, v0 = row_layers[0][j]
            keys = k0.new_zeros((len(prompts), k0.shape[0], width, k0.shape[2]))
            values = v0.new_zeros((len(prompts), v0.shape[0], width, v0.shape[2]))
            for i, r in enumerate(index):
                k, v = row_layers[r][j]
                keys[i, :, width - k.shape[1] :] = k
                values[i, :, width - v.shape[1] :] = v
            batch.append((keys, values))
        return DynamicCache(batch), torch.stack([row_logits[r] for r in index])

    def chat_complete(
        self,
        conversations: Sequence[Sequence[Message]],
        **sampling: Any,
    ) -> list[Generation]:
        """Reply to each conversation (a list of messages); ``sampling`` as in :meth:`generate`."""
        stop = tuple(sampling.pop("stop", ())) + self.chat.stop_strings
        prompts = [self.encode_messages(c) for c in conversations]
        return self.generate(prompts, stop=stop, **sampling)
