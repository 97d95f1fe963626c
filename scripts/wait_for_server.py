"""Wait until a server started in the background answers, or say at once why it never will.

``scripts/main.sh`` starts ``verigym serve-model smollm2`` in the background and then runs this:

    python scripts/wait_for_server.py http://127.0.0.1:8765/health --pid "$server" \\
        --log verigym-results/serve-smollm2.log --name "the model server"

It polls ``URL`` once a second for as long as process ``--pid`` is alive (loading a model can take
minutes: the first SmolLM2 run dequantizes its GGUF file), prints a progress line every
``--every`` seconds, and exits

* 0 when ``URL`` answers with HTTP 2xx;
* 1 as soon as the process has exited (a zombie counts as exited), printing the last ``--tail``
  lines of ``--log`` so the cause (a missing package, a port in use) is on the terminal;
* 1 when ``--timeout`` seconds pass (0: no limit) with the process alive but not answering;
* 2 on bad arguments.

Only the standard library is used, so it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

MAX_TAIL = 1000
"""Most log lines --tail may ask for."""


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` is running (not exited, not a zombie awaiting its parent's wait).

    Args:
        pid: a process id (> 0).

    Returns:
        False when there is no such process or it is a zombie; True otherwise.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (not Linux): ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # the state is the first field after the command name, which is in parentheses and may hold spaces
    state = stat.rsplit(")", 1)[-1].split()[:1]
    return state not in (["Z"], ["X"])


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether ``url`` answers a GET with HTTP 2xx within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return 200 <= reply.status < 300
    except (
        OSError,
        ValueError,
    ):  # refused, reset, timed out, HTTP error status (URLError/HTTPError)
        return False


def log_tail(path: Path | None, lines: int) -> str:
    """The last ``lines`` lines of the file at ``path`` (a note when there is none)."""
    if path is None:
        return ""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def wait(
    url: str,
    pid: int,
    *,
    name: str,
    log: Path | None = None,
    every: float = 15.0,
    timeout: float = 0.0,
    tail: int = 30,
    poll: float = 1.0,
) -> int:
    """Poll ``url`` while process ``pid`` lives; the exit status described in the module docstring.

    Args:
        url: an ``http://`` or ``https://`` address that answers 2xx once the server is ready.
        pid: the server's process id.
        name: what to call the server in messages.
        log: the server's log file, whose tail is printed when it exits or times out.
        every: seconds between progress lines.
        timeout: seconds to wait at most while the process is alive (0: no limit).
        tail: log lines to print on failure.
        poll: seconds between attempts.

    Returns:
        0 ready, 1 the process exited or the wait timed out.
    """
    start = time.monotonic()
    next_note = start + every
    while True:
        if not process_alive(pid):
            # it may have answered and exited between two polls: its exit is the news either way
            print(
                f"{name} exited before it was ready (after {time.monotonic() - start:.0f} s)"
                + (f"; the last lines of {log}:" if log else ""),
                file=sys.stderr,
                flush=True,
            )
            if log:
                print(log_tail(log, tail), file=sys.stderr, flush=True)
            return 1
        if answers(url):
            print(
                f"{name} is ready (after {time.monotonic() - start:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
            return 0
        now = time.monotonic()
        if timeout and now - start >= timeout:
            print(
                f"{name} is still running but did not answer {url} within {timeout:.0f} s"
                + (f"; the last lines of {log}:" if log else ""),
                file=sys.stderr,
                flush=True,
            )
            if log:
                print(log_tail(log, tail), file=sys.stderr, flush=True)
            return 1
        if now >= next_note:
            print(f"waiting for {name} (loading, {now - start:.0f} s)", file=sys.stderr, flush=True)
            next_note += every
        time.sleep(poll)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "url",
        help="the address that answers HTTP 2xx once the server is ready (http:// or https://)",
    )
    parser.add_argument("--pid", type=int, required=True, help="the server's process id")
    parser.add_argument(
        "--log",
        type=Path,
        default=None,
        help="the server's log file (its tail is printed on failure)",
    )
    parser.add_argument("--name", default="the server", help="what to call the server in messages")
    parser.add_argument(
        "--every", type=float, default=15.0, help="seconds between progress lines (default 15)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="seconds to wait at most while it runs (default 0: no limit)",
    )
    parser.add_argument(
        "--tail", type=int, default=30, help="log lines to print on failure (default 30)"
    )
    args = parser.parse_args(argv)
    if not args.url.startswith(("http://", "https://")):
        parser.error(f"url must start with http:// or https://, not {args.url!r}")
    if args.pid <= 0:
        parser.error(f"--pid must be a positive process id, not {args.pid}")
    if not (args.every > 0 and args.timeout >= 0):
        parser.error("--every must be > 0 and --timeout >= 0")
    if not 0 < args.tail <= MAX_TAIL:
        parser.error(f"--tail must be in 1..{MAX_TAIL}")
    return wait(
        args.url,
        args.pid,
        name=args.name,
        log=args.log,
        every=args.every,
        timeout=args.timeout,
        tail=args.tail,
    )


if __name__ == "__main__":
    sys.exit(main())
