"""Plumbing every torch learner shares: device, seeding, batching in ``act``, save/load, callbacks.

A learner subclasses :class:`TorchLearner`, names its config class and its ``name`` (the registry
key), builds its networks in ``_build()`` and implements ``_act_batch`` and ``_learn`` (the
training loop). Saved agents
are a directory (docs/design.md section 4):

* ``config.json`` -- the config dataclass;
* ``model.safetensors`` -- every tensor of :meth:`TorchLearner.state_tensors` (network weights,
  normalization statistics, tables);
* ``meta.json`` -- agent name, env id, observation and action spaces, verigym/torch versions, git SHA.

:meth:`TorchLearner.learn` is the template (as Stable-Baselines3's ``learn`` around
``collect_rollouts``/``train``): it runs the subclass's ``_learn`` inside
:meth:`TorchLearner.training_threads` (torch's intra-op thread count pinned to the config's
``torch_threads``, by default one thread for small networks, and subnormal floats flushed to zero
on the CPU, both restored afterwards), with a progress bar (steps/s and the recent return) shown
when ``progress=True`` or, by default, when the output is a terminal or a notebook.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from verigym.agents.common.config import AgentConfig
from verigym.agents.common.spaces import ObservationBatcher, space_from_json, space_to_json
from verigym.core import ACTION_MASK
from verigym.provenance import git_sha

__all__ = [
    "SMALL_NETWORK_PARAMETERS",
    "Callback",
    "TorchLearner",
    "choose_threads",
    "emit",
    "env_id_of",
    "episode_metrics",
    "final_batch",
    "flush_denormal",
    "resolve_device",
    "torch_threads",
]

log = logging.getLogger(__name__)

Callback = Callable[[Mapping[str, float]], Any]
"""Called by ``learn`` with a metrics dict (always ``global_step``; ``charts/episodic_return`` etc.
when episodes ended); returning ``False`` stops training."""


def resolve_device(device: str) -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; other strings as given."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


SMALL_NETWORK_PARAMETERS = 1_000_000
"""Networks with fewer parameters than this train on one CPU thread by default: their matrices are
too small for torch's intra-op parallelism to pay for its synchronisation, and on a loaded machine
the extra threads fight over the cores (issue 20: PPO on DoorKey-5x5 took 37.5 min with torch's
default threads on 2 busy cores, 77 s with one)."""


def choose_threads(requested: int | None, device: torch.device, num_parameters: int) -> int | None:
    """The intra-op thread count to train with (None: leave torch's setting alone).

    Args:
        requested: the config's ``torch_threads`` (an explicit count wins).
        device: the training device.
        num_parameters: floating-point parameters of the agent's networks (``int``).

    Returns:
        ``requested`` when given; else 1 for a network under :data:`SMALL_NETWORK_PARAMETERS`
        or a non-CPU device (the CPU only feeds the GPU small batches); else None.
    """
    if requested is not None:
        return requested
    if device.type != "cpu" or num_parameters < SMALL_NETWORK_PARAMETERS:
        return 1
    return None


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(threads)``, restoring the previous count after.

    ``None`` leaves the setting alone.
    """
    previous = torch.get_num_threads()
    if threads is not None and threads != previous:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


def _flushing_denormal() -> bool:
    """Whether this thread flushes subnormal floats to zero now (torch has no getter for it)."""
    return bool((torch.tensor([1e-40]) * 1.0)[0] == 0)  # 1e-40 is subnormal in float32


@contextlib.contextmanager
def flush_denormal(enabled: bool = True) -> Iterator[None]:
    """Run the block with subnormal floats flushed to zero on the CPU (``torch.set_flush_denormal``),
    restoring the previous mode after.

    Adam's moment estimates of weights whose gradients are tiny or zero (dead ReLUs, rarely chosen
    actions) decay into the subnormal range (below 1.2e-38 in float32), where x86 CPUs compute one
    to two orders of magnitude slower: in the DQN CartPole learning test the fused Adam step took
    10.6 s of 46 s with subnormals and 0.96 s flushed, with the same evaluation returns. Values that
    small change no update measurably. The mode is per thread: it covers the calling thread, which
    does all the work at one intra-op thread (the default for small networks); a CPU without the
    mode (``set_flush_denormal`` returns False) is left as it is.
    """
    previous = _flushing_denormal()
    changed = enabled != previous and torch.set_flush_denormal(enabled)
    try:
        yield
    finally:
        if changed:
            torch.set_flush_denormal(previous)


def _show_progress(progress: bool | None) -> bool:
    """``progress`` itself when given, else whether stdout is an interactive terminal or a notebook."""
    if progress is not None:
        return progress
    from rich.console import Console

    console = Console()
    return console.is_terminal or console.is_jupyter


def emit(callbacks: Sequence[Callback], metrics: Mapping[str, float]) -> bool:
    """Send ``metrics`` to every callback; False when one of them asked to stop."""
    keep_going = True
    for callback in callbacks:
        if callback(metrics) is False:
            keep_going = False
    return keep_going


def episode_metrics(episodes: list[dict[str, float]]) -> dict[str, float]:
    """Mean return/length/success/score of finished episodes, with CleanRL-style names."""
    if not episodes:
        return {}
    out = {
        "charts/episodic_return": float(np.mean([e["return"] for e in episodes])),
        "charts/episodic_length": float(np.mean([e["length"] for e in episodes])),
        "charts/episodes": float(len(episodes)),
    }
    for key in ("success", "score"):
        values = [e[key] for e in episodes if key in e]
        if values:
            out[f"charts/{key}"] = float(np.mean(values))
    return out


def final_batch(
    batcher: ObservationBatcher, next_batch: dict[str, np.ndarray], finals: Sequence[Any]
) -> dict[str, np.ndarray]:
    """``next_batch`` with the true last observation where an episode ended (``finals[i]`` set).

    The pool's observation there already belongs to the next episode; targets and bootstraps need
    the last one. Returns ``next_batch`` itself when no episode ended.
    """
    ended = [i for i, f in enumerate(finals) if f is not None]
    if not ended:
        return next_batch
    out = {k: v.copy() for k, v in next_batch.items()}
    final = batcher([finals[i] for i in ended])
    for k in out:
        out[k][ended] = final[k]
    return out


def env_id_of(env: Any) -> str | None:
    """The registered id of ``env`` (a str id, an env with a spec, or a pool of them), if any."""
    if isinstance(env, str):
        return env
    inner = env.unwrapped if isinstance(env, gym.vector.VectorEnv) else env
    first = inner.envs[0] if hasattr(inner, "envs") else inner
    spec = getattr(first, "spec", None)
    return None if spec is None else spec.id


LearnerT = TypeVar("LearnerT", bound="TorchLearner")


class TorchLearner:
    """Base of the torch learners (see the module doc). Not an agent on its own."""

    name: ClassVar[str] = ""
    config_class: ClassVar[type[AgentConfig]] = AgentConfig
    _learning: bool = False

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        config: AgentConfig,
        *,
        env_id: str | None = None,
    ):
        self.config = config
        self.observation_space = observation_space
        self.action_space = action_space
        self.env_id = env_id
        self.device = resolve_device(config.device)
        self.batcher = ObservationBatcher(observation_space)
        self.global_step = 0
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(config.seed)
        self.rng = np.random.default_rng(config.seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            self._build()

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_env(cls, env: str | gym.Env | Any, **config: Any) -> TorchLearner:
        """Build for ``env`` (an env, an id, or a vector env: its single spaces) with ``config``
        overrides.

        Raises:
            TypeError: unknown option or wrong type; ValueError: out-of-range option, or spaces
            this learner does not support.
        """
        from verigym.agents.common.vec import make_env

        if env is None:
            raise ValueError(f"{cls.name} needs an env (or an env id) to build its networks")
        cfg = cls.config_class.from_dict(config)
        if hasattr(env, "single_observation_space"):
            observation_space, action_space = env.single_observation_space, env.single_action_space
        else:
            probe = env if hasattr(env, "observation_space") else make_env(env)
            observation_space, action_space = probe.observation_space, probe.action_space
        return cls(observation_space, action_space, cfg, env_id=env_id_of(env))

    def _build(self) -> None:
        """Create networks/optimizers (called under the config seed)."""

    # -- learning -----------------------------------------------------------------------------
    def learn(
        self: LearnerT,
        env: Any,
        total_steps: int,
        *,
        callbacks: Sequence[Callback] = (),
        progress: bool | None = None,
    ) -> LearnerT:
        """Train for ``total_steps`` env steps (the subclass's :meth:`_learn` documents its env
        types and rounding), with pinned torch threads and an optional progress bar.

        Args:
            env: an env id, a ``gymnasium.Env`` or an env pool (see the subclass's ``_learn``).
            total_steps: env steps over all envs.
            callbacks: called with each metrics dict (see :data:`Callback`); ``False`` stops.
            progress: show a progress bar; ``None``: when stdout is a terminal or a notebook.

        Returns:
            self.
        """
        if self._learning:  # a learn calling another learn: the outer one owns threads and bar
            return self._learn(env, total_steps, callbacks=callbacks)
        callbacks = list(callbacks)
        bar = None
        if _show_progress(progress):
            from verigym.agents.common.callbacks import ProgressBar

            bar = ProgressBar(
                total_steps,
                f"{self.name} on {env_id_of(env) or type(env).__name__}",
                start=self.global_step,
            )
            callbacks.append(bar)
        self._learning = True
        try:
            with self.training_threads():
                return self._learn(env, total_steps, callbacks=callbacks)
        finally:
            self._learning = False
            if bar is not None:
                bar.close()

    def _learn(self, env: Any, total_steps: int, *, callbacks: Sequence[Callback] = ()) -> Any:
        """The algorithm's training loop (subclass hook), run by :meth:`learn`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _learn")

    def num_parameters(self) -> int:
        """Floating-point values in :meth:`state_tensors` (weights and normalization statistics)."""
        return sum(t.numel() for t in self.state_tensors().values() if t.is_floating_point())

    @contextlib.contextmanager
    def training_threads(self) -> Iterator[None]:
        """Context pinning torch's intra-op threads for training (see :func:`choose_threads`) and,
        on the CPU, flushing subnormal floats to zero (see :func:`flush_denormal`).

        ``learn`` enters it by itself; use it around other heavy work with the agent, e.g. a long
        evaluation: ``with agent.training_threads(): evaluate(agent, env)``.
        """
        size = self.num_parameters()
        threads = choose_threads(self.config.torch_threads, self.device, size)
        log.debug(
            "%s trains with torch_threads=%s (%d parameters on %s)",
            self.name,
            threads,
            size,
            self.device,
        )
        with (
            torch_threads(threads),
            flush_denormal() if self.device.type == "cpu" else contextlib.nullcontext(),
        ):
            yield

    # -- acting -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None) -> None:
        """Start of an episode; ``seed`` reseeds action sampling."""
        if seed is not None:
            self.generator.manual_seed(seed)
            self.rng = np.random.default_rng(seed)

    def act(
        self,
        obs: Any,
        info: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        *,
        deterministic: bool = False,
    ) -> Any:
        """The action for one observation, or an array of actions for a batch of them.

        Args:
            obs: one observation of ``observation_space``, or a batch (a list, or arrays with a
                leading batch axis).
            info: the env's info (``info["action_mask"]`` restricts discrete actions), or one per
                batch entry / a dict of batched arrays.
            deterministic: the greedy/mean action instead of a sample.
        """
        batched = self.batcher.is_batched(obs)
        batch = self.batcher(obs if batched else [obs])
        n = len(next(iter(batch.values())))
        mask = _masks(info, n, batched)
        actions = self._act_batch(batch, mask, deterministic)
        return actions if batched else actions[0]

    def _act_batch(
        self, batch: dict[str, np.ndarray], mask: np.ndarray | None, deterministic: bool
    ) -> np.ndarray:
        raise NotImplementedError

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Network actions -> env actions (``Discrete`` start offset, ``Box`` clipping)."""
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            return actions.astype(np.int64) + int(space.start)
        if isinstance(space, spaces.Box):
            return np.clip(actions, space.low, space.high).astype(space.dtype)
        return actions.astype(np.int64)

    # -- persistence --------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor to save (names -> tensors)."""
        raise NotImplementedError

    def load_state_tensors(self, tensors: Mapping[str, torch.Tensor]) -> None:
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Write ``config.json``, ``model.safetensors`` and ``meta.json`` into directory ``path``."""
        from safetensors.torch import save_file

        from verigym import __version__

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(self.config.to_json() + "\n")
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in self.state_tensors().items()}
        save_file(tensors, str(path / "model.safetensors"))
        meta = {
            "agent": self.name,
            "env_id": self.env_id,
            "observation_space": space_to_json(self.observation_space),
            "action_space": space_to_json(self.action_space),
            "global_step": self.global_step,
            "verigym_version": __version__,
            "torch_version": torch.__version__,
            "git_sha": git_sha(),
        }
        (path / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path, *, device: str = "auto") -> TorchLearner:
        """Load an agent saved by :meth:`save`.

        Raises:
            FileNotFoundError: a file of the directory is missing.
            ValueError: the directory holds another kind of agent.
        """
        from safetensors.torch import load_file

        path = Path(path)
        meta = json.loads((path / "meta.json").read_text())
        if meta.get("agent") != cls.name:
            raise ValueError(
                f"{path} holds a {meta.get('agent')!r} agent, not {cls.name!r}; load it with verigym.agents.load({meta.get('agent')!r}, path)"
            )
        config = cls.config_class.from_dict(
            {**json.loads((path / "config.json").read_text()), "device": device}
        )
        agent = cls(
            space_from_json(meta["observation_space"]),
            space_from_json(meta["action_space"]),
            config,
            env_id=meta.get("env_id"),
        )
        agent.load_state_tensors(
            load_file(str(path / "model.safetensors"), device=str(agent.device))
        )
        agent.global_step = int(meta.get("global_step", 0))
        return agent


def _masks(info: Any, n: int, batched: bool) -> np.ndarray | None:
    """Action masks ``(n, k)`` from one info, a list of infos, or a dict of batched arrays."""
    if info is None:
        return None
    if isinstance(info, Mapping):
        mask = info.get(ACTION_MASK)
        if mask is None:
            return None
        mask = np.asarray(mask)
        return mask.reshape(n, -1) if batched or mask.ndim > 1 else mask[None]
    masks = [i.get(ACTION_MASK) if i is not None else None for i in info]
    if any(m is None for m in masks):
        return None
    return np.stack([np.asarray(m) for m in masks])
