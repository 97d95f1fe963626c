"""A small OpenAI-compatible server over a local transformers model.

``verigym serve-model MODEL`` runs it, so many evaluation workers (``verigym eval`` with the ``openai``
agent) share one loaded model. Requests that arrive together are sampled as one left-padded batch
(continuous batching it is not: a batch runs to completion before the next).

Endpoints:

* ``POST /v1/chat/completions`` -- ``model`` (another name than the served one is refused with
  HTTP 404 ``model_not_found``, as OpenAI does), ``messages`` (string or list-of-parts text
  content; ``tool`` messages and assistant ``tool_calls`` are rendered in the Hermes format),
  ``tools`` / ``tool_choice`` (``"none"`` or ``"auto"``), ``max_tokens`` (or
  ``max_completion_tokens``), ``temperature``, ``top_p``, ``stop``, ``n``, ``logprobs``,
  ``top_logprobs`` (0-20), ``stream`` (server-sent events; ``stream_options.include_usage``).
  ``seed`` is accepted and ignored (batched sampling shares one generator).
  Tools reach the model through its chat template when the template reads ``tools``, else as a
  Hermes-style system section; ``<tool_call>{"name", "arguments"}</tool_call>`` blocks in the
  reply (also SmolLM2's list form) come back as ``message.tool_calls`` with
  ``finish_reason="tool_calls"``. Each choice carries the generated token ids in the extension
  field ``token_ids``. The reported log-probs are those of the sampling distribution
  (``softmax(logits / temperature)``; raw logits at temperature 0); ``top_logprobs`` are raw.
* ``POST /v1/completions`` -- ``prompt`` (a string, a list of strings, or token ids), the same
  sampling options, ``logprobs`` (0-5, legacy layout); ``echo`` and ``suffix`` are refused.
* ``GET /v1/models`` -- the one served model.
* ``GET /health`` -- ``{"status": "ok"}``.

Every request is bounded before anything is generated (HTTP 400 naming the limit and the ``verigym
serve`` flag that raises it): ``n`` (``--max-n``, default 16), ``max_tokens`` (``--max-tokens``,
default 4096, and at most the model's context minus the prompt), prompts per ``/v1/completions``
request (``--max-prompts``, default 16) and the request's tokens, ``n x (prompt + max_tokens)``
summed over its prompts (``--max-request-tokens``, default 65536), which is what sizes its KV cache.
Sampling options must be finite numbers in range (else 400); a temperature so small that the
logits overflow samples greedily. A request whose client disconnects stops generating at the next
decoding step.

``usage`` counts the prompt tokens once per request (not once per choice) and the tokens of every
choice, as OpenAI does. Errors are answered as OpenAI does: ``{"error": {"message", "type",
"param", "code"}}`` with HTTP 400 (bad request), 404 (unknown path or model) or 500.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from verigym.agents.llm.policy import Generation, TransformersPolicy
from verigym.core import ActionParseError

__all__ = ["ChatServer", "make_server"]

logger = logging.getLogger(__name__)

_MAX_BODY = 8 << 20
_CLIENT_POLL_SECONDS = 0.25
"""how often a waiting request checks that its client is still connected"""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class RequestError(ValueError):
    """A client error, answered with HTTP 400 (or ``status``) and an OpenAI error ``code``."""

    def __init__(
        self, message: str, *, status: int = 400, code: str | None = None, param: str | None = None
    ):
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


_HERMES = (
    "You are a function calling AI model. You are provided with function signatures within "
    "<tools></tools> XML tags. You may call one or more functions to assist with the user query. "
    "Don't make assumptions about what values to plug into functions. Here are the available tools: "
    "<tools>\n{tools}\n</tools>\nFor each function call return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
"""The Hermes function-calling system text (used when the chat template does not read ``tools``)."""


@dataclass
class _Job:
    prompt: list[int]
    n: int
    sampling: tuple[int, float, float, tuple[str, ...], int]
    done: threading.Event = field(default_factory=threading.Event)
    result: list[Generation] | None = None
    error: str | None = None
    abandoned: bool = False
    """the client stopped waiting (it left, or its timeout): the job is skipped if it has not
    started, and its rows stop at the next decoding step if it has"""


class _Batcher:
    """One worker thread that samples queued requests together, grouped by sampling options."""

    def __init__(self, policy: TransformersPolicy, max_batch_size: int):
        self.policy = policy
        self.max_batch_size = max_batch_size
        self.jobs: queue.Queue[_Job | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="verigym-serve-batcher", daemon=True)
        self.thread.start()

    def submit(
        self, job: _Job, timeout: float, client_gone: Callable[[], bool] | None = None
    ) -> list[Generation]:
        """Queue ``job`` and wait for it; a job whose client left (``client_gone()``) or timed out
        is marked abandoned, so a batch that has not started skips it."""
        self.jobs.put(job)
        deadline = time.monotonic() + timeout
        while not job.done.wait(min(_CLIENT_POLL_SECONDS, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline or (client_gone is not None and client_gone()):
                job.abandoned = True
                raise TimeoutError(
                    f"generation did not finish within {timeout:.0f} s, or the client left"
                )
        if job.error is not None:
            raise RuntimeError(job.error)
        return job.result or []

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=10)

    def _loop(self) -> None:
        while True:
            first = self.jobs.get()
            if first is None:
                return
            batch, rows = [first], first.n
            while rows < self.max_batch_size:
                try:
                    job = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    self.jobs.put(None)
                    break
                batch.append(job)
                rows += job.n
            groups: dict[tuple[int, float, float, tuple[str, ...], int], list[_Job]] = {}
            for job in batch:
                if job.abandoned:  # nobody waits for it: do not spend the batch's time on it
                    continue
                groups.setdefault(job.sampling, []).append(job)
            for (max_tokens, temperature, top_p, stop, top_logprobs), jobs in groups.items():
                prompts = [job.prompt for job in jobs for _ in range(job.n)]

                def gone(jobs: list[_Job] = jobs) -> list[bool]:
                    return [job.abandoned for job in jobs for _ in range(job.n)]

                try:
                    out = self.policy.generate(
                        prompts,
                        max_new_tokens=max_tokens,
                        temperature=temperature,
                        top_p=top_p,
                        stop=stop,
                        top_logprobs=top_logprobs,
                        stop_rows=gone,
                    )
                except Exception as exc:  # report to the waiting clients, keep serving
                    logger.exception("generation failed")
                    for job in jobs:
                        job.error = f"generation failed: {exc}"
                        job.done.set()
                    continue
                for job in jobs:
                    job.result, out = out[: job.n], out[job.n :]
                    job.done.set()


class ChatServer(ThreadingHTTPServer):
    """The HTTP server (a :class:`ThreadingHTTPServer`); build it with :func:`make_server`.

    Args:
        address: (host, port) to bind; port 0 picks a free one.
        policy: the model that samples the replies.
        model_name: the name clients must send as ``model``.
        max_batch_size: rows (choices) sampled together at most.
        max_tokens_limit: the largest ``max_tokens`` a request may ask (``--max-tokens``).
        max_n: the largest ``n`` (choices per prompt) a request may ask (``--max-n``).
        max_prompts: the most prompts one ``/v1/completions`` request may send (``--max-prompts``).
        max_request_tokens: the most tokens one request may hold, ``n x (prompt tokens +
            max_tokens)`` summed over its prompts (``--max-request-tokens``).
        request_timeout: seconds a request waits for its generation before it is abandoned.

    Raises:
        ValueError: a limit is below 1.
    """

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        policy: TransformersPolicy,
        *,
        model_name: str,
        max_batch_size: int = 16,
        max_tokens_limit: int = 4096,
        max_n: int = 16,
        max_prompts: int = 16,
        max_request_tokens: int = 65536,
        request_timeout: float = 600.0,
    ):
        limits = {
            "max_batch_size": max_batch_size,
            "max_tokens_limit": max_tokens_limit,
            "max_n": max_n,
            "max_prompts": max_prompts,
            "max_request_tokens": max_request_tokens,
        }
        for name, value in limits.items():
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        super().__init__(address, _Handler)
        self.policy = policy
        self.model_name = model_name
        self.max_tokens_limit = max_tokens_limit
        self.max_n = max_n
        self.max_prompts = max_prompts
        self.max_request_tokens = max_request_tokens
        self.request_timeout = request_timeout
        self.batcher = _Batcher(policy, max_batch_size)
        template = getattr(policy.tokenizer, "chat_template", None) or ""
        self._template_reads_tools = policy.chat.use_template and "tools" in str(template)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def server_close(self) -> None:
        self.batcher.stop()
        super().server_close()

    # -- shared request parts ---------------------------------------------------------------------
    def _check_model(self, request: dict[str, Any]) -> None:
        model = request.get("model", self.model_name)
        if not isinstance(model, str):
            raise RequestError("'model' must be a string", param="model")
        if model != self.model_name:
            raise RequestError(
                f"The model `{model}` does not exist or you do not have access to it. "
                f"This server serves `{self.model_name}`.",
                status=404,
                code="model_not_found",
                param="model",
            )

    def _sampling(
        self, request: dict[str, Any], *, top_logprobs: int
    ) -> tuple[int, float, float, tuple[str, ...], int, int]:
        """(max_tokens, temperature, top_p, stop, top_logprobs, n) of a request, validated.

        ``max_tokens`` is 0 when the request leaves it out: :meth:`_check_size` then picks the
        endpoint's default, or less where the prompt leaves less room in the context.
        """
        max_tokens = request.get("max_completion_tokens", request.get("max_tokens"))
        temperature = request.get("temperature", 1.0)
        top_p = request.get("top_p", 1.0)
        n = request.get("n", 1)
        stop = request.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if max_tokens is None:
            max_tokens = 0
        elif not _is_int(max_tokens) or max_tokens < 1:
            raise RequestError("max_tokens must be an integer >= 1", param="max_tokens")
        elif max_tokens > self.max_tokens_limit:
            raise RequestError(
                f"max_tokens={max_tokens} is above this server's limit of {self.max_tokens_limit} "
                "(verigym serve-model --max-tokens raises it)",
                param="max_tokens",
            )
        if temperature is None:
            temperature = 1.0
        if not _is_number(temperature) or not 0 <= temperature <= 10:
            raise RequestError(
                "temperature must be a finite number in [0, 10]", param="temperature"
            )
        if top_p is None:
            top_p = 1.0
        if not _is_number(top_p) or not 0 < top_p <= 1:
            raise RequestError("top_p must be a finite number in (0, 1]", param="top_p")
        if not _is_int(n) or n < 1:
            raise RequestError("n must be an integer >= 1", param="n")
        if n > self.max_n:
            raise RequestError(
                f"n={n} is above this server's limit of {self.max_n} (verigym serve-model --max-n raises it)",
                param="n",
            )
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 8:
            raise RequestError("stop must be a string or a list of at most 8 strings", param="stop")
        return max_tokens, float(temperature), float(top_p), tuple(stop), top_logprobs, n

    def _check_size(
        self,
        prompts: list[list[int]],
        max_tokens: int,
        n: int,
        *,
        default_max_tokens: int,
        param: str,
    ) -> int:
        """The request's ``max_tokens`` (its default when 0), checked against the model's context
        and this server's token limit before anything is generated.

        Raises:
            RequestError: a prompt with ``max_tokens`` exceeds the context, or the request's tokens
                exceed ``max_request_tokens``.
        """
        context = self.policy.max_context_tokens
        longest = max(len(p) for p in prompts)
        room = context - longest
        if room < 1:
            raise RequestError(
                f"the prompt has {longest} tokens, which fills the model's context of {context} tokens; "
                "shorten it",
                param=param,
            )
        if not max_tokens:
            max_tokens = min(default_max_tokens, room, self.max_tokens_limit)
        elif max_tokens > room:
            raise RequestError(
                f"the prompt has {longest} tokens; with max_tokens={max_tokens} it exceeds the model's "
                f"context of {context} tokens: ask for max_tokens <= {room}",
                param="max_tokens",
            )
        total = n * sum(len(p) + max_tokens for p in prompts)
        if total > self.max_request_tokens:
            raise RequestError(
                f"the request holds {total} tokens (n x (prompt + max_tokens), summed over its prompts), "
                f"above this server's limit of {self.max_request_tokens} (verigym serve-model "
                "--max-request-tokens raises it); lower n or max_tokens",
                param="max_tokens",
            )
        return max_tokens

    def _generate(
        self,
        prompt: list[int],
        sampling: tuple[int, float, float, tuple[str, ...], int, int],
        client_gone: Callable[[], bool] | None = None,
    ) -> list[Generation]:
        """Sample ``n`` replies to ``prompt`` (already checked by :meth:`_check_size`)."""
        max_tokens, temperature, top_p, stop, top_logprobs, n = sampling
        job = _Job(prompt, n, (max_tokens, temperature, top_p, stop, top_logprobs))
        return self.batcher.submit(job, self.request_timeout, client_gone)

    def _token_text(self, token_id: int) -> str:
        return self.policy.tokenizer.decode([token_id])

    # -- chat completions -------------------------------------------------------------------------
    def _messages(self, request: dict[str, Any]) -> list[dict[str, str]]:
        """The request's messages as plain {role, content} text (tool calls and results in Hermes form)."""
        from verigym.toolcalls import message_to_text

        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(
                "'messages' must be a non-empty list of {role, content} objects", param="messages"
            )
        out = []
        for m in messages:
            role = m.get("role") if isinstance(m, dict) else None
            if role == "developer":
                role = "system"
            if role not in {"system", "user", "assistant", "tool"}:
                raise RequestError(
                    "each message needs a role (system, developer, user, assistant or tool) and a content",
                    param="messages",
                )
            content = m.get("content")
            if content is None and not (role == "assistant" and m.get("tool_calls")):
                raise RequestError(f"a {role} message needs a content", param="messages")
            if isinstance(content, list):
                if not all(
                    isinstance(part, dict)
                    and part.get("type") == "text"
                    and isinstance(part.get("text"), str)
                    for part in content
                ):
                    raise RequestError(
                        "list content may hold only {type: text, text} parts (this server reads text)",
                        param="messages",
                    )
            elif content is not None and not isinstance(content, str):
                raise RequestError(
                    "a message content is a string or a list of text parts", param="messages"
                )
            try:
                text = message_to_text(
                    {
                        "content": content,
                        "tool_calls": m.get("tool_calls") if role == "assistant" else None,
                    }
                )
            except ActionParseError as exc:
                raise RequestError(f"bad assistant tool_calls: {exc}", param="messages") from None
            if role == "tool":
                role, text = "user", f"<tool_response>\n{text}\n</tool_response>"
            out.append({"role": role, "content": text})
        return out

    def _tools(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        tools = request.get("tools") or []
        choice = request.get("tool_choice", "auto")
        if not isinstance(tools, list) or not all(
            isinstance(t, dict)
            and t.get("type", "function") == "function"
            and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str)
            for t in tools
        ):
            raise RequestError(
                "tools must be a list of {type: function, function: {name, description, parameters}}",
                param="tools",
            )
        if choice not in ("auto", "none", "required", None) and not isinstance(choice, dict):
            raise RequestError(
                "tool_choice must be none, auto, required or a {type: function, function: {name}} object",
                param="tool_choice",
            )
        return [] if choice == "none" else tools

    def _chat_prompt(
        self, messages: list[dict[str, str]], tools: list[dict[str, Any]]
    ) -> list[int]:
        if not tools:
            return self.policy.encode_messages(messages)
        if self._template_reads_tools:
            text = self.policy.tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=True
            )
            return self.policy.chat.encode(text)
        section = _HERMES.format(tools="\n".join(json.dumps(t) for t in tools))
        if messages[0]["role"] == "system":
            messages = [
                {"role": "system", "content": f"{messages[0]['content']}\n\n{section}"},
                *messages[1:],
            ]
        else:
            messages = [{"role": "system", "content": section}, *messages]
        return self.policy.encode_messages(messages)

    @staticmethod
    def _tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
        """(content before the calls or None, OpenAI tool_calls) of a reply; no calls -> (text, [])."""
        from verigym.toolcalls import tool_calls_in

        try:
            calls = tool_calls_in(text)
        except ActionParseError:  # malformed: hand the text back as content
            return text, []
        if not calls:
            return text, []
        cut = text.find("<tool_call>")
        content = text[:cut].strip() if cut >= 0 else ""
        return content or None, [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for name, arguments in calls
        ]

    def _chat_logprobs(self, reply: Generation) -> dict[str, Any]:
        content = []
        for k, (token_id, log_prob) in enumerate(zip(reply.token_ids, reply.log_probs)):
            token = self._token_text(token_id)
            top = [
                {"token": (t := self._token_text(i)), "logprob": lp, "bytes": list(t.encode())}
                for i, lp in (reply.top_log_probs[k] if reply.top_log_probs else [])
            ]
            content.append(
                {
                    "token": token,
                    "logprob": log_prob,
                    "bytes": list(token.encode()),
                    "top_logprobs": top,
                }
            )
        return {"content": content, "refusal": None}

    def complete(
        self, request: Any, client_gone: Callable[[], bool] | None = None
    ) -> dict[str, Any]:
        """Answer a chat-completions request body (``stream`` is handled by the handler).

        Raises:
            RequestError: the request is malformed, names another model or is above a limit (the
                message says which, and the flag that raises it).
            TimeoutError: the client left (or the request timed out) before its answer.
        """
        if not isinstance(request, dict):
            raise RequestError("the body must be a JSON object")
        self._check_model(request)
        messages = self._messages(request)
        tools = self._tools(request)
        logprobs = request.get("logprobs") or False
        top_logprobs = request.get("top_logprobs") or 0
        if not isinstance(logprobs, bool):
            raise RequestError("logprobs must be a boolean", param="logprobs")
        if (
            not isinstance(top_logprobs, int)
            or not 0 <= top_logprobs <= 20
            or (top_logprobs and not logprobs)
        ):
            raise RequestError(
                "top_logprobs must be an integer in [0, 20], with logprobs=true",
                param="top_logprobs",
            )
        sampling = self._sampling(request, top_logprobs=top_logprobs)
        prompt = self._chat_prompt(messages, tools)
        max_tokens = self._check_size(
            [prompt], sampling[0], sampling[5], default_max_tokens=256, param="messages"
        )
        stop = sampling[3] + self.policy.chat.stop_strings
        replies = self._generate(
            prompt, (max_tokens, sampling[1], sampling[2], stop, *sampling[4:]), client_gone
        )
        choices = []
        for i, r in enumerate(replies):
            content, calls = self._tool_calls(r.text) if tools else (r.text, [])
            message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
            if calls:
                message["tool_calls"] = calls
            choice: dict[str, Any] = {
                "index": i,
                "message": message,
                "finish_reason": "tool_calls" if calls else r.finish_reason,
                "logprobs": self._chat_logprobs(r) if logprobs else None,
                "token_ids": list(r.token_ids),
            }
            choices.append(choice)
        completion_tokens = sum(len(r.token_ids) for r in replies)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion_tokens,
                "total_tokens": len(prompt) + completion_tokens,
            },
        }

    def stream_chunks(
        self, request: dict[str, Any], answer: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The ``chat.completion.chunk`` events of a finished answer: the role, the content token by
        token, the tool calls, the finish reason, and the usage when ``stream_options.include_usage``."""
        base = {
            "id": answer["id"],
            "object": "chat.completion.chunk",
            "created": answer["created"],
            "model": answer["model"],
        }
        chunks = []
        for choice in answer["choices"]:
            i, message = choice["index"], choice["message"]
            chunks.append(
                {
                    **base,
                    "choices": [
                        {
                            "index": i,
                            "delta": {"role": "assistant", "content": ""},
                            "finish_reason": None,
                        }
                    ],
                }
            )
            content = message["content"] or ""
            said = ""
            ids = choice["token_ids"]
            logprobs = (choice["logprobs"] or {}).get("content") or []
            for k in range(len(ids)):
                upto = self.policy.tokenizer.decode(ids[: k + 1], skip_special_tokens=True)
                piece = content[len(said) : len(upto)] if upto.startswith(said) else ""
                if not piece and not logprobs:
                    continue
                said += piece
                delta = {"index": i, "delta": {"content": piece}, "finish_reason": None}
                if logprobs:
                    delta["logprobs"] = {"content": logprobs[k : k + 1], "refusal": None}
                chunks.append({**base, "choices": [delta]})
            if len(said) < len(content):
                chunks.append(
                    {
                        **base,
                        "choices": [
                            {
                                "index": i,
                                "delta": {"content": content[len(said) :]},
                                "finish_reason": None,
                            }
                        ],
                    }
                )
            for j, call in enumerate(message.get("tool_calls") or []):
                chunks.append(
                    {
                        **base,
                        "choices": [
                            {
                                "index": i,
                                "delta": {"tool_calls": [{"index": j, **call}]},
                                "finish_reason": None,
                            }
                        ],
                    }
                )
            chunks.append(
                {
                    **base,
                    "choices": [
                        {"index": i, "delta": {}, "finish_reason": choice["finish_reason"]}
                    ],
                }
            )
        options = request.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            chunks.append({**base, "choices": [], "usage": answer["usage"]})
        return chunks

    # -- legacy completions ---------------------------------------------------------------------------
    def text_complete(
        self, request: Any, client_gone: Callable[[], bool] | None = None
    ) -> dict[str, Any]:
        """Answer a ``/v1/completions`` request body.

        Raises:
            RequestError: the request is malformed, names another model or is above a limit.
            TimeoutError: the client left (or the request timed out) before its answer.
        """
        if not isinstance(request, dict):
            raise RequestError("the body must be a JSON object")
        self._check_model(request)
        if request.get("stream"):
            raise RequestError("stream is supported on /v1/chat/completions only", param="stream")
        if request.get("echo") or request.get("suffix"):
            raise RequestError(
                "echo and suffix are not supported by verigym serve-model", param="echo"
            )
        prompt = request.get("prompt")
        if isinstance(prompt, str) or (
            isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)
        ):
            prompts = [prompt]
        elif (
            isinstance(prompt, list)
            and prompt
            and all(
                isinstance(p, str)
                or (isinstance(p, list) and p and all(isinstance(t, int) for t in p))
                for p in prompt
            )
        ):
            prompts = list(prompt)
        else:
            raise RequestError(
                "prompt must be a string, a list of strings, or token ids", param="prompt"
            )
        if len(prompts) > self.max_prompts:
            raise RequestError(
                f"the request sends {len(prompts)} prompts, above this server's limit of {self.max_prompts} "
                "(verigym serve-model --max-prompts raises it)",
                param="prompt",
            )
        logprobs = request.get("logprobs")
        if logprobs is not None and (
            not isinstance(logprobs, int) or isinstance(logprobs, bool) or not 0 <= logprobs <= 5
        ):
            raise RequestError("logprobs must be an integer in [0, 5]", param="logprobs")
        sampling = self._sampling(request, top_logprobs=logprobs or 0)
        vocab = self.policy.model.config.vocab_size
        encoded = []
        for p in prompts:
            ids = list(self.policy.tokenizer(p)["input_ids"]) if isinstance(p, str) else list(p)
            if not ids or not all(_is_int(t) and 0 <= t < vocab for t in ids):
                raise RequestError(
                    f"a prompt is empty or has token ids outside [0, {vocab})", param="prompt"
                )
            encoded.append(ids)
        max_tokens = self._check_size(
            encoded, sampling[0], sampling[5], default_max_tokens=16, param="prompt"
        )
        sampling = (max_tokens, *sampling[1:])
        choices, prompt_tokens, completion_tokens = [], 0, 0
        for ids in encoded:
            if client_gone is not None and client_gone():
                raise TimeoutError("the client left before its answer")
            prompt_tokens += len(ids)
            for r in self._generate(ids, sampling, client_gone):
                completion_tokens += len(r.token_ids)
                choice: dict[str, Any] = {
                    "index": len(choices),
                    "text": r.text,
                    "finish_reason": r.finish_reason,
                    "logprobs": None,
                    "token_ids": list(r.token_ids),
                }
                if logprobs is not None:
                    tokens = [self._token_text(t) for t in r.token_ids]
                    offsets, at = [], 0
                    for token in tokens:
                        offsets.append(at)
                        at += len(token)
                    choice["logprobs"] = {
                        "tokens": tokens,
                        "token_logprobs": list(r.log_probs),
                        "text_offset": offsets,
                        "top_logprobs": [
                            {self._token_text(i): lp for i, lp in top}
                            for top in (r.top_log_probs or [])
                        ]
                        if logprobs
                        else None,
                    }
                choices.append(choice)
        return {
            "id": f"cmpl-{uuid.uuid4().hex[:24]}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug("%s - %s", self.address_string(), format % args)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
            logger.info("client %s left before the answer", self.address_string())
            self.close_connection = True

    def _error(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        *,
        code: Any = None,
        param: str | None = None,
    ) -> None:
        self._send(
            status, {"error": {"message": message, "type": kind, "param": param, "code": code}}
        )

    def _client_gone(self) -> bool:
        """Whether the client closed its connection while its request waits (an eval worker killed
        at its episode's time limit): readable with nothing to read."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _send_events(self, chunks: list[dict[str, Any]]) -> None:
        """Server-sent events: one ``data: {json}`` per chunk, then ``data: [DONE]``."""
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            logger.info("client %s left during the stream", self.address_string())
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?")[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": self.server.model_name, "object": "model", "owned_by": "verigym"}
                    ],
                },
            )
        elif path == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"no route {self.path}; use POST /v1/chat/completions", "not_found")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?")[0].rstrip("/")
        if path not in (
            "/v1/chat/completions",
            "/chat/completions",
            "/v1/completions",
            "/completions",
        ):
            self._error(
                404,
                f"no route {self.path}; use POST /v1/chat/completions or /v1/completions",
                "not_found",
            )
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            if not 0 < length <= _MAX_BODY:
                raise RequestError(f"the body must be 1 byte to {_MAX_BODY} bytes of JSON")
            request = json.loads(self.rfile.read(length))
            if path.endswith("chat/completions"):
                answer = self.server.complete(request, self._client_gone)
                if request.get("stream"):
                    self._send_events(self.server.stream_chunks(request, answer))
                    return
            else:
                answer = self.server.text_complete(request, self._client_gone)
        except RequestError as exc:
            self._error(exc.status, str(exc), code=exc.code, param=exc.param)
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
            self._error(400, str(exc))
        except Exception as exc:  # keep the server up; tell the client
            logger.exception("request failed")
            self._error(500, f"server error: {exc}", "server_error")
        else:
            self._send(200, answer)


def make_server(
    policy: TransformersPolicy,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    model_name: str = "default",
    max_batch_size: int = 16,
    request_timeout: float = 600.0,
    max_tokens: int = 4096,
    max_n: int = 16,
    max_prompts: int = 16,
    max_request_tokens: int = 65536,
) -> ChatServer:
    """Bind a :class:`ChatServer` (``port=0`` picks a free port; see ``server.base_url``).

    ``max_tokens``, ``max_n``, ``max_prompts`` and ``max_request_tokens`` bound every request (see
    :class:`ChatServer`). Call ``serve_forever()`` to run it and ``shutdown()`` + ``server_close()``
    to stop.

    Raises:
        ValueError: a limit is below 1.
    """
    return ChatServer(
        (host, port),
        policy,
        model_name=model_name,
        max_batch_size=max_batch_size,
        max_tokens_limit=max_tokens,
        max_n=max_n,
        max_prompts=max_prompts,
        max_request_tokens=max_request_tokens,
        request_timeout=request_timeout,
    )
