"""A small OpenAI-compatible server over a local transformers model, on Starlette and uvicorn.

The server by concern: this module holds the app, its routes and its life cycle (hosted by
:mod:`verigym.serve.hosting`, behind the front door and token gate both servers share);
:mod:`verigym.serve.model.requests` validates requests, :mod:`verigym.serve.model.tool_choice`
forces tool calls, :mod:`verigym.serve.model.streaming` writes server-sent events and
:mod:`verigym.serve.model.batcher` runs the model.

``verigym serve-model MODEL`` runs it, so many evaluation workers (``verigym eval`` with the ``openai``
agent) share one loaded model. Requests are batched continuously: each joins the running batch
between two decoding steps and leaves it when its reply is done (:mod:`verigym.serve.model.batcher`).
LoRA adapters (``--lora NAME=DIR``, as vLLM serves them) are loaded unmerged beside the base weights
and each is a ``model`` of its own: a request naming ``NAME`` samples under that adapter, and rows of
the base model and of every adapter share one batch and one forward pass per token (peft's
mixed-batch inference; an adapter's keys and values are cached apart from the base model's).

Endpoints:

* ``POST /v1/chat/completions`` -- ``model`` (the served model's name or a served adapter's; another
  name is refused with HTTP 404 ``model_not_found``, as OpenAI does), ``messages`` (string or list-of-parts text
  content; ``tool`` messages and assistant ``tool_calls`` are rendered in the Hermes format),
  ``tools`` (at most :data:`~verigym.serve.model.requests.MAX_TOOLS`, names of 1 to 64 printable
  characters), ``tool_choice`` and ``parallel_tool_calls`` (below), ``response_format`` (``{"type": "text"}`` only, below),
  ``max_tokens`` (or ``max_completion_tokens``), ``temperature``, ``top_p``, ``stop``, ``n``,
  ``logprobs``, ``top_logprobs`` (0-20), ``stream`` (server-sent events;
  ``stream_options.include_usage``). ``seed`` is accepted and ignored (batched sampling shares one
  generator). ``logit_bias``, ``frequency_penalty`` and ``presence_penalty`` other than their
  neutral values (``{}``, 0) and a tool's ``"strict": true`` are refused with HTTP 400 (``code``
  ``"unsupported_value"``, ``param`` the field), on both endpoints: the sampler does not apply
  them, so the server says so rather than ignore them. Tools reach the model through its chat template when the template reads ``tools``,
  else as a Hermes-style system section; ``<tool_call>{"name", "arguments"}</tool_call>`` blocks in
  the reply (also SmolLM2's list form) come back as ``message.tool_calls`` with
  ``finish_reason="tool_calls"``. Each choice carries the generated token ids in the extension
  field ``token_ids``. The reported log-probs are those of the sampling distribution
  (``softmax(logits / temperature)``; raw logits at temperature 0); ``top_logprobs`` are raw.
* ``POST /v1/completions`` -- ``prompt`` (a string, a list of strings, or token ids), the same
  sampling options, ``logprobs`` (0-5, legacy layout); ``echo`` and ``suffix`` are refused.
* ``GET /v1/models`` -- the served model, and each LoRA adapter served beside it (``verigym
  serve-model --lora NAME=DIR``) as its own model id ``NAME``, with ``parent`` (the base model's
  id) and the extension field ``adapter_sha256`` (SHA-256 of its ``adapter_config.json`` and
  ``adapter_model.safetensors``: which adapter it is).
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
JSON nested deeper than the interpreter's recursion limit is a 400, as is text that is not Unicode (a
lone surrogate escape such as ``\\ud800``, which no tokenizer takes). Sampling options must be finite numbers in range (else 400); a temperature so small that
the logits overflow samples greedily. A request whose client disconnects is dropped from the queue,
or stops generating at the next decoding step.

Concurrency: the event loop parses nothing large and runs no model code. Bodies are decoded and
prompts tokenized on a pool of :data:`PREP_THREADS` threads; every model call (sampling, the
``"required"`` choosing pass) runs on one batcher thread (:mod:`verigym.serve.model.batcher`) that
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
body (:func:`verigym.serve.front.error_body`, both servers'),
``{"error": {"message", "type", "param", "code"}, "detail": message, "code": code}``
(``code`` at the top is the error's ``code``, else its ``type``), with HTTP 400 (bad request), 404
(unknown path or model), 405 (wrong method), 500 or 504 (the generation outlived
``request_timeout``): OpenAI clients read ``error``, verigym's env client reads ``detail`` and
``code``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from verigym.serve.front import error_response, json_response
from verigym.serve.hosting import Hosted, exposed_token
from verigym.serve.model.batcher import Batcher, ClientGone, Job
from verigym.serve.model.requests import (
    ChatPlan,
    RequestError,
    RequestLimits,
    RequestReader,
    TextPlan,
)
from verigym.serve.model.streaming import event_stream
from verigym.serve.model.tool_choice import REQUIRED, draw, forced_calls, score_openings
from verigym.toolcalls import text_to_message

if TYPE_CHECKING:
    from verigym.agents.llm.policy import Generation, TransformersPolicy

__all__ = [
    "BODY_BUDGET_BYTES",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "PREP_THREADS",
    "TEMPLATE_WORKERS",
    "ChatServer",
    "make_server",
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

PREP_THREADS = 4
"""Threads that decode request bodies, tokenize prompts and build answers, off the event loop."""

TEMPLATE_WORKERS = 2
"""Processes that render the model's chat template (:mod:`verigym.agents.llm.template_guard`)."""


