"""``verigym play ENV_ID``: play any env in the terminal through its text view.

The rules are printed once (not again inside the first observation, nor for later episodes); an
empty line costs no turn; arrow keys are moves in envs whose text view knows them (up/right/down/
left, or MiniGrid's forward / turn left / turn right): on a terminal an arrow pressed at the start
of a line plays at once, and from a pipe the escape sequences a terminal sends for them (one or
several on a line) are read the same way.
"""

from __future__ import annotations

import argparse
import codecs
import os
import re
import sys
from typing import Any

HELP = "play an environment in the terminal through its text view"

# the ANSI (CSI and SS3) sequences of the four arrow keys, and the action names each may stand for
_ARROW = re.compile(r"\x1b(?:\[|O)([ABCD])")
_ARROW_NAMES = {"A": ("up", "forward"), "B": ("down",), "C": ("right",), "D": ("left",)}
_GLYPHS = {"A": "\u2191", "B": "\u2193", "C": "\u2192", "D": "\u2190"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id", help="a registered id (verigym's or Gymnasium's)")
    parser.add_argument(
        "--seed", type=int, default=None, help="reset seed (the same seed replays the same task)"
    )
    parser.add_argument("--episodes", type=int, default=1, help="episodes to play")


def arrow_moves(line: str, parse_action: Any) -> list[str] | None:
    """The action names a line of arrow keys stands for.

    Args:
        line: what the player typed.
        parse_action: the env's ``parse_action(text)`` (raises on a name it does not know), or
            ``None`` when the env has none.

    Returns:
        One action name per arrow key, in order; ``None`` when the line is not only arrow keys.
        An arrow the env has no name for maps to ``""`` (the caller reports it).
    """
    keys = _ARROW.findall(line)
    if not keys or _ARROW.sub("", line).strip():
        return None
    moves = []
    for key in keys:
        name = ""
        for candidate in _ARROW_NAMES[key]:
            try:
                if parse_action is not None and parse_action(candidate) is not None:
                    name = candidate
                    break
            except Exception:  # noqa: BLE001 - the env's parse error: try the next name
                continue
        moves.append(name)
    return moves


def read_line(prompt: str, *, arrows: bool) -> str:
    """``input(prompt)``, except that on a terminal with ``arrows`` an arrow key pressed on an
    empty line is returned at once (as its escape sequence), without waiting for Enter.

    The line is read in cbreak mode (Ctrl-C still interrupts) with its own echo and backspace; the
    terminal's settings are restored before returning.

    Raises:
        EOFError: Ctrl-D on an empty line, or the end of the input.
    """
    if not arrows or not sys.stdin.isatty():
        return input(prompt)
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    line: list[str] = []
    try:
        tty.setcbreak(fd, termios.TCSANOW)  # not TCSAFLUSH (the default): keys typed ahead stay
        sys.stdout.write(prompt)
        sys.stdout.flush()
        while True:
            data = os.read(fd, 1)
            if not data:
                raise EOFError
            char = decoder.decode(data)
            if char == "\x1b":
                intro = os.read(fd, 1).decode("ascii", errors="replace")
                sequence = (
                    char
                    + intro
                    + (
                        os.read(fd, 1).decode("ascii", errors="replace")
                        if intro in ("[", "O")
                        else ""
                    )
                )
                if not line and _ARROW.fullmatch(sequence):
                    sys.stdout.write(_GLYPHS[sequence[-1]] + "\n")
                    return sequence
                continue  # other keys (and arrows mid-line) are not text
            if char in ("\r", "\n"):
                sys.stdout.write("\n")
                return "".join(line)
            if char in ("\x7f", "\b"):
                if line:
                    line.pop()
                    sys.stdout.write("\b \b")
            elif char == "\x04" and not line:
                raise EOFError
            elif char.isprintable():
                line.append(char)
                sys.stdout.write(char)
            sys.stdout.flush()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        sys.stdout.flush()


def _without_rules(observation: str, instructions: str) -> str:
    """The observation with the rules taken out where it repeats them (the whole rules, or each
    of their lines: the rules may carry a paragraph the observation does not)."""
    for part in [instructions.strip(), *(line.strip() for line in instructions.splitlines())]:
        if part and part in observation:
            observation = observation.replace(part, "")
    return observation.strip()


def _standing(episode: int, episodes: int, steps: int, total: float) -> str:
    """How an unfinished episode stood when the player left (one line)."""
    return f"Episode {episode + 1} of {episodes} left unfinished after {steps} steps: return={total:+.3f}, no verdict"


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import verigym  # noqa: F401
    from verigym.commands import lookup_env, usage_error
    from verigym.wrappers.language import LanguageWrapper

    api = lookup_env("play", args.env_id)
    if api is None:
        return 2
    if api != "gymnasium":
        return usage_error(
            "play",
            f"{args.env_id} is a multi-agent env; play one of its single-agent views instead (verigym list --family multiagent)",
        )
    if args.episodes < 1:
        return usage_error("play", f"--episodes must be >= 1, got {args.episodes}")
    env = LanguageWrapper(gym.make(args.env_id))
    parse_action = getattr(env.unwrapped, "parse_action", None)
    arrows = any(name for name in arrow_moves("\x1b[A\x1b[B\x1b[C\x1b[D", parse_action) or ())
    try:
        for episode in range(args.episodes):
            seed = None if args.seed is None else args.seed + episode
            observation, info = env.reset(seed=seed)
            instructions = str(info.get("instructions", ""))
            if episode == 0:
                print(instructions, "\n")
            shown = _without_rules(observation, instructions)
            if shown:
                print(shown)
            total, steps, done = 0.0, 0, False
            while not done:
                try:
                    text = read_line("> ", arrows=arrows)
                except EOFError:  # Ctrl-D, or the end of piped input: say how the episode stood
                    print(f"\n(end of input) {_standing(episode, args.episodes, steps, total)}")
                    return 0
                if text.strip() in {"quit", "exit"}:
                    print(_standing(episode, args.episodes, steps, total))
                    return 0
                if not text.strip():
                    print("(type an action, or quit; an empty line is not a turn)")
                    continue
                moves = arrow_moves(text, parse_action)
                if moves is not None and "" in moves:
                    print("(this env has no move for that arrow key; type the action instead)")
                    continue
                for action in moves if moves is not None else [text]:
                    observation, reward, terminated, truncated, info = env.step(action)
                    total += float(reward)
                    steps += 1
                    print(_without_rules(observation, instructions))
                    if "action_error" in info:
                        print(f"(invalid action: {info['action_error']})")
                    print(f"(reward {float(reward):+.3f}, return {total:+.3f})")
                    done = terminated or truncated
                    if done:
                        break
            print(
                f"Episode over: success={info.get('success')} score={info.get('score')} return={total:+.3f}\n"
            )
    finally:
        env.close()
    sys.stdout.flush()
    return 0
