"""Streaming in the model server: a finished ``chat.completion`` as OpenAI's server-sent events
(``stream: true``): the role, the content token by token, the tool calls, the finish reason, and
the usage when ``stream_options.include_usage``; then ``data: [DONE]``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["event_stream", "stream_chunks"]


def stream_chunks(
    request: dict[str, Any], answer: dict[str, Any], decode: Callable[[list[int]], str]
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a finished ``answer`` to ``request``.

    Args:
        request: the validated chat request (its ``stream_options`` is read).
        answer: the ``chat.completion`` object; each choice carries its ``token_ids``.
        decode: token ids -> text, special tokens skipped (how the content is cut into pieces,
            one per sampled token).
    """
    base = {
        "id": answer["id"],
        "object": "chat.completion.chunk",
        "created": answer["created"],
        "model": answer["model"],
    }

    def chunk(i: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": i, "delta": delta, "finish_reason": finish}]}

    chunks = []
    for choice in answer["choices"]:
        i, message = choice["index"], choice["message"]
        chunks.append(chunk(i, {"role": "assistant", "content": ""}))
        content = message["content"] or ""
        said = ""
        ids = choice["token_ids"]
        logprobs = (choice["logprobs"] or {}).get("content") or []
        for k in range(len(ids)):
            upto = decode(ids[: k + 1])
            piece = content[len(said) : len(upto)] if upto.startswith(said) else ""
            if not piece and not logprobs:
                continue
            said += piece
            event = chunk(i, {"content": piece})
            if logprobs:
                event["choices"][0]["logprobs"] = {
                    "content": logprobs[k : k + 1],
                    "refusal": None,
                }
            chunks.append(event)
        if len(said) < len(content):
            chunks.append(chunk(i, {"content": content[len(said) :]}))
        for j, call in enumerate(message.get("tool_calls") or []):
            chunks.append(chunk(i, {"tool_calls": [{"index": j, **call}]}))
        chunks.append(chunk(i, {}, choice["finish_reason"]))
    options = request.get("stream_options") or {}
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append({**base, "choices": [], "usage": answer["usage"]})
    return chunks


def event_stream(
    request: dict[str, Any], answer: dict[str, Any], decode: Callable[[list[int]], str]
) -> bytes:
    """The server-sent events of :func:`stream_chunks`: one ``data: {json}`` per chunk, then
    ``data: [DONE]`` (UTF-8)."""
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in stream_chunks(request, answer, decode)]
    return ("".join(lines) + "data: [DONE]\n\n").encode()
