"""Registry, configs, acting on single/batched observations, save/load, determinism (no learning)."""

from __future__ import annotations

import dataclasses
import importlib
import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import verigym
import verigym.agents as agents
from verigym.agents.common.config import field_docs
from verigym.agents.common.spaces import ObservationBatcher, space_from_json, space_to_json

CLASSIC = ["ppo", "sac", "dqn", "qlearning", "option-critic"]
ENV_FOR = {
    "ppo": "CartPole-v1",
    "sac": "Pendulum-v1",
    "dqn": "CartPole-v1",
    "qlearning": "FrozenLake-v1",
    "option-critic": "CartPole-v1",
}
SMALL = {
    "ppo": {"num_envs": 2, "num_steps": 16},
    "sac": {"learning_starts": 20, "batch_size": 16, "hidden_sizes": [16]},
    "dqn": {"learning_starts": 20, "batch_size": 16},
    "qlearning": {},
    "option-critic": {"num_envs": 2, "num_steps": 8},
}


@pytest.mark.parametrize("name", [*CLASSIC, "ippo"])
def test_registered_and_documented(name):
    cls = agents.agent_class(name)
    assert cls.name == name
    module_doc = importlib.import_module(cls.__module__).__doc__
    assert (
        cls.__doc__ and module_doc and " et al. " in module_doc + " " or "Watkins" in module_doc
    )  # cites the paper
    docs = field_docs(cls.config_class)
    missing = [f.name for f in dataclasses.fields(cls.config_class) if f.name not in docs]
    assert not missing, f"{name} config fields without a docstring: {missing}"


@pytest.mark.parametrize("name", [*CLASSIC, "ippo"])
def test_config_validation(name):
    cls = agents.agent_class(name).config_class
    with pytest.raises(TypeError, match="unknown"):
        cls.from_dict({"no_such_option": 1})
    with pytest.raises(TypeError):
        cls(seed=1.5)
    with pytest.raises(ValueError):
        cls(gamma=1.5)
    config = cls(seed=3)
    assert cls.from_dict(json.loads(config.to_json())) == config
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 4


def test_unknown_agent_lists_registered():
    with pytest.raises(KeyError, match="ppo"):
        agents.make("no-such-agent", "CartPole-v1")


@pytest.mark.parametrize("name", CLASSIC)
def test_act_single_and_batched_and_save_load(name, tmp_path):
    env = gym.make(ENV_FOR[name])
    agent = agents.make(name, env, seed=0, **SMALL[name])
    agent.learn(env, 64)
    obs, info = env.reset(seed=0)
    single = agent.act(obs, deterministic=True)
    assert env.action_space.contains(single)
    batch = np.stack([obs, env.observation_space.sample()]) if name != "qlearning" else [obs, 3]
    actions = agent.act(batch, deterministic=True)
    assert len(actions) == 2 and all(env.action_space.contains(a) for a in actions)
    agent.save(tmp_path / "agent")
    assert {p.name for p in (tmp_path / "agent").iterdir()} == {
        "config.json",
        "model.safetensors",
        "meta.json",
    }
    meta = json.loads((tmp_path / "agent" / "meta.json").read_text())
    assert meta["agent"] == name and meta["env_id"] == ENV_FOR[name]
    loaded = agents.load(name, tmp_path / "agent", device="cpu")
    rng = np.random.default_rng(1)
    for _ in range(20):
        o = env.observation_space.sample() if name != "qlearning" else int(rng.integers(16))
        if name == "option-critic":
            agent.reset()
            loaded.reset()
        np.testing.assert_array_equal(
            agent.act(o, deterministic=True), loaded.act(o, deterministic=True)
        )
    with pytest.raises(ValueError, match="holds a"):
        agents.load("ppo" if name != "ppo" else "dqn", tmp_path / "agent")


@pytest.mark.parametrize("name", ["ppo", "dqn", "sac"])
def test_same_seed_same_training(name):
    env_id = ENV_FOR[name]
    runs = []
    for _ in range(2):
        agent = agents.make(name, env_id, seed=7, **SMALL[name])
        agent.learn(env_id, 200)
        obs, _ = gym.make(env_id).reset(seed=0)
        runs.append([agent.act(obs) for _ in range(5)] + [agent.act(obs, deterministic=True)])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_action_mask_is_respected():
    env = gym.make("verigym/Treasure-7x7-v0")
    agent = agents.make("ppo", env, num_envs=1, num_steps=8)
    obs, info = env.reset(seed=0)
    mask = np.zeros(4, dtype=np.int8)
    mask[2] = 1
    assert all(agent.act(obs, {"action_mask": mask}) == 2 for _ in range(20))
    dqn = agents.make("dqn", env)
    dqn.epsilon = 1.0
    assert all(dqn.act(obs, {"action_mask": mask}) == 2 for _ in range(20))


