"""GRPO for LLM agents on verigym text environments, single- and multi-turn.

Read top to bottom: :class:`GRPOConfig` (every option, documented), :func:`rollout` (a batch of
episodes played by the policy, each one token sequence with a loss mask over the agent's tokens),
:func:`group_advantages`, :func:`token_log_probs` and :func:`grpo_loss` (the objective), and
:class:`GRPOTrainer` (the loop: sample tasks, roll out groups, filter, several inner updates,
metrics, checkpoints).

The objective, per agent token ``t`` of episode ``i`` in group ``g``::

    A_i   = (R_i - mean_g R) / (std_g R + eps)            # or without the std ("Dr. GRPO")
    r_t   = exp(log pi(t) - log pi_old(t))
    L_t   = -min(r_t A_i, clip(r_t, 1 - eps_low, 1 + eps_high) A_i) + beta * k3_t
    k3_t  = exp(log pi_ref(t) - log pi(t)) - (log pi_ref(t) - log pi(t)) - 1

aggregated over tokens as a token mean (DAPO), a per-sequence mean (GRPO) or a sum over a constant
(Dr. GRPO). Environment and tool tokens -- everything the agent did not sample -- carry no loss.

Sources: Shao et al. 2024 (DeepSeekMath, GRPO); Yu et al. 2025 (DAPO: clip-higher, dynamic
sampling, token-level loss, overlong reward shaping); Liu et al. 2025 (Dr. GRPO); Schulman 2020
(the k3 KL estimator).
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch

from verigym.agents.common.callbacks import MetricsLogger
from verigym.agents.llm.chat import feedback_text, initial_messages
from verigym.agents.llm.configs import GRPOConfig
from verigym.agents.llm.curriculum import UCBCurriculum
from verigym.agents.llm.policy import (
    TransformersPolicy,
    enable_activation_checkpointing,
    output_cache,
    with_cache,
)
from verigym.core import ACTION_ERROR, SCORE, SUCCESS
from verigym.provenance import git_sha

if TYPE_CHECKING:
    from verigym.agents.llm.static_rollout import StaticRollout

__all__ = [
    "Episode",
    "GRPOConfig",
    "GRPOTrainer",
    "Task",
    "cpu_seconds",
    "group_advantages",
    "grpo_loss",
    "rollout",
    "shared_prefix_length",
    "token_log_probs",
]

logger = logging.getLogger(__name__)

Task = str | Callable[[], gym.Env] | gym.Env
"""A task distribution: a registered env id, a zero-argument env factory, or an env (deep-copied
per episode). Each episode resets it with a seed; the same seed is the same task."""


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its waited-for children so far: the budget
    unit of the benchmarks (wall time is inflated on a shared machine)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# -- rollouts ------------------------------------------------------------------------------------------
@dataclass
class Episode:
    """One played episode as a training sequence.

    Attributes:
        token_ids: the whole episode: prompt, replies and env text, as the model saw them.
        loss_mask: 1 where the agent sampled the token (trained on), 0 for prompt/env/tool tokens.
        log_probs: rollout log-prob of each sampled token (0 elsewhere), same length.
        task: index of the task distribution; seed: its reset seed.
        reward: the shaped reward (verdict + format reward - overlong penalty).
        success / score: the verifier's verdict (False / 0 when the episode hit a limit).
        turns: agent replies; invalid: replies that did not parse; truncated_replies: replies cut
            at ``max_new_tokens``.
        replies: the reply texts.
    """

    task: int
    seed: int
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    reward: float = 0.0
    success: bool = False
    score: float = 0.0
    env_return: float = 0.0
    turns: int = 0
    invalid: int = 0
    truncated_replies: int = 0
    max_reply_tokens: int = 0
    replies: list[str] = field(default_factory=list)
    done: bool = False

    def extend(self, ids: Sequence[int], log_probs: Sequence[float] | None = None) -> None:
        self.token_ids.extend(ids)
        if log_probs is None:
            self.loss_mask.extend([0] * len(ids))
            self.log_probs.extend([0.0] * len(ids))
        else:
            self.loss_mask.extend([1] * len(ids))
            self.log_probs.extend(log_probs)


def make_env(task: Task) -> gym.Env:
    """A fresh env for ``task``, through the text view when it is not natively text."""
    from verigym.wrappers.language import LanguageWrapper

    if isinstance(task, str):
        env = gym.make(task)
    elif isinstance(task, gym.Env):
        env = copy.deepcopy(task)
    elif callable(task):
        env = task()
    else:
        raise TypeError(f"a task is an env id, an env factory or an env, got {type(task).__name__}")
    return env if isinstance(env, LanguageWrapper) else LanguageWrapper(env)


def rollout(
    policy: TransformersPolicy,
    envs: Sequence[gym.Env],
    seeds: Sequence[int],
    tasks: Sequence[int],
    config: GRPOConfig,
    *,
    generator: torch.Generator | None = None,
    temperature: float | None = None,
    engine: StaticRollout | None = None,
) -> list[Episode]:
    """Play one episode in each env (text view), all turns batched across the live episodes.

    Args:
        policy: the acting model.
        envs: one env per episode (Text -> Text, e.g. from :func:`make_env`).
        seeds: the reset seed of each episode.
        tasks: the task index of each episode (kept in :attr:`Episode.task`).
        config: sampling budgets and limits.
        generator: torch generator of the sampler.
        temperature: overrides ``config.temperature`` (0 is greedy, for evaluation).
        engine: sample the replies with this static-shape engine (every turn: the first turn's
            prompts of a group are equal, so they share one prefill; a later turn has one prompt
            per live episode) instead of :meth:`TransformersPolicy.generate` (``None``, the
            default). Greedy replies are the same; seeded samples are the same until a row ends.

    Returns:
        the episodes, rewards filled in (shaped as the config says), in order.
    """
    chat = policy.chat
    context = min(config.max_context_tokens, policy.max_context_tokens)
    episodes: list[Episode] = []
    for env, seed, task in zip(envs, seeds, tasks):
        observation, info = env.reset(seed=int(seed))
        episode = Episode(task=int(task), seed=int(seed))
        messages = initial_messages(str(info.get("instructions", "")), str(observation))
        episode.extend(policy.encode_messages(messages))
        episodes.append(episode)
    for episode in episodes:
        if len(episode.token_ids) + config.max_new_tokens > context:
            _finish(episode, None, config)  # the prompt alone leaves no room for a reply
    sample = policy.generate if engine is None else engine.generate
    while True:
        live = [i for i, e in enumerate(episodes) if not e.done]
        if not live:
            break
        replies = sample(
            [episodes[i].token_ids for i in live],
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature if temperature is None else temperature,
            top_p=config.top_p,
            stop=chat.stop_strings,
            generator=generator,
        )
        for i, reply in zip(live, replies):
            episode, env = episodes[i], envs[i]
            episode.extend(reply.token_ids, reply.log_probs)
            episode.turns += 1
            episode.replies.append(reply.text)
            episode.max_reply_tokens = max(episode.max_reply_tokens, len(reply.token_ids))
            episode.truncated_replies += reply.finish_reason == "length"
            observation, reward, terminated, truncated, info = env.step(reply.text)
            episode.env_return += float(reward)
            episode.invalid += ACTION_ERROR in info
            if terminated or truncated:
                _finish(episode, info, config)
            elif episode.turns >= config.max_turns:
                _finish(episode, None, config)
            else:
                ended = bool(reply.token_ids) and reply.token_ids[-1] in policy.eos_token_ids
                following = chat.encode(
                    chat.continuation(feedback_text(observation, info), reply_ended=ended)
                )
                if len(episode.token_ids) + len(following) + config.max_new_tokens > context:
                    _finish(episode, None, config)  # no room for another reply
                else:
                    episode.extend(following)
    return episodes


def _finish(episode: Episode, info: Mapping[str, Any] | None, config: GRPOConfig) -> None:
    """Close an episode: verdict (none when a trainer limit ended it) and shaped reward."""
    episode.done = True
    if info is not None:
        episode.success = bool(info.get(SUCCESS, False))
        episode.score = float(info.get(SCORE, 0.0))
    reward = (
        episode.score
        if config.reward == "score"
        else (episode.env_return if info is not None else 0.0)
    )
    if config.format_reward and episode.turns:
        reward += config.format_reward * (1.0 - episode.invalid / episode.turns)
    if config.overlong_penalty:
        if episode.truncated_replies:
            reward -= config.overlong_penalty
        elif config.overlong_buffer:
            start = config.max_new_tokens - config.overlong_buffer
            over = max(0, episode.max_reply_tokens - start)
            reward -= config.overlong_penalty * over / config.overlong_buffer
    episode.reward = reward


# -- the objective ---------------------------------------------------------------------------------------
def group_advantages(rewards: np.ndarray, *, scale: bool = True, eps: float = 1e-4) -> np.ndarray:
    """Group-relative advantages.

    Args:
        rewards: float array of shape (num_groups, num_generations).
        scale: divide by the group's std (GRPO); ``False`` only centres (Dr. GRPO).
        eps: added to the std.

    Returns:
        float32 array of the same shape.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    if scale:
        centred = centred / (rewards.std(axis=1, keepdims=True) + eps)
    return centred.astype(np.float32)


