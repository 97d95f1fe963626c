"""Networks shared by the learners: orthogonal init, MLPs, the observation encoder, ensembles.

* :func:`mlp` -- ``Linear``/activation stacks with orthogonal init (Engstrom et al. 2020,
  "Implementation Matters in Deep RL", the PPO details).
* :class:`ObservationEncoder` -- features from an :class:`~verigym.agents.common.spaces.ObservationBatcher`
  batch: vectors pass through flat (like Stable-Baselines3's ``FlattenExtractor``), discrete parts
  are one-hot, symbolic grids get a cell embedding and a small CNN (as MiniGrid's baselines;
  ``grid="cnn"``) or, with ``grid="mlp"``, their flattened one-hot cells through one linear layer
  (the flat-grid MLP input of Stable-Baselines3's ``MlpPolicy`` with MiniGrid's flat wrappers,
  one-hot instead of raw codes), images a Nature-DQN style CNN, text its hashed features; parts
  are concatenated.
* :class:`EnsembleMLP` -- ``k`` independent MLPs evaluated in one batched matmul (SAC's twin critics).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from verigym.agents.common.spaces import Part

__all__ = [
    "ACTIVATIONS",
    "GRID_ENCODERS",
    "EnsembleMLP",
    "ObservationEncoder",
    "adam",
    "layer_init",
    "mlp",
    "to_tensors",
]

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
}


def layer_init(
    layer: nn.Linear | nn.Conv2d, gain: float = math.sqrt(2), bias: float = 0.0
) -> nn.Module:
    """Orthogonal weights with ``gain``, constant bias; returns the layer."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    out_dim: int | None,
    activation: str = "tanh",
    *,
    out_gain: float = 1.0,
    init: bool = True,
) -> nn.Sequential:
    """An MLP ``in_dim -> hidden... -> out_dim`` (no output layer when ``out_dim`` is None).

    Args:
        activation: a key of :data:`ACTIVATIONS`.
        out_gain: orthogonal gain of the output layer (0.01 for policy logits, 1 for values).
        init: orthogonal init; False keeps PyTorch's default (as SB3's off-policy agents).
    """
    layers: list[nn.Module] = []
    width = in_dim
    for h in hidden:
        linear = nn.Linear(width, h)
        layers += [layer_init(linear) if init else linear, ACTIVATIONS[activation]()]
        width = h
    if out_dim is not None:
        linear = nn.Linear(width, out_dim)
        layers.append(layer_init(linear, out_gain) if init else linear)
    return nn.Sequential(*layers)


def adam(params: Any, lr: float, eps: float = 1e-8) -> torch.optim.Adam:
    """Adam with the fused kernel (one kernel for all parameters, about 3x faster on small nets)."""
    return torch.optim.Adam(params, lr=lr, eps=eps, fused=True)


