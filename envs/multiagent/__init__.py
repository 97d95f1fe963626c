"""Multi-agent environments (family ``multiagent``), PettingZoo-native.

Turn-based games are ``AECEnv`` (legal moves in ``infos[agent]["action_mask"]``), simultaneous
games are ``ParallelEnv``; where one seat can play against built-in opponents a Gymnasium view
(:class:`verigym.envs.multiagent.versus.VersusEnv`) is registered too. Keep this module light: it
is imported by ``import verigym``.
"""
