"""``verigym train grpo ...`` and ``verigym train sft ...``: the LLM trainers' command lines.

:mod:`verigym.commands.train` hands these two agents here (:data:`VERBS`); each verb has a help
line, ``add_*_arguments(parser)`` and ``run_*(args) -> int``, as a :mod:`verigym.cli` command has.

``train grpo --env ID --model DIR ...``: every :class:`~verigym.agents.llm.grpo.GRPOConfig` field
is a flag (``--learning-rate 1e-6``, ``--no-dynamic-sampling``), its help the field's docstring.
The trained model, ``metrics.jsonl`` and checkpoints go to ``--output-dir``; ``verigym
serve-model OUTPUT_DIR`` then serves it.

``train sft --model M --data D --out DIR``: every :class:`~verigym.agents.llm.sft.SFTConfig` field
is a flag (``--epochs 2``, ``--learning-rate 2e-4``, ``--lora-r 16``; ``--lora-target-modules``
takes a comma-separated list). A record whose task is an evaluation task of a shipped suite (its
``env_id`` reset at its ``seed``; data exported before the split was made by task content can hold
them) is left out and counted on stdout
(:func:`verigym.leaderboards.heldout.drop_evaluation_records`). The adapter (or, with
``--lora-r 0``, the model), ``sft_config.json`` and ``train_log.jsonl`` go to ``--out``; play the
result with the agent spec ``llm:M?adapter=DIR``.

Both take ``--adapter DIR`` (continue training an existing LoRA adapter) and the ``--lora-*``
flags; the policy is loaded by :func:`verigym.agents.llm.policy.load_trainable_policy`.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

GRPO_HELP = "train a local LLM with GRPO on verigym text/tool envs"
SFT_HELP = "fine-tune a local LLM on chat demonstrations (verigym export --format sft), with LoRA"

_SFT_OWN = ("lora_r", "lora_alpha", "lora_target_modules", "output_dir")


def add_grpo_arguments(parser: argparse.ArgumentParser) -> None:
    """The GRPO flags (for ``verigym train grpo``)."""
    from verigym.agents.common.config import add_config_arguments
    from verigym.agents.llm.configs import GRPOConfig

    parser.add_argument(
        "--env",
        action="append",
        required=True,
        metavar="ID[?KEY=VALUE&...]",
        help="a registered env id to train on, with constructor kwargs after '?' (values read as "
        "JSON scalars, checked against the env's declared bounds: "
        "verigym/RG-BasicArithmetic-v0?level=0); repeat for several (the curriculum picks among them)",
    )
    add_model_arguments(parser, metavar="DIR")
    parser.add_argument("--steps", type=int, default=100, help="GRPO steps (default: 100)")
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=0,
        help="after training, greedy success on this many held-out seeds of each env (default: 0)",
    )
    add_config_arguments(parser, GRPOConfig, aliases={"output_dir": ("--out",)})


def add_sft_arguments(parser: argparse.ArgumentParser) -> None:
    """The SFT flags (for ``verigym train sft``)."""
    from verigym.agents.common.config import add_config_arguments
    from verigym.agents.llm.configs import SFTConfig

    add_model_arguments(parser, metavar="M", default_r=SFTConfig.lora_r)
    parser.add_argument(
        "--data",
        required=True,
        metavar="D",
        help="JSON Lines of chat records (verigym export --format sft)",
    )
    parser.add_argument(
        "--out",
        dest="output_dir",
        default=None,
        metavar="DIR",
        help="where the adapter (or model) and logs go",
    )
    add_config_arguments(parser, SFTConfig, skip=set(_SFT_OWN))


def add_model_arguments(
    parser: argparse.ArgumentParser, *, metavar: str, default_r: int = 0
) -> None:
    """``--model``, ``--adapter``, ``--lora-r``, ``--lora-alpha``, ``--lora-target-modules``: what
    :func:`_load_policy` reads (both verbs)."""
    from verigym.agents.llm.configs import DEFAULT_LORA_TARGETS

    parser.add_argument(
        "--model",
        required=True,
        metavar=metavar,
        help="local model directory (save_pretrained layout), a .gguf file, or smollm2",
    )
    parser.add_argument(
        "--adapter",
        default=None,
        metavar="DIR",
        help="start from this LoRA adapter (peft save_pretrained folder, e.g. an SFT run) and train it further",
    )
    parser.add_argument(
        "--lora-r",
        type=int,
        default=default_r,
        help=f"LoRA rank: train low-rank adapters only and save only them; 0 trains every weight (default: {default_r})",
    )
    parser.add_argument(
        "--lora-alpha",
        type=float,
        default=None,
        help="LoRA scale numerator (default: 2 * rank)",
    )
    parser.add_argument(
        "--lora-target-modules",
        default=",".join(DEFAULT_LORA_TARGETS),
        help="comma-separated names of the linear layers that get adapters (default: %(default)s)",
    )


def _target_modules(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(t for t in args.lora_target_modules.split(",") if t)


def _load_policy(command: str, args: argparse.Namespace, device: str) -> Any:
    """The policy of ``--model`` with ``--adapter`` or new ``--lora-r`` layers, or the exit
    status 2 after a one-line usage error (an int) when it cannot be loaded."""
    from verigym.commands import usage_error

    if args.lora_r < 0:
        return usage_error(command, f"--lora-r must be >= 0, got {args.lora_r}")
    from verigym.agents.llm.policy import load_trainable_policy
    from verigym.progress import quiet_library_bars

    quiet_library_bars()  # no "Loading weights" redraws in a log
    try:
        return load_trainable_policy(
            args.model,
            device=device,
            adapter=args.adapter,
            lora_r=args.lora_r,
            lora_alpha=args.lora_alpha,
            target_modules=_target_modules(args),
        )
    except (FileNotFoundError, ImportError, ValueError) as exc:
        return usage_error(command, str(exc).strip().splitlines()[0])
    except OSError as exc:  # transformers could not read the folder (no tokenizer, say)
        return usage_error(command, f"{args.model}: {str(exc).strip().splitlines()[0]}")


def _env_task(env_id: str, query: str) -> Any:
    """``env_id`` itself, or with ``query`` (``KEY=VALUE&...``) a factory ``gym.make(env_id,
    **kwargs)`` named ``ID?QUERY``. Values are read as JSON scalars (``level=0`` is the int 0, a
    value that is no JSON is the string) and checked as any outside kwargs are
    (:func:`verigym.registration.untrusted_kwargs`), the operator-only ones allowed: the command's
    user is the operator.

    Raises:
        ValueError: a pair without ``=``, a repeated key, or kwargs the env refuses (its
            kwargs policy, or its constructor: one env is made here to check them).
    """
    import functools
    import json

    import gymnasium as gym

    from verigym.registration import untrusted_kwargs

    if not query:
        return env_id
    kwargs: dict[str, Any] = {}
    for pair in query.split("&"):
        key, sep, text = pair.partition("=")
        if not sep or not key or key in kwargs:
            raise ValueError(f"expected KEY=VALUE pairs joined by '&', each key once; got {pair!r}")
        try:
            kwargs[key] = json.loads(text)
        except json.JSONDecodeError:
            kwargs[key] = text
    kwargs = untrusted_kwargs(env_id, kwargs, allow=tuple(kwargs))
    task = functools.partial(gym.make, env_id, **kwargs)
    try:  # an unknown name or an out-of-range value fails here, before the model loads
        task().close()
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc).strip().splitlines()[0]) from None
    task.__name__ = f"{env_id}?{query}"  # the trainer's name of the task (meta.json)
    return task


def run_grpo(args: argparse.Namespace) -> int:
    """``verigym train grpo``: exit status 0, or 2 after a one-line usage error."""
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    import verigym  # noqa: F401 - registers the ids
    from verigym.agents.llm.configs import GRPOConfig  # torch-free: options fail before torch
    from verigym.commands import lookup_env, usage_error
    from verigym.progress import Progress  # whole lines, not a live bar, when the output is a log

    command = "train grpo"
    if args.steps < 1:
        return usage_error(command, f"--steps must be >= 1, got {args.steps}")
    if args.eval_episodes < 0:
        return usage_error(command, f"--eval-episodes must be >= 0, got {args.eval_episodes}")
    tasks = []
    for spec in args.env:
        env_id, _, query = spec.partition("?")
        api = lookup_env(command, env_id)  # "did you mean" for a misspelled id
        if api is None:
            return 2
        if api != "gymnasium":
            return usage_error(
                command,
                f"{env_id} is a multi-agent env; train on one of its single-agent seats "
                "(verigym list --family multiagent, e.g. verigym/TicTacToe-Random-v0)",
            )
        try:
            tasks.append(_env_task(env_id, query))
        except ValueError as exc:
            return usage_error(command, f"--env {spec}: {exc}")
    overrides = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(GRPOConfig)
        if getattr(args, f.name, None) is not None
    }
    try:
        config = GRPOConfig.from_dict(overrides)
    except (TypeError, ValueError) as exc:
        return usage_error(command, str(exc))
    policy = _load_policy(command, args, config.device)
    if isinstance(policy, int):
        return policy
    from verigym.agents.llm.grpo import GRPOTrainer

    try:
        trainer = GRPOTrainer(policy, tasks, config)
    except ValueError as exc:  # a setting the loaded policy cannot run (--compile-rollout off CUDA)
        return usage_error(command, str(exc).strip().splitlines()[0])
    columns = (
        TextColumn("[bold]GRPO"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("reward {task.fields[reward]:.3f} success {task.fields[success]:.2f}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns) as progress:
        bar = progress.add_task("grpo", total=args.steps, reward=0.0, success=0.0)

        def show(metrics: dict[str, float]) -> None:
            progress.update(bar, advance=1, reward=metrics["reward"], success=metrics["success"])

        trainer.callbacks.append(show)
        trainer.train(args.steps)
    for index, env_id in enumerate(args.env):
        if args.eval_episodes:
            seeds = range(1_000_000, 1_000_000 + args.eval_episodes)
            result = trainer.evaluate(seeds, task=index)
            print(
                f"{env_id}: greedy success {result['success']:.3f}, score {result['score']:.3f} on {args.eval_episodes} held-out seeds"
            )
    trainer.close()
    if config.output_dir:
        if policy.has_adapter:
            print(
                f"saved the LoRA adapter to {config.output_dir}; play it with the agent spec llm:{args.model}?adapter={config.output_dir}"
            )
        else:
            print(
                f"saved to {config.output_dir}; serve it with: verigym serve-model {config.output_dir}"
            )
    return 0


def run_sft(args: argparse.Namespace) -> int:
    """``verigym train sft``: exit status 0, or 2 after a one-line usage error."""
    from verigym.agents.llm.configs import SFTConfig  # torch-free: options fail before torch
    from verigym.commands import usage_error

    command = "train sft"
    overrides = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(SFTConfig)
        if f.name not in _SFT_OWN and getattr(args, f.name, None) is not None
    }
    overrides["lora_r"] = args.lora_r
    overrides["lora_target_modules"] = _target_modules(args)
    if args.lora_alpha is not None:
        overrides["lora_alpha"] = args.lora_alpha
    elif args.lora_r > 0:
        overrides["lora_alpha"] = 2.0 * args.lora_r
    overrides["output_dir"] = args.output_dir
    try:
        config = SFTConfig.from_dict(overrides)
    except (TypeError, ValueError) as exc:
        return usage_error(command, str(exc))
    from verigym.agents.llm.sft import SupervisedTrainer, load_records

    try:
        records = load_records(args.data, max_records=config.max_records)
    except (TypeError, ValueError, FileNotFoundError) as exc:
        return usage_error(command, str(exc))
    from verigym.leaderboards.heldout import drop_evaluation_records

    records, dropped, _ = drop_evaluation_records(records)
    if dropped:
        print(
            f"left out {sum(dropped.values())} records whose task is an evaluation task of a suite: "
            + ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())),
            flush=True,
        )
    if config.torch_threads is not None:
        import torch

        torch.set_num_threads(config.torch_threads)  # 1 on a shared CPU: no spinning threads
    policy = _load_policy(command, args, config.device)
    if isinstance(policy, int):
        return policy

    def show(entry: dict) -> None:
        print(
            f"step {entry['step']} epoch {entry['epoch']} loss {entry['loss']:.4f} "
            f"tokens {entry['tokens']} lr {entry['lr']:.2e} {entry['seconds']:.0f}s",
            flush=True,
        )

    try:
        trainer = SupervisedTrainer(policy, records, config, callbacks=[show])
    except ValueError as exc:
        return usage_error(command, str(exc))
    probe = trainer.examples[:: max(1, len(trainer.examples) // 16)][:16]  # a fixed sample
    before = trainer.mean_loss(probe)
    print(
        f"{len(trainer.examples)} episodes; loss on {len(probe)} of them before training {before:.4f}",
        flush=True,
    )
    trainer.train()
    print(f"loss on the same {len(probe)} after training {trainer.mean_loss(probe):.4f}")
    if config.output_dir:
        where = (
            f"llm:{args.model}?adapter={config.output_dir}"
            if policy.has_adapter
            else f"llm:{config.output_dir}"
        )
        print(f"saved to {config.output_dir}; play it with the agent spec {where}")
    return 0


VERBS: dict[
    str,
    tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]],
] = {
    "grpo": (GRPO_HELP, add_grpo_arguments, run_grpo),
    "sft": (SFT_HELP, add_sft_arguments, run_sft),
}
"""``verigym train AGENT`` for the LLM agents: AGENT -> (help line, add_arguments, run)."""
