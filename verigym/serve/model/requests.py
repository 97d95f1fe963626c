"""Request validation in the model server: a ``/v1/chat/completions`` or ``/v1/completions`` body
checked field by field, bounded by the server's limits and tokenized, before anything is sampled.

:class:`RequestReader` turns a body into a :class:`ChatPlan` or a :class:`TextPlan`, or raises
:class:`RequestError` (HTTP 400, or 404 for another model's name) naming the field and, for a
limit, the ``verigym serve-model`` flag that raises it. It runs on the server's prep threads.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verigym.core import ActionParseError
from verigym.serve.front import loads_json
from verigym.serve.model.batcher import Sampling
from verigym.serve.model.tool_choice import REQUIRED, tool_call_opening
from verigym.toolcalls import messages_to_text

if TYPE_CHECKING:
    from verigym.agents.llm.policy import TransformersPolicy

__all__ = [
    "MAX_TOOLS",
    "ChatPlan",
    "RequestError",
    "RequestLimits",
    "RequestReader",
    "TextPlan",
]

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A JSON escape of a surrogate code point: only a body holding one can hold a lone surrogate."""

MAX_TOOLS = 128
"""Tools one chat request may offer (OpenAI's limit)."""

_HERMES = (
    "You are a function calling AI model. You are provided with function signatures within "
    "<tools></tools> XML tags. You may call one or more functions to assist with the user query. "
    "Don't make assumptions about what values to plug into functions. Here are the available tools: "
    "<tools>\n{tools}\n</tools>\nFor each function call return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
"""The Hermes function-calling system text (used when the chat template does not read ``tools``)."""


class RequestError(ValueError):
    """A client error, answered with HTTP 400 (or ``status``) and an OpenAI error ``code``."""

    def __init__(
        self, message: str, *, status: int = 400, code: str | None = None, param: str | None = None
    ):
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class RequestLimits:
    """What one request may ask (each an integer >= 1; the ``verigym serve-model`` flag in
    brackets).

    Attributes:
        max_tokens: the largest ``max_tokens`` (``--max-tokens``).
        max_n: the largest ``n``, choices per prompt (``--max-n``).
        max_prompts: prompts per ``/v1/completions`` request (``--max-prompts``).
        max_request_tokens: tokens one request may hold, ``n x (prompt + max_tokens)`` summed over
            its prompts (``--max-request-tokens``).

    Raises:
        ValueError: a limit is not an integer >= 1.
    """

    max_tokens: int = 4096
    max_n: int = 16
    max_prompts: int = 16
    max_request_tokens: int = 65536

    def __post_init__(self) -> None:
        for name in ("max_tokens", "max_n", "max_prompts", "max_request_tokens"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                limit = "max_tokens_limit" if name == "max_tokens" else name
                raise ValueError(f"{limit} must be an integer >= 1, got {value!r}")


@dataclass
class ChatPlan:
    """A validated chat request, ready to sample."""

    request: dict[str, Any]
    prompt: list[int]
    sampling: Sampling
    n: int
    tools: list[dict[str, Any]]
    forced: str | None
    """``None`` (no forced call), a tool name, or :data:`~verigym.serve.model.tool_choice.REQUIRED`"""
    parallel: bool
    logprobs: bool
    openings: dict[str, list[int]] = field(default_factory=dict)
    """token ids of the forced opening of each tool that may be called"""
    adapter: str | None = None
    """the served LoRA adapter the request's ``model`` names (``None``: the base model)"""


@dataclass
class TextPlan:
    """A validated ``/v1/completions`` request, ready to sample."""

    prompts: list[list[int]]
    sampling: Sampling
    n: int
    logprobs: int | None
    adapter: str | None = None
    """the served LoRA adapter the request's ``model`` names (``None``: the base model)"""


class RequestReader:
    """Reads request bodies for one served model (and the LoRA adapters served beside it).

    Args:
        policy: the served model (its tokenizer, chat format and context length).
        model_name: the name requests must send as ``model`` for the base model.
        limits: what one request may ask.
        render_tools: renders ``(messages, tools)`` with the model's chat template when the
            template reads ``tools``; ``None``: tools go in a Hermes system section.
        adapters: the names of the LoRA adapters served beside the base model, each a ``model``
            a request may name (an adapter shares the base model's tokenizer and template, so
            its prompts are rendered the same way).
    """

    def __init__(
        self,
        policy: TransformersPolicy,
        model_name: str,
        limits: RequestLimits,
        render_tools: Any = None,
        adapters: Sequence[str] = (),
    ) -> None:
        self.policy, self.model_name, self.limits = policy, model_name, limits
        self.render_tools = render_tools
        self.adapters = tuple(adapters)

    # -- the endpoints ------------------------------------------------------------------------------
    def chat(self, request: Any) -> ChatPlan:
        """A chat-completions body (parsed, or its JSON bytes) validated and tokenized.

        Raises:
            ValueError: the bytes are not JSON (or nested too deeply).
            RequestError: the request is malformed, names another model or is above a limit (the
                message says which, and the flag that raises it).
        """
        request = self._object(request)
        adapter = self.check_model(request)
        self.check_response_format(request)
        self.check_unsupported_sampling(request)
        messages = self.messages(request)
        tools, forced, parallel = self.tools(request)
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
        sampling, n = self.sampling(request, top_logprobs=top_logprobs)
        prompt = self.chat_prompt(messages, tools)
        openings: dict[str, list[int]] = {}
        if forced is not None:
            callable_names = (
                [t["function"]["name"] for t in tools] if forced == REQUIRED else [forced]
            )
            for name in callable_names:
                openings.setdefault(name, self.policy.chat.encode(tool_call_opening(name)))
        longest = max((len(ids) for ids in openings.values()), default=0)
        max_tokens = self.check_size(
            [prompt + [0] * longest],
            sampling.max_tokens,
            n,
            default_max_tokens=256,
            param="messages",
        )
        if forced == REQUIRED:
            held = len(openings) * (len(prompt) + longest)
            if held > self.limits.max_request_tokens:
                raise RequestError(
                    f'tool_choice "required" with {len(openings)} tools holds {held} tokens to choose '
                    f"the function (tools x (prompt + opening)), above this server's limit of "
                    f"{self.limits.max_request_tokens} (verigym serve-model --max-request-tokens "
                    "raises it); name the function or offer fewer tools",
                    param="tool_choice",
                )
        stop = sampling.stop + self.policy.chat.stop_strings
        if forced is not None and not parallel:
            stop += ("</tool_call>",)
        return ChatPlan(
            request=request,
            prompt=prompt,
            sampling=dataclasses.replace(sampling, max_tokens=max_tokens, stop=stop),
            n=n,
            tools=tools,
            forced=forced,
            parallel=parallel,
            logprobs=logprobs,
            openings=openings,
            adapter=adapter,
        )

    def text(self, request: Any) -> TextPlan:
        """A ``/v1/completions`` body (parsed, or its JSON bytes) validated and tokenized.

        Raises:
            ValueError: the bytes are not JSON (or nested too deeply).
            RequestError: the request is malformed, names another model or is above a limit.
        """
        request = self._object(request)
        adapter = self.check_model(request)
        if request.get("stream"):
            raise RequestError("stream is supported on /v1/chat/completions only", param="stream")
        if request.get("echo") or request.get("suffix"):
            raise RequestError(
                "echo and suffix are not supported by verigym serve-model", param="echo"
            )
        self.check_response_format(request)
        self.check_unsupported_sampling(request)
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
        if len(prompts) > self.limits.max_prompts:
            raise RequestError(
                f"the request sends {len(prompts)} prompts, above this server's limit of "
                f"{self.limits.max_prompts} (verigym serve-model --max-prompts raises it)",
                param="prompt",
            )
        logprobs = request.get("logprobs")
        if logprobs is not None and (
            not isinstance(logprobs, int) or isinstance(logprobs, bool) or not 0 <= logprobs <= 5
        ):
            raise RequestError("logprobs must be an integer in [0, 5]", param="logprobs")
        sampling, n = self.sampling(request, top_logprobs=logprobs or 0)
        vocab = self.policy.model.config.vocab_size
        encoded = []
        for p in prompts:
            ids = list(self.policy.tokenizer(p)["input_ids"]) if isinstance(p, str) else list(p)
            if not ids or not all(_is_int(t) and 0 <= t < vocab for t in ids):
                raise RequestError(
                    f"a prompt is empty or has token ids outside [0, {vocab})", param="prompt"
                )
            encoded.append(ids)
        max_tokens = self.check_size(
            encoded, sampling.max_tokens, n, default_max_tokens=16, param="prompt"
        )
        return TextPlan(
            encoded, dataclasses.replace(sampling, max_tokens=max_tokens), n, logprobs, adapter
        )

    # -- the fields -----------------------------------------------------------------------------------
    @staticmethod
    def _object(request: Any) -> dict[str, Any]:
        """The request as a dict; JSON bytes parsed. Text that is not Unicode (a lone surrogate
        such as ``"\\ud800"``, which JSON can spell and no tokenizer takes) is a 400 here, not a
        500 when the prompt is tokenized."""
        if isinstance(request, (bytes, bytearray)):
            suspect = _SURROGATE_ESCAPE.search(request) is not None
            request = loads_json(request)
        else:
            suspect = True
        if not isinstance(request, dict):
            raise RequestError("the body must be a JSON object")
        if suspect:
            try:
                json.dumps(request, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise RequestError(
                    "the request holds a lone surrogate (a \\ud800-\\udfff escape that is not "
                    "half of a pair): its text is not Unicode"
                ) from None
            except (
                TypeError,
                ValueError,
            ):  # not JSON (an in-process caller's object): later checks
                pass
        return request

    def check_model(self, request: dict[str, Any]) -> str | None:
        """The served adapter a request's ``model`` names (``None``: the base model, also when
        ``model`` is absent); any other ``model`` is refused (404 ``model_not_found``, as OpenAI)."""
        model = request.get("model", self.model_name)
        if not isinstance(model, str):
            raise RequestError("'model' must be a string", param="model")
        if model in self.adapters:
            return model
        if model != self.model_name:
            served = ", ".join(f"`{name}`" for name in (self.model_name, *self.adapters))
            raise RequestError(
                f"The model `{model[:100]}` does not exist or you do not have access to it. "
                f"This server serves {served}.",
                status=404,
                code="model_not_found",
                param="model",
            )
        return None

    def sampling(self, request: dict[str, Any], *, top_logprobs: int) -> tuple[Sampling, int]:
        """(sampling options, ``n``) of a request, validated.

        ``max_tokens`` is 0 when the request leaves it out: :meth:`check_size` then picks the
        endpoint's default, or less where the prompt leaves less room in the context.
        """
        limits = self.limits
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
        elif max_tokens > limits.max_tokens:
            raise RequestError(
                f"max_tokens={max_tokens} is above this server's limit of {limits.max_tokens} "
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
        if n > limits.max_n:
            raise RequestError(
                f"n={n} is above this server's limit of {limits.max_n} (verigym serve-model --max-n raises it)",
                param="n",
            )
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 8:
            raise RequestError("stop must be a string or a list of at most 8 strings", param="stop")
        sampling = Sampling(max_tokens, float(temperature), float(top_p), tuple(stop), top_logprobs)
        return sampling, n

    def check_size(
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
            max_tokens = min(default_max_tokens, room, self.limits.max_tokens)
        elif max_tokens > room:
            raise RequestError(
                f"the prompt has {longest} tokens; with max_tokens={max_tokens} it exceeds the model's "
                f"context of {context} tokens: ask for max_tokens <= {room}",
                param="max_tokens",
            )
        total = n * sum(len(p) + max_tokens for p in prompts)
        if total > self.limits.max_request_tokens:
            raise RequestError(
                f"the request holds {total} tokens (n x (prompt + max_tokens), summed over its prompts), "
                f"above this server's limit of {self.limits.max_request_tokens} (verigym serve-model "
                "--max-request-tokens raises it); lower n or max_tokens",
                param="max_tokens",
            )
        return max_tokens

    def messages(self, request: dict[str, Any]) -> list[dict[str, str]]:
        """The request's messages as plain {role, content} text (tool calls and results in Hermes
        form, by :func:`verigym.toolcalls.messages_to_text`)."""
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(
                "'messages' must be a non-empty list of {role, content} objects", param="messages"
            )
        for m in messages:
            role = m.get("role") if isinstance(m, dict) else None
            if role not in {"system", "developer", "user", "assistant", "tool"}:
                raise RequestError(
                    "each message needs a role (system, developer, user, assistant or tool) and a content",
                    param="messages",
                )
            content = m.get("content")
            if content is None and not (role == "assistant" and m.get("tool_calls")):
                role = "system" if role == "developer" else role
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
            return messages_to_text(messages, tool_response=True, parse_arguments=False)
        except ActionParseError as exc:
            raise RequestError(f"bad assistant tool_calls: {exc}", param="messages") from None

    def tools(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None, bool]:
        """(tools offered, forced call, parallel calls allowed) of a request, validated.

        The forced call is ``None`` (``tool_choice`` ``"auto"`` or ``"none"``), a tool name (a
        named function, or ``"required"`` with one tool) or
        :data:`~verigym.serve.model.tool_choice.REQUIRED`.
        """
        tools = request.get("tools") or []
        choice = request.get("tool_choice")
        parallel = request.get("parallel_tool_calls")
        if not isinstance(tools, list) or not all(
            isinstance(t, dict)
            and t.get("type", "function") == "function"
            and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str)
            and 0 < len(t["function"]["name"]) <= 64
            and t["function"]["name"].isprintable()
            for t in tools
        ):
            raise RequestError(
                "tools must be a list of {type: function, function: {name, description, parameters}} "
                "with names of 1 to 64 printable characters",
                param="tools",
            )
        for i, tool in enumerate(tools):
            strict = tool["function"].get("strict", tool.get("strict"))
            if strict not in (None, False):
                raise RequestError(
                    f'tools[{i}] "strict": {json.dumps(strict)[:20]} is not supported by verigym '
                    "serve-model: it cannot constrain a call's arguments to the schema (no "
                    "grammar-constrained decoding). Leave strict out and check the arguments.",
                    code="unsupported_value",
                    param=f"tools[{i}].function.strict",
                )
        if len(tools) > MAX_TOOLS:
            raise RequestError(
                f"a request may offer at most {MAX_TOOLS} tools, got {len(tools)}", param="tools"
            )
        if parallel is not None and not isinstance(parallel, bool):
            raise RequestError("parallel_tool_calls must be a boolean", param="parallel_tool_calls")
        names = [t["function"]["name"] for t in tools]
        if choice is None or choice == "auto":
            return tools, None, parallel is not False
        if choice == "none":
            return [], None, False
        if not tools and (choice == "required" or isinstance(choice, dict)):
            raise RequestError(
                "tool_choice requires a tool call, but the request offers no tools: send tools, "
                "or leave tool_choice out",
                param="tool_choice",
            )
        if choice == "required":
            forced = names[0] if len(set(names)) == 1 else REQUIRED
            return tools, forced, parallel is not False
        function = choice.get("function") if isinstance(choice, dict) else None
        if (
            isinstance(choice, dict)
            and choice.get("type") == "function"
            and isinstance(function, dict)
            and isinstance(function.get("name"), str)
        ):
            if function["name"] not in names:
                raise RequestError(
                    f"tool_choice names the function {function['name']!r}, which is not in tools "
                    f"({', '.join(names[:20])})",
                    param="tool_choice",
                )
            return tools, function["name"], False
        raise RequestError(
            "tool_choice must be none, auto, required or a {type: function, function: {name}} object",
            param="tool_choice",
        )

    @staticmethod
    def check_response_format(request: dict[str, Any]) -> None:
        """Refuse a ``response_format`` this server cannot enforce (anything but text)."""
        fmt = request.get("response_format")
        if fmt is None:
            return
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "text":
            return
        if kind in ("json_object", "json_schema"):
            raise RequestError(
                f"response_format {kind} is not supported by verigym serve-model: it cannot constrain "
                "a reply to JSON (no grammar-constrained decoding), and an unchecked reply would "
                "break the contract. Ask for JSON in the prompt and parse the reply, or offer tools "
                'with tool_choice "required" or a named function (enforced).',
                code="unsupported_value",
                param="response_format",
            )
        raise RequestError(
            "response_format must be {type: text} (json_object and json_schema are not supported)",
            param="response_format",
        )

    @staticmethod
    def check_unsupported_sampling(request: dict[str, Any]) -> None:
        """Refuse the OpenAI sampling fields this server does not implement, rather than ignore
        them: ``frequency_penalty`` and ``presence_penalty`` other than 0, a non-empty
        ``logit_bias`` (HTTP 400, ``code`` ``"unsupported_value"``, ``param`` the field). Their
        neutral values (0, ``{}``, ``null``), which some clients always send, are accepted."""
        for name in ("frequency_penalty", "presence_penalty"):
            value = request.get(name)
            if value is None:
                continue
            if not _is_number(value) or not -2 <= value <= 2:
                raise RequestError(f"{name} must be a finite number in [-2, 2]", param=name)
            if value != 0:
                raise RequestError(
                    f"{name}={value} is not supported by verigym serve-model (its sampler applies "
                    f"no penalties); send 0 or leave {name} out",
                    code="unsupported_value",
                    param=name,
                )
        bias = request.get("logit_bias")
        if bias is None:
            return
        if not isinstance(bias, dict):
            raise RequestError("logit_bias must be an object {token id: bias}", param="logit_bias")
        if bias:
            raise RequestError(
                "logit_bias is not supported by verigym serve-model (its sampler applies no "
                "bias); send {} or leave logit_bias out",
                code="unsupported_value",
                param="logit_bias",
            )

    def chat_prompt(self, messages: list[dict[str, str]], tools: list[dict[str, Any]]) -> list[int]:
        """The prompt's token ids: the model's chat template (with ``tools`` when it reads
        them), else the Hermes system section naming the tools."""
        if not tools:
            return self.policy.encode_messages(messages)
        if self.render_tools is not None:
            return self.policy.chat.encode(self.render_tools(messages, tools=tools))
        section = _HERMES.format(tools="\n".join(json.dumps(t) for t in tools))
        if messages[0]["role"] == "system":
            messages = [
                {"role": "system", "content": f"{messages[0]['content']}\n\n{section}"},
                *messages[1:],
            ]
        else:
            messages = [{"role": "system", "content": section}, *messages]
        return self.policy.encode_messages(messages)
