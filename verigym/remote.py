"""Environments served by ``verigym serve-env``, used as local ``gymnasium.Env`` objects.

The documented public name of the client; the code lives in :mod:`verigym.serve.client`, next to
the server it talks to.

Example::

    import verigym.remote

    env = verigym.remote.make("verigym/GuessNumber-v0", url="http://127.0.0.1:8000")
    observation, info = env.reset(seed=0)
"""

from __future__ import annotations

from verigym.serve.client import (
    AsyncRemoteEnv,
    RemoteEnv,
    RemoteEnvError,
    RemoteTextEnv,
    make,
    make_async,
)

__all__ = ["AsyncRemoteEnv", "RemoteEnv", "RemoteEnvError", "RemoteTextEnv", "make", "make_async"]
