"""``verigym play ENV_ID``: play any env in the terminal through its text view."""

from __future__ import annotations

import argparse
import sys

HELP = "play an environment in the terminal through its text view"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id", help="a registered id")
    parser.add_argument("--seed", type=int, default=None, help="reset seed (the same seed replays the same task)")
    parser.add_argument("--episodes", type=int, default=1, help="episodes to play")


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import verigym  # noqa: F401
    from verigym.registration import row
    from verigym.wrappers.language import LanguageWrapper

    if row(args.env_id).api != "gymnasium":
        print(f"{args.env_id} is a multi-agent env; play its single-agent view instead (verigym list --family multiagent)")
        return 2
    env = LanguageWrapper(gym.make(args.env_id))
    try:
        for episode in range(args.episodes):
            seed = None if args.seed is None else args.seed + episode
            observation, info = env.reset(seed=seed)
            print(info["instructions"], "\n")
            if observation != info["instructions"]:
                print(observation)
            total, done = 0.0, False
            while not done:
                try:
                    text = input("> ")
                except EOFError:
                    print()
                    return 0
                if text.strip() in {"quit", "exit"}:
                    return 0
                observation, reward, terminated, truncated, info = env.step(text)
                total += float(reward)
                print(observation)
                if "action_error" in info:
                    print(f"(invalid action: {info['action_error']})")
                print(f"(reward {float(reward):+.3f}, return {total:+.3f})")
                done = terminated or truncated
            print(f"Episode over: success={info.get('success')} score={info.get('score')} return={total:+.3f}\n")
    finally:
        env.close()
    sys.stdout.flush()
    return 0
