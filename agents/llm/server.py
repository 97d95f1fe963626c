"""A small OpenAI-compatible server over a local transformers model, on Starlette and uvicorn.

``verigym serve-model MODEL`` runs it, so many evaluation workers (``verigym eval`` with the ``openai``
agent) share one loaded model. Requests that arrive together are sampled as one left-padded batch
(continuous batching it is not: a batch runs to completion before the next).

Endpoints:

* ``POST /v1/chat/completions`` -- ``model`` (another name than the served one is refused with
  HTTP 404 ``model_not_found``, as OpenAI does), ``messages`` (string or list-of-parts text
  content; ``tool`` messages and assistant ``tool_calls`` are rendered in the Hermes format),
  ``tools`` (at most :data:`MAX_TOOLS`, names of 1 to 64 printable characters), ``tool_choice`` and
  ``parallel_tool_calls`` (below), ``response_format`` (``{"type": "text"}`` only, below),
  ``max_tokens`` (or ``max_completion_tokens``), ``temperature``, ``top_p``, ``stop``, ``n``,
  ``logprobs``, ``top_logprobs`` (0-20), ``stream`` (server-sent events;
  ``stream_options.include_usage``). ``seed`` is accepted and ignored (batched sampling shares one
  generator). Tools reach the model through its chat template when the template reads ``tools``,
  else as a Hermes-style system section; ``<tool_call>{"name", "arguments"}</tool_call>`` blocks in
  the reply (also SmolLM2's list form) come back as ``message.tool_calls`` with
  ``finish_reason="tool_calls"``. Each choice carries the generated token ids in the extension
  field ``token_ids``. The reported log-probs are those of the sampling distribution
  (``softmax(logits / temperature)``; raw logits at temperature 0); ``top_logprobs`` are raw.
* ``POST /v1/completions`` -- ``prompt`` (a string, a list of strings, or token ids), the same
  sampling options, ``logprobs`` (0-5, legacy layout); ``echo`` and ``suffix`` are refused.
* ``GET /v1/models`` -- the one served model.
* ``GET /health`` -- ``{"status": "ok"}``; answered while a batch generates.

``tool_choice`` is enforced:

* ``"auto"`` (the default): the tools are offered and the model decides.
* ``"none"``: no tools are offered (the prompt has none) and the reply is not read for calls.
* ``{"type": "function", "function": {"name": NAME}}``: the reply is one call of ``NAME``. The
  prompt is extended by the Hermes tool-call opening ``<tool_call>\\n{"name": "NAME", "arguments": {``
  (the format the server writes tools in; Qwen2.5/Hermes templates use it too), so the model writes
  only the arguments. ``message.content`` is ``None`` and ``message.tool_calls`` holds the call;
  ``arguments`` is the JSON object the model wrote, re-serialised, or, when it wrote no valid
  object, its raw text (as with OpenAI, the arguments are the model's: check them).
  ``finish_reason`` is ``"tool_calls"``, or ``"length"`` when ``max_tokens`` ran out before the
  arguments closed.
* ``"required"``: the reply is at least one call of an offered tool. With one tool it is the named
  case; with several, the function is chosen first: the log-probability of each tool's opening
  (one forward pass over the prompt, its KV cache shared by the ``k`` openings) gives the choice
  ``softmax(log p / temperature)`` (the most likely at temperature 0), drawn per choice; then the
  named case runs. Further calls the model writes after the first are kept unless
  ``parallel_tool_calls`` is ``false``. The choosing pass holds ``k x (prompt + opening)`` tokens,
  which ``--max-request-tokens`` bounds.

With a forced call, ``token_ids`` and ``logprobs`` hold the sampled tokens only (the opening was
not sampled) and ``usage.completion_tokens`` counts the opening's tokens too (it is part of the
reply). ``tool_choice`` other than ``"auto"`` without ``tools`` is a 400, as is a named function
that is not in ``tools``. ``response_format`` ``json_object`` or ``json_schema`` is refused with
HTTP 400 (``code`` ``"unsupported_value"``, ``param`` ``"response_format"``): this server cannot
constrain free text to JSON (no grammar-constrained decoding), so it says so rather than answer
unchecked text; ask for JSON in the prompt, or use ``tools`` with a forced ``tool_choice``.

Every request is bounded before anything is generated (HTTP 400 naming the limit and the ``verigym
serve-model`` flag that raises it): ``n`` (``--max-n``, default 16), ``max_tokens``
(``--max-tokens``, default 4096, and at most the model's context minus the prompt), prompts per
``/v1/completions`` request (``--max-prompts``, default 16) and the request's tokens, ``n x (prompt
+ max_tokens)`` summed over its prompts (``--max-request-tokens``, default 65536), which is what
sizes its KV cache. A body is 1 byte to :data:`MAX_BODY_BYTES` of JSON (larger: 413, counted as it
arrives, also without a ``Content-Length``), and the bodies of all requests in progress hold at most
:data:`BODY_BUDGET_BYTES` together (more: 503, before the body is read when its ``Content-Length``
says so); at most :data:`MAX_CONNECTIONS` requests are served at once (more get 503). A connection
must send its request's headers within :data:`verigym.serve.front.HEADER_TIMEOUT_S` seconds of
opening (or of its previous answer) or it is closed, and when more than :data:`MAX_CONNECTIONS`
connections are open the longest-idle one is closed, so idle connections never refuse a request.
JSON nested deeper than the interpreter's recursion limit is a 400. Sampling options must be finite numbers in range (else 400); a temperature so small that
the logits overflow samples greedily. A request whose client disconnects is dropped from the queue,
or stops generating at the next decoding step.

Concurrency: the event loop parses nothing large and runs no model code. Bodies are decoded and
prompts tokenized on a pool of :data:`PREP_THREADS` threads; every model call (sampling, the
``"required"`` choosing pass) runs on one batcher thread (:mod:`verigym.agents.llm.batcher`) that
takes queued requests in arrival order, so ``/health`` and new requests are answered while a batch
generates, and a client that leaves is noticed at once (the ASGI ``http.disconnect`` event). The
model folder's chat template is untrusted code: it renders in :data:`TEMPLATE_WORKERS` worker
processes (:mod:`verigym.agents.llm.template_guard`), each render bounded to
:data:`~verigym.agents.llm.template_guard.TEMPLATE_TIMEOUT_S` seconds (then the worker is killed
and replaced), :data:`~verigym.agents.llm.template_guard.TEMPLATE_MEMORY_BYTES` of memory and
:data:`~verigym.agents.llm.template_guard.TEMPLATE_MAX_CHARS` characters; a template over a bound is
a 400 and costs a prep thread at most the timeout.

Security: with a token (``token=``, ``verigym serve-model --token`` or ``$VERIGYM_TOKEN``) every
request needs ``Authorization: Bearer <token>``, checked by :class:`verigym.serve.auth.TokenGate`
(the env server's gate: the right token always goes through; a wrong or missing one gets 401, or 429
once its address or its /24 (/64) network sent too many); binding any address but loopback without
a token, or with one under 128 bits, is refused, as ``verigym serve-env`` does (on loopback a weak
token is logged as a warning).

``usage`` counts the prompt tokens once per request (not once per choice) and the tokens of every
choice, as OpenAI does. Errors carry OpenAI's error object and the env server's fields in one
body, ``{"error": {"message", "type", "param", "code"}, "detail": message, "code": code}``
(``code`` at the top is the error's ``code``, else its ``type``), with HTTP 400 (bad request), 404
(unknown path or model), 405 (wrong method), 500 or 504 (the generation outlived
``request_timeout``): OpenAI clients read ``error``, verigym's env client reads ``detail`` and
``code``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.agents.llm.batcher import Batcher, ClientGone, Job
from verigym.agents.llm.policy import Generation, TransformersPolicy
from verigym.core import ActionParseError

__all__ = [
    "BODY_BUDGET_BYTES",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "MAX_TOOLS",
    "PREP_THREADS",
    "TEMPLATE_WORKERS",
    "ChatServer",
    "RequestError",
    "error_body",
    "make_server",
    "tool_call_opening",
]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 << 20
"""Bytes of JSON one request body may hold (larger: 413, counted as the body arrives)."""

MAX_CONNECTIONS = 1024
"""Requests served at once (one more gets HTTP 503), and open connections above which the
longest-idle one is closed for each new one (:mod:`verigym.serve.front`): idle connections never
refuse a request."""

BODY_BUDGET_BYTES = 4 * MAX_BODY_BYTES
"""Bytes all request bodies being read or held by requests in progress may hold together (more:
HTTP 503, before the body is read when its ``Content-Length`` says so)."""

MAX_TOOLS = 128
"""Tools one chat request may offer (OpenAI's limit)."""

PREP_THREADS = 4
"""Threads that decode request bodies, tokenize prompts and build answers, off the event loop."""

TEMPLATE_WORKERS = 2
"""Processes that render the model's chat template (:mod:`verigym.agents.llm.template_guard`)."""

_REQUIRED = "\x00required"
"""The forced-call marker of ``tool_choice="required"`` (never a tool name: names are printable)."""

Sampling = tuple[int, float, float, tuple[str, ...], int, int]
"""(max_tokens, temperature, top_p, stop strings, top_logprobs, n) of a request."""


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


def error_body(
    message: str,
    *,
    kind: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """The JSON of an error answer: OpenAI's error object and the env server's ``detail``/``code``.

    Args:
        message: what went wrong and what to do.
        kind: OpenAI's error ``type`` (``invalid_request_error``, ``not_found``, ``server_error``).
        code: OpenAI's error ``code`` (e.g. ``model_not_found``), or ``None``.
        param: the request field at fault, or ``None``.

    Returns:
        ``{"error": {"message", "type", "param", "code"}, "detail": message, "code": code or kind}``.
    """
    return {
        "error": {"message": message, "type": kind, "param": param, "code": code},
        "detail": message,
        "code": code or kind,
    }


def _json_response(status: int, body: dict[str, Any]) -> Any:
    """A JSON response written as Python's ``json`` writes it (``-Infinity`` log-probs included,
    as the ``http.server`` version did; Starlette's ``JSONResponse`` refuses them)."""
    from starlette.responses import Response

    return Response(json.dumps(body), status_code=status, media_type="application/json")


def _error_response(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    *,
    code: str | None = None,
    param: str | None = None,
) -> Any:
    return _json_response(status, error_body(message, kind=kind, code=code, param=param))


_HERMES = (
    "You are a function calling AI model. You are provided with function signatures within "
    "<tools></tools> XML tags. You may call one or more functions to assist with the user query. "
    "Don't make assumptions about what values to plug into functions. Here are the available tools: "
    "<tools>\n{tools}\n</tools>\nFor each function call return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
"""The Hermes function-calling system text (used when the chat template does not read ``tools``)."""


def tool_call_opening(name: str) -> str:
    """The text a forced call of ``name`` starts with: the Hermes opening up to the arguments,
    ``<tool_call>\\n{"name": "<name>", "arguments": {`` (the arguments' own brace included: they
    are a JSON object, and a small model that is not shown the brace writes a bare value)."""
    return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {{'


@dataclass
class _ChatPlan:
    """A validated chat request, ready to sample."""

    request: dict[str, Any]
    prompt: list[int]
    sampling: Sampling
    tools: list[dict[str, Any]]
    forced: str | None
    """``None`` (no forced call), a tool name, or :data:`_REQUIRED`"""
    parallel: bool
    logprobs: bool
    openings: dict[str, list[int]] = field(default_factory=dict)
    """token ids of the forced opening of each tool that may be called"""


class ChatServer:
    """The model server: the request logic, its Starlette app and the uvicorn server that runs it.

    Build it with :func:`make_server`. The socket is bound on construction; :meth:`serve_forever`
    serves until :meth:`shutdown` (from another thread) or Ctrl-C; :meth:`server_close` stops the
    batcher and closes the socket (the ``http.server`` life cycle, so callers did not change).

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
        request_timeout: seconds a request waits for its generation before it is abandoned (504).
        token: the credential every request must carry (``Authorization: Bearer``); ``None``: none.

    Attributes:
        app: the ASGI app (behind :class:`verigym.serve.auth.TokenGate` with a token).
        server_address: the bound (host, port).

    Raises:
        ValueError: a limit is below 1, or ``address`` is not loopback and there is no token (or
            one under :data:`verigym.serve.auth.MIN_TOKEN_BITS` bits).
        OSError: the address cannot be bound.
        ImportError: Starlette or uvicorn is missing (``pip install verigym[serve]``).
    """

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
        token: str | None = None,
    ):
        import uvicorn

        from verigym.serve import bind_socket, is_loopback
        from verigym.serve.auth import check_token
        from verigym.serve.front import uvicorn_protocol

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
        host, port = address
        if not token and not is_loopback(host):
            raise ValueError(
                f"refusing to serve on {host} without a token: anyone who reaches the port could use "
                "the model. Pass --token or set VERIGYM_TOKEN, or bind 127.0.0.1."
            )
        check_token(token, host, "serve-model")
        self.policy = policy
        self.model_name = model_name
        self.max_tokens_limit = max_tokens_limit
        self.max_n = max_n
        self.max_prompts = max_prompts
        self.max_request_tokens = max_request_tokens
        self.request_timeout = request_timeout
        template = getattr(policy.tokenizer, "chat_template", None) or ""
        self._template_reads_tools = policy.chat.use_template and "tools" in str(template)
        from verigym.agents.llm.template_guard import TemplateRenderer

        self._templates = None
        if policy.chat.use_template:  # the policy renders through the workers from now on
            self._templates = TemplateRenderer(policy.tokenizer, workers=TEMPLATE_WORKERS)
            policy.chat.render = functools.partial(_render_with, self._templates)
        self.app = self._create_app(token)
        self._sock = bind_socket(host, port)
        self.server_address: tuple[str, int] = tuple(self._sock.getsockname()[:2])  # type: ignore[assignment]
        self._uvicorn = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host=host,
                log_level="warning",
                access_log=False,
                lifespan="off",
                http=uvicorn_protocol(max_connections=MAX_CONNECTIONS),
                timeout_keep_alive=30,
                timeout_graceful_shutdown=10,
            )
        )
        self._stopped = threading.Event()
        self._stopped.set()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            PREP_THREADS, thread_name_prefix="verigym-serve-prep"
        )
        self.batcher = Batcher(policy, max_batch_size)

    @property
    def base_url(self) -> str:
        from verigym.serve import http_url

        return http_url(*self.server_address) + "/v1"

    # -- life cycle -------------------------------------------------------------------------------------
    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` or, on the main thread, SIGINT/SIGTERM (then re-raised)."""
        self._stopped.clear()
        try:
            self._uvicorn.run(sockets=[self._sock])
        finally:
            self._stopped.set()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop :meth:`serve_forever` (from another thread) and wait until it has returned."""
        self._uvicorn.should_exit = True
        self._stopped.wait(timeout)

    def server_close(self) -> None:
        """Stop the batcher and the prep threads and close the socket (idempotent)."""
        self.batcher.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._templates is not None:
            self._templates.close()
        self._sock.close()

    # -- the app ------------------------------------------------------------------------------------------
    def _create_app(self, token: str | None) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route

        from verigym.serve.auth import TokenGate
        from verigym.serve.front import guard

        routes = []
        for paths, endpoint, method in (
            (("/v1/chat/completions", "/chat/completions"), self._chat_route, "POST"),
            (("/v1/completions", "/completions"), self._completions_route, "POST"),
            (("/v1/models", "/models"), self._models_route, "GET"),
            (("/health",), self._health_route, "GET"),
        ):
            for path in paths:  # with and without a trailing slash, as before
                routes.append(Route(path, endpoint, methods=[method]))
                routes.append(Route(path + "/", endpoint, methods=[method]))

        async def not_found(request: Any, exc: Any) -> Any:
            if getattr(exc, "status_code", 404) == 405:
                return _error_response(
                    405, f"{request.method} is not allowed on {request.url.path}", "not_found"
                )
            return _error_response(
                404,
                f"no route {request.url.path}; use POST /v1/chat/completions or /v1/completions",
                "not_found",
            )

        app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
        app.state.server = self
        return guard(
            app if not token else TokenGate(app, token),
            max_requests=MAX_CONNECTIONS,
            max_body_bytes=MAX_BODY_BYTES,
            body_budget_bytes=BODY_BUDGET_BYTES,
        )

    async def _models_route(self, request: Any) -> Any:
        return _json_response(
            200,
            {
                "object": "list",
                "data": [{"id": self.model_name, "object": "model", "owned_by": "verigym"}],
            },
        )

    async def _health_route(self, request: Any) -> Any:
        return _json_response(200, {"status": "ok"})

    async def _chat_route(self, request: Any) -> Any:
        return await self._answer(request, chat=True)

    async def _completions_route(self, request: Any) -> Any:
        return await self._answer(request, chat=False)

    async def _in_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on a prep thread (tokenizing, JSON of a large body, building answers)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    async def _answer(self, request: Any, *, chat: bool) -> Any:
        """One POST: body (bounded), JSON, the answer; every failure in the shared error shape."""
        from starlette.requests import ClientDisconnect
        from starlette.responses import Response

        gone = asyncio.Event()
        watcher: asyncio.Future | None = None
        try:
            body = await _read_body(request)
            watcher = asyncio.ensure_future(_watch_disconnect(request, gone))
            if not chat:
                return _json_response(200, await self.text_complete(body, gone))
            plan: _ChatPlan = await self._in_pool(self._plan_chat, body)
            answer = await self._complete_plan(plan, gone)
            if plan.request.get("stream"):
                events = await self._in_pool(self._events, plan.request, answer)
                return Response(
                    events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
                )
            return _json_response(200, answer)
        except RequestError as exc:
            return _error_response(exc.status, str(exc), code=exc.code, param=exc.param)
        except (ClientGone, ClientDisconnect):
            logger.info("a client left before its answer")
            return _error_response(400, "the client left before its answer")
        except TimeoutError as exc:
            return _error_response(504, str(exc), "server_error", code="timeout")
        except RecursionError:  # over-deep JSON, or a structure in it too deep to render
            return _error_response(400, "the request is nested too deeply")
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
            return _error_response(400, str(exc))
        except Exception as exc:  # keep the server up; tell the client
            logger.exception("request failed")
            return _error_response(500, f"server error: {exc}", "server_error")
        finally:
            if watcher is not None:
                watcher.cancel()

    def _events(self, request: dict[str, Any], answer: dict[str, Any]) -> bytes:
        """Server-sent events: one ``data: {json}`` per chunk, then ``data: [DONE]``."""
        lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in self.stream_chunks(request, answer)]
        return ("".join(lines) + "data: [DONE]\n\n").encode()

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

    def _tools(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None, bool]:
        """(tools offered, forced call, parallel calls allowed) of a request, validated.

        The forced call is ``None`` (``tool_choice`` ``"auto"`` or ``"none"``), a tool name (a
        named function, or ``"required"`` with one tool) or :data:`_REQUIRED`.
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
            forced = names[0] if len(set(names)) == 1 else _REQUIRED
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
    def _check_response_format(request: dict[str, Any]) -> None:
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

    def _chat_prompt(
        self, messages: list[dict[str, str]], tools: list[dict[str, Any]]
    ) -> list[int]:
        if not tools:
            return self.policy.encode_messages(messages)
        if self._template_reads_tools and self._templates is not None:
            return self.policy.chat.encode(self._templates.render(messages, tools=tools))
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
            _openai_call(name, json.dumps(arguments)) for name, arguments in calls
        ]

    @staticmethod
    def _forced_calls(
        name: str, reply: Generation, names: Sequence[str], parallel: bool
    ) -> tuple[list[dict[str, Any]], str]:
        """(OpenAI tool_calls, finish_reason) of a reply whose opening forced a call of ``name``.

        ``reply.text`` continues the opening, so ``"{" + reply.text`` starts with the arguments:
        the JSON object there (re-serialised), else the raw text up to ``</tool_call>`` with the
        call's closing brace dropped. Complete calls of offered tools written after it are kept when ``parallel``.
        """
        from verigym.toolcalls import tool_calls_in

        rest = "{" + reply.text
        try:
            arguments, end = json.JSONDecoder().raw_decode(rest)
        except ValueError:
            arguments, end = None, 0
        if isinstance(arguments, dict):
            calls = [_openai_call(name, json.dumps(arguments))]
            tail = rest[end:]
            if parallel and "<tool_call>" in tail:
                try:
                    more = tool_calls_in(tail[tail.index("<tool_call>") :])
                except ActionParseError:  # a malformed extra call is dropped
                    more = []
                calls += [_openai_call(n, json.dumps(a)) for n, a in more if n in names]
            return calls, "tool_calls"
        raw = rest.split("</tool_call>", 1)[0].rstrip()
        if raw.endswith("}") and raw.count("}") > raw.count("{"):
            raw = raw[:-1].rstrip()  # the brace that closes {"name": ..., "arguments": ...}
        finish = "length" if reply.finish_reason == "length" else "tool_calls"
        return [_openai_call(name, raw)], finish

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

    def _plan_chat(self, request: Any) -> _ChatPlan:
        """A chat-completions body (parsed, or its JSON bytes) validated and tokenized (on a prep
        thread).

        Raises:
            json.JSONDecodeError, UnicodeDecodeError: the bytes are not JSON.
            RequestError: the request is malformed, names another model or is above a limit (the
                message says which, and the flag that raises it).
        """
        if isinstance(request, (bytes, bytearray)):
            from verigym.serve.front import loads_json

            request = loads_json(request)
        if not isinstance(request, dict):
            raise RequestError("the body must be a JSON object")
        self._check_model(request)
        self._check_response_format(request)
        messages = self._messages(request)
        tools, forced, parallel = self._tools(request)
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
        openings: dict[str, list[int]] = {}
        if forced is not None:
            callable_names = (
                [t["function"]["name"] for t in tools] if forced == _REQUIRED else [forced]
            )
            for name in callable_names:
                openings.setdefault(name, self.policy.chat.encode(tool_call_opening(name)))
        longest = max((len(ids) for ids in openings.values()), default=0)
        max_tokens = self._check_size(
            [prompt + [0] * longest],
            sampling[0],
            sampling[5],
            default_max_tokens=256,
            param="messages",
        )
        if forced == _REQUIRED:
            held = len(openings) * (len(prompt) + longest)
            if held > self.max_request_tokens:
                raise RequestError(
                    f'tool_choice "required" with {len(openings)} tools holds {held} tokens to choose '
                    f"the function (tools x (prompt + opening)), above this server's limit of "
                    f"{self.max_request_tokens} (verigym serve-model --max-request-tokens raises it); "
                    "name the function or offer fewer tools",
                    param="tool_choice",
                )
        stop = sampling[3] + self.policy.chat.stop_strings
        if forced is not None and not parallel:
            stop += ("</tool_call>",)
        return _ChatPlan(
            request=request,
            prompt=prompt,
            sampling=(max_tokens, sampling[1], sampling[2], stop, *sampling[4:]),
            tools=tools,
            forced=forced,
            parallel=parallel,
            logprobs=logprobs,
            openings=openings,
        )

    def _score_openings(self, prompt: list[int], openings: list[list[int]]) -> list[float]:
        """Log-probability of each opening after ``prompt`` (one pass; the prompt's KV cache is
        computed once and shared by the openings). Runs on the batcher thread."""
        import torch

        from verigym.agents.llm.grpo import token_log_probs

        width = max(len(o) for o in openings)
        pad = self.policy.tokenizer.pad_token_id
        device = self.policy.device
        ids = torch.tensor([prompt + o + [pad] * (width - len(o)) for o in openings], device=device)
        mask = torch.tensor(
            [[1] * (len(prompt) + len(o)) + [0] * (width - len(o)) for o in openings],
            device=device,
        )
        start = len(prompt) - 1
        with torch.no_grad():
            log_probs, _ = token_log_probs(
                self.policy.model,
                ids,
                mask,
                start=start,
                shared_prefix=start if len(openings) > 1 else 0,
            )
        return (log_probs * mask[:, len(prompt) :]).sum(-1).tolist()

    @staticmethod
    def _draw(names: list[str], scores: list[float], temperature: float, n: int) -> list[str]:
        """``n`` names drawn from ``softmax(scores / temperature)`` (the best at temperature 0)."""
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

    async def complete(self, request: Any, gone: asyncio.Event | None = None) -> dict[str, Any]:
        """Answer a chat-completions request body (``stream`` is turned into events by the route).

        Args:
            request: the JSON body, parsed or as bytes.
            gone: set when the client disconnects; the request is then abandoned.

        Raises:
            RequestError: the request is malformed, names another model or is above a limit (the
                message says which, and the flag that raises it).
            ClientGone: the client left before its answer.
            TimeoutError: the generation outlived ``request_timeout``.
        """
        plan: _ChatPlan = await self._in_pool(self._plan_chat, request)
        return await self._complete_plan(plan, gone if gone is not None else asyncio.Event())

    async def _complete_plan(self, plan: _ChatPlan, gone: asyncio.Event) -> dict[str, Any]:
        """Sample a planned chat request and build its answer."""
        n = plan.sampling[5]
        job_sampling = plan.sampling[:5]
        names: list[str | None] = [plan.forced] * n
        if plan.forced == _REQUIRED:
            choices = list(plan.openings)
            scores = await self.batcher.call(
                functools.partial(
                    self._score_openings, plan.prompt, [plan.openings[c] for c in choices]
                ),
                gone,
                self.request_timeout,
            )
            names = list(self._draw(choices, scores, plan.sampling[1], n))
        groups: dict[str | None, int] = {}
        for name in names:
            groups[name] = groups.get(name, 0) + 1
        jobs = [
            Job(plan.prompt + (plan.openings[name] if name else []), count, job_sampling)
            for name, count in groups.items()
        ]
        results = await self.batcher.run(jobs, gone, self.request_timeout)
        replies = [(name, r) for name, out in zip(groups, results) for r in out]
        if plan.logprobs:  # a token text per sampled and top token: off the event loop
            return await self._in_pool(self._chat_answer, plan, replies)
        return self._chat_answer(plan, replies)

    def _chat_answer(
        self, plan: _ChatPlan, replies: list[tuple[str | None, Generation]]
    ) -> dict[str, Any]:
        """The ``chat.completion`` object of sampled replies (on a prep thread)."""
        names = [t["function"]["name"] for t in plan.tools]
        choices = []
        completion_tokens = 0
        for i, (forced, r) in enumerate(replies):
            completion_tokens += len(r.token_ids)
            if forced is not None:
                content = None
                calls, finish = self._forced_calls(forced, r, names, plan.parallel)
                completion_tokens += len(plan.openings[forced])
            else:
                content, calls = self._tool_calls(r.text) if plan.tools else (r.text, [])
                finish = "tool_calls" if calls else r.finish_reason
            message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
            if calls:
                message["tool_calls"] = calls
            choices.append(
                {
                    "index": i,
                    "message": message,
                    "finish_reason": finish,
                    "logprobs": self._chat_logprobs(r) if plan.logprobs else None,
                    "token_ids": list(r.token_ids),
                }
            )
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(plan.prompt),
                "completion_tokens": completion_tokens,
                "total_tokens": len(plan.prompt) + completion_tokens,
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
    def _plan_text(self, request: Any) -> tuple[list[list[int]], Sampling, int | None]:
        """(prompt token ids, sampling, logprobs) of a ``/v1/completions`` body (parsed, or its JSON
        bytes), on a prep thread.

        Raises:
            json.JSONDecodeError, UnicodeDecodeError: the bytes are not JSON.
            RequestError: the request is malformed, names another model or is above a limit.
        """
        if isinstance(request, (bytes, bytearray)):
            from verigym.serve.front import loads_json

            request = loads_json(request)
        if not isinstance(request, dict):
            raise RequestError("the body must be a JSON object")
        self._check_model(request)
        if request.get("stream"):
            raise RequestError("stream is supported on /v1/chat/completions only", param="stream")
        if request.get("echo") or request.get("suffix"):
            raise RequestError(
                "echo and suffix are not supported by verigym serve-model", param="echo"
            )
        self._check_response_format(request)
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
        return encoded, (max_tokens, *sampling[1:]), logprobs

    async def text_complete(
        self, request: Any, gone: asyncio.Event | None = None
    ) -> dict[str, Any]:
        """Answer a ``/v1/completions`` request body; its prompts are queued together.

        Raises:
            RequestError: the request is malformed, names another model or is above a limit.
            ClientGone: the client left before its answer.
            TimeoutError: the generation outlived ``request_timeout``.
        """
        gone = gone if gone is not None else asyncio.Event()
        encoded, sampling, logprobs = await self._in_pool(self._plan_text, request)
        jobs = [Job(ids, sampling[5], sampling[:5]) for ids in encoded]
        results = await self.batcher.run(jobs, gone, self.request_timeout)
        if logprobs is not None:  # a token text per sampled and top token: off the event loop
            return await self._in_pool(self._text_answer, encoded, results, logprobs)
        return self._text_answer(encoded, results, logprobs)

    def _text_answer(
        self, encoded: list[list[int]], results: list[list[Generation]], logprobs: int | None
    ) -> dict[str, Any]:
        """The ``text_completion`` object of sampled replies (on a prep thread)."""
        choices: list[dict[str, Any]] = []
        completion_tokens = 0
        for out in results:
            for r in out:
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
        prompt_tokens = sum(len(ids) for ids in encoded)
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


def _render_with(
    templates: Any, messages: Sequence[Any], *, add_generation_prompt: bool = True
) -> str:
    """``ChatFormat.render`` through a :class:`~verigym.agents.llm.template_guard.TemplateRenderer`
    (raises its ``TemplateError``, a ``ValueError``: HTTP 400)."""
    return templates.render(messages, add_generation_prompt=add_generation_prompt)


def _openai_call(name: str, arguments: str) -> dict[str, Any]:
    """One entry of an OpenAI ``message.tool_calls`` list."""
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


async def _read_body(request: Any) -> bytes:
    """The request body, 1 to :data:`MAX_BODY_BYTES` bytes, refused as soon as it is over.

    Raises:
        RequestError: the declared or received body is empty or too large.
    """
    refusal = f"the body must be 1 byte to {MAX_BODY_BYTES} bytes of JSON"
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            size = -1
        if not 0 < size <= MAX_BODY_BYTES:
            raise RequestError(refusal)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise RequestError(refusal)
    if not body:
        raise RequestError(refusal)
    return bytes(body)


async def _watch_disconnect(request: Any, gone: asyncio.Event) -> None:
    """Set ``gone`` when the client disconnects (the ASGI ``http.disconnect`` after the body)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


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
    token: str | None = None,
) -> ChatServer:
    """Bind a :class:`ChatServer` (``port=0`` picks a free port; see ``server.base_url``).

    ``max_tokens``, ``max_n``, ``max_prompts`` and ``max_request_tokens`` bound every request (see
    :class:`ChatServer`); ``token`` is required on every request when given. Call
    ``serve_forever()`` to run it and ``shutdown()`` + ``server_close()`` to stop.

    Raises:
        ValueError: a limit is below 1, or ``host`` is not loopback and there is no ``token`` (or
            a weak one).
        OSError: the address cannot be bound.
        ImportError: Starlette or uvicorn is missing (``pip install verigym[serve]``).
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
        token=token,
    )
