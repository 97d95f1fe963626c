"""Action distributions with explicit ``torch.Generator`` sampling, so agents are reproducible.

* :class:`Categorical` -- discrete actions, optional action mask (illegal logits set to the
  dtype's minimum), Gumbel-max sampling.
* :class:`MultiCategorical` -- ``MultiDiscrete`` actions: independent categoricals.
* :class:`DiagGaussian` -- continuous actions (PPO): state-dependent mean, state-independent
  log-std parameter.
* :func:`squashed_gaussian_sample` -- SAC's tanh-squashed Gaussian with the log-det correction
  (Haarnoja et al. 2018, appendix C).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["Categorical", "DiagGaussian", "MultiCategorical", "squashed_gaussian_sample"]

LOG_2PI = math.log(2 * math.pi)


def _gumbel_argmax(logits: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
    return torch.argmax(logits - torch.log(-torch.log(u.clamp_min(1e-20))), dim=-1)


class Categorical:
    """Categorical over the last axis of ``logits (N, n)``; ``mask (N, n)`` (nonzero = legal)."""

    def __init__(self, logits: torch.Tensor, mask: torch.Tensor | None = None):
        if mask is not None:
            legal = mask.bool()
            legal = legal | ~legal.any(dim=-1, keepdim=True)  # an all-illegal row stays unmasked
            logits = logits.masked_fill(~legal, torch.finfo(logits.dtype).min)
        self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return _gumbel_argmax(self.logits, generator)

    def mode(self) -> torch.Tensor:
        return self.logits.argmax(dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return self.logits.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        probs = self.logits.exp()
        return -(probs * self.logits.clamp_min(torch.finfo(self.logits.dtype).min)).sum(-1)


class MultiCategorical:
    """Independent categoricals over splits of ``logits (N, sum(nvec))``; actions ``(N, len(nvec))``."""

    def __init__(self, logits: torch.Tensor, nvec: Sequence[int], mask: torch.Tensor | None = None):
        masks = torch.split(mask, list(nvec), dim=-1) if mask is not None else [None] * len(nvec)
        self.dists = [
            Categorical(lg, m) for lg, m in zip(torch.split(logits, list(nvec), dim=-1), masks)
        ]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.stack([d.sample(generator) for d in self.dists], dim=-1)

    def mode(self) -> torch.Tensor:
        return torch.stack([d.mode() for d in self.dists], dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return sum(d.log_prob(actions[..., i]) for i, d in enumerate(self.dists))

    def entropy(self) -> torch.Tensor:
        return sum(d.entropy() for d in self.dists)


class DiagGaussian:
    """Diagonal Gaussian with ``mean (N, d)`` and ``log_std (d,)`` or ``(N, d)``."""

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor):
        self.mean = mean
        self.log_std = log_std.expand_as(mean)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        noise = torch.randn(
            self.mean.shape, generator=generator, device=self.mean.device, dtype=self.mean.dtype
        )
        return self.mean + noise * self.log_std.exp()

    def mode(self) -> torch.Tensor:
        return self.mean

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - self.mean) * torch.exp(-self.log_std)
        return (-0.5 * z.pow(2) - self.log_std - 0.5 * LOG_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 * (1.0 + LOG_2PI)).sum(-1)


def squashed_gaussian_sample(
    mean: torch.Tensor, log_std: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterized sample ``tanh(mean + std * eps)`` in ``(-1, 1)`` and its log-probability ``(N,)``."""
    noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
    pre = mean + noise * log_std.exp()
    action = torch.tanh(pre)
    log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * LOG_2PI).sum(-1)
    # log(1 - tanh(x)^2) = 2 * (log 2 - x - softplus(-2x)), numerically stable
    log_prob = log_prob - (
        2.0 * (math.log(2.0) - pre - torch.nn.functional.softplus(-2.0 * pre))
    ).sum(-1)
    return action, log_prob
