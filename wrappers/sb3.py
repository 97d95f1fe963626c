"""Stable-Baselines3 on a Gymnasium ``VectorEnv`` (the batched grid engine included).

SB3 trains on its own ``VecEnv`` interface, and neither SB3 nor SuperSuit converts a Gymnasium
``VectorEnv`` to it. :class:`SB3VecEnv` does::

    import gymnasium as gym
    from gymnasium.vector import AutoresetMode
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import VecMonitor

    import verigym
    from verigym.wrappers.sb3 import SB3VecEnv, make_sb3_vec_env

    venv = VecMonitor(make_sb3_vec_env("verigym/DoorKey-5x5-v0", 16, seed=0))  # batched engine
    MaskablePPO("MlpPolicy", venv).learn(100_000)

    # or any VectorEnv made with the same-step autoreset SB3 expects:
    envs = gym.make_vec("CartPole-v1", 8, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    venv = SB3VecEnv(envs)

What it maps (SB3's ``VecEnv`` contract, ``DummyVecEnv``'s behaviour):

* ``step`` returns ``dones = terminated | truncated``; on a done copy the observation is already
  the next episode's first one, ``infos[i]["terminal_observation"]`` is the ended episode's last
  (Gymnasium's ``info["final_obs"]``), ``infos[i]["TimeLimit.truncated"]`` is ``truncated and not
  terminated`` (SB3's on-policy and off-policy learners bootstrap through it), and the ended
  episode's own infos (``final_info``: ``success``, ``score``...) are merged into ``infos[i]``.
* Gymnasium's batched info dict (``key`` with its ``_key`` mask) becomes one dict per copy.
* ``action_masks()`` (``bool (N, n_actions)``, for sb3-contrib's ``MaskablePPO``) is the latest
  ``info["action_mask"]``, reachable as ``env_method("action_masks")`` as MaskablePPO calls it.
* ``seed(s)`` seeds the next ``reset`` with ``s`` (the vector env gives copy ``i`` ``s + i``).

The vector env must autoreset in ``AutoresetMode.SAME_STEP`` (SB3's semantics);
:func:`make_sb3_vec_env` makes one for any Gymnasium id that way (the batched engine through its
``autoreset_mode`` argument, any other id through ``SyncVectorEnv``'s ``vector_kwargs``).
Requires ``stable-baselines3`` (the ``bench``/``test`` extras).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from verigym.core import ACTION_MASK

__all__ = ["SB3VecEnv", "make_sb3_vec_env"]


def _unbatch_infos(infos: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Gymnasium's ``{key: (N,...), "_key": bool (N,)}`` as ``n`` dicts (nested dicts too)."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in infos.items():
        if key.startswith("_") and key[1:] in infos:
            continue
        mask = infos.get("_" + key)
        if isinstance(value, dict):
            for i, sub in enumerate(_unbatch_infos(value, n)):
                if mask is None or mask[i]:
                    out[i][key] = sub
            continue
        for i in range(n):
            if mask is None or mask[i]:
                out[i][key] = value[i]
    return out


class SB3VecEnv(VecEnv):
    """A Gymnasium ``VectorEnv`` with SB3's ``VecEnv`` interface (see the module doc).

    Args:
        envs: a ``gymnasium.vector.VectorEnv`` whose ``metadata["autoreset_mode"]`` is
            ``AutoresetMode.SAME_STEP``; the bridge closes it on ``close()``.

    Raises:
        TypeError: ``envs`` is not a ``VectorEnv``.
        ValueError: it autoresets in another mode.
    """

    def __init__(self, envs: VectorEnv) -> None:
        if not isinstance(envs, VectorEnv):
            raise TypeError(f"SB3VecEnv wraps a gymnasium VectorEnv, got {type(envs).__name__}")
        mode = envs.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"SB3VecEnv needs autoreset_mode=AutoresetMode.SAME_STEP (SB3's semantics), got "
                f"{mode!r}; make_sb3_vec_env(env_id, n) makes such a vector env for any id"
            )
        self.envs = envs
        self._actions: np.ndarray | None = None
        self._masks: np.ndarray | None = None
        super().__init__(envs.num_envs, envs.single_observation_space, envs.single_action_space)

    # -- SB3's VecEnv -------------------------------------------------------------------------
    def reset(self) -> Any:
        """Reset every copy; seeds from :meth:`seed` apply once. Returns the batched observation."""
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        options = self._options[0] or None
        obs, infos = self.envs.reset(seed=seeds, options=options)
        self._reset_seeds()
        self._reset_options()
        self._note_masks(infos)
        self.reset_infos = _unbatch_infos(infos, self.num_envs)
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """One step: ``(obs, rewards float32 (N,), dones bool (N,), infos list of N dicts)``."""
        obs, rewards, terminated, truncated, infos = self.envs.step(self._actions)
        dones = np.logical_or(terminated, truncated)
        self._note_masks(infos)
        final_obs = infos.pop("final_obs", None)
        final_mask = infos.pop("_final_obs", None)
        final_info = infos.pop("final_info", None)
        infos.pop("_final_info", None)
        per_env = _unbatch_infos(infos, self.num_envs)
        ended = _unbatch_infos(final_info, self.num_envs) if final_info else None
        for i in np.flatnonzero(dones).tolist():
            info = per_env[i]
            if ended is not None:
                info.update(ended[i])
            if final_obs is not None and final_mask is not None and final_mask[i]:
                info["terminal_observation"] = _index(final_obs, i)
            info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return obs, np.asarray(rewards, dtype=np.float32), dones, per_env

    def close(self) -> None:
        self.envs.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """``attr_name`` of each copy: ``action_masks`` (a bound method) and ``render_mode`` from
        the bridge, others through the vector env's ``get_attr`` (Sync/Async) or its own attribute.

        Raises:
            AttributeError: no such attribute (SB3's ``has_attr`` relies on it).
        """
        which = self._get_indices(indices)
        if attr_name == "action_masks":
            if not self._has_masks():
                raise AttributeError("this vector env reports no info['action_mask']")
            return [self._mask_of(i) for i in which]
        if attr_name == "render_mode":
            return [getattr(self.envs, "render_mode", None) for _ in which]
        if hasattr(self.envs, "get_attr"):
            try:
                values = self.envs.get_attr(attr_name)
            except AttributeError:
                values = None
            if values is not None and len(values) == self.num_envs:
                return [values[i] for i in which]
        value = getattr(self.envs, attr_name)
        return [value for _ in which]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Sets ``attr_name`` through the vector env's ``set_attr`` (every copy).

        Raises:
            NotImplementedError: the vector env has no ``set_attr``.
        """
        if not hasattr(self.envs, "set_attr"):
            raise NotImplementedError(f"{type(self.envs).__name__} has no set_attr")
        self.envs.set_attr(attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """``method_name(*args, **kwargs)`` of each copy; ``action_masks`` from the bridge."""
        methods = self.get_attr(method_name, indices)
        return [method(*method_args, **method_kwargs) for method in methods]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        """False for every copy (a vector env's copies are not SB3-wrapped; use ``VecMonitor``)."""
        return [False for _ in self._get_indices(indices)]

    # -- action masks -------------------------------------------------------------------------
    def action_masks(self) -> np.ndarray:
        """The copies' valid actions, ``bool (N, n_actions)``, from the latest ``info["action_mask"]``.

        Raises:
            AttributeError: the vector env reports no action mask.
        """
        if not self._has_masks():
            raise AttributeError("this vector env reports no info['action_mask']")
        return self._masks.copy()

    def _has_masks(self) -> bool:
        return self._masks is not None

    def _mask_of(self, i: int) -> Any:
        return lambda: self._masks[i].copy()

    def _note_masks(self, infos: dict[str, Any]) -> None:
        masks = infos.get(ACTION_MASK)
        if masks is not None:
            self._masks = np.asarray(masks).astype(bool)


def _index(batch: Any, i: int) -> Any:
    """Copy ``i`` of a batched observation (an array, a tuple of strings, or a dict of those)."""
    if isinstance(batch, dict):
        return {k: _index(v, i) for k, v in batch.items()}
    return batch[i]


def make_sb3_vec_env(
    env_id: str,
    n_envs: int,
    *,
    seed: int | None = None,
    vectorization_mode: str | None = None,
    **kwargs: Any,
) -> SB3VecEnv:
    """``n_envs`` copies of ``env_id`` as an SB3 ``VecEnv`` autoresetting in ``SAME_STEP``.

    Args:
        env_id: a Gymnasium id (verigym's or any other).
        n_envs: number of copies (>= 1).
        seed: seeds the first ``reset`` (copy ``i`` gets ``seed + i``); ``None``: unseeded.
        vectorization_mode: ``gymnasium.make_vec``'s; ``None`` picks the id's natively batched
            engine when it has one (``"vector_entry_point"``), else ``"sync"``.
        **kwargs: the env's constructor arguments.

    Raises:
        ValueError: ``n_envs`` < 1; Gymnasium's errors for an unknown id or bad kwargs.
    """
    if not isinstance(n_envs, int) or n_envs < 1:
        raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
    spec = gym.spec(env_id)
    if vectorization_mode is None:
        vectorization_mode = "vector_entry_point" if spec.vector_entry_point else "sync"
    if vectorization_mode == "vector_entry_point":
        envs = gym.make_vec(
            env_id,
            n_envs,
            vectorization_mode=vectorization_mode,
            autoreset_mode=AutoresetMode.SAME_STEP,
            **kwargs,
        )
    else:
        envs = gym.make_vec(
            env_id,
            n_envs,
            vectorization_mode=vectorization_mode,
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
            **kwargs,
        )
    venv = SB3VecEnv(envs)
    if seed is not None:
        venv.seed(seed)
    return venv
