"""The classic agents' defaults are their named source's (issue 41 item 4).

PPO's, DQN's and SAC's config docstrings (and docs/agents.md's table) say their defaults are
Stable-Baselines3's, with named exceptions. Each default is checked against the keyword defaults of
the installed SB3's own constructor, read from its source file (no import: importing SB3 imports
torch, seconds under load).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from verigym.agents.configs import DQNConfig, PPOConfig, SACConfig

# verigym field -> SB3 keyword (None: the same name)
SB3_NAMES = {
    PPOConfig: {
        "learning_rate": None,
        "batch_size": None,
        "num_epochs": "n_epochs",
        "gamma": None,
        "gae_lambda": None,
        "clip_coef": "clip_range",
        "norm_adv": "normalize_advantage",
        "ent_coef": None,
        "vf_coef": None,
        "max_grad_norm": None,
        "target_kl": None,
    },
    DQNConfig: {
        name: None
        for name in (
            "learning_rate",
            "buffer_size",
            "learning_starts",
            "batch_size",
            "tau",
            "gamma",
            "train_freq",
            "gradient_steps",
            "target_update_interval",
            "exploration_fraction",
            "exploration_initial_eps",
            "exploration_final_eps",
            "max_grad_norm",
        )
    },
    SACConfig: {
        name: None
        for name in (
            "learning_rate",
            "buffer_size",
            "learning_starts",
            "batch_size",
            "tau",
            "gamma",
            "train_freq",
            "gradient_steps",
        )
    },
}
SB3_CLASSES = {PPOConfig: ("ppo", "PPO"), DQNConfig: ("dqn", "DQN"), SACConfig: ("sac", "SAC")}


def sb3_defaults(package: str, name: str) -> dict[str, object]:
    """Keyword defaults of ``stable_baselines3.<package>.<name>.__init__``, from its source."""
    spec = importlib.util.find_spec("stable_baselines3")  # the top level only: nothing imported
    if spec is None or spec.origin is None:
        pytest.skip("stable-baselines3 is not installed (the bench extra)")
    tree = ast.parse((Path(spec.origin).parent / package / f"{package}.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    args = init.args
    named = [a.arg for a in args.args][len(args.args) - len(args.defaults) :]
    defaults = dict(zip(named, args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    return {key: ast.literal_eval(node) for key, node in defaults.items()}


@pytest.mark.parametrize("config_class", list(SB3_NAMES), ids=lambda c: c.__name__)
def test_defaults_are_stable_baselines3s(config_class):
    theirs = sb3_defaults(*SB3_CLASSES[config_class])
    ours = config_class()
    assert "Stable-Baselines3" in (config_class.__doc__ or "")
    for field, sb3_name in SB3_NAMES[config_class].items():
        assert getattr(ours, field) == theirs[sb3_name or field], field


def test_the_named_exceptions_are_the_only_ones():
    """The exceptions the docstrings name: PPO's rollout (8 x 128, SB3 1 x 2048), DQN's double-Q
    targets (SB3's DQN has none), SAC's automatic temperature and target entropy (None is SB3's
    "auto", starting at 1.0 as SB3's "auto" does)."""
    ppo = sb3_defaults("ppo", "PPO")
    assert ppo["n_steps"] == 2048 and (PPOConfig.num_envs, PPOConfig.num_steps) == (8, 128)
    assert "8 envs x 128" in (PPOConfig.__doc__ or "")
    assert "double_q" in (DQNConfig.__doc__ or "") and DQNConfig.double_q
    sac = sb3_defaults("sac", "SAC")
    assert sac["ent_coef"] == sac["target_entropy"] == "auto"
    assert SACConfig.ent_coef is None and SACConfig.target_entropy is None
    assert SACConfig.ent_coef_init == 1.0
