"""Registration rows of the multiagent family (imported by ``import verigym``; keep it light).

``api="aec"``/``"parallel"`` rows go to PettingZoo's registry (``pettingzoo.make("aec",
"verigym/TicTacToe-v0")``); ``api="gymnasium"`` rows are single-seat views against built-in
opponents (:class:`verigym.envs.multiagent.versus.VersusEnv`).
"""

from verigym.registration import EnvRow, variants

_M = "verigym.envs.multiagent"
_VERSUS = f"{_M}.versus:VersusEnv"

ROWS: list[EnvRow] = [
    EnvRow("verigym/TicTacToe-v0", f"{_M}.tictactoe:TicTacToeEnv", "multiagent", api="aec",
           description="TicTacToe, two agents, legal-move masks, exact minimax solver."),
    *variants(
        "verigym/TicTacToe-{}-v0", _VERSUS, family="multiagent",
        rows={
            "Random": {"game": "tictactoe", "opponent": "random"},
            "Minimax": {"game": "tictactoe", "opponent": "minimax"},
        },
        description="TicTacToe as X against a built-in opponent (random moves or perfect minimax play).",
    ),
]
