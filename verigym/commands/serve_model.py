"""``verigym serve-model MODEL_DIR``: an OpenAI-compatible chat-completions server over a local
model (``verigym serve-env`` is the other server: environments). Both run on Starlette and uvicorn
(the ``serve`` extra) and are hosted the same way (:mod:`verigym.serve.hosting`); the server is
:mod:`verigym.serve.model.server`."""

from __future__ import annotations

import argparse
import logging
import os

HELP = "serve a local transformers model over an OpenAI-compatible chat-completions API"

logger = logging.getLogger(__name__)


def _positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (a request limit)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model_dir",
        help="local model directory (save_pretrained layout, e.g. a GRPO checkpoint), a .gguf file, or smollm2",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: this machine only; any other address needs --token)",
    )
    parser.add_argument("--port", type=int, default=8000, help="port (0 picks a free one)")
    parser.add_argument(
        "--model-name",
        default=None,
        help="name reported by /v1/models (default: the directory name)",
    )
    parser.add_argument(
        "--device", default="auto", help='"auto" (CUDA when present), "cpu", "cuda:0", ...'
    )
    parser.add_argument(
        "--max-batch-size", type=int, default=16, help="requests sampled together at most"
    )
    parser.add_argument(
        "--max-n",
        type=_positive_int,
        default=16,
        help="the largest n (choices per prompt) a request may ask",
    )
    parser.add_argument(
        "--max-tokens",
        type=_positive_int,
        default=4096,
        help="the largest max_tokens a request may ask (also capped by the model's context minus the prompt)",
    )
    parser.add_argument(
        "--max-prompts",
        type=_positive_int,
        default=16,
        help="the most prompts one /v1/completions request may send",
    )
    parser.add_argument(
        "--max-request-tokens",
        type=_positive_int,
        default=65536,
        help="the most tokens one request may hold, n x (prompt + max_tokens) summed over its prompts "
        "(what sizes its KV cache)",
    )
    parser.add_argument(
        "--dtype",
        choices=("auto", "float32", "bfloat16", "float16"),
        default="auto",
        help="weights and KV cache: auto is bfloat16 on CUDA and float32 on a CPU; bfloat16 halves the "
        "memory a CPU reads per token (faster where the CPU has native bf16, e.g. AVX512-BF16 or AMX)",
    )
    parser.add_argument(
        "--no-chat-template", action="store_true", help="use the plain User:/Assistant: layout"
    )
    parser.add_argument(
        "--token",
        default=None,
        help="credential every request must send as Authorization: Bearer <token> (default: "
        "$VERIGYM_TOKEN); mandatory off loopback",
    )
    parser.add_argument(
        "--adapter",
        default=None,
        metavar="DIR",
        help="a LoRA adapter folder (verigym train sft/grpo --lora-r ...: adapter_config.json + "
        "adapter_model.safetensors) merged into the model before serving",
    )
    parser.add_argument(
        "--lora",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="serve a LoRA adapter folder (as --adapter takes) beside the model, unmerged, as the "
        "model id NAME (as vLLM's --lora-modules): requests naming NAME sample under it, in the same "
        "batch as the base model's; repeatable",
    )
    parser.add_argument(
        "--prefix-cache-mb",
        type=float,
        default=1024.0,
        help="memory for the KV caches of recent prompts, so a conversation's next turn prefills only "
        "its new tokens (default 1024; 0 turns it off)",
    )


def _token(args: argparse.Namespace) -> str | None:
    """``--token``, else ``$VERIGYM_TOKEN``, else ``None``."""
    return getattr(args, "token", None) or os.environ.get("VERIGYM_TOKEN") or None


def build(args: argparse.Namespace):
    """Load the model and bind the server described by ``args`` (without serving)."""
    from pathlib import Path

    from verigym.agents.llm.policy import TransformersPolicy
    from verigym.serve.model.server import make_server

    policy = TransformersPolicy.from_pretrained(
        args.model_dir,
        device=args.device,
        dtype=args.dtype,
        use_chat_template=False if args.no_chat_template else None,
        prefix_cache_bytes=int(max(args.prefix_cache_mb, 0.0) * (1 << 20)),
        adapter=getattr(args, "adapter", None),
    )
    for spec in getattr(args, "lora", None) or []:
        name, equals, folder = str(spec).partition("=")
        if not equals or not folder:
            raise ValueError(f"--lora takes NAME=DIR, got {str(spec)[:100]!r}")
        policy.serve_adapter(name, folder)
    from verigym.agents.llm.models import SHORT_NAMES

    name = args.model_name or (
        args.model_dir if args.model_dir in SHORT_NAMES else Path(args.model_dir).resolve().name
    )
    return make_server(
        policy,
        host=args.host,
        port=args.port,
        model_name=name,
        max_batch_size=args.max_batch_size,
        max_n=args.max_n,
        max_tokens=args.max_tokens,
        max_prompts=args.max_prompts,
        max_request_tokens=args.max_request_tokens,
        token=_token(args),
    )


def _one_line(exc: BaseException) -> str:
    """The first line of an exception's message (transformers' errors run to many lines)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def run(args: argparse.Namespace) -> int:
    from verigym.agents.llm.models import check_adapter, check_model
    from verigym.commands import usage_error

    if args.max_batch_size < 1:
        return usage_error(
            "serve-model", f"--max-batch-size must be >= 1, got {args.max_batch_size}"
        )
    if not 0 <= args.port <= 65535:
        return usage_error("serve-model", f"--port must be in 0..65535, got {args.port}")
    from verigym.serve.hosting import exposed_token, is_loopback

    try:  # off loopback, no token or a weak one is refused before the model loads (the server
        # itself warns about a weak one on loopback)
        if not is_loopback(args.host):
            exposed_token(_token(args), args.host, "serve-model", "use the model")
    except ValueError as exc:
        return usage_error("serve-model", str(exc))
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return usage_error(
            "serve-model",
            f"{exc.name} is missing: pip install 'verigym[serve]' (Starlette, uvicorn)",
        )
    from verigym.progress import quiet_library_bars

    try:
        # before torch and transformers load: one line saying what is missing
        check_model(args.model_dir)
        # a missing or refused adapter (--adapter, each --lora) is one line before any weights load
        if args.adapter:
            check_adapter(args.adapter)
        for spec in args.lora:
            check_adapter(str(spec).partition("=")[2] or str(spec))
        quiet_library_bars()  # (imports transformers) no "Loading weights" redraws in a log
        server = build(args)
    except (FileNotFoundError, ImportError) as exc:  # no model there, or gguf missing
        return usage_error("serve-model", _one_line(exc))
    except ValueError as exc:  # a refused adapter field (one line naming it)
        return usage_error("serve-model", _one_line(exc))
    except OSError as exc:  # transformers could not read the folder, or the port is taken
        return usage_error("serve-model", f"{args.model_dir}: {_one_line(exc)}")
    auth = " (token required)" if _token(args) else ""
    print(
        f"serving {server.model_name} at {server.base_url}{auth} (POST /chat/completions); Ctrl-C stops",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
