"""``verigym train AGENT --env ID --steps N --out DIR [options]``: train a classic RL agent.

Every field of the agent's config dataclass is an option (``--learning-rate 1e-3``,
``--hidden-sizes 256 256``, ``--no-norm-adv``); ``verigym train ppo --help`` lists them with their
docstrings. verigym's own agents are parsed and validated with their torch-free configs
(:mod:`verigym.agents.configs`) before the agent's module and torch are imported, so a mistyped
option fails in about a second. Torch's CPU threads follow ``--torch-threads`` (default: one thread for small
networks, see :func:`verigym.agents.common.learner.choose_threads`). The run shows a progress bar
(steps/s, recent return) and writes into ``--out``: the
saved agent (``config.json``, ``model.safetensors``, ``meta.json``), ``metrics.jsonl``, TensorBoard
events under ``tb/`` (when tensorboard is installed), ``learning_curve.png`` and ``eval.json``.

``verigym train grpo ...`` and ``verigym train sft ...`` dispatch to the LLM trainers' own command
lines (:mod:`verigym.commands.train_llm`), which likewise parse and validate their options with
torch-free configs (:mod:`verigym.agents.llm.configs`) before torch is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
from pathlib import Path
from typing import Any

HELP = "train an agent (ppo, sac, dqn, qlearning, option-critic, ippo, grpo, sft) on an env and save it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "agent",
        help="agent name: ppo, sac, dqn, qlearning, option-critic, ippo, grpo, or sft (an LLM on demonstrations)",
    )
    options = parser.add_argument(
        "options",
        nargs=argparse.REMAINDER,
        help="--env ID --steps N --out DIR and the agent's options (verigym train AGENT --help)",
    )
    options.required = False  # "verigym train" alone: only the agent is missing


def _plot(metrics_path: Path, out: Path, title: str) -> bool:
    """Learning curve (episodic return against env steps) as a PNG; False when nothing to plot."""
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    points = [
        (r["global_step"], r["charts/episodic_return"])
        for r in rows
        if "charts/episodic_return" in r
    ]
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(*zip(*points))
    ax.set_xlabel("env steps")
    ax.set_ylabel("episodic return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def _run_llm(agent: str, options: list[str]) -> int:
    """``verigym train grpo|sft OPTIONS``: the verb's own parser and run."""
    from verigym.cli import ArgumentParser
    from verigym.commands.train_llm import VERBS

    help_line, add_arguments, run = VERBS[agent]
    parser = ArgumentParser(
        prog=f"verigym train {agent}", description=help_line, allow_abbrev=False
    )
    add_arguments(parser)
    return int(run(parser.parse_args(options)) or 0)


def _evaluation_line(result: dict[str, Any]) -> str:
    """Mean return, and the success rate only where the env reports success (never "nan")."""
    import math

    line = f"mean return {result['mean_return']:.2f} +- {result['std_return']:.2f}"
    rate = result.get("success_rate")
    if isinstance(rate, (int, float)) and math.isfinite(rate):
        line += f", success rate {rate:.2f}"
    return line


def _what_fits(agent: str, env_id: str) -> str:
    """For an env whose spaces the agent cannot take: which agent or wrapper fits, else ``""``."""
    from verigym.registration import row

    try:
        family = row(env_id).family
    except KeyError:  # a Gymnasium id: its own error says enough
        return ""
    if family in ("text", "tool"):
        return (
            f"; {env_id} is a {family} env (text actions): train an LLM on it (verigym train grpo --env {env_id} --model DIR), "
            f"or, for a game with a finite answer set (Wordle, Hangman), wrap it in verigym.wrappers.CandidateActionWrapper "
            f"and HashedNGramObservation for a classic agent"
        )
    if family == "gui":
        return f"; {env_id} is a GUI env: wrap it in verigym.wrappers.ScreenshotClickWrapper for pixels and a Discrete click"
    if family == "multiagent" and agent != "ippo":
        return f"; {env_id} is a multi-agent game: train it with ippo (verigym train ippo --env {env_id} ...)"
    return ""


