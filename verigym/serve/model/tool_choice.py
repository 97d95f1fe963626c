"""``tool_choice`` forcing in the model server: the forced call's opening, the choice of the
function under ``"required"``, and the reply read back as the forced call (the rules are in
:mod:`verigym.serve.model.server`'s docstring).

The server prompts with the Hermes tool-call format; a forced call extends the prompt by its
opening (:func:`tool_call_opening`), so the model writes only the arguments.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from verigym.core import ActionParseError
from verigym.toolcalls import openai_tool_call, tool_calls_in

if TYPE_CHECKING:
    from verigym.agents.llm.policy import Generation, TransformersPolicy

__all__ = ["REQUIRED", "draw", "forced_calls", "score_openings", "tool_call_opening"]

REQUIRED = "\x00required"
"""The forced-call marker of ``tool_choice="required"`` with several tools (never a tool name:
names are printable)."""


def tool_call_opening(name: str) -> str:
    """The text a forced call of ``name`` starts with: the Hermes opening up to the arguments,
    ``<tool_call>\\n{"name": "<name>", "arguments": {`` (the arguments' own brace included: they
    are a JSON object, and a small model that is not shown the brace writes a bare value)."""
    return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {{'


def score_openings(
    policy: TransformersPolicy,
    prompt: list[int],
    openings: list[list[int]],
    adapter: str | None = None,
) -> list[float]:
    """Log-probability (float, nats) of each opening (token ids) after ``prompt``, in one forward
    pass (the prompt's KV cache is computed once and shared by the openings), under the served
    LoRA ``adapter`` (``None``: the base model). Runs on the batcher thread."""
    import contextlib

    import torch

    from verigym.agents.llm.grpo import token_log_probs

    width = max(len(o) for o in openings)
    pad = policy.tokenizer.pad_token_id
    device = policy.device
    ids = torch.tensor([prompt + o + [pad] * (width - len(o)) for o in openings], device=device)
    mask = torch.tensor(
        [[1] * (len(prompt) + len(o)) + [0] * (width - len(o)) for o in openings],
        device=device,
    )
    start = len(prompt) - 1
    scope = getattr(policy, "adapter_scope", None)
    with torch.no_grad(), scope(adapter) if scope else contextlib.nullcontext():
        log_probs, _ = token_log_probs(
            policy.model,
            ids,
            mask,
            start=start,
            shared_prefix=start if len(openings) > 1 else 0,
        )
    return (log_probs * mask[:, len(prompt) :]).sum(-1).tolist()


def draw(names: list[str], scores: list[float], temperature: float, n: int) -> list[str]:
    """``n`` names drawn from ``softmax(scores / temperature)`` (the best at temperature 0, or
    when a score is not finite)."""
    if temperature == 0 or not all(math.isfinite(s) for s in scores):
        best = max(range(len(names)), key=lambda i: (scores[i], -i))
        return [names[best]] * n
    top = max(scores)
    try:
        weights = [math.exp((s - top) / temperature) for s in scores]
    except OverflowError:
        weights = [1.0 if s == top else 0.0 for s in scores]
    if not all(math.isfinite(w) for w in weights) or sum(weights) <= 0:
        weights = [1.0 if s == top else 0.0 for s in scores]
    return random.choices(names, weights=weights, k=n)


def forced_calls(
    name: str, reply: Generation, names: Sequence[str], parallel: bool
) -> tuple[list[dict[str, Any]], str]:
    """(OpenAI tool_calls, finish_reason) of a reply whose opening forced a call of ``name``.

    ``reply.text`` continues the opening, so ``"{" + reply.text`` starts with the arguments:
    the JSON object there (re-serialised), else the raw text up to ``</tool_call>`` with the
    call's closing brace dropped. Complete calls of offered tools (``names``) written after it
    are kept when ``parallel``.
    """
    rest = "{" + reply.text
    try:
        arguments, end = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        arguments, end = None, 0
    if isinstance(arguments, dict):
        calls = [openai_tool_call(name, arguments)]
        tail = rest[end:]
        if parallel and "<tool_call>" in tail:
            try:
                more = tool_calls_in(tail[tail.index("<tool_call>") :])
            except ActionParseError:  # a malformed extra call is dropped
                more = []
            calls += [openai_tool_call(n, a) for n, a in more if n in names]
        return calls, "tool_calls"
    raw = rest.split("</tool_call>", 1)[0].rstrip()
    if raw.endswith("}") and raw.count("}") > raw.count("{"):
        raw = raw[:-1].rstrip()  # the brace that closes {"name": ..., "arguments": ...}
    finish = "length" if reply.finish_reason == "length" else "tool_calls"
    return [openai_tool_call(name, raw)], finish
