"""verigym's parallel games through SuperSuit's usual vector wrappers into SB3, as a new user runs them
(Pursuit and Spread as they are; Tag, whose tagged runners leave the game, through FixedAgents)."""

from __future__ import annotations

import numpy as np
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.checker_multiagent import check_multiagent_env
from verigym.core import EpisodeEndedError
from verigym.envs.multiagent.fixed_agents import FixedAgents
from verigym.envs.multiagent.tag import TagEnv
from verigym.registration import make, rows

PARALLEL_IDS = [r.id for r in rows("multiagent") if r.api == "parallel"]


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_sb3_ppo_over_supersuit_vector_envs(env_id):
    ss = pytest.importorskip("supersuit")
    from stable_baselines3 import PPO
    from stable_baselines3.common.utils import set_random_seed

    game = make(env_id)
    agents = len(game.possible_agents)
    if (
        env_id == "verigym/Tag-v0"
    ):  # tagged runners leave the game; SuperSuit needs a fixed agent set
        game = FixedAgents(game)
    vec = ss.pettingzoo_env_to_vec_env_v1(game)
    vec = ss.concat_vec_envs_v1(vec, 2, num_cpus=0, base_class="stable_baselines3")
    assert vec.num_envs == 2 * agents
    set_random_seed(0)  # not PPO(seed=...): SuperSuit's ConcatVecEnv has no seed(), which SB3 calls
    model = PPO("MlpPolicy", vec, n_steps=32, batch_size=64, n_epochs=1, device="cpu")
    model.learn(total_timesteps=32 * vec.num_envs * 2)
    actions, _ = model.predict(vec.reset(), deterministic=True)
    assert actions.shape[0] == vec.num_envs
    vec.close()


def _play(env, seed: int, rng_seed: int):
    """Random joint actions over every listed agent until the game is over; the per-step records."""
    rng = np.random.default_rng(rng_seed)
    env.reset(seed=seed)
    steps = []
    while env.agents:
        joint = {a: int(rng.integers(5)) for a in env.possible_agents}
        result = env.step({a: joint[a] for a in env.agents})
        steps.append(result)
    return steps


def test_fixed_agents_keeps_tagged_runners_until_the_end_with_the_same_rewards():
    everyone = sorted(TagEnv().possible_agents)

    def someone_out_early(seed: int) -> bool:
        return any(sorted(step[0]) != everyone for step in _play(TagEnv(), seed, seed)[:-1])

    seed = next(s for s in range(200) if someone_out_early(s))
    raw, fixed = _play(TagEnv(), seed, seed), _play(FixedAgents(TagEnv()), seed, seed)
    assert len(raw) == len(fixed)
    for raw_step, fixed_step in zip(raw, fixed):
        assert sorted(fixed_step[0]) == everyone  # every agent on every step
        assert fixed_step[1] == {
            a: raw_step[1].get(a, 0.0) for a in everyone
        }  # the game's own rewards
    for step in fixed[:-1]:
        assert not any(step[2].values()) and not any(step[3].values())
    last = fixed[-1]
    assert all(last[2][a] or last[3][a] for a in everyone)  # all done together at the end
    assert all(isinstance(last[4][a]["success"], bool) for a in everyone)  # each with its verdict
    env = FixedAgents(TagEnv())
    _play(env, seed, seed)
    with pytest.raises(EpisodeEndedError, match="reset"):
        env.step({a: 0 for a in env.possible_agents})


def test_fixed_agents_passes_the_multiagent_checker():
    check_multiagent_env(lambda: FixedAgents(TagEnv()), steps=150).raise_for_failures()
