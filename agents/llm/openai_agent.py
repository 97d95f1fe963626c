"""OpenAIAgent: a model behind any OpenAI-compatible chat-completions server as a verigym agent.

Works with vLLM, llama.cpp's server, Ollama, SGLang, hosted APIs and ``verigym serve-model``. Requests
are plain HTTP (stdlib ``urllib``) with a per-request timeout and retries with exponential backoff
on connection errors, timeouts, HTTP 429 and 5xx.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verigym.agents.common.config import AgentConfig, require
from verigym.agents.llm.agent import ChatHistory

__all__ = ["ChatCompletionError", "OpenAIAgent", "OpenAIConfig", "chat_completion"]

logger = logging.getLogger(__name__)


class ChatCompletionError(RuntimeError):
    """The server refused the request or never answered within the retries."""


def chat_completion(
    base_url: str,
    payload: Mapping[str, Any],
    *,
    api_key: str | None = None,
    timeout: float = 60.0,
    max_retries: int = 3,
    backoff: float = 0.5,
) -> dict[str, Any]:
    """POST ``payload`` to ``{base_url}/chat/completions`` and return the decoded JSON answer.

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``.
        payload: the request body (``model``, ``messages``, sampling options).
        api_key: sent as a bearer token when given.
        timeout: seconds per attempt.
        max_retries: further attempts after a retryable failure (connection error, timeout,
            HTTP 429 or 5xx), waiting ``backoff * 2**k`` seconds before attempt ``k + 1``.
        backoff: first wait, in seconds.

    Raises:
        ChatCompletionError: a non-retryable HTTP error (the server's message is included), or
            every attempt failed.
    """
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    body = json.dumps(payload).encode()
    last: Exception | None = None
    for attempt in range(max_retries + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read().decode())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            if exc.code != 429 and exc.code < 500:
                raise ChatCompletionError(f"{url} answered HTTP {exc.code}: {detail}") from None
            last = ChatCompletionError(f"HTTP {exc.code}: {detail}")
        except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError) as exc:
            last = exc
        logger.warning(
            "chat completion attempt %d/%d at %s failed: %s",
            attempt + 1,
            max_retries + 1,
            url,
            last,
        )
    raise ChatCompletionError(f"{url} failed after {max_retries + 1} attempts: {last}")


@dataclass(frozen=True)
class OpenAIConfig(AgentConfig):
    """Options of :class:`OpenAIAgent`."""

    base_url: str = "http://127.0.0.1:8000/v1"
    """the server's OpenAI-compatible API root"""
    model: str = "default"
    """the model name the server expects"""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the API key, if the server needs one"""
    max_tokens: int = 256
    """token budget of one reply"""
    temperature: float = 0.7
    """sampling temperature (act(deterministic=True) sends 0)"""
    top_p: float = 1.0
    """nucleus sampling mass"""
    stop: tuple[str, ...] = ()
    """strings that end a reply"""
    timeout: float = 60.0
    """seconds per request attempt"""
    max_retries: int = 3
    """further attempts after a connection error, timeout, HTTP 429 or 5xx"""
    max_context_chars: int = 32000
    """characters of conversation at most; older turns are dropped to fit"""
    send_seed: bool = True
    """send a per-request seed (servers that support it sample reproducibly)"""
    native_tools: bool = True
    """send a tool env's tools (reset info["tools"]) as the request's OpenAI `tools` and play the
    returned `tool_calls` (as the assistant message's JSON, which tool envs accept)"""
    adapter: str = ""
    """the LoRA adapter folder the server serves as `model` (`verigym serve-model --lora
    NAME=DIR`): before its first request the agent checks that the server's /v1/models reports
    that adapter (its `adapter_sha256`, the digest of the folder's files) for `model`, so a row
    keyed by the folder's contents (the spec's config hash) is that adapter's; "" for none"""

    def check(self) -> None:
        require(
            self.base_url.startswith(("http://", "https://")),
            f"base_url must be an http(s) URL, got {self.base_url!r}",
        )
        require(self.max_tokens >= 1, f"max_tokens must be >= 1, got {self.max_tokens}")
        require(self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}")
        require(0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}")
        require(self.timeout > 0, f"timeout must be > 0, got {self.timeout}")
        require(self.max_retries >= 0, f"max_retries must be >= 0, got {self.max_retries}")
        if self.adapter:
            from verigym.agents.llm.models import check_adapter

            try:
                check_adapter(self.adapter)
            except FileNotFoundError as exc:
                raise ValueError(str(exc)) from None


class OpenAIAgent:
    """A served chat model as a verigym agent (``verigym.agents.make("openai", env, base_url=...)``).

    ``act(observation, info)`` sends the episode's conversation and returns the reply text; on a
    tool env (``info["tools"]`` at reset) it also sends the tools, and a reply with ``tool_calls``
    is returned as the assistant message's JSON (tool envs parse it).

    Raises:
        ChatCompletionError: from ``act``, when the server cannot be reached or refuses.
    """

    def __init__(self, config: OpenAIConfig):
        self.config = config
        self.history = ChatHistory(
            lambda messages: sum(len(m["content"]) for m in messages), config.max_context_chars
        )
        self.last_generation: Any = (
            None  # the last reply's tokens/usage, read by the trajectory recorder
        )
        self._seed = config.seed
        self._calls = 0
        self._tools: list[Any] = []
        self._adapter_checked = not config.adapter

    @classmethod
    def from_env(cls, env: Any = None, **config: Any) -> OpenAIAgent:
        """Build from config overrides; ``env`` is not needed."""
        return cls(OpenAIConfig.from_dict(config))

    def reset(self, *, seed: int | None = None) -> None:
        self.history.reset()
        self._tools = []
        if seed is not None:
            self._seed, self._calls = seed, 0

    def act(
        self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False
    ) -> str:
        """The model's reply to ``obs`` given the episode so far."""
        cfg = self.config
        if not self._adapter_checked:
            self._check_adapter()
        if not self.history.messages and cfg.native_tools:
            self._tools = list((info or {}).get("tools") or [])
        messages = self.history.observe(obs, info)
        payload: dict[str, Any] = {
            "model": cfg.model,
            "messages": messages,
            "max_tokens": cfg.max_tokens,
            "temperature": 0.0 if deterministic else cfg.temperature,
            "top_p": cfg.top_p,
        }
        if self._tools:
            payload["tools"] = self._tools
        if cfg.stop:
            payload["stop"] = list(cfg.stop)
        if cfg.send_seed:
            payload["seed"] = self._seed + self._calls
        self._calls += 1
        answer = chat_completion(
            cfg.base_url,
            payload,
            api_key=os.environ.get(cfg.api_key_env) or None,
            timeout=cfg.timeout,
            max_retries=cfg.max_retries,
        )
        self.last_generation = (
            {"usage": answer.get("usage")} if isinstance(answer, dict) else None
        )  # for the trajectory
        try:
            message = answer["choices"][0]["message"]
            text = message.get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ChatCompletionError(
                f"unexpected answer from {cfg.base_url}: {str(answer)[:300]}"
            ) from None
        if message.get("tool_calls"):  # the env reads the message; the history keeps its text form
            from verigym.toolcalls import message_to_text

            try:
                self.history.reply(message_to_text(message))
            except ValueError:  # a malformed call: the env reports it to the agent
                self.history.reply(text)
            return json.dumps(
                {
                    "role": "assistant",
                    "content": message.get("content"),
                    "tool_calls": message["tool_calls"],
                }
            )
        self.history.reply(text)
        return text

    def _check_adapter(self) -> None:
        """Refuse to play unless the server serves ``config.adapter``'s files as ``config.model``.

        Raises:
            ChatCompletionError: /v1/models cannot be read, or reports another adapter (or none).
        """
        from verigym.agents.llm.policy import adapter_digest

        cfg = self.config
        url = cfg.base_url.rstrip("/") + "/models"
        headers = {}
        if key := os.environ.get(cfg.api_key_env):
            headers["Authorization"] = f"Bearer {key}"
        try:
            request = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(request, timeout=cfg.timeout) as response:
                listed = json.loads(response.read(1 << 20).decode())["data"]
            served = next(
                (m.get("adapter_sha256") for m in listed if m.get("id") == cfg.model), None
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ChatCompletionError(f"{url}: cannot read the served models: {exc}") from None
        expected = adapter_digest(cfg.adapter)
        if served != expected:
            raise ChatCompletionError(
                f"{url} serves {cfg.model!r} with adapter digest {str(served)[:64]}, not the "
                f"adapter {cfg.adapter} ({expected})"
            )
        self._adapter_checked = True
