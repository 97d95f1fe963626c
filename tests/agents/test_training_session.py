"""The training session every torch learner's ``learn`` runs in: pinned torch threads, progress bar."""

from __future__ import annotations

import inspect

import pytest
import torch

import verigym.agents as agents
from verigym.agents.common.learner import (
    SMALL_NETWORK_PARAMETERS,
    choose_threads,
    flush_denormal,
    torch_threads,
)

CARTPOLE = "CartPole-v1"


@pytest.fixture
def two_threads():
    """torch at 2 intra-op threads during the test (the agents' conftest pins 1 for the session)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(previous)


def _threads_seen(agent, steps: int, **kwargs) -> list[int]:
    seen: list[int] = []
    agent.learn(
        CARTPOLE, steps, callbacks=[lambda m: seen.append(torch.get_num_threads())], **kwargs
    )
    return seen


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("ppo", {"num_envs": 2, "num_steps": 16, "num_epochs": 1, "log_interval": 1}),
        ("dqn", {"learning_starts": 10, "log_interval": 50}),
    ],
)
def test_learn_pins_one_thread_for_a_small_network_and_restores(two_threads, name, config):
    agent = agents.make(name, CARTPOLE, **config)
    assert agent.num_parameters() < SMALL_NETWORK_PARAMETERS
    seen = _threads_seen(agent, 200, progress=False)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 2


def test_torch_threads_option_wins_and_is_restored_after_an_error(two_threads):
    agent = agents.make(
        "ppo", CARTPOLE, num_envs=2, num_steps=16, num_epochs=1, log_interval=1, torch_threads=3
    )
    assert set(_threads_seen(agent, 64, progress=False)) == {3}
    assert torch.get_num_threads() == 2

    def fail(metrics):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        agent.learn(CARTPOLE, 64, callbacks=[fail], progress=False)
    assert torch.get_num_threads() == 2


def _subnormal_survives() -> bool:
    return bool((torch.tensor([1e-40]) * 1.0)[0] != 0)


@pytest.mark.skipif(not torch.set_flush_denormal(False), reason="this CPU cannot flush subnormals")
def test_learn_flushes_subnormals_on_the_cpu_and_restores_the_mode():
    """Adam's moments decaying into subnormals made the fused step 11x slower (learner.flush_denormal)."""
    agent = agents.make("dqn", CARTPOLE, learning_starts=10, log_interval=50)
    seen: list[bool] = []
    assert _subnormal_survives()
    agent.learn(
        CARTPOLE, 100, callbacks=[lambda m: seen.append(_subnormal_survives())], progress=False
    )
    assert seen and not any(seen)  # flushed while learning
    assert _subnormal_survives()  # torch's default mode is back
    torch.set_flush_denormal(True)
    try:  # a caller's own flushing is kept, also after an error inside
        with pytest.raises(RuntimeError, match="inside"), flush_denormal():
            raise RuntimeError("inside")
        assert not _subnormal_survives()
    finally:
        torch.set_flush_denormal(False)


def test_choose_threads_by_device_and_size():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert choose_threads(None, cpu, 10_000) == 1
    assert choose_threads(None, cpu, SMALL_NETWORK_PARAMETERS) is None  # big: torch's own setting
    assert choose_threads(None, cuda, 10 * SMALL_NETWORK_PARAMETERS) == 1
    assert choose_threads(4, cpu, 10) == 4
    previous = torch.get_num_threads()
    with torch_threads(None):
        assert torch.get_num_threads() == previous


def test_torch_threads_is_validated_and_saved(tmp_path):
    with pytest.raises(ValueError, match="torch_threads"):
        agents.make("ppo", CARTPOLE, torch_threads=0)
    with pytest.raises(TypeError, match="torch_threads"):
        agents.make("ppo", CARTPOLE, torch_threads=1.5)
    agent = agents.make("ppo", CARTPOLE, torch_threads=2)
    agent.save(tmp_path)
    assert agents.load("ppo", tmp_path).config.torch_threads == 2


def test_every_learner_takes_progress():
    for name in ("ppo", "sac", "dqn", "qlearning", "option-critic", "ippo"):
        cls = agents.agent_class(name)
        parameter = inspect.signature(cls.learn).parameters.get("progress")
        assert parameter is not None and parameter.default is None, name


def test_progress_bar_from_the_python_api(capsys):
    agent = agents.make("ppo", CARTPOLE, num_envs=2, num_steps=16, num_epochs=1, log_interval=1)
    agent.learn(CARTPOLE, 64, progress=True)
    agent.learn(CARTPOLE, 64, progress=True)  # the second call counts from its own start
    out = capsys.readouterr().out
    assert "ppo on CartPole-v1" in out and "steps/s" in out
    assert "64/64" in out and "128/64" not in out
    agent.learn(CARTPOLE, 32)  # auto: pytest's captured stdout is no terminal, so no bar
    assert "steps/s" not in capsys.readouterr().out
