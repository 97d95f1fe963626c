"""PPO's grid encoders (issue 32): the flat one-hot MLP encoder (the default) beside the CNN, and
checkpoints saved before the option (CNN weights, no ``encoder`` key) loading as CNN."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from gymnasium import spaces

import verigym  # noqa: F401
import verigym.agents as agents
from verigym.agents.common.networks import GRID_ENCODERS, ObservationEncoder
from verigym.agents.common.spaces import ObservationBatcher
from verigym.agents.ppo import PPOConfig

GRID = spaces.Box(0, 14, (7, 7, 3), np.uint8)


def _grid_batch(n: int, seed: int = 0) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(seed)
    obs = rng.integers(0, 15, size=(n, 7, 7, 3), dtype=np.uint8)
    return {k: torch.as_tensor(v) for k, v in ObservationBatcher(GRID)(list(obs)).items()}


@pytest.mark.parametrize("grid", GRID_ENCODERS)
def test_grid_encoders_shapes_and_dtypes(grid):
    encoder = ObservationEncoder(ObservationBatcher(GRID).parts, grid=grid)
    out = encoder(_grid_batch(5))
    assert out.shape == (5, encoder.out_dim) and out.dtype == torch.float32
    assert torch.isfinite(out).all()
    out.sum().backward()  # trainable end to end
    assert all(p.grad is not None for p in encoder.parameters())


def test_mlp_encoder_is_a_linear_layer_on_the_one_hot_grid():
    encoder = ObservationEncoder(ObservationBatcher(GRID).parts, grid="mlp")
    flat = encoder.encoders["obs"]
    batch = _grid_batch(4, seed=1)
    one_hot = torch.nn.functional.one_hot(batch[""].reshape(4, -1), 15).reshape(4, -1).float()
    expected = one_hot @ flat.embed.weight + flat.bias
    assert torch.allclose(encoder(batch), expected, atol=1e-5)
    assert encoder.out_dim == 64
    # a value past the space's high is clamped to the last category, never an index error
    big = {"": batch[""].clone().fill_(99)}
    top = {"": batch[""].clone().fill_(14)}
    assert torch.equal(encoder(big), encoder(top))


def test_encoder_option_is_validated_and_defaults_to_mlp():
    with pytest.raises(ValueError, match="grid encoder"):
        ObservationEncoder(ObservationBatcher(GRID).parts, grid="transformer")
    with pytest.raises(ValueError, match="encoder"):
        PPOConfig(encoder="transformer")
    with pytest.raises(ValueError, match="encoder"):
        PPOConfig(encoder="auto")  # the default is stated plainly, no alias
    agent = agents.make("ppo", "verigym/DoorKey-5x5-v0", num_envs=2, num_steps=8)
    assert agent.config.encoder == PPOConfig().encoder == "mlp"
    cnn = agents.make("ppo", "verigym/DoorKey-5x5-v0", encoder="cnn")
    mlp = agents.make("ppo", "verigym/DoorKey-5x5-v0", encoder="mlp")
    assert cnn.num_parameters() != mlp.num_parameters()
    # vector observations have no grid part: the option changes nothing
    a = agents.make("ppo", "CartPole-v1", encoder="cnn", seed=3)
    b = agents.make("ppo", "CartPole-v1", encoder="mlp", seed=3)
    assert a.num_parameters() == b.num_parameters()


@pytest.mark.parametrize("encoder", GRID_ENCODERS)
def test_save_load_keeps_the_encoder(encoder, tmp_path):
    agent = agents.make("ppo", "verigym/DoorKey-5x5-v0", encoder=encoder, num_envs=2, num_steps=8)
    agent.learn("verigym/DoorKey-5x5-v0", 16)
    agent.save(tmp_path / "a")
    obs = np.random.default_rng(0).integers(0, 15, (6, 7, 7, 3), dtype=np.uint8)
    loaded = agents.load("ppo", tmp_path / "a")
    assert loaded.config.encoder == encoder
    assert np.array_equal(loaded.act(obs, deterministic=True), agent.act(obs, deterministic=True))


def test_checkpoint_without_the_encoder_key_loads_its_cnn(tmp_path):
    """Checkpoints saved before the option hold CNN weights whatever the default is today."""
    agent = agents.make("ppo", "verigym/DoorKey-5x5-v0", encoder="cnn", num_envs=2, num_steps=8)
    agent.save(tmp_path / "old")
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    del config["encoder"]
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    loaded = agents.load("ppo", tmp_path / "old")
    assert loaded.config.encoder == "cnn"
    obs = np.random.default_rng(1).integers(0, 15, (6, 7, 7, 3), dtype=np.uint8)
    assert np.array_equal(loaded.act(obs, deterministic=True), agent.act(obs, deterministic=True))
