"""verigym.agents -- agents that plug into any verigym env (docs/design.md section 4).

``verigym.agents.make(name, env, **config)`` builds a registered agent; ``AGENTS`` lists them.
Algorithms live one per module (``ppo.py``, ``sac.py``, ...), shared pure helpers in ``common/``.
"""

from verigym.agents.base import AGENTS, Agent, Learner, agent_class, load, make

__all__ = ["AGENTS", "Agent", "Learner", "agent_class", "load", "make"]
