"""Oracle demonstrations for the trained LLM row, one curriculum stage a call (scripts/train_llm_agent.sh).

    python scripts/llm_demos.py [--name-the-element] OUT.jsonl SPEC [SPEC ...]

Each SPEC is ``ENV_ID[?KEY=INT&...]:START:END``: the env (with integer kwargs such as a level or a
difficulty: ``verigym/Calculator-v0?difficulty=1``) played by its oracle through the text view on
training seeds ``START..END-1`` (:func:`verigym.leaderboards.demonstrations.play_demonstrations`).
Episodes whose task is an evaluation task of a shipped suite are left out by task content (the same
check as ``verigym export --format sft``, :class:`verigym.leaderboards.heldout.HeldOutTasks`: the
env with these kwargs, hashed after its reset), failed episodes too, and a record whose messages
equal an earlier one's (GuessNumber has 100 secrets: many seeds replay one game) is written once.
A record made with kwargs names them in ``env_kwargs``. Prints one line per SPEC: kept, left out.
``--name-the-element``: each ``click N`` or ``type N "text"`` reply names the element first
(:func:`name_the_element`).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_SPEC = re.compile(
    r"^(verigym/[A-Za-z0-9-]+)(?:\?([a-z][a-z_]*=-?\d+(?:&[a-z][a-z_]*=-?\d+)*))?:(\d+):(\d+)$"
)


def parse_spec(text: str) -> tuple[str, dict[str, int], range]:
    """``(env_id, kwargs, seeds)`` of one SPEC; ``ValueError`` if it does not match the grammar."""
    match = _SPEC.match(text)
    if not match:
        raise ValueError(f"bad SPEC {text!r}: ENV_ID[?KEY=INT&...]:START:END")
    env_id, query, start, end = match.groups()
    kwargs = {k: int(v) for k, v in (p.split("=") for p in query.split("&"))} if query else {}
    return env_id, kwargs, range(int(start), int(end))


_ELEMENT_ACTION = re.compile(r'(?:click|type) (\d+)(?: "(?:[^"\\]|\\.)*")?')
_ELEMENT = r'^\[{}\] ([a-z]+) ("(?:[^"\\]|\\.)*")'


def name_the_element(record: dict) -> dict:
    """The record with each ``click N`` or ``type N "text"`` reply preceded by a sentence naming the
    element it acts on, read from the element line ``[N] role "name"`` of the observation before it
    (the GUI text view): ``click 3`` becomes ``Button "Juniper" is [3].`` and ``click 3`` on the next line. The
    env reads the last command of a reply, so the reply plays as before; a model trained on it
    writes the name it was asked for before the id (SmolLM2-135M trained on the bare ``click N``
    replies answered one id whatever the button). Replies without an element line are kept as
    they are."""
    messages, last_user = [], ""
    for message in record["messages"]:
        content = message.get("content") or ""
        if message["role"] == "user":
            last_user = content
        elif message["role"] == "assistant" and (
            action := _ELEMENT_ACTION.fullmatch(content.strip())
        ):
            element = re.search(_ELEMENT.format(action.group(1)), last_user, re.MULTILINE)
            if element:
                role, name = element.groups()
                message = {
                    **message,
                    "content": f"{role.capitalize()} {name} is [{action.group(1)}].\n{content}",
                }
        messages.append(message)
    return {**record, "messages": messages}


def main(argv: list[str]) -> int:
    from verigym.leaderboards.demonstrations import play_demonstrations
    from verigym.leaderboards.episode import make_env
    from verigym.leaderboards.heldout import HeldOutTasks

    named = argv[:1] == ["--name-the-element"]
    argv = argv[1:] if named else argv
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, specs = Path(argv[0]), [parse_spec(s) for s in argv[1:]]
    held_out = HeldOutTasks()
    seen: set[str] = set()
    with out.open("w", encoding="utf-8") as f:
        for env_id, kwargs, seeds in specs:
            refused: list[str] = []
            dropped_before = sum(held_out.dropped.values())
            kept = duplicates = 0
            for record in play_demonstrations(
                [env_id],
                seeds,
                make_env=lambda i, kw=kwargs: make_env(i, dict(kw), True),
                refused=refused,
                held_out=held_out,
            ):
                key = json.dumps(record["messages"], sort_keys=True)
                if key in seen:
                    duplicates += 1
                    continue
                seen.add(key)
                if kwargs:
                    record["env_kwargs"] = kwargs
                if named:
                    record = name_the_element(record)
                f.write(json.dumps(record) + "\n")
                kept += 1
            evaluation = sum(held_out.dropped.values()) - dropped_before
            print(
                f"{env_id} {kwargs or ''} seeds {seeds.start}:{seeds.stop}: kept {kept}, "
                f"evaluation tasks {evaluation}, duplicates {duplicates}, "
                f"not solved/other {len(refused) - evaluation}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