def run(args: argparse.Namespace) -> int:
    if args.agent in ("grpo", "sft"):
        return _run_llm(args.agent, args.options)

    from verigym.agents.base import AGENTS, agent_class, builtin_agents
    from verigym.agents.common.config import add_config_arguments
    from verigym.agents.configs import CONFIGS
    from verigym.commands import usage_error

    # verigym's own agents are parsed with their torch-free config (verigym.agents.configs) and
    # imported only once the options are valid; a plugin's class is imported to find its config
    cls: Any = None
    if args.agent in CONFIGS and args.agent in builtin_agents():
        config_class: Any = CONFIGS[args.agent]
    else:
        try:
            cls = agent_class(args.agent)
        except KeyError as exc:
            return usage_error("train", exc.args[0])
        config_class = getattr(cls, "config_class", None)
    if config_class is None or (cls is not None and not hasattr(cls, "learn")):
        learners = sorted(n for n in AGENTS if n not in {"random", "oracle", "llm", "openai"})
        return usage_error(
            "train",
            f"agent {args.agent!r} does not learn; trainable agents: {', '.join(learners)}, grpo",
        )
    from verigym.cli import ArgumentParser

    parser = ArgumentParser(
        prog=f"verigym train {args.agent}",
        # verigym's own: the config's docstring, which names the source of the defaults
        description=" ".join((config_class.__doc__ or "").split())
        if cls is None
        else (cls.__doc__ or "").strip().splitlines()[0],
        allow_abbrev=False,
    )
    parser.add_argument(
        "--env",
        required=True,
        help="env id to train on, e.g. CartPole-v1 or verigym/DoorKey-5x5-v0",
    )
    parser.add_argument("--steps", type=int, required=True, help="env steps to train for")
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output directory (agent, metrics.jsonl, tb/, learning_curve.png)",
    )
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=10,
        help="deterministic evaluation episodes after training (0: none)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_arguments(parser, config_class)
    opts = vars(parser.parse_args(args.options))
    env_id, steps, out = opts.pop("env"), opts.pop("steps"), opts.pop("out")
    eval_episodes, no_progress = opts.pop("eval_episodes"), opts.pop("no_progress")
    command = f"train {args.agent}"
    if steps < 1:
        return usage_error(command, f"--steps must be >= 1, got {steps}")
    if eval_episodes < 0:
        return usage_error(command, f"--eval-episodes must be >= 0, got {eval_episodes}")
    try:  # the config's own type and range checks, before torch is imported
        config_class.from_dict(opts)
    except (TypeError, ValueError) as exc:
        return usage_error(command, " ".join(str(exc).split()))

    import gymnasium

    import verigym  # noqa: F401
    from verigym.agents.common.callbacks import MetricsLogger, evaluate
    from verigym.commands import lookup_env

    if lookup_env(command, env_id) is None:  # the message suggests close ids
        return 2
    if cls is None:
        cls = agent_class(args.agent)
    try:
        agent = cls.from_env(env_id, **opts)
    except (TypeError, ValueError, gymnasium.error.Error) as exc:
        return usage_error(command, " ".join(str(exc).split()) + _what_fits(args.agent, env_id))
    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / "metrics.jsonl"
    callbacks: list[Any] = [MetricsLogger(out, tensorboard=True, tensorboard_dir=out / "tb")]
    # verigym's learners pin torch's threads themselves (torch_threads) and draw the bar
    session = "progress" in inspect.signature(agent.learn).parameters
    if not session and not no_progress:  # a plugin learner without the training session
        from verigym.agents.common.callbacks import ProgressBar

        callbacks.append(ProgressBar(steps, f"{args.agent} on {env_id}"))
    try:
        agent.learn(
            env_id, steps, callbacks=callbacks, **({"progress": not no_progress} if session else {})
        )
    finally:
        for callback in callbacks:
            callback.close()
    agent.save(out)
    _plot(metrics_path, out / "learning_curve.png", f"{args.agent} on {env_id}")
    if eval_episodes > 0:
        threads = (
            agent.training_threads()
            if hasattr(agent, "training_threads")
            else contextlib.nullcontext()
        )
        with threads:
            result = evaluate(agent, env_id, episodes=eval_episodes)
        (out / "eval.json").write_text(json.dumps(result, indent=2) + "\n")
        print(f"evaluation over {eval_episodes} episodes: {_evaluation_line(result)}")
    print(f"saved to {out} (load with verigym.agents.load({args.agent!r}, {str(out)!r}))")
    return 0