def test_grid_and_dict_observations():
    space = spaces.Dict(
        {
            "image": spaces.Box(0, 10, (5, 5, 3), np.uint8),
            "direction": spaces.Discrete(4),
            "mission": verigym.UnicodeText(64),
        }
    )
    batcher = ObservationBatcher(space)
    assert {p.key: p.kind for p in batcher.parts} == {
        "image": "grid",
        "direction": "discrete",
        "mission": "text",
    }
    assert space_from_json(json.loads(json.dumps(space_to_json(space)))) == space
    assert ObservationBatcher(spaces.Discrete(3, start=5))([5, 7])[""].tolist() == [0, 2]

    class DictEnv(gym.Env):
        observation_space = space
        action_space = spaces.MultiDiscrete([3, 2])

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return {
                "image": np.zeros((5, 5, 3), np.uint8),
                "direction": 1,
                "mission": "go to the key",
            }, {}

        def step(self, action):
            return self.reset()[0], 0.0, True, False, {}

    env = DictEnv()
    agent = agents.make("ppo", env, num_envs=2, num_steps=4, batch_size=4)
    agent.learn(env, 8)
    assert env.action_space.contains(agent.act(env.reset()[0]))


def test_qlearning_hashes_text_observations():
    agent = agents.make("qlearning", _TextEnv())
    assert agent.state_index("abc") == agent.state_index("abc") != agent.state_index("abd")


class _TextEnv(gym.Env):
    observation_space = verigym.UnicodeText(32)
    action_space = spaces.Discrete(3)


def test_hindsight_relabelling_uses_future_achieved_goals():
    from verigym.agents.common.buffers import HindsightRelabeller

    def compute_reward(achieved, desired, info):
        return -(np.linalg.norm(achieved - desired, axis=-1) > 0.05).astype(np.float32)

    her = HindsightRelabeller(1, 4, compute_reward, np.random.default_rng(0))
    achieved = [np.array([float(t), 0.0]) for t in range(6)]
    for t in range(5):
        obs = {
            "observation": np.zeros(3),
            "achieved_goal": achieved[t],
            "desired_goal": np.array([9.0, 9.0]),
        }
        nxt = {
            "observation": np.zeros(3),
            "achieved_goal": achieved[t + 1],
            "desired_goal": np.array([9.0, 9.0]),
        }
        her.record(0, obs, np.zeros(2), nxt, False)
    out = her.finish(0)
    assert len(out) == 5 * 4
    for obs, _, reward, nxt, _ in out:
        t = int(obs["achieved_goal"][0])
        goal = obs["desired_goal"]
        assert goal[0] >= t + 1 and goal[1] == 0.0  # an achieved goal from later in the episode
        assert np.array_equal(nxt["desired_goal"], goal)
        assert reward == (0.0 if goal[0] == t + 1 else -1.0)
    assert her.finish(0) == []


def test_sac_her_needs_a_goal_env():
    agent = agents.make("sac", "Pendulum-v1", her_k=2)
    with pytest.raises(TypeError, match="goal-conditioned"):
        agent.learn("Pendulum-v1", 10)


def test_verigym_agents_are_entry_points():
    """verigym's own agents are found like a plugin's: through the verigym.agents entry points."""
    import importlib.metadata

    from verigym.agents.base import AGENT_GROUP, builtin_agents

    own = {
        point.name: point.value
        for point in importlib.metadata.entry_points(group=AGENT_GROUP)
        if point.dist is not None and point.dist.metadata["Name"] == "verigym"
    }
    assert {"random", "oracle", *CLASSIC, "ippo", "llm", "openai"} <= set(own)
    assert builtin_agents() == frozenset(own)
    assert {name: agents.AGENTS[name] for name in own} == own


def test_unknown_agent_suggests_close_names():
    with pytest.raises(KeyError, match=r"unknown agent 'ppoo' \(did you mean ppo"):
        agents.agent_class("ppoo")