class ChatServer:
    """The model server: its Starlette app, the uvicorn server that runs it, and the answers.

    Build it with :func:`make_server`. The socket is bound on construction; :meth:`serve_forever`
    serves until :meth:`shutdown` (from another thread) or Ctrl-C; :meth:`server_close` stops the
    batcher and closes the socket (the ``http.server`` life cycle, so callers did not change).

    Args:
        address: (host, port) to bind; port 0 picks a free one.
        policy: the model that samples the replies.
        model_name: the name clients must send as ``model``.
        max_batch_size: rows (choices) sampled together at most.
        limits: what one request may ask (``--max-tokens``, ``--max-n``, ``--max-prompts``,
            ``--max-request-tokens``).
        request_timeout: seconds a request waits for its generation before it is abandoned (504).
        token: the credential every request must carry (``Authorization: Bearer``); ``None``:
            ``$VERIGYM_TOKEN``, else none.

    Attributes:
        app: the ASGI app (behind :class:`verigym.serve.auth.TokenGate` with a token).
        server_address: the bound (host, port).
        reader: the request validation (:class:`verigym.serve.model.requests.RequestReader`).

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
        limits: RequestLimits | None = None,
        request_timeout: float = 600.0,
        token: str | None = None,
    ):
        if (
            isinstance(max_batch_size, bool)
            or not isinstance(max_batch_size, int)
            or max_batch_size < 1
        ):
            raise ValueError(f"max_batch_size must be an integer >= 1, got {max_batch_size!r}")
        limits = limits or RequestLimits()
        host, port = address
        token = exposed_token(token, host, "serve-model", "use the model")
        self.policy = policy
        self.model_name = model_name
        self.request_timeout = request_timeout
        self._templates = None
        render_tools = None
        if policy.chat.use_template:  # the policy renders through the workers from now on
            from verigym.agents.llm.template_guard import TemplateRenderer

            self._templates = TemplateRenderer(policy.tokenizer, workers=TEMPLATE_WORKERS)
            policy.chat.render = functools.partial(_render_with, self._templates)
            template = getattr(policy.tokenizer, "chat_template", None) or ""
            if "tools" in str(template):
                render_tools = self._templates.render
        adapters = tuple(getattr(policy, "served_adapters", {}))
        if model_name in adapters:
            raise ValueError(f"the model name {model_name!r} is also an adapter's name")
        self.reader = RequestReader(policy, model_name, limits, render_tools, adapters)
        self._hosted = Hosted(
            self._create_app(token),
            host,
            port,
            name="verigym-serve-model",
            max_requests=MAX_CONNECTIONS,
            max_body_bytes=MAX_BODY_BYTES,
            body_budget_bytes=BODY_BUDGET_BYTES,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=10,
        )
        self.app = self._hosted.app
        self.server_address = self._hosted.address
        self._pool = concurrent.futures.ThreadPoolExecutor(
            PREP_THREADS, thread_name_prefix="verigym-serve-prep"
        )
        self.batcher = Batcher(policy, max_batch_size)

    @property
    def base_url(self) -> str:
        return self._hosted.url + "/v1"

    # -- life cycle -------------------------------------------------------------------------------------
    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` or, on the main thread, SIGINT/SIGTERM (then re-raised)."""
        self._hosted.run()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop :meth:`serve_forever` (from another thread) and wait until it has returned."""
        self._hosted.stop(timeout)

    def server_close(self) -> None:
        """Stop the batcher and the prep threads and close the socket (idempotent)."""
        self.batcher.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._templates is not None:
            self._templates.close()
        self._hosted.close()

    # -- the app ------------------------------------------------------------------------------------------
    def _create_app(self, token: str | None) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route

        from verigym.serve.auth import TokenGate

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
                return error_response(
                    405, f"{request.method} is not allowed on {request.url.path}", kind="not_found"
                )
            return error_response(
                404,
                f"no route {request.url.path}; use POST /v1/chat/completions or /v1/completions",
                kind="not_found",
            )

        app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
        app.state.server = self
        return app if not token else TokenGate(app, token)

    async def _models_route(self, request: Any) -> Any:
        models = [{"id": self.model_name, "object": "model", "owned_by": "verigym"}]
        for name, digest in getattr(self.policy, "served_adapters", {}).items():
            models.append(
                {
                    "id": name,
                    "object": "model",
                    "owned_by": "verigym",
                    "parent": self.model_name,
                    "adapter_sha256": digest,
                }
            )
        return json_response(200, {"object": "list", "data": models})

    async def _health_route(self, request: Any) -> Any:
        return json_response(200, {"status": "ok"})

    async def _chat_route(self, request: Any) -> Any:
        return await self._answer(request, chat=True)

    async def _completions_route(self, request: Any) -> Any:
        return await self._answer(request, chat=False)

    async def _in_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on a prep thread (tokenizing, JSON of a large body, building answers)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    async def _answer(self, request: Any, *, chat: bool) -> Any:
        """One POST: the body (read and bounded by the front door), JSON, the answer; every
        failure in the shared error shape."""
        from starlette.requests import ClientDisconnect
        from starlette.responses import Response

        gone = asyncio.Event()
        watcher: asyncio.Future | None = None
        try:
            body = await request.body()
            if not body:
                raise RequestError(f"the body must be 1 byte to {MAX_BODY_BYTES} bytes of JSON")
            watcher = asyncio.ensure_future(_watch_disconnect(request, gone))
            if not chat:
                return json_response(200, await self.text_complete(body, gone))
            plan: ChatPlan = await self._in_pool(self.reader.chat, body)
            answer = await self._complete_plan(plan, gone)
            if plan.request.get("stream"):
                events = await self._in_pool(event_stream, plan.request, answer, self._decode)
                return Response(
                    events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
                )
            return json_response(200, answer)
        except RequestError as exc:
            return error_response(exc.status, str(exc), code=exc.code, param=exc.param)
        except (ClientGone, ClientDisconnect):
            logger.info("a client left before its answer")
            return error_response(400, "the client left before its answer")
        except TimeoutError as exc:
            return error_response(504, str(exc), code="timeout")
        except RecursionError:  # a structure too deep to render
            return error_response(400, "the request is nested too deeply")
        except ValueError as exc:  # not JSON (or nested too deeply), not UTF-8, a template error
            return error_response(400, str(exc))
        except Exception as exc:  # keep the server up; tell the client
            logger.exception("request failed")
            return error_response(500, f"server error: {exc}")
        finally:
            if watcher is not None:
                watcher.cancel()

    def _decode(self, token_ids: list[int]) -> str:
        return self.policy.tokenizer.decode(token_ids, skip_special_tokens=True)

    def _token_text(self, token_id: int) -> str:
        return self.policy.tokenizer.decode([token_id])

    # -- chat completions -------------------------------------------------------------------------
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
        plan: ChatPlan = await self._in_pool(self.reader.chat, request)
        return await self._complete_plan(plan, gone if gone is not None else asyncio.Event())

    async def _complete_plan(self, plan: ChatPlan, gone: asyncio.Event) -> dict[str, Any]:
        """Sample a planned chat request and build its answer."""
        names: list[str | None] = [plan.forced] * plan.n
        if plan.forced == REQUIRED:
            choices = list(plan.openings)
            scores = await self.batcher.call(
                functools.partial(
                    score_openings,
                    self.policy,
                    plan.prompt,
                    [plan.openings[c] for c in choices],
                    plan.adapter,
                ),
                gone,
                self.request_timeout,
            )
            names = list(draw(choices, scores, plan.sampling.temperature, plan.n))
        groups: dict[str | None, int] = {}
        for name in names:
            groups[name] = groups.get(name, 0) + 1
        jobs = [
            Job(
                plan.prompt + (plan.openings[name] if name else []),
                count,
                plan.sampling,
                plan.adapter,
            )
            for name, count in groups.items()
        ]
        results = await self.batcher.run(jobs, gone, self.request_timeout)
        replies = [(name, r) for name, out in zip(groups, results) for r in out]
        if plan.logprobs:  # a token text per sampled and top token: off the event loop
            return await self._in_pool(self._chat_answer, plan, replies)
        return self._chat_answer(plan, replies)

    def _chat_answer(
        self, plan: ChatPlan, replies: list[tuple[str | None, Generation]]
    ) -> dict[str, Any]:
        """The ``chat.completion`` object of sampled replies (on a prep thread)."""
        names = [t["function"]["name"] for t in plan.tools]
        choices = []
        completion_tokens = 0
        for i, (forced, r) in enumerate(replies):
            completion_tokens += len(r.token_ids)
            if forced is not None:
                content = None
                calls, finish = forced_calls(forced, r, names, plan.parallel)
                completion_tokens += len(plan.openings[forced])
            else:
                content, calls = text_to_message(r.text) if plan.tools else (r.text, [])
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
            "model": plan.adapter or self.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(plan.prompt),
                "completion_tokens": completion_tokens,
                "total_tokens": len(plan.prompt) + completion_tokens,
            },
        }

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

    # -- legacy completions ---------------------------------------------------------------------------
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
        plan: TextPlan = await self._in_pool(self.reader.text, request)
        jobs = [Job(ids, plan.n, plan.sampling, plan.adapter) for ids in plan.prompts]
        results = await self.batcher.run(jobs, gone, self.request_timeout)
        if plan.logprobs is not None:  # a token text per sampled and top token: off the event loop
            return await self._in_pool(self._text_answer, plan, results)
        return self._text_answer(plan, results)

    def _text_answer(self, plan: TextPlan, results: list[list[Generation]]) -> dict[str, Any]:
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
                if plan.logprobs is not None:
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
                        if plan.logprobs
                        else None,
                    }
                choices.append(choice)
        prompt_tokens = sum(len(ids) for ids in plan.prompts)
        return {
            "id": f"cmpl-{uuid.uuid4().hex[:24]}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": plan.adapter or self.model_name,
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
    :class:`~verigym.serve.model.requests.RequestLimits`); ``token`` is required on every request
    when given. Call ``serve_forever()`` to run it and ``shutdown()`` + ``server_close()`` to stop.

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
        limits=RequestLimits(
            max_tokens=max_tokens,
            max_n=max_n,
            max_prompts=max_prompts,
            max_request_tokens=max_request_tokens,
        ),
        request_timeout=request_timeout,
        token=token,
    )
