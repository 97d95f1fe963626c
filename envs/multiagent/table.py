"""Registration rows of the multiagent family (imported by ``import verigym``; keep it light).

``api="aec"``/``"parallel"`` rows go to PettingZoo's registry (``pettingzoo.make("aec",
"verigym/TicTacToe-v0")``); ``api="gymnasium"`` rows are single-seat views against built-in
opponents (:class:`verigym.envs.multiagent.versus.VersusEnv`).
"""

from verigym.registration import EnvRow, variants

_M = "verigym.envs.multiagent"
_VERSUS = f"{_M}.versus:VersusEnv"


def _aec(name: str, module_class: str, description: str) -> EnvRow:
    return EnvRow(
        f"verigym/{name}-v0",
        f"{_M}.{module_class}",
        "multiagent",
        api="aec",
        description=description,
    )


def _parallel(name: str, module_class: str, description: str) -> EnvRow:
    return EnvRow(
        f"verigym/{name}-v0",
        f"{_M}.{module_class}",
        "multiagent",
        api="parallel",
        description=description,
    )


ROWS: list[EnvRow] = [
    _aec(
        "TicTacToe",
        "tictactoe:TicTacToeEnv",
        "TicTacToe, two agents, legal-move masks, exact minimax solver.",
    ),
    _aec(
        "ConnectFour",
        "connect_four:ConnectFourEnv",
        "ConnectFour on a 6x7 board, two agents, legal-move masks.",
    ),
    _aec(
        "KuhnPoker",
        "kuhn_poker:KuhnPokerEnv",
        "Kuhn poker (J, Q, K; one betting round), with Kuhn's equilibrium strategy.",
    ),
    _aec(
        "LiarsDice",
        "liars_dice:LiarsDiceEnv",
        "Liar's dice, one round, two players with 2 dice each: bid or call liar.",
    ),
    _aec(
        "Negotiation",
        "negotiation:NegotiationEnv",
        "Deal-or-no-deal negotiation: split items with private values by offers.",
    ),
    _aec(
        "ProposerSolver",
        "proposer_solver:ProposerSolverEnv",
        "Self-play: one agent proposes a bounded arithmetic task, the other solves it.",
    ),
    _parallel(
        "Pursuit",
        "pursuit:PursuitEnv",
        "Cooperative pursuit on a grid: predators surround random prey; egocentric views.",
    ),
    _parallel(
        "Tag", "tag:TagEnv", "Competitive tag on a grid with walls: one chaser against two runners."
    ),
    _parallel(
        "Spread",
        "spread:SpreadEnv",
        "Continuous cooperative navigation: three agents cover three landmarks (MPE spread).",
    ),
    *variants(
        "verigym/TicTacToe-{}-v0",
        _VERSUS,
        family="multiagent",
        rows={
            "Random": {"game": "tictactoe", "opponent": "random"},
            "Minimax": {"game": "tictactoe", "opponent": "optimal"},
        },
        description="TicTacToe as X against a built-in opponent (random moves or perfect minimax play).",
    ),
    *variants(
        "verigym/ConnectFour-{}-v0",
        _VERSUS,
        family="multiagent",
        rows={"Heuristic": {"game": "connect_four", "opponent": "heuristic"}},
        description="ConnectFour as first player against a win/block/safe-move heuristic opponent.",
    ),
    *variants(
        "verigym/KuhnPoker-{}-v0",
        _VERSUS,
        family="multiagent",
        rows={"Equilibrium": {"game": "kuhn_poker", "opponent": "optimal"}},
        description="Kuhn poker as first player against Kuhn's equilibrium strategy.",
    ),
    *variants(
        "verigym/LiarsDice-{}-v0",
        _VERSUS,
        family="multiagent",
        rows={"Heuristic": {"game": "liars_dice", "opponent": "heuristic"}},
        description="Liar's dice as opening player against a probability-estimate heuristic opponent.",
    ),
    *variants(
        "verigym/Negotiation-{}-v0",
        _VERSUS,
        family="multiagent",
        rows={"Heuristic": {"game": "negotiation", "opponent": "heuristic"}},
        description="Negotiation as first mover against a conceding heuristic negotiator.",
    ),
    *variants(
        "verigym/ProposerSolver-{}-v0",
        _VERSUS,
        family="multiagent",
        rows={
            "Solve": {"game": "proposer_solver", "opponent": "random", "seat": 1},
            "Propose": {"game": "proposer_solver", "opponent": "heuristic", "seat": 0},
        },
        description="One seat of ProposerSolver: solve random tasks, or propose tasks for an error-prone solver.",
    ),
]