def token_log_probs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    start: int = 0,
    shared_prefix: int = 0,
    prefix_groups: Sequence[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of each next token under ``softmax(logits / temperature)``, in one forward pass.

    Args:
        model: a causal LM.
        input_ids: int64 tensor of shape (batch, length), right-padded.
        attention_mask: int64 tensor of shape (batch, length), 1 on real tokens.
        temperature: the rollout temperature.
        with_entropy: also return the entropy of each next-token distribution.
        start: skip the first ``start`` targets (prompt tokens): logits are computed only from
            there on (``logits_to_keep``), which saves the LM head's work on the prompt.
        shared_prefix: the first ``shared_prefix`` tokens are the same in every row (a GRPO group:
            G episodes of one prompt) and ``shared_prefix <= start``: they are run once, batch 1,
            and their KV cache is repeated to the batch for the rest of the sequence. Exact --
            gradients reach the shared tokens through every row's attention -- and the prompt's
            cost is paid once per group instead of once per episode. 0 (or a batch of one) runs
            the plain pass.
        prefix_groups: the group of each row when the batch holds several GRPO groups: rows of
            one group share their first ``shared_prefix`` tokens, and each group's are run once
            (one batch of the groups' prefixes); ``None``: every row is in one group.

    Returns:
        ``(log_probs, entropy)``: float32 tensors of shape (batch, length - 1 - start); entry ``t``
        is about token ``start + t + 1``. ``entropy`` is ``None`` unless asked for.
    """
    if shared_prefix > start:
        raise ValueError(
            f"shared_prefix ({shared_prefix}) must be <= start ({start}): the prefix carries no targets"
        )
    if shared_prefix and input_ids.shape[0] > 1:
        logits = _suffix_logits(model, input_ids, attention_mask, shared_prefix, prefix_groups)[
            :, start - shared_prefix : -1
        ]
    else:
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        extra = (
            {"logits_to_keep": input_ids.shape[1] - start}
            if start and _accepts_logits_to_keep(_model_class(model))
            else {}
        )
        logits = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=positions,
            use_cache=False,
            **extra,
        ).logits
        logits = logits[:, -(input_ids.shape[1] - start) : -1]
    logits = logits.float() / temperature
    log_p = torch.log_softmax(logits, dim=-1)
    chosen = log_p.gather(-1, input_ids[:, start + 1 :, None])[..., 0]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = -(log_p.exp() * log_p).sum(-1)
    return chosen, entropy


def _suffix_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prefix: int,
    groups: Sequence[int] | None = None,
) -> torch.Tensor:
    """Logits (batch, length - prefix, vocab) of positions ``prefix..`` when the first ``prefix``
    tokens of the rows of each group (``groups[row]``; ``None``: one group) are equal
    (left-aligned, not padded): one pass over the groups' prefixes (batch 1 for one group) with
    its KV cache (and its autograd graph) spread to their rows, then the batched suffixes."""
    batch, length = input_ids.shape
    owners = [0] * batch if groups is None else list(groups)
    firsts: dict[int, int] = {}
    for row, group in enumerate(owners):
        firsts.setdefault(group, row)
    device = input_ids.device
    heads = torch.tensor(list(firsts.values()), device=device)
    order = {group: k for k, group in enumerate(firsts)}
    spread = torch.tensor([order[group] for group in owners], device=device)
    shared = input_ids[heads, :prefix]
    if not bool((input_ids[:, :prefix] == shared[spread]).all()) or not bool(
        attention_mask[:, :prefix].all()
    ):
        raise ValueError("shared_prefix: the rows differ (or are padded) within the prefix")
    head = model(input_ids=shared, attention_mask=attention_mask[heads, :prefix], use_cache=True)
    cache = output_cache(head)
    if len(firsts) == 1:
        cache.batch_repeat_interleave(batch)
    else:
        cache.reorder_cache(spread)
    positions = torch.arange(prefix, length, device=input_ids.device).expand(batch, -1)
    out = model(
        input_ids=input_ids[:, prefix:],
        attention_mask=attention_mask,
        position_ids=positions,
        use_cache=True,
        **with_cache(model, cache),
    )
    return out.logits


def shared_prefix_length(episodes: Sequence[Episode]) -> int:
    """Tokens at the start that every episode has in common and that carry no loss (0 for one episode)."""
    if len(episodes) < 2:
        return 0
    first = episodes[0].token_ids
    common = min(len(e.token_ids) for e in episodes)
    for e in episodes:
        loss_start = next((i for i, m in enumerate(e.loss_mask) if m), len(e.loss_mask))
        common = min(common, loss_start)
        n = 0
        ids = e.token_ids
        while n < common and ids[n] == first[n]:
            n += 1
        common = n
    return common


def _micro_batch_prefix(episodes: Sequence[Episode], start: int) -> tuple[int, list[int] | None]:
    """``(shared_prefix, prefix_groups)`` of :func:`token_log_probs` for a micro-batch of
    ``episodes`` whose first target is ``start``: a group is the episodes of one task and seed
    (one prompt); each group's shared length is what its episodes have in common before their
    loss (a lone episode: its prompt), the prefix the shortest of them. ``(0, None)``: nothing to
    share (one group's rows differ at once, or every row is its own group)."""
    owners: dict[tuple[int, int], int] = {}
    groups = [owners.setdefault((e.task, e.seed), len(owners)) for e in episodes]
    if len(owners) == 1:
        return min(start, shared_prefix_length(episodes)), None
    if len(owners) == len(episodes):
        return 0, None
    lengths = [start]
    for group in range(len(owners)):
        members = [e for e, g in zip(episodes, groups) if g == group]
        if len(members) > 1:
            lengths.append(shared_prefix_length(members))
        else:
            lengths.append(next((i for i, m in enumerate(members[0].loss_mask) if m), start))
    prefix = min(lengths)
    return (prefix, groups) if prefix else (0, None)


@functools.cache
def _accepts_logits_to_keep(model_class: type) -> bool:
    return "logits_to_keep" in inspect.signature(model_class.forward).parameters


def _model_class(model: Any) -> type:
    from verigym.agents.llm.policy import base_model_class

    return base_model_class(model)


def grpo_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps_low: float,
    clip_eps_high: float,
    ref_log_probs: torch.Tensor | None = None,
    beta: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token clipped surrogate with optional k3 KL (see the module doc).

    Args:
        log_probs: float32 (batch, T) log-probs under the current policy (with grad).
        old_log_probs: float32 (batch, T) log-probs under the rollout policy.
        advantages: float32 (batch,) one advantage per episode.
        mask: float32 (batch, T), 1 on agent tokens.
        clip_eps_low / clip_eps_high: the ratio clip range ``[1 - low, 1 + high]``.
        ref_log_probs: float32 (batch, T) reference-policy log-probs, needed when ``beta > 0``.
        beta: KL weight.

    Returns:
        ``(per_token_loss, stats)``: loss float32 (batch, T) already multiplied by ``mask``; stats
        holds masked per-token ``kl`` and ``clipped`` (1 where the clip was active), both (batch, T).
    """
    ratio = torch.exp(log_probs - old_log_probs)
    adv = advantages[:, None]
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    stats = {"clipped": ((clipped < unclipped).float() * mask).detach()}
    if beta > 0:
        if ref_log_probs is None:
            raise ValueError("beta > 0 needs ref_log_probs")
        delta = ref_log_probs - log_probs
        kl = torch.exp(delta) - delta - 1.0
        loss = loss + beta * kl
        stats["kl"] = (kl * mask).detach()
    return loss * mask, stats


def _pad_batch(
    episodes: Sequence[Episode], pad_id: int, device: torch.device
) -> dict[str, torch.Tensor]:
    """Right-padded tensors of a micro-batch: ids/attention (B, L), mask/old log-probs (B, L-1)."""
    width = max(len(e.token_ids) for e in episodes)
    ids = torch.full((len(episodes), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(episodes), width), dtype=torch.long)
    mask = torch.zeros((len(episodes), width), dtype=torch.float32)
    old = torch.zeros((len(episodes), width), dtype=torch.float32)
    for i, e in enumerate(episodes):
        n = len(e.token_ids)
        ids[i, :n] = torch.tensor(e.token_ids)
        attention[i, :n] = 1
        mask[i, :n] = torch.tensor(e.loss_mask, dtype=torch.float32)
        old[i, :n] = torch.tensor(e.log_probs, dtype=torch.float32)
    return {
        "input_ids": ids.to(device),
        "attention_mask": attention.to(device),
        "mask": mask[:, 1:].to(device),
        "old_log_probs": old[:, 1:].to(device),
    }


# -- the trainer ------------------------------------------------------------------------------------------
class GRPOTrainer:
    """Train a :class:`TransformersPolicy` with GRPO on verigym tasks.

    Args:
        policy: the model to train (its weights are updated in place).
        tasks: one or more task distributions (:data:`Task`); several are sampled by the curriculum.
        config: a :class:`GRPOConfig`; keyword overrides build one.
        callbacks: called with each step's metrics dict; returning ``False`` stops training.

    Example::

        policy = TransformersPolicy.from_pretrained("path/to/model")
        trainer = GRPOTrainer(policy, ["verigym/GuessNumber-v0"], learning_rate=1e-6, output_dir="runs/gn")
        trainer.train(num_steps=200)

    Raises:
        ValueError: no tasks.
    """

    def __init__(
        self,
        policy: TransformersPolicy,
        tasks: Task | Sequence[Task],
        config: GRPOConfig | None = None,
        *,
        callbacks: Sequence[Callable[[Mapping[str, float]], Any]] = (),
        **overrides: Any,
    ):
        config = GRPOConfig.from_dict(overrides) if config is None else config.replace(**overrides)
        self.config = config
        self.policy = policy
        self.tasks: list[Task] = (
            [tasks]
            if isinstance(tasks, (str, gym.Env))
            or (callable(tasks) and not isinstance(tasks, Sequence))
            else list(tasks)
        )
        if not self.tasks:
            raise ValueError("GRPOTrainer needs at least one task")
        self.task_names = [
            t if isinstance(t, str) else getattr(t, "__name__", type(t).__name__)
            for t in self.tasks
        ]
        self.callbacks = list(callbacks)
        self.device = policy.device
        self.rng = np.random.default_rng(config.seed)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(config.seed)
        model = policy.model
        # fp32 master weights (an AdamW step of lr 1e-6 vanishes in bf16) under bf16 autocast
        self.bf16 = config.bf16 if config.bf16 is not None else self.device.type == "cuda"
        if model.dtype != torch.float32:
            model.float()
        if config.gradient_checkpointing:
            enable_activation_checkpointing(model)
        self.ref_model = None
        if config.beta > 0:
            self.ref_model = copy.deepcopy(model).eval()
            if self.bf16:
                self.ref_model.to(torch.bfloat16)
            self.ref_model.requires_grad_(False)
        self._trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self._trainable,
            lr=config.learning_rate,
            weight_decay=config.weight_decay,
            fused=self.device.type == "cuda",  # one kernel for every parameter's update
        )
        self.static_rollout: StaticRollout | None = None
        """The static-shape engine of training rollouts (``rollout_engine="static"``), kept with
        its caches (and, compiled, its CUDA graphs) for every step."""
        if config.rollout_engine == "static":
            if config.compile_rollout and self.device.type != "cuda":
                raise ValueError(
                    f"compile_rollout (CUDA graphs) needs a CUDA device; the policy is on {self.device}"
                )
            from verigym.agents.llm.static_rollout import StaticRollout

            self.static_rollout = StaticRollout(
                policy,
                batch_size=config.groups_per_step * config.num_generations,
                compile=config.compile_rollout,
                bf16=self.bf16,  # the rollout's autocast region (collect) has the same setting
            )
        self.curriculum = UCBCurriculum(
            len(self.tasks),
            window=config.curriculum_window,
            temperature=config.curriculum_temperature,
        )
        self._envs: dict[int, list[gym.Env]] = {}
        self.global_step = 0
        self._next_seed = config.train_seed_offset
        from verigym.leaderboards.heldout import HeldOutTasks

        self.held_out = HeldOutTasks()
        """Evaluation tasks of the shipped suites: a training seed that draws one is skipped."""
        self._writers = MetricsLogger(
            config.output_dir, tensorboard=config.tensorboard, step_key="step", prefix="grpo/"
        )

    # -- sampling -------------------------------------------------------------------------------------
    def _autocast(self) -> Any:
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def _env_pool(self, task: int, n: int) -> list[gym.Env]:
        pool = self._envs.setdefault(task, [])
        while len(pool) < n:
            pool.append(make_env(self.tasks[task]))
        return pool[:n]

    def _training_seed(self, task: int) -> int:
        """The next training seed whose task is no evaluation task of a suite (two seeds can draw
        the same task; :mod:`verigym.leaderboards.heldout`).

        Raises:
            RuntimeError: 10,000 seeds in a row draw evaluation tasks.
        """
        env = self._env_pool(task, 1)[0]
        env_id = getattr(getattr(env.unwrapped, "spec", None), "id", None)
        for _ in range(10_000):
            seed = self._next_seed
            self._next_seed += 1
            if env_id is None or not self.held_out.is_evaluation_task(env_id, env, seed):
                return seed
        raise RuntimeError(f"{env_id}: 10000 training seeds in a row draw evaluation tasks")

    def _draw_tasks(self) -> list[int]:
        if self.config.curriculum and len(self.tasks) > 1:
            return [self.curriculum.sample(self.rng) for _ in range(self.config.groups_per_step)]
        return [int(self.rng.integers(len(self.tasks))) for _ in range(self.config.groups_per_step)]

    def collect(self) -> list[list[Episode]]:
        """Roll out ``groups_per_step`` groups of ``num_generations`` episodes; one list per group."""
        g = self.config.num_generations
        drawn = self._draw_tasks()
        envs, seeds, tasks = [], [], []
        used: dict[int, int] = {}
        for task in drawn:
            seed = self._training_seed(task)
            start = used.get(task, 0)
            envs.extend(self._env_pool(task, start + g)[start:])
            used[task] = start + g
            seeds.extend([seed] * g)
            tasks.extend([task] * g)
        self.policy.model.eval()
        with self._autocast():
            episodes = rollout(
                self.policy,
                envs,
                seeds,
                tasks,
                self.config,
                generator=self.generator,
                engine=self.static_rollout,
            )
        return [episodes[k * g : (k + 1) * g] for k in range(len(drawn))]

    # -- one step -----------------------------------------------------------------------------------
    def step(self) -> dict[str, float]:
        """Collect one batch, update the policy, return the step's metrics."""
        cfg = self.config
        started, cpu_started = time.perf_counter(), cpu_seconds()
        groups = self.collect()
        rollout_time, rollout_cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
        rewards = np.array([[e.reward for e in group] for group in groups], dtype=np.float64)
        advantages = group_advantages(rewards, scale=cfg.scale_rewards)
        for k, group in enumerate(groups):
            self.curriculum.update(
                group[0].task, np.abs(advantages[k]).tolist(), [e.success for e in group]
            )
        keep = [k for k in range(len(groups)) if not cfg.dynamic_sampling or rewards[k].std() > 0]
        batch = [(e, float(advantages[k, j])) for k in keep for j, e in enumerate(groups[k])]
        every = [e for group in groups for e in group]
        metrics: dict[str, float] = {
            "reward": float(rewards.mean()),
            "success": float(np.mean([e.success for e in every])),
            "score": float(np.mean([e.score for e in every])),
            "reward_std": float(rewards.std(axis=1).mean()),
            "groups_kept": len(keep) / len(groups),
            "response_length": float(np.mean([sum(e.loss_mask) / max(1, e.turns) for e in every])),
            "turns": float(np.mean([e.turns for e in every])),
            "invalid_action_rate": float(
                sum(e.invalid for e in every) / max(1, sum(e.turns for e in every))
            ),
            "truncated_reply_rate": float(
                sum(e.truncated_replies for e in every) / max(1, sum(e.turns for e in every))
            ),
            "rollout_time": rollout_time,
            "rollout_cpu_time": rollout_cpu,
        }
        if batch:
            metrics.update(self._update(batch))
        self.global_step += 1
        metrics["step"] = float(self.global_step)
        metrics["step_time"] = time.perf_counter() - started
        metrics["step_cpu_time"] = cpu_seconds() - cpu_started
        self._writers(metrics)
        if cfg.output_dir and cfg.save_every and self.global_step % cfg.save_every == 0:
            self.save(Path(cfg.output_dir) / f"checkpoint-{self.global_step}")
        return metrics

    def _update(self, batch: list[tuple[Episode, float]]) -> dict[str, float]:
        cfg = self.config
        model = self.policy.model
        model.train()
        pad = self.policy.tokenizer.pad_token_id
        total_tokens = max(1, sum(sum(e.loss_mask) for e, _ in batch))
        sums = {"loss": 0.0, "kl": 0.0, "clip_fraction": 0.0, "entropy": 0.0, "grad_norm": 0.0}
        # the metrics' terms stay on the device until the end: one host sync per update, not
        # three per micro-batch (the GPU keeps its queue of work)
        terms: list[tuple[str, torch.Tensor]] = []
        # a micro-batch holds up to micro_batch_size episodes: whole groups packed together (a
        # larger group is split); each group's shared prompt is run once per micro-batch
        # (token_log_probs(shared_prefix=..., prefix_groups=...)) -- unless checkpointing is on,
        # which runs without a KV cache
        share = not cfg.gradient_checkpointing
        groups: dict[tuple[int, int], list[int]] = {}
        for i, (e, _) in enumerate(batch):
            groups.setdefault((e.task, e.seed) if share else (0, 0), []).append(i)
        for _ in range(cfg.num_iterations):
            members = [groups[key] for key in groups]
            pieces = [
                [int(i) for i in shuffled[s : s + cfg.micro_batch_size]]
                for g in self.rng.permutation(len(members))
                for shuffled in [list(self.rng.permutation(members[g]))]
                for s in range(0, len(shuffled), cfg.micro_batch_size)
            ]
            packed: list[list[int]] = []
            for piece in pieces:
                if packed and len(packed[-1]) + len(piece) <= cfg.micro_batch_size:
                    packed[-1].extend(piece)
                else:
                    packed.append(piece)
            self.optimizer.zero_grad(set_to_none=True)
            for chunk in ([batch[i] for i in indices] for indices in packed):
                tensors = _pad_batch([e for e, _ in chunk], pad, self.device)
                advantages = torch.tensor(
                    [a for _, a in chunk], dtype=torch.float32, device=self.device
                )
                start = int(tensors["mask"].any(0).float().argmax())
                prefix, prefix_groups = (
                    _micro_batch_prefix([e for e, _ in chunk], start) if share else (0, None)
                )
                heads = len(set(prefix_groups)) if prefix_groups is not None else 1
                if prefix * (len(chunk) - heads) < cfg.share_prompt_min_tokens:
                    prefix, prefix_groups = 0, None  # too little saved for a second pass
                ids, attention = tensors["input_ids"], tensors["attention_mask"]
                with self._autocast():
                    log_probs, entropy = token_log_probs(
                        model,
                        ids,
                        attention,
                        temperature=cfg.temperature,
                        with_entropy=True,
                        start=start,
                        shared_prefix=prefix,
                        prefix_groups=prefix_groups,
                    )
                mask = tensors["mask"][:, start:]
                old = (
                    log_probs.detach()
                    if cfg.num_iterations == 1
                    else tensors["old_log_probs"][:, start:]
                )
                ref = None
                if self.ref_model is not None:
                    with torch.no_grad(), self._autocast():
                        ref, _ = token_log_probs(
                            self.ref_model,
                            ids,
                            attention,
                            temperature=cfg.temperature,
                            start=start,
                            shared_prefix=prefix,
                            prefix_groups=prefix_groups,
                        )
                per_token, stats = grpo_loss(
                    log_probs,
                    old,
                    advantages,
                    mask,
                    clip_eps_low=cfg.clip_eps_low,
                    clip_eps_high=cfg.clip_eps_high,
                    ref_log_probs=ref,
                    beta=cfg.beta,
                )
                loss = self._aggregate(per_token, mask, total_tokens, len(batch))
                loss.backward()
                terms.append(("loss", loss.detach()))
                terms.append(("clip_fraction", stats["clipped"].sum()))
                terms.append(("entropy", (entropy * mask).sum()))
                if "kl" in stats:
                    terms.append(("kl", stats["kl"].sum()))
            if cfg.max_grad_norm > 0:
                # foreach kernels on CUDA (torch's default there): a few launches for all grads
                norm = torch.nn.utils.clip_grad_norm_(self._trainable, cfg.max_grad_norm)
                terms.append(("grad_norm", norm))
            self.optimizer.step()
        model.eval()
        values = torch.stack([t.float() for _, t in terms]).tolist() if terms else []
        for (name, _), value in zip(terms, values):  # the host sync; summed in the same order
            sums[name] += value if name in ("loss", "grad_norm") else value / total_tokens
        return {k: v / cfg.num_iterations for k, v in sums.items()}

    def _aggregate(
        self, per_token: torch.Tensor, mask: torch.Tensor, total_tokens: int, num_episodes: int
    ) -> torch.Tensor:
        """This micro-batch's share of the batch loss (so accumulated gradients equal the full batch's)."""
        how = self.config.loss_aggregation
        if how == "token-mean":
            return per_token.sum() / total_tokens
        if how == "sequence-mean":
            return (per_token.sum(-1) / mask.sum(-1).clamp(min=1)).sum() / num_episodes
        return per_token.sum() / (num_episodes * self.config.max_new_tokens)

    # -- the loop -----------------------------------------------------------------------------------
    def train(self, num_steps: int) -> list[dict[str, float]]:
        """Run ``num_steps`` steps (stopping early when a callback returns ``False``); save at the end
        when ``output_dir`` is set. Returns the metrics of every step."""
        history = []
        try:
            for _ in range(num_steps):
                metrics = self.step()
                history.append(metrics)
                logger.info(
                    "step %d reward %.3f success %.3f",
                    self.global_step,
                    metrics["reward"],
                    metrics["success"],
                )
                if any(cb(metrics) is False for cb in self.callbacks):
                    break
        finally:
            self._writers.flush()
        if self.config.output_dir:
            self.save(self.config.output_dir)
        return history

    def evaluate(
        self, seeds: Sequence[int], *, task: int = 0, temperature: float = 0.0
    ) -> dict[str, float]:
        """Success and score of the policy on ``seeds`` of task ``task`` (greedy by default)."""
        envs = [make_env(self.tasks[task]) for _ in seeds]
        self.policy.model.eval()
        with self._autocast():
            episodes = rollout(
                self.policy,
                envs,
                seeds,
                [task] * len(seeds),
                self.config,
                generator=self.generator,
                temperature=temperature,
            )
        for env in envs:
            env.close()
        return {
            "success": float(np.mean([e.success for e in episodes])),
            "score": float(np.mean([e.score for e in episodes])),
        }

    # -- persistence ------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the model and tokenizer (HF format), ``grpo_config.json`` and ``meta.json`` to ``path``."""
        from verigym import __version__

        path = Path(path)
        self.policy.save_pretrained(path)
        (path / "grpo_config.json").write_text(self.config.to_json() + "\n")
        meta = {
            "agent": "llm",
            "trainer": "grpo",
            "tasks": [t for t in self.task_names],
            "global_step": self.global_step,
            "verigym_version": __version__,
            "torch_version": torch.__version__,
            "git_sha": git_sha(),
        }
        (path / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    def close(self) -> None:
        for pool in self._envs.values():
            for env in pool:
                env.close()
        self._envs.clear()
        self._writers.close()
