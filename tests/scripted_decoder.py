"""A model-server test double at the decoding step: :class:`ScriptedDecoder` answers with a fixed
text, or lets the real model decode, as its policy's attributes say."""

from __future__ import annotations

import time
from collections.abc import Sequence

from verigym.agents.llm.decoding import Decoder
from verigym.agents.llm.policy import Generation


class ScriptedDecoder(Decoder):
    """The policy's :class:`Decoder`, scripted through the policy's attributes (a policy whose
    ``decoder()`` returns one is scripted in ``generate`` and in the model server alike):

    - ``reply`` (str or None): rows added while it is set end at the next step with that text
      (``finish_reason`` ``"stop"``); None: the model decodes them.
    - ``delay`` (seconds): each step first sleeps that long.
    - ``hold`` (``threading.Event`` or None): ``add`` sets ``started`` and waits for it (30 s at most).

    It records on the policy ``seen`` (the prompts last added) and ``generated`` (rows added so far).
    """

    def __init__(self, policy) -> None:
        super().__init__(policy)
        self.scripted: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return super().__len__() + len(self.scripted)

    def add(self, prompts: Sequence[Sequence[int]], **options) -> list[int]:
        policy = self.policy
        policy.seen = [list(p) for p in prompts]
        policy.generated = getattr(policy, "generated", 0) + len(prompts)
        hold = getattr(policy, "hold", None)
        if hold is not None:
            policy.started.set()
            hold.wait(30)
        reply = getattr(policy, "reply", None)
        if reply is None:
            return super().add(prompts, **options)
        keys = [next(self._keys) for _ in prompts]
        self.scripted.extend((key, reply) for key in keys)
        return keys

    def drop(self, keys: Sequence[int]) -> list[tuple[int, Generation]]:
        wanted = set(keys)
        dropped = [
            (key, Generation("", [], [], "length")) for key, _ in self.scripted if key in wanted
        ]
        self.scripted = [(key, reply) for key, reply in self.scripted if key not in wanted]
        return dropped + super().drop(keys)

    def step(self) -> list[tuple[int, Generation]]:
        time.sleep(getattr(self.policy, "delay", 0.0))
        done = []
        for key, reply in self.scripted:
            ids = self.policy.chat.encode(reply)
            done.append((key, Generation(reply, ids, [0.0] * len(ids), "stop")))
        self.scripted = []
        return done + (super().step() if self.rows else [])
