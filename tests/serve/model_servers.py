"""Model servers in the tests: built as ``verigym serve-model`` builds them, run on a thread."""

from __future__ import annotations

import argparse
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from verigym.commands import serve_model


def built(model_dir: Any, *flags: str) -> Any:
    """The server of ``verigym serve-model MODEL_DIR --port 0 --device cpu FLAGS`` (bound, not
    serving)."""
    parser = argparse.ArgumentParser()
    serve_model.add_arguments(parser)
    args = parser.parse_args([str(model_dir), "--port", "0", "--device", "cpu", *flags])
    return serve_model.build(args)


@contextlib.contextmanager
def running(httpd: Any) -> Iterator[Any]:
    """``httpd`` (a :class:`verigym.serve.model.server.ChatServer`) serving on a thread; stopped and
    closed on exit."""
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
