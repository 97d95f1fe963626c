"""The HTTP server of the MiniWoB++ pages: the installed ``miniwob`` package's ``html`` folder,
served on 127.0.0.1 at a free port, read only, from a daemon thread of this process.

Reference counted: the first :func:`acquire` starts it, the last :func:`release` shuts it down
and joins its thread (nothing is left listening). Every MiniWoB env holds one reference from its
first page to its ``close()``.
"""

from __future__ import annotations

import functools
import http.server
import logging
import mimetypes
import pathlib
import sys
import threading
import urllib.parse
from importlib import resources
from typing import Any

__all__ = ["MISSING", "acquire", "answer", "html_root", "release", "running"]

logger = logging.getLogger(__name__)

MISSING = "the MiniWoB++ envs need the miniwob package: pip install 'verigym[miniwob]'"
"""The one-line error of an env made without the package."""


def html_root() -> pathlib.Path:
    """The ``html`` folder of the installed ``miniwob`` package (``miniwob/``, ``core/``, ``flight/`` ...).

    Raises:
        ModuleNotFoundError: the package is not installed (the message names the extra).
    """
    try:
        root = resources.files("miniwob") / "html"
    except ModuleNotFoundError:
        raise ModuleNotFoundError(MISSING) from None
    path = pathlib.Path(str(root))
    if not (path / "core" / "core.js").is_file():  # a zipped or broken install
        raise ModuleNotFoundError(f"{MISSING} (its html folder was not found at {path})")
    return path


class _Handler(http.server.SimpleHTTPRequestHandler):
    """GET/HEAD of files under the html folder; no directory listings, no logging."""

    def list_directory(self, path):  # noqa: ANN001, ANN201 - the base class's signature
        self.send_error(404, "no listings")
        return None

    def log_message(self, format, *args):  # noqa: A002, ANN001, ANN002, ANN201
        logger.debug("miniwob http: " + format, *args)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def handle_error(self, request, client_address):  # noqa: ANN001, ANN201 - the base's signature
        # a page that navigated away closes its connections mid-answer (a broken pipe): logged,
        # never printed to the user's terminal
        logger.debug("miniwob http: a request from %s failed", client_address, exc_info=True)


_LOCK = threading.Lock()
_STATE: dict[str, object] = {"server": None, "thread": None, "users": 0}


def acquire() -> str:
    """Count one more user and return the base URL (``http://127.0.0.1:<port>/``), starting the
    server when it is not running.

    Raises:
        ModuleNotFoundError: the ``miniwob`` package is missing.
        OSError: no port could be bound.
    """
    with _LOCK:
        server = _STATE["server"]
        if server is None:
            handler = functools.partial(_Handler, directory=str(html_root()))
            server = _Server(("127.0.0.1", 0), handler)
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.1},
                daemon=True,
                name="verigym-miniwob-http",
            )
            thread.start()
            _STATE["server"], _STATE["thread"] = server, thread
            logger.debug("miniwob pages served at port %d", server.server_address[1])
        _STATE["users"] = int(_STATE["users"]) + 1
        return f"http://127.0.0.1:{server.server_address[1]}/"


def release() -> None:
    """One user is gone; the last one stops the server and joins its thread (never raises)."""
    with _LOCK:
        _STATE["users"] = max(0, int(_STATE["users"]) - 1)
        if _STATE["users"] or _STATE["server"] is None:
            return
        server, thread = _STATE["server"], _STATE["thread"]
        _STATE["server"] = _STATE["thread"] = None
    try:
        if thread.is_alive() and not sys.is_finalizing():  # (shutdown waits for its loop)
            server.shutdown()
            thread.join(timeout=5)
        server.server_close()
    except Exception as exc:  # noqa: BLE001 - closing must not raise
        logger.debug("stopping the miniwob http server: %s", exc)


_FILES: dict[str, tuple[bytes, str] | None] = {}
"""URL path -> (body, content type) of the files read so far (None: not a file of the folder)."""
MAX_CACHED_BYTES = 4 << 20


def answer(route: Any) -> None:
    """The page route of the MiniWoB pages: a file of the html folder is answered from memory (read
    once per process: a reset reloads the task's page and its scripts), anything else goes on to
    the server (which answers 404 outside the folder)."""
    path = urllib.parse.urlsplit(route.request.url).path
    if path not in _FILES:
        _FILES[path] = None
        try:
            root = html_root().resolve()
            file = (root / urllib.parse.unquote(path).lstrip("/")).resolve()
            if (
                file.is_relative_to(root)
                and file.is_file()
                and file.stat().st_size <= MAX_CACHED_BYTES
            ):
                kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
                _FILES[path] = (file.read_bytes(), kind)
        except (OSError, ValueError) as exc:
            logger.debug("miniwob file %s: %s", path, exc)
    found = _FILES[path]
    try:
        if found is None or route.request.method != "GET":
            route.continue_()
        else:
            route.fulfill(status=200, body=found[0], content_type=found[1])
    except Exception as exc:  # noqa: BLE001 - the page navigated away or closed: nothing to answer
        logger.debug("miniwob route %s: %s", path, exc)


def running() -> bool:
    """True while the server is up (for tests)."""
    return _STATE["server"] is not None
