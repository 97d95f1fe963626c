"""A small OpenAI-compatible chat-completions server over a local transformers model.

``verigym serve MODEL_DIR`` runs it, so many evaluation workers (``verigym eval`` with the
``openai`` agent) share one loaded checkpoint. Requests that arrive together are sampled as one
left-padded batch (continuous batching it is not: a batch runs to completion before the next).

Endpoints:

* ``POST /v1/chat/completions`` -- ``model``, ``messages``, ``max_tokens`` (or
  ``max_completion_tokens``), ``temperature``, ``top_p``, ``stop``, ``n``. No streaming; a
  ``seed`` is accepted and ignored (batched sampling shares one generator).
* ``GET /v1/models`` -- the one served model.
* ``GET /health`` -- ``{"status": "ok"}``.

Errors are answered as OpenAI does: ``{"error": {"message", "type", "code"}}`` with HTTP 400
(bad request), 404 (unknown path) or 500.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from verigym.agents.llm.policy import Generation, TransformersPolicy

__all__ = ["ChatServer", "make_server"]

logger = logging.getLogger(__name__)

_MAX_BODY = 8 << 20


class RequestError(ValueError):
    """A client error, answered with HTTP 400."""


@dataclass
class _Job:
    prompt: list[int]
    n: int
    sampling: tuple[int, float, float, tuple[str, ...]]
    done: threading.Event = field(default_factory=threading.Event)
    result: list[Generation] | None = None
    error: str | None = None


class _Batcher:
    """One worker thread that samples queued requests together, grouped by sampling options."""

    def __init__(self, policy: TransformersPolicy, max_batch_size: int):
        self.policy = policy
        self.max_batch_size = max_batch_size
        self.jobs: queue.Queue[_Job | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="verigym-serve-batcher", daemon=True)
        self.thread.start()

    def submit(self, job: _Job, timeout: float) -> list[Generation]:
        self.jobs.put(job)
        if not job.done.wait(timeout):
            raise TimeoutError(f"generation did not finish within {timeout:.0f} s")
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
            groups: dict[tuple[int, float, float, tuple[str, ...]], list[_Job]] = {}
            for job in batch:
                groups.setdefault(job.sampling, []).append(job)
            for (max_tokens, temperature, top_p, stop), jobs in groups.items():
                prompts = [job.prompt for job in jobs for _ in range(job.n)]
                try:
                    out = self.policy.generate(prompts, max_new_tokens=max_tokens, temperature=temperature, top_p=top_p, stop=stop)
                except Exception as exc:  # report to the waiting clients, keep serving
                    logger.exception("generation failed")
                    for job in jobs:
                        job.error = f"generation failed: {exc}"
                        job.done.set()
                    continue
                for job in jobs:
                    job.result, out = out[:job.n], out[job.n:]
                    job.done.set()


class ChatServer(ThreadingHTTPServer):
    """The HTTP server (a :class:`ThreadingHTTPServer`); build it with :func:`make_server`."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], policy: TransformersPolicy, *, model_name: str,
                 max_batch_size: int = 16, max_tokens_limit: int = 4096, request_timeout: float = 600.0):
        super().__init__(address, _Handler)
        self.policy = policy
        self.model_name = model_name
        self.max_tokens_limit = max_tokens_limit
        self.request_timeout = request_timeout
        self.batcher = _Batcher(policy, max_batch_size)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def server_close(self) -> None:
        self.batcher.stop()
        super().server_close()

    # -- the one endpoint that works ------------------------------------------------------------
    def complete(self, request: Any) -> dict[str, Any]:
        """Answer a chat-completions request body.

        Raises:
            RequestError: the request is malformed (the message says how).
        """
        if not isinstance(request, dict):
            raise RequestError("the body must be a JSON object")
        if request.get("stream"):
            raise RequestError("streaming is not supported by verigym serve; send stream=false")
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("'messages' must be a non-empty list of {role, content} objects")
        for m in messages:
            if not isinstance(m, dict) or m.get("role") not in {"system", "user", "assistant"} or not isinstance(m.get("content"), str):
                raise RequestError("each message needs a role (system, user or assistant) and a string content")
        max_tokens = request.get("max_completion_tokens", request.get("max_tokens", 256))
        temperature = request.get("temperature", 1.0)
        top_p = request.get("top_p", 1.0)
        n = request.get("n", 1)
        stop = request.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(max_tokens, int) or not 1 <= max_tokens <= self.max_tokens_limit:
            raise RequestError(f"max_tokens must be an integer in [1, {self.max_tokens_limit}]")
        if not isinstance(temperature, (int, float)) or not 0 <= temperature <= 10:
            raise RequestError("temperature must be a number in [0, 10]")
        if not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
            raise RequestError("top_p must be a number in (0, 1]")
        if not isinstance(n, int) or not 1 <= n <= 64:
            raise RequestError("n must be an integer in [1, 64]")
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 8:
            raise RequestError("stop must be a string or a list of at most 8 strings")
        prompt = self.policy.encode_messages(messages)
        if len(prompt) + max_tokens > self.policy.max_context_tokens:
            raise RequestError(
                f"the prompt has {len(prompt)} tokens; with max_tokens={max_tokens} it exceeds the model's "
                f"context of {self.policy.max_context_tokens} tokens"
            )
        sampling = (max_tokens, float(temperature), float(top_p), tuple(stop) + self.policy.chat.stop_strings)
        replies = self.batcher.submit(_Job(prompt, n, sampling), self.request_timeout)
        completion_tokens = sum(len(r.token_ids) for r in replies)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": r.text}, "finish_reason": r.finish_reason}
                for i, r in enumerate(replies)
            ],
            "usage": {"prompt_tokens": len(prompt) * n, "completion_tokens": completion_tokens,
                      "total_tokens": len(prompt) * n + completion_tokens},
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

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?")[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": self.server.model_name, "object": "model", "owned_by": "verigym"}]})
        elif path == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"no route {self.path}; use POST /v1/chat/completions", "not_found")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?")[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}; use POST /v1/chat/completions", "not_found")
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            if not 0 < length <= _MAX_BODY:
                raise RequestError(f"the body must be 1 byte to {_MAX_BODY} bytes of JSON")
            request = json.loads(self.rfile.read(length))
            answer = self.server.complete(request)
        except (RequestError, json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
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
) -> ChatServer:
    """Bind a :class:`ChatServer` (``port=0`` picks a free port; see ``server.base_url``).

    Call ``serve_forever()`` to run it and ``shutdown()`` + ``server_close()`` to stop.
    """
    return ChatServer((host, port), policy, model_name=model_name, max_batch_size=max_batch_size, request_timeout=request_timeout)
