"""Chat templates rendered in worker processes, under a time, memory and size bound.

A model folder's chat template is untrusted code (Jinja, run in transformers' sandbox). The sandbox
stops attribute tricks but not cost: nested ``range`` loops run for hours, and a template that
builds a 400 MB constant spends that memory while it compiles. So the model server renders
templates here, never on its own threads: each render goes to one of a few worker processes
(this file run as a script, holding a copy of the tokenizer); the caller waits
at most ``timeout`` seconds, after which the worker is killed (and replaced on the next render)
and :class:`TemplateError` is raised. A worker's address space is capped at its size after start-up
plus ``memory_bytes`` (``RLIMIT_AS``), and a rendered prompt over ``max_chars`` characters is
refused.

The text is what ``tokenizer.apply_chat_template(messages, tools=..., tokenize=False,
add_generation_prompt=...)`` returns in this process: the worker runs that very call on a pickled
copy of the tokenizer. Replies come back as JSON (never pickles).
"""

from __future__ import annotations

import json
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

__all__ = [
    "TEMPLATE_MAX_CHARS",
    "TEMPLATE_MEMORY_BYTES",
    "TEMPLATE_TIMEOUT_S",
    "TemplateError",
    "TemplateRenderer",
]

TEMPLATE_TIMEOUT_S = 10.0
"""Seconds one render may take (compiling the template included) before its worker is killed."""

TEMPLATE_MEMORY_BYTES = 512 << 20
"""Bytes of address space a worker may add to what it holds after start-up."""

TEMPLATE_MAX_CHARS = 32 << 20
"""Characters a rendered prompt may have."""


class TemplateError(ValueError):
    """The chat template failed, timed out, ran out of its memory or wrote too much (one line)."""


class _Worker:
    """One worker process and its two pipe ends."""

    def __init__(self, blob: bytes, memory_bytes: int, max_chars: int) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        environment = dict(os.environ)  # the parent's import path, so the pickle loads there too
        environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
        self.process = subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),  # a script: no verigym import, a fast start
                str(to_child_r),
                str(from_child_w),
                str(memory_bytes),
                str(max_chars),
            ],
            pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=environment,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.send = Connection(to_child_w, readable=False)
        self.receive = Connection(from_child_r, writable=False)
        self.send.send_bytes(blob)
        self.ready = False

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.send.close()
        self.receive.close()


class TemplateRenderer:
    """Renders ``tokenizer``'s chat template in worker processes (see the module docstring).

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template (pickled once for the workers).
        workers: processes (renders run at once at most; others wait their turn); one starts at
            once, the others when renders overlap.
        timeout: seconds one render may take, start-up of a fresh worker not counted (``None``:
            :data:`TEMPLATE_TIMEOUT_S`).
        memory_bytes: address space a worker may add after start-up (``None``:
            :data:`TEMPLATE_MEMORY_BYTES`).
        max_chars: characters a rendered prompt may have (``None``: :data:`TEMPLATE_MAX_CHARS`).

    :meth:`close` stops the workers.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        workers: int = 2,
        timeout: float | None = None,
        memory_bytes: int | None = None,
        max_chars: int | None = None,
    ) -> None:
        self.timeout = TEMPLATE_TIMEOUT_S if timeout is None else timeout
        self.memory_bytes = TEMPLATE_MEMORY_BYTES if memory_bytes is None else memory_bytes
        self.max_chars = TEMPLATE_MAX_CHARS if max_chars is None else max_chars
        self._blob = pickle.dumps(tokenizer)
        self._idle: queue.LifoQueue[_Worker | None] = queue.LifoQueue()  # a started one first
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._idle.put(None)  # the others start when renders overlap
        for _ in range(workers - 1):
            self._idle.put(None)
        self._idle.put(self._start())  # start-up (imports) runs while the model loads

    def _start(self) -> _Worker:
        worker = _Worker(self._blob, self.memory_bytes, self.max_chars)
        with self._lock:
            if self._closed:
                worker.kill()
                raise TemplateError("the template renderer is closed")
            self._all.add(worker)
        return worker

    def _drop(self, worker: _Worker) -> None:
        with self._lock:
            self._all.discard(worker)
        worker.kill()

    def render(
        self,
        messages: Sequence[Any],
        *,
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The prompt text of ``messages`` (and ``tools``), as ``apply_chat_template`` writes it.

        Raises:
            TemplateError: the template raised, took over ``timeout`` seconds, ran out of memory,
                wrote over ``max_chars`` characters, or its worker died (one line).
        """
        request = json.dumps(
            {
                "messages": [dict(message) for message in messages],
                "tools": tools or None,
                "add_generation_prompt": bool(add_generation_prompt),
            }
        ).encode()
        worker = self._idle.get()
        try:
            if worker is None:
                worker = self._start()
            if not worker.ready:  # start-up (imports, unpickling) is not the template's time
                if not worker.receive.poll(120) or worker.receive.recv_bytes() != b"ready":
                    raise EOFError("the worker did not start")
                worker.ready = True
            worker.send.send_bytes(request)
            if not worker.receive.poll(self.timeout):
                self._drop(worker)
                worker = None
                raise TemplateError(
                    f"the chat template took over {self.timeout:.0f} s to render; refused"
                )
            reply = json.loads(worker.receive.recv_bytes())
        except (EOFError, OSError, ValueError) as exc:
            if isinstance(exc, TemplateError):
                raise
            if worker is not None:
                self._drop(worker)
                worker = None
            raise TemplateError(f"the chat template's worker failed: {exc}") from None
        finally:
            self._idle.put(worker)
        if "error" in reply:
            raise TemplateError(f"the chat template failed: {reply['error']}")
        return reply["text"]

    def close(self) -> None:
        """Stop every worker (idempotent); later renders raise :class:`TemplateError`."""
        with self._lock:
            self._closed = True
            workers, self._all = list(self._all), set()
        for worker in workers:
            worker.kill()


def _serve(receive: Connection, send: Connection, memory_bytes: int, max_chars: int) -> None:
    """The worker's loop: unpickle the tokenizer, cap memory, render requests until EOF."""
    import resource

    tokenizer = pickle.loads(receive.recv_bytes())
    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (size + memory_bytes, size + memory_bytes))
    send.send_bytes(b"ready")
    while True:
        try:
            request = json.loads(receive.recv_bytes())
        except EOFError:
            return
        try:
            kwargs = {"tools": request["tools"]} if request["tools"] else {}
            text = tokenizer.apply_chat_template(
                request["messages"],
                tokenize=False,
                add_generation_prompt=request["add_generation_prompt"],
                **kwargs,
            )
            if not isinstance(text, str):
                reply = {"error": f"it gave a {type(text).__name__}, not text"}
            elif len(text) > max_chars:
                reply = {"error": f"the prompt is over {max_chars} characters"}
            else:
                reply = {"text": text}
        except MemoryError:
            reply = {"error": f"it needed over {memory_bytes >> 20} MiB"}
        except RecursionError:
            reply = {"error": "it recursed too deeply"}
        except Exception as exc:  # the template's own error (raise_exception, a type error...)
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            reply = {"error": f"{type(exc).__name__}: {line[:300]}"}
        try:
            send.send_bytes(json.dumps(reply).encode())
        except MemoryError:
            send.send_bytes(b'{"error": "it needed too much memory"}')


if __name__ == "__main__":
    _serve(
        Connection(int(sys.argv[1]), writable=False),
        Connection(int(sys.argv[2]), readable=False),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
