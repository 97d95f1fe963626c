"""``verigym train sft --model M --data D --out DIR``: supervised fine-tuning from the command line.

Every :class:`~verigym.agents.llm.sft.SFTConfig` field is a flag (``--epochs 2``,
``--learning-rate 2e-4``, ``--lora-r 16``; ``--lora-target-modules`` takes a comma-separated
list). ``--adapter DIR`` continues training an existing LoRA adapter. A record whose task is an
evaluation task of a shipped suite (its ``env_id`` reset at its ``seed``; data exported before the
split was made by task content can hold them) is left out and counted on stdout
(:func:`verigym.leaderboards.heldout.drop_evaluation_records`). The adapter (or, with
``--lora-r 0``, the model), ``sft_config.json`` and ``train_log.jsonl`` go to ``--out``; play the
result with the agent spec ``llm:M?adapter=DIR``.
"""

from __future__ import annotations

import argparse
import dataclasses

HELP = "fine-tune a local LLM on chat demonstrations (verigym export --format sft), with LoRA"

_OWN = ("lora_r", "lora_alpha", "lora_target_modules", "output_dir")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The SFT flags."""
    from verigym.agents.common.config import add_config_arguments
    from verigym.agents.llm.grpo_cli import add_lora_arguments
    from verigym.agents.llm.sft import SFTConfig

    parser.add_argument(
        "--model",
        required=True,
        metavar="M",
        help="local model directory (save_pretrained layout), a .gguf file, or smollm2",
    )
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
    add_lora_arguments(parser, default_r=SFTConfig.lora_r)
    add_config_arguments(parser, SFTConfig, skip=set(_OWN))


def run(args: argparse.Namespace) -> int:
    from verigym.agents.llm.grpo_cli import load_policy
    from verigym.agents.llm.sft import SFTConfig, SupervisedTrainer, load_records
    from verigym.commands import usage_error
    from verigym.progress import quiet_library_bars

    command = "train sft"
    overrides = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(SFTConfig)
        if f.name not in _OWN and getattr(args, f.name, None) is not None
    }
    overrides["lora_r"] = args.lora_r
    overrides["lora_target_modules"] = tuple(t for t in args.lora_target_modules.split(",") if t)
    if args.lora_alpha is not None:
        overrides["lora_alpha"] = args.lora_alpha
    elif args.lora_r > 0:
        overrides["lora_alpha"] = 2.0 * args.lora_r
    overrides["output_dir"] = args.output_dir
    try:
        config = SFTConfig.from_dict(overrides)
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
    quiet_library_bars()
    if config.torch_threads is not None:
        import torch

        torch.set_num_threads(config.torch_threads)  # 1 on a shared CPU: no spinning threads
    try:
        policy = load_policy(args, config.device)
    except (FileNotFoundError, ImportError, ValueError) as exc:
        return usage_error(command, str(exc).strip().splitlines()[0])
    except OSError as exc:
        return usage_error(command, f"{args.model}: {str(exc).strip().splitlines()[0]}")

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