def to_tensors(batch: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """numpy batch -> tensors on ``device`` (no copy on CPU)."""
    return {k: torch.as_tensor(v, device=device) for k, v in batch.items()}


class _GridEncoder(nn.Module):
    """Cell embedding (per channel value) + two 2x2 convolutions + flatten, for small symbolic grids."""

    def __init__(self, part: Part, embed_dim: int = 8):
        super().__init__()
        height, width, channels = part.shape
        self.num_values = part.n[0]
        self.embed = nn.Embedding(self.num_values * channels, embed_dim)
        self.register_buffer("offsets", torch.arange(channels) * self.num_values, persistent=False)
        self.conv = nn.Sequential(
            layer_init(nn.Conv2d(embed_dim * channels, 32, 2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 2)),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.out_dim = 64 * max(height - 2, 1) * max(width - 2, 1)
        if height < 3 or width < 3:
            raise ValueError(f"grid observations must be at least 3x3, got {part.shape}")

    def forward(self, grid: torch.Tensor) -> torch.Tensor:
        n, h, w, c = grid.shape
        x = self.embed(grid.clamp(0, self.num_values - 1) + self.offsets)  # (N, H, W, C, E)
        return self.conv(x.reshape(n, h, w, -1).permute(0, 3, 1, 2))


class _FlatGridEncoder(nn.Module):
    """The grid flattened to one-hot cells times one linear layer: ``(N, H, W, C)`` integers ->
    ``float32 (N, out_dim)``.

    The same map as ``nn.Linear(H*W*C*num_values, out_dim)`` on the one-hot vector, computed as
    a sum of ``H*W*C`` weight rows (``nn.EmbeddingBag``), so the one-hot vector is never built.
    Weights are initialized as that linear layer with orthogonal init and gain sqrt(2).
    """

    def __init__(self, part: Part, out_dim: int = 64):
        super().__init__()
        cells = int(np.prod(part.shape))
        self.num_values = part.n[0]
        self.out_dim = out_dim
        self.embed = nn.EmbeddingBag(cells * self.num_values, out_dim, mode="sum")
        weight = torch.empty(out_dim, cells * self.num_values)
        nn.init.orthogonal_(weight, math.sqrt(2))
        with torch.no_grad():
            self.embed.weight.copy_(weight.T)
        self.bias = nn.Parameter(torch.zeros(out_dim))
        self.register_buffer("offsets", torch.arange(cells) * self.num_values, persistent=False)

    def forward(self, grid: torch.Tensor) -> torch.Tensor:
        flat = grid.reshape(len(grid), -1).clamp(0, self.num_values - 1) + self.offsets
        return self.embed(flat) + self.bias


GRID_ENCODERS = ("cnn", "mlp")
"""The encoders of symbolic grid parts: ``cnn`` (cell embedding + two 2x2 convolutions) and ``mlp``
(flattened one-hot cells, one linear layer)."""


class _ImageEncoder(nn.Module):
    """Nature-DQN CNN (Mnih et al. 2015) on ``(N, C, H, W)`` floats in [0, 1]."""

    def __init__(self, part: Part):
        super().__init__()
        h, w, c = part.shape
        self.conv = nn.Sequential(
            layer_init(nn.Conv2d(c, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            self.out_dim = int(self.conv(torch.zeros(1, c, h, w)).shape[1])

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.conv(image)


class ObservationEncoder(nn.Module):
    """Features ``float32 (N, out_dim)`` from a batch ``{part key: tensor}``; see the module doc.

    Args:
        parts: the observation's parts (:attr:`ObservationBatcher.parts`).
        grid: the encoder of grid parts, one of :data:`GRID_ENCODERS`.

    Raises:
        ValueError: an unknown ``grid`` encoder, or a grid smaller than 3x3 for ``cnn``.
    """

    def __init__(self, parts: Sequence[Part], grid: str = "cnn"):
        super().__init__()
        if grid not in GRID_ENCODERS:
            raise ValueError(f"grid encoder must be one of {GRID_ENCODERS}, got {grid!r}")
        self.parts = tuple(parts)
        self.encoders = nn.ModuleDict()
        self.out_dim = 0
        for part in self.parts:
            name = part.key or "obs"
            if part.kind in ("vector", "text"):
                self.out_dim += part.size
            elif part.kind == "discrete":
                self.out_dim += part.n[0]
            elif part.kind == "multi":
                self.out_dim += sum(part.n)
            elif part.kind == "grid":
                self.encoders[name] = (
                    _GridEncoder(part) if grid == "cnn" else _FlatGridEncoder(part)
                )
                self.out_dim += self.encoders[name].out_dim
            elif part.kind == "image":
                self.encoders[name] = _ImageEncoder(part)
                self.out_dim += self.encoders[name].out_dim
            else:  # pragma: no cover - spaces.py only makes the kinds above
                raise ValueError(f"unknown part kind {part.kind!r}")

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        features = []
        for part in self.parts:
            x = batch[part.key]
            if part.kind in ("vector", "text"):
                features.append(x.float())
            elif part.kind == "discrete":
                features.append(nn.functional.one_hot(x.long(), part.n[0]).float())
            elif part.kind == "multi":
                features.append(
                    torch.cat(
                        [
                            nn.functional.one_hot(x[:, i].long(), k).float()
                            for i, k in enumerate(part.n)
                        ],
                        dim=1,
                    )
                )
            else:
                features.append(self.encoders[part.key or "obs"](x))
        return features[0] if len(features) == 1 else torch.cat(features, dim=1)


class EnsembleMLP(nn.Module):
    """``k`` independent MLPs ``in_dim -> hidden -> out_dim`` computed together with ``baddbmm``.

    ``forward(x)`` takes ``(N, in_dim)`` (shared input) and returns ``(k, N, out_dim)``. Init as
    ``nn.Linear`` (uniform, fan-in), each member independently.
    """

    def __init__(
        self, k: int, in_dim: int, hidden: Sequence[int], out_dim: int, activation: str = "relu"
    ):
        super().__init__()
        self.k = k
        sizes = [in_dim, *hidden, out_dim]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1.0 / math.sqrt(fan_in)
            self.weights.append(
                nn.Parameter(torch.empty(k, fan_in, fan_out).uniform_(-bound, bound))
            )
            self.biases.append(nn.Parameter(torch.empty(k, 1, fan_out).uniform_(-bound, bound)))
        self.activation = ACTIVATIONS[activation]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.unsqueeze(0).expand(self.k, *x.shape) if x.dim() == 2 else x
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.baddbmm(b, h, w)
            if i < last:
                h = self.activation(h)
        return h
