"""``verigym serve-env [IDS...]``: serve registered envs over the OpenEnv wire protocol.

See :mod:`verigym.serve` (server) and :mod:`verigym.remote` (client).
"""

from __future__ import annotations

import argparse
import os

from verigym.core import FAMILIES

HELP = "serve registered envs over the OpenEnv protocol (WebSocket /ws sessions, HTTP /reset /schema /health)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "env_ids",
        nargs="*",
        metavar="ID",
        help="ids to serve (default: every verigym Gymnasium id, or those of --family)",
    )
    parser.add_argument("--family", choices=FAMILIES, help="serve every id of this family")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; any other address needs --token)",
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="TCP port (0 picks a free one; the URL is printed)"
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=1024,
        help="open sessions at most; one more is refused with CAPACITY_REACHED",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=600.0,
        help="seconds without a message before a session is closed (0: never)",
    )
    parser.add_argument(
        "--step-timeout",
        type=float,
        default=120.0,
        help="seconds one env call (make/reset/step) may take before its session ends and its env is closed, sandbox processes killed (0: no limit)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=32,
        help="idle threads kept for new sessions (each session runs on a thread of its own, so no session waits behind another's calls)",
    )
    parser.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run MuJoCo and plugin envs in a child process per session, so a native crash (segfault) ends only that session (default: plugin ids only; --no-isolate: none)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=16 << 20,
        help="larger frames get MESSAGE_TOO_LARGE",
    )
    parser.add_argument(
        "--allow-kwargs",
        default="",
        metavar="NAME,...",
        help="constructor kwargs clients may set beyond those each env declares client-settable "
        "(e.g. max_steps,timeout_s; declared bounds still apply; unsafe is never allowed)",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="required credential (default: $VERIGYM_TOKEN); mandatory off loopback",
    )
    parser.add_argument(
        "--ray",
        action="store_true",
        help="deploy on Ray Serve (replicas behind Ray's HTTP proxy; each WebSocket session stays on one replica)",
    )
    parser.add_argument(
        "--replicas", type=int, default=1, help="with --ray: replicas of the deployment"
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        help="with --ray: the Ray cluster (default: $RAY_ADDRESS, else a local instance)",
    )


def run(args: argparse.Namespace) -> int:
    from verigym.commands import lookup_env, usage_error
    from verigym.serve import ServeConfig, serve

    for env_id in args.env_ids:
        api = lookup_env("serve-env", env_id)
        if api is None:
            return 2
        if api != "gymnasium":
            return usage_error(
                "serve-env",
                f"{env_id} is a PettingZoo {api} env; serve its Gymnasium seat (verigym list --family multiagent shows them)",
            )
    if args.env_ids and args.family:
        return usage_error("serve-env", "give either IDS or --family, not both")
    try:
        config = ServeConfig(
            env_ids=tuple(args.env_ids),
            family=args.family,
            max_sessions=args.max_sessions,
            idle_timeout=args.idle_timeout,
            step_timeout=args.step_timeout,
            token=args.token or os.environ.get("VERIGYM_TOKEN") or None,
            max_message_bytes=args.max_message_bytes,
            workers=args.workers,
            isolate=args.isolate,
            allow_kwargs=tuple(
                name.strip() for name in args.allow_kwargs.split(",") if name.strip()
            ),
        )
    except ValueError as exc:
        return usage_error("serve-env", str(exc))
    what = (
        ", ".join(args.env_ids)
        if args.env_ids
        else f"every {args.family + ' ' if args.family else ''}id"
    )

    def ready(url: str) -> None:
        auth = " (token required)" if config.token else ""
        print(
            f"serving {what} at {url}{auth}: WebSocket {url.replace('http', 'ws', 1)}/ws, HTTP /reset /step /state /schema /health; Ctrl-C stops",
            flush=True,
        )

    if args.ray:
        return _run_on_ray(config, args, ready)
    try:
        serve(config, host=args.host, port=args.port, ready=ready)
    except ValueError as exc:
        return usage_error("serve-env", str(exc))
    except OSError as exc:
        return usage_error("serve-env", f"cannot bind {args.host}:{args.port}: {exc}")
    except KeyboardInterrupt:
        pass
    return 0


def _run_on_ray(config, args: argparse.Namespace, ready) -> int:
    """Deploy on Ray Serve, print the URL, wait for Ctrl-C/SIGTERM, then tear the deployment down."""
    import signal
    import threading

    from verigym.commands import usage_error
    from verigym.serve import check_exposure
    from verigym.serve.ray_serve import deploy, shutdown

    try:
        config = check_exposure(config, args.host)
        url = deploy(
            config, host=args.host, port=args.port, replicas=args.replicas, address=args.ray_address
        )
    except (ValueError, RuntimeError) as exc:
        return usage_error("serve-env", str(exc))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        ready(url)
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        shutdown()
    return 0
