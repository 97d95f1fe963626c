"""Registration rows of the text family (imported by ``import verigym``; keep it light)."""

from verigym.registration import EnvRow, variants

ROWS: list[EnvRow] = [
    *variants(
        "verigym/GuessNumber{}-v0",
        "verigym.envs.text.guess_number:GuessNumberEnv",
        family="text",
        rows={"": {}, "-Hard": {"max_number": 1000, "slack_turns": 0}},
        description="Guess a secret integer from higher/lower feedback (the tutorial env).",
    ),
]
