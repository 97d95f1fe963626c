"""Checkpoint specs' ``?deterministic=false`` option (issue 39): allow-listed, hashed apart from the
greedy row, and sampled play that replays with the same episode seed."""

from __future__ import annotations

import gymnasium as gym
import pytest

from verigym import agents
from verigym.leaderboards.agent_spec import SampledActions, parse_agent_spec
from verigym.leaderboards.episode import run_episode


class _Actions(gym.Wrapper):
    """Records the actions an episode took."""

    def reset(self, **kwargs):
        self.actions = []
        return self.env.reset(**kwargs)

    def step(self, action):
        self.actions.append(int(action))
        return self.env.step(action)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    env = gym.make("verigym/Treasure-7x7-v0")
    agents.make("ppo", env, seed=0).save(root / "grid")
    return root


@pytest.mark.parametrize(
    "query",
    [
        "deterministic=False",
        "deterministic=0",
        "deterministic=",
        "deterministic",
        "temperature=0.5",
        "deterministic=false&deterministic=true",
        "deterministic=false&",
    ],
)
def test_bad_checkpoint_options_are_refused(checkpoint, query):
    with pytest.raises(ValueError, match="agent spec"):
        parse_agent_spec(f"ppo:{checkpoint}?{query}")


def test_option_is_parsed_and_hashed_apart(checkpoint):
    greedy = parse_agent_spec(f"ppo:{checkpoint}")
    sampled = parse_agent_spec(f"ppo:{checkpoint}?deterministic=false&name=PPO (sampled)")
    explicit = parse_agent_spec(f"ppo:{checkpoint}?deterministic=true")
    assert greedy.deterministic and explicit.deterministic and not sampled.deterministic
    assert sampled.target == greedy.target == str(checkpoint)
    assert sampled.display_name == "PPO (sampled)"
    assert len({greedy.config_hash(), sampled.config_hash(), explicit.config_hash()}) == 3


def test_sampled_play_replays_with_the_same_seed(checkpoint):
    env = _Actions(gym.make("verigym/Treasure-7x7-v0"))
    sampled = parse_agent_spec(f"ppo:{checkpoint}?deterministic=false").build(env)
    greedy = parse_agent_spec(f"ppo:{checkpoint}").build(env)
    assert isinstance(sampled, SampledActions) and not isinstance(greedy, SampledActions)

    def actions(agent, seed):
        assert run_episode(agent, env, seed)["status"] == "ok"
        return list(env.actions)

    first = actions(sampled, 3)
    assert actions(sampled, 7) != first  # another seed, other samples
    assert actions(sampled, 3) == first  # the same seed replays the episode
    assert actions(greedy, 3) != first  # the greedy row is another row
    env.close()
