"""Seconds per GRPO step: verigym's ``GRPOTrainer`` against TRL's ``GRPOTrainer``, in one run.

Same model (a tiny random Llama-architecture model unless ``--model``), same task
(:class:`verigym.agents.llm.tiny.EchoLetterEnv`, or ``--env ID``: the first reply of a registered
env, ``max_turns=1`` on verigym's side), scored by its verifier on both sides (through
:class:`verigym.agents.llm.trl_adapter.VerigymReward` for TRL), same batch (``--groups`` prompts x
``--generations`` completions), exactly ``--new-tokens`` completion tokens on both sides (EOS
suppressed), one optimizer step per batch with no gradient accumulation, no KL term, clip range
[0.8, 1.28]. A step is rollout + rewards + loss + backward + optimizer step; the median over
``--steps`` steps after ``--warmup`` warm-up steps is reported, with the ratio verigym / TRL (target
of issues 10 and 42: <= 0.5x), verigym's split into rollout and update, and on CUDA each side's peak
GPU memory. Runs as-is on a CUDA machine (bf16 there on both sides). verigym packs the whole batch
into one micro-batch (``micro_batch_size`` = groups x generations, each group's prompt run once).

After the timed steps the update of one batch is timed both ways: each group's prompt run once (a
second pass) and one plain pass (``--share-prompt-min-tokens`` chooses for the timed steps).
``--rollout-engine static`` rolls out with GRPO's static-shape engine and ``--compile`` captures
its decode step in CUDA graphs (CUDA only; give ``--warmup 3`` or more: the first steps compile and
capture). ``--profile`` profiles one more step and prints its top operators by device time (CPU
time off CUDA), rollout and update marked.

Usage::

    python benchmarks/llm_grpo.py [--model DIR] [--groups 4] [--generations 8] [--new-tokens 32] [--steps 5]
        [--rollout-engine dynamic|static] [--compile] [--warmup 1] [--profile]

Needs the ``trl`` extra (``pip install -e .[trl]``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from verigym.agents.llm.grpo import GRPOTrainer
from verigym.agents.llm.policy import TransformersPolicy, resolve_device
from verigym.agents.llm.static_rollout import StaticRollout
from verigym.agents.llm.tiny import EchoLetterEnv, build_tiny_model
from verigym.agents.llm.trl_adapter import VerigymReward, verigym_dataset


def _task(args: argparse.Namespace):
    """The benchmark task: EchoLetterEnv (a short prompt) or a registered env id (first reply only)."""
    if args.env == "echo":
        return EchoLetterEnv
    import verigym  # noqa: F401 - registers the ids

    return args.env


def peak_gib(device: torch.device) -> float:
    """The peak GPU memory since the last reset, in GiB, then a reset (0 off CUDA)."""
    if device.type != "cuda":
        return 0.0
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return peak


def verigym_step_seconds(
    path: str, args: argparse.Namespace, device: torch.device
) -> tuple[float, float, float, GRPOTrainer]:
    """Median seconds of a whole step and of its rollout part (generation + env steps), the
    warm-up steps' seconds, and the trainer (open, for a profiled step)."""
    policy = TransformersPolicy.from_pretrained(path, device=str(device))
    policy.eos_token_ids = frozenset()
    trainer = GRPOTrainer(
        policy,
        _task(args),
        num_generations=args.generations,
        groups_per_step=args.groups,
        max_new_tokens=args.new_tokens,
        learning_rate=1e-5,
        micro_batch_size=args.groups * args.generations,
        dynamic_sampling=False,
        clip_eps_low=0.2,
        clip_eps_high=0.28,
        seed=0,
        max_turns=1,
        rollout_engine=args.rollout_engine,
        compile_rollout=args.compile,
        share_prompt_min_tokens=args.share_prompt_min_tokens,
    )
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(args.warmup):
        try:
            trainer.step()
        except Exception as error:  # noqa: BLE001 - a failed compilation still leaves eager timings
            if trainer.static_rollout is None or not trainer.static_rollout.compile:
                raise
            first = (str(error).strip().splitlines() or [""])[0][:300]
            print(f"COMPILE FAILED ({type(error).__name__}: {first}); timing the eager engine")
            args.compile = False
            trainer.static_rollout = StaticRollout(
                trainer.policy, batch_size=args.groups * args.generations, bf16=trainer.bf16
            )
    if device.type == "cuda":
        torch.cuda.synchronize()
    warmup_s = time.perf_counter() - started
    print(f"verigym: {args.warmup} warm-up steps took {warmup_s:.1f} s", flush=True)
    times, rollouts = [], []
    for _ in range(args.steps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        metrics = trainer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        rollouts.append(metrics["rollout_time"])
    return statistics.median(times), statistics.median(rollouts), warmup_s, trainer


def update_seconds(trainer: GRPOTrainer, device: torch.device, repeats: int = 3) -> None:
    """Print the median seconds of the update of one collected batch, with each group's prompt
    run once (a second pass) and in one plain pass (share_prompt_min_tokens 0 and huge)."""
    groups = trainer.collect()
    batch = [(e, 0.1 * (j % 3) - 0.1) for group in groups for j, e in enumerate(group)]
    saved = trainer.config
    parts = []
    for name, bound in (("prompt shared", 0), ("one plain pass", 1 << 40)):
        trainer.config = saved.replace(share_prompt_min_tokens=bound)
        times = []
        for _ in range(repeats + 1):
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            trainer._update(batch)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        parts.append(f"{name} {statistics.median(times[1:]) * 1e3:.1f} ms")
    trainer.config = saved
    prompt = min(e.loss_mask.index(1) if 1 in e.loss_mask else 0 for g in groups for e in g)
    print(f"update of one batch (prompts >= {prompt} tokens): " + ", ".join(parts), flush=True)


def profile_step(trainer: GRPOTrainer, device: torch.device) -> None:
    """Profile one more step and print its top operators (by device time on CUDA)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    collect, update = trainer.collect, trainer._update

    def marked_collect():
        with record_function("verigym.rollout"):
            return collect()

    def marked_update(batch):
        with record_function("verigym.update"):
            return update(batch)

    trainer.collect, trainer._update = marked_collect, marked_update
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        trainer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"profile of one verigym step ({args_note(trainer)}), top operators by {sort}:")
    print(prof.key_averages().table(sort_by=sort, row_limit=20, max_name_column_width=48))
    launches = sum(e.count for e in prof.key_averages() if e.key in _LAUNCHES)
    syncs = sum(e.count for e in prof.key_averages() if "Synchronize" in e.key)
    print(f"kernel launches {launches}, host syncs {syncs}")


_LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaGraphLaunch"}


def args_note(trainer: GRPOTrainer) -> str:
    config = trainer.config
    compiled = ", CUDA graphs" if config.compile_rollout else ""
    return f"rollout engine {config.rollout_engine}{compiled}"


def trl_step_seconds(
    path: str, args: argparse.Namespace, device: torch.device, out_dir: str
) -> float:
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig
    from trl import GRPOTrainer as TRLTrainer

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.stamps: list[float] = []

        def on_step_end(self, *_args, **_kwargs):
            if device.type == "cuda":
                torch.cuda.synchronize()
            self.stamps.append(time.perf_counter())

    bf16 = device.type == "cuda"
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16 if bf16 else torch.float32
    )
    tokenizer = AutoTokenizer.from_pretrained(path)
    batch = args.groups * args.generations
    config = GRPOConfig(
        output_dir=out_dir,
        per_device_train_batch_size=batch,
        num_generations=args.generations,
        max_completion_length=args.new_tokens,
        generation_kwargs={"min_new_tokens": args.new_tokens},
        max_steps=args.steps + 1,
        learning_rate=1e-5,
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.28,
        num_iterations=1,
        gradient_accumulation_steps=1,
        use_cpu=device.type == "cpu",
        bf16=bf16,
        report_to="none",
        logging_steps=10_000,
        save_strategy="no",
        dataloader_num_workers=0,
        seed=0,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
    )
    clock = StepClock()
    trainer = TRLTrainer(
        model=model,
        reward_funcs=VerigymReward([_task(args)]),
        args=config,
        processing_class=tokenizer,
        train_dataset=verigym_dataset([_task(args)], seeds=range(batch * (args.steps + 2))),
        callbacks=[clock],
    )
    trainer.train()
    deltas = [b - a for a, b in zip(clock.stamps, clock.stamps[1:])]
    return statistics.median(deltas)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=None, help="local model directory (default: a tiny random model)"
    )
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument(
        "--env",
        default="echo",
        help='"echo" (EchoLetterEnv, ~25-token prompt) or a registered id, e.g. verigym/GuessNumber-v0 (~250-token prompt)',
    )
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--rollout-engine", choices=("dynamic", "static"), default="dynamic")
    parser.add_argument(
        "--compile", action="store_true", help="static engine: CUDA graphs (CUDA only)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="verigym steps before timing")
    parser.add_argument("--profile", action="store_true", help="profile one more verigym step")
    parser.add_argument(
        "--share-prompt-min-tokens",
        type=int,
        default=0,
        help="GRPOConfig.share_prompt_min_tokens of verigym's trainer (0: share whenever it saves)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or str(
            build_tiny_model(
                f"{tmp}/model",
                hidden_size=args.hidden_size,
                num_layers=args.layers,
                num_heads=max(1, args.hidden_size // 32),
            )
        )
        print(
            f"task {args.env}, device {device}, {args.groups} groups x {args.generations} generations, {args.new_tokens} completion tokens, "
            f"median of {args.steps} steps"
        )
        memory = (
            device.type == "cuda"
        )  # each line is printed once known: a stage cut short keeps it
        peak_gib(device)
        trl_s = trl_step_seconds(path, args, device, f"{tmp}/trl")
        trl_peak = peak_gib(device)
        print(
            f"TRL GRPOTrainer        {trl_s * 1e3:9.1f} ms/step"
            + (f" (peak GPU memory {trl_peak:.2f} GiB)" if memory else ""),
            flush=True,
        )
        ours_s, ours_rollout_s, warmup_s, trainer = verigym_step_seconds(path, args, device)
        ours_peak = peak_gib(device)
        engine = args.rollout_engine + (", CUDA graphs" if args.compile else "")
        print(
            f"verigym GRPOTrainer    {ours_s * 1e3:9.1f} ms/step "
            f"(rollout {ours_rollout_s * 1e3:.1f} ms, update {(ours_s - ours_rollout_s) * 1e3:.1f} ms; "
            f"rollout engine {engine}; {args.warmup} warm-up steps {warmup_s:.1f} s"
            + (f"; peak GPU memory {ours_peak:.2f} GiB)" if memory else ")")
        )
        print(f"ratio verigym / TRL    {ours_s / trl_s:9.2f}x  (target <= 0.5x)", flush=True)
        update_seconds(trainer, device)
        if args.profile:
            profile_step(trainer, device)
        trainer.close()


if __name__ == "__main__":
    main()
