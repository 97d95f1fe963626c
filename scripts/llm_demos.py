"""Oracle demonstrations for the trained LLM row, one curriculum stage a call (scripts/train_llm_agent.sh).

    python scripts/llm_demos.py [--name-the-element] [--show-work] OUT.jsonl SPEC [SPEC ...]

Each SPEC is ``ENV_ID[?KEY=INT&...]:START:END``: the env (with integer kwargs such as a level or a
difficulty: ``verigym/Calculator-v0?difficulty=1``) played by its oracle through the text view on
training seeds ``START..END-1`` (:func:`verigym.leaderboards.demonstrations.play_demonstrations`).
Episodes whose task is an evaluation task of a shipped suite are left out by task content (the same
check as ``verigym export --format sft``, :class:`verigym.leaderboards.heldout.HeldOutTasks`: the
env with these kwargs, hashed after its reset), failed episodes too, and a record whose messages
equal an earlier one's (GuessNumber has 100 secrets: many seeds replay one game) is written once.
A record made with kwargs names them in ``env_kwargs``. Prints one line per SPEC: kept, left out.
``--name-the-element``: each ``click N`` or ``type N "text"`` reply names the element first
(:func:`name_the_element`). ``--show-work``: each ``<answer>N</answer>`` reply to an arithmetic
question (``Calculate EXPR.``, RG-BasicArithmetic) reasons first, one operation at a time
(:func:`show_work`).
"""

from __future__ import annotations

import ast
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

    def rewrite(reply: str, observation: str) -> str:
        action = _ELEMENT_ACTION.fullmatch(reply.strip())
        element = action and re.search(_ELEMENT.format(action.group(1)), observation, re.MULTILINE)
        if not element:
            return reply
        role, name = element.groups()
        return f"{role.capitalize()} {name} is [{action.group(1)}].\n{reply}"

    return _rewrite_replies(record, rewrite)


def _rewrite_replies(record: dict, rewrite) -> dict:
    """The record with each assistant reply replaced by ``rewrite(reply, observation)``, the
    observation being the user message before it."""
    messages, last_user = [], ""
    for message in record["messages"]:
        content = message.get("content") or ""
        if message["role"] == "user":
            last_user = content
        elif message["role"] == "assistant":
            message = {**message, "content": rewrite(content, last_user)}
        messages.append(message)
    return {**record, "messages": messages}


_OPS = {ast.Add: ("+", 1), ast.Sub: ("-", 1), ast.Mult: ("*", 2), ast.FloorDiv: ("/", 2)}
_QUESTION = re.compile(r"Calculate (.+?)\.\s*$", re.MULTILINE)


def _render(node: ast.expr, outer: int = 0, right: bool = False) -> str:
    """An expression tree in reasoning-gym's spelling (``-( 3 - -1 )``, ``/`` for floor division):
    parentheses, with a space inside, where precedence needs them."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.UnaryOp):
        return f"-( {_render(node.operand)} )"
    symbol, level = _OPS[type(node.op)]
    text = f"{_render(node.left, level)} {symbol} {_render(node.right, level, True)}"
    return f"( {text} )" if level < outer or (right and level == outer) else text


def _reduce(node: ast.expr) -> ast.expr:
    """``node`` with its leftmost innermost operation (both operands numbers) computed."""
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.operand, ast.Constant):
            return ast.Constant(-node.operand.value)
        return ast.UnaryOp(node.op, _reduce(node.operand))
    if isinstance(node, ast.BinOp):
        if isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant):
            a, b = node.left.value, node.right.value
            op = type(node.op)
            value = (
                a + b
                if op is ast.Add
                else a - b
                if op is ast.Sub
                else a * b
                if op is ast.Mult
                else a // b
            )
            return ast.Constant(value)
        if not isinstance(node.left, ast.Constant):
            return ast.BinOp(_reduce(node.left), node.op, node.right)
        return ast.BinOp(node.left, node.op, _reduce(node.right))
    raise ValueError(f"not an arithmetic expression: {ast.dump(node)}")


def _parse(expression: str) -> ast.expr:
    """The tree of ``expression``, a minus sign on a number read as part of the number (``-8``),
    on anything else as unary minus."""

    def build(node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = build(node.operand)
            if isinstance(operand, ast.Constant) and isinstance(node.operand, ast.Constant):
                return ast.Constant(-operand.value)  # a negative number, not an operation
            return ast.UnaryOp(node.op, operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return ast.BinOp(build(node.left), node.op, build(node.right))
        raise ValueError(f"not an integer arithmetic expression: {expression!r}")

    return build(ast.parse(expression.replace("/", "//"), mode="eval").body)


def work_steps(expression: str) -> list[str]:
    """The reduction of ``expression`` (integers, ``+ - * /`` with ``/`` floor division, unary
    minus, parentheses) one operation at a time, in reasoning-gym's spelling, from the expression
    as posed to its value: ``-( 3 - -1 )`` gives ``["-( 3 - -1 )", "-( 4 )", "-4"]``.

    Raises:
        ValueError: anything else (a name, a call, a float, another operator).
        ZeroDivisionError: a division by zero.
    """
    tree = _parse(expression)
    steps = [" ".join(expression.split())]  # as posed; the steps drop needless parentheses
    while not isinstance(tree, ast.Constant):
        tree = _reduce(tree)
        steps.append(_render(tree))
    return steps


def show_work(record: dict) -> dict:
    """The record with each ``<answer>N</answer>`` reply to ``Calculate EXPR.`` preceded by its
    worked reduction in a think block: ``<think>9 + 7 = 16</think>`` then ``<answer>16</answer>``
    on the next line (:func:`work_steps`; the env reads the answer outside the think block). A
    135M model asked for the bare answer wrote ``<answer>5</answer>`` to ``9 + 7``, where the base
    model, writing ``9 + 7 = 16`` first, was right. A reply whose answer is not the reduction's
    value, or whose question does not parse, is kept as it is."""

    def rewrite(reply: str, observation: str) -> str:
        answer = re.fullmatch(r"<answer>(-?\d+)</answer>", reply.strip())
        question = answer and _QUESTION.search(observation)
        try:
            steps = work_steps(question.group(1)) if question else []
        except (ValueError, SyntaxError, ZeroDivisionError):
            return reply
        if not steps or steps[-1] != answer.group(1):
            return reply
        return f"<think>{' = '.join(steps)}</think>\n{reply.strip()}"

    return _rewrite_replies(record, rewrite)


def main(argv: list[str]) -> int:
    from verigym.leaderboards.demonstrations import play_demonstrations
    from verigym.leaderboards.episode import make_env
    from verigym.leaderboards.heldout import HeldOutTasks

    flags = {"--name-the-element", "--show-work"}
    given = set()
    while argv and argv[0] in flags:
        given.add(argv.pop(0))
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
                if "--name-the-element" in given:
                    record = name_the_element(record)
                if "--show-work" in given:
                    record = show_work(record)
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
