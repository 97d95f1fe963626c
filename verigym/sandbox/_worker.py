"""The persistent worker that runs inside the sandbox (stdlib only, started as ``python -I -S``).

This file is not imported by the library: its source is passed to the sandboxed interpreter with
``-c``. It reads length-prefixed JSON requests from its control input, runs them in one namespace
that persists between requests (like a notebook), and answers on its control output.

Requests:

* ``{"op": "exec", "code": str}`` -- run a cell; when the last statement is an expression, its
  ``repr`` is printed like a notebook does. Answer ``{"ok": bool, "error": str | None}``.
* ``{"op": "call_many", "name": str, "args_list": list}`` -- several calls in one round trip; the
  value is a list of ``{"ok", "value" | "error"}``.
* ``{"op": "call", "name": str, "args": list}`` -- call ``name(*args)`` from the namespace and
  answer with its return value converted to JSON primitives (exact types only: ``None``, ``bool``,
  ``int``, ``float``, ``str``, lists/tuples and ``str``-keyed dicts of those); any other type is an
  error, so an object whose ``__eq__`` is always true never reaches a comparison.

What the cell prints goes to file descriptors 1 and 2, which the supervisor reads separately (and
caps); the answers never contain printed text.

In the sandbox the worker is pid 1 of its own pid namespace and the notebook itself: there is no
parent process that outlives an episode (each episode gets a new sandbox). After every request it
kills every other process of the namespace (whatever the cell started) and reaps them, so no agent
process runs between calls.
"""

import ast
import json
import os
import struct
import sys
import time
import traceback

_HEADER = struct.Struct("!Q")
_MAX_DEPTH = 20
_MAX_ITEMS = 100000


def _read_exact(fd, size):
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _send(fd, message):
    body = json.dumps(message).encode("utf-8", "surrogatepass")
    data = _HEADER.pack(len(body)) + body
    while data:
        data = data[os.write(fd, data) :]


class _NotPrimitive(TypeError):
    pass


def _primitive(value, depth=0, budget=None):
    budget = budget if budget is not None else [_MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_DEPTH:
        raise _NotPrimitive("the value is too large or too deeply nested")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        if kind is int and abs(value).bit_length() > 4096:
            raise _NotPrimitive("the integer has more than 4096 bits")
        return value
    if kind in (list, tuple):
        return [_primitive(v, depth + 1, budget) for v in value]
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPrimitive("dict keys must be str, got " + type(key).__name__)
            out[key] = _primitive(item, depth + 1, budget)
        return out
    raise _NotPrimitive("returned a " + kind.__name__ + ", not None/bool/int/float/str/list/dict")


def _error_text(exc):
    return type(exc).__name__ + ": " + str(exc)[:1000]


def _call_one(function, args):
    try:
        return {"ok": True, "value": _primitive(function(*args))}
    except SystemExit as exc:
        return {
            "ok": False,
            "error": "SystemExit: the code called exit(" + repr(exc.code)[:50] + ")",
        }
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": _error_text(exc)}


def _run_cell(code, namespace):
    tree = ast.parse(code, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is not None:
        value = eval(compile(last, "<cell>", "eval"), namespace)
        if value is not None:
            print(repr(value))


def _sweep():
    """Kill every other process of the sandbox's pid namespace and reap them (bounded, about 0.5 s).

    As pid 1, ``kill(-1)`` reaches every process of the namespace but the worker itself, and orphans
    are re-parented to the worker, so reaping here collects them all. Threads of the cell that fork
    while this runs are caught by the supervisor, which stops the worker and sweeps again.
    """
    for _ in range(1000):
        try:
            os.kill(-1, 9)
        except OSError:
            pass
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except OSError:
            return
        if pid == 0:
            time.sleep(0.0005)


def _serve(request_fd, answer_fd, isolated):
    """The notebook: answer requests until EOF on the request pipe (exit 3)."""
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    _send(answer_fd, {"id": "start", "ready": True, "uid": os.getuid(), "pid": os.getpid()})
    while True:
        try:
            (size,) = _HEADER.unpack(_read_exact(request_fd, _HEADER.size))
            request = json.loads(_read_exact(request_fd, size).decode("utf-8", "surrogatepass"))
        except EOFError:
            os._exit(3)
        answer = {"id": request["id"], "ok": True, "error": None}
        try:
            if request["op"] == "exec":
                _run_cell(request["code"], namespace)
            elif request["op"] == "call":
                function = namespace.get(request["name"])
                if not callable(function):
                    raise NameError("no function named " + repr(request["name"]) + " is defined")
                answer["value"] = _primitive(function(*request["args"]))
            elif request["op"] == "call_many":
                function = namespace.get(request["name"])
                if not callable(function):
                    raise NameError("no function named " + repr(request["name"]) + " is defined")
                answer["value"] = [_call_one(function, args) for args in request["args_list"]]
            else:
                raise ValueError("unknown op " + repr(request["op"]))
        except SystemExit as exc:
            answer = {
                "id": request["id"],
                "ok": False,
                "error": "SystemExit: the code called exit(" + repr(exc.code)[:50] + ")",
            }
        except BaseException as exc:  # noqa: BLE001 -- everything the agent's code raises is reported
            answer = {"id": request["id"], "ok": False, "error": _error_text(exc)}
            try:
                lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
                sys.stderr.write(
                    "".join(line for line in lines if 'File "<string>"' not in line)[-4000:]
                )
            except BaseException:  # noqa: BLE001
                pass
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        if isolated:
            _sweep()
        _send(answer_fd, answer)


def main():
    """Close inherited descriptors, make fd 0 ``/dev/null`` (``input()`` cannot read requests), serve."""
    request_fd, answer_fd, isolated = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
    keep = {1, 2, request_fd, answer_fd}
    for fd in range(3, 1024):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _serve(request_fd, answer_fd, isolated)


main()
