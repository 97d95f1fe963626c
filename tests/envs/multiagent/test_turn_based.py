"""The turn-based (AEC) games: rules, payoffs, illegal moves, max_cycles, copies and text views."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pettingzoo
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.envs.multiagent.connect_four import ConnectFourEnv
from verigym.envs.multiagent.kuhn_poker import (
    BET,
    PASS,
    KuhnPokerEnv,
    equilibrium_bet_probability,
    exploitability,
)
from verigym.envs.multiagent.liars_dice import LiarsDiceEnv
from verigym.envs.multiagent.negotiation import NegotiationEnv, deal_payoffs
from verigym.envs.multiagent.proposer_solver import ProposerSolverEnv, proposer_reward
from verigym.envs.multiagent.tictactoe import TicTacToeEnv, _winner, minimax_values

GAMES = [
    TicTacToeEnv,
    ConnectFourEnv,
    KuhnPokerEnv,
    LiarsDiceEnv,
    NegotiationEnv,
    ProposerSolverEnv,
]


def play(env, policy, seed=0):
    """Play one game with ``policy(env, agent) -> action``; return final rewards and infos per agent."""
    env.reset(seed=seed)
    returns, final = dict.fromkeys(env.possible_agents, 0.0), {}
    for agent in env.agent_iter():
        _, reward, terminated, truncated, info = env.last()
        returns[agent] += reward
        if terminated or truncated:
            final[agent] = info
            env.step(None)
        else:
            env.step(policy(env, agent))
    return returns, final


def random_legal(rng):
    def policy(env, agent):
        legal = np.flatnonzero(env.infos[agent]["action_mask"])
        return int(rng.choice(legal))

    return policy


# -- TicTacToe ------------------------------------------------------------------------------------
def test_perfect_play_always_draws():
    rng = np.random.default_rng(0)
    for seed in range(30):
        returns, final = play(
            TicTacToeEnv(), lambda env, agent: env.solver_action(agent, rng), seed
        )
        assert returns == {"player_0": 0.0, "player_1": 0.0}
        assert all(info["score"] == 0.5 and info["success"] is False for info in final.values())


@pytest.mark.parametrize("solver_mark", [1, 2])
def test_minimax_never_loses_against_any_opponent(solver_mark):
    """Exhaustive: the solver's side never loses, whatever the other side plays."""

    def explore(board: tuple[int, ...], mark: int) -> None:
        winner = _winner(board)
        assert winner != 3 - solver_mark, f"the solver lost: {board}"
        if winner or 0 not in board:
            return
        if mark == solver_mark:
            values = minimax_values(board, mark)
            cell = min(c for c, v in values.items() if v == max(values.values()))
            explore(board[:cell] + (mark,) + board[cell + 1 :], 3 - mark)
        else:
            for cell in (i for i, v in enumerate(board) if v == 0):
                explore(board[:cell] + (mark,) + board[cell + 1 :], 3 - mark)

    explore((0,) * 9, 1)


def test_tictactoe_win_and_observation():
    env = TicTacToeEnv()
    env.reset(seed=0)
    for cell in (0, 3, 1, 4, 2):  # X takes the top row
        env.step(cell)
    assert env.terminations == {"player_0": True, "player_1": True}
    assert env.rewards == {"player_0": 1.0, "player_1": -1.0}
    assert env.infos["player_0"]["success"] is True and env.infos["player_1"]["score"] == 0.0
    obs = env.observe("player_1")
    assert obs.shape == (3, 3, 3) and obs[1, 0, 0] == 1 and obs[0, 0, 1] == 1 and obs[2, 2, 2] == 1


@pytest.mark.parametrize("bad", [0, 9, -1, float("nan"), np.zeros(3), "4"])
def test_illegal_or_malformed_move_forfeits(bad):
    env = TicTacToeEnv()
    env.reset(seed=0)
    env.step(0)  # X in the corner; now O plays `bad` (0 is occupied)
    env.step(bad)
    assert env.terminations["player_1"] and env.terminations["player_0"]
    assert env.rewards == {"player_0": 1.0, "player_1": -1.0}
    assert (
        isinstance(env.infos["player_1"]["action_error"], str)
        and env.infos["player_1"]["action_error"]
    )
    assert (
        env.infos["player_1"]["success"] is False and env.infos["player_0"]["forfeit"] == "player_1"
    )
    assert env.observation_space("player_1").contains(env.observe("player_1"))
    env.step(None)
    env.step(None)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(4)


def test_illegal_move_reward_is_configurable():
    env = TicTacToeEnv(illegal_move_reward=-5.0)
    env.reset(seed=0)
    env.step(0)
    env.step(0)
    assert env.rewards["player_1"] == -5.0


# -- ConnectFour ----------------------------------------------------------------------------------
def test_connect_four_vertical_win_and_full_column():
    env = ConnectFourEnv()
    env.reset(seed=0)
    for col in (3, 4, 3, 4, 3, 4, 3):
        env.step(col)
    assert env.rewards == {"player_0": 1.0, "player_1": -1.0}
    env.reset(seed=0)
    for col in (0, 0, 0, 0, 0, 0):
        env.step(col)
    assert env.infos["player_0"]["action_mask"][0] == 0
    env.step(0)  # the full column
    assert env.rewards["player_0"] == -1.0 and "action_error" in env.infos["player_0"]


def test_connect_four_heuristic_beats_random():
    rng = np.random.default_rng(1)
    wins = 0
    for seed in range(20):
        returns, _ = play(
            ConnectFourEnv(),
            lambda env, agent: (
                env.heuristic_action(agent, rng)
                if agent == "player_0"
                else random_legal(rng)(env, agent)
            ),
            seed,
        )
        wins += returns["player_0"] > 0
    assert wins >= 17


# -- Kuhn poker -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cards", "history", "first"),
    [
        ((2, 0), [PASS, PASS], 1.0),
        ((0, 2), [PASS, PASS], -1.0),
        ((0, 1), [BET, PASS], 1.0),
        ((2, 1), [PASS, BET, PASS], -1.0),
        ((1, 2), [PASS, BET, BET], -2.0),
        ((2, 1), [BET, BET], 2.0),
    ],
)
def test_kuhn_payoffs(cards, history, first):
    env = KuhnPokerEnv()
    env.reset(seed=0)
    env.cards = cards
    for action in history:
        env.step(action)
    assert env.rewards == {"player_0": first, "player_1": -first}
    assert env.infos["player_0"]["score"] == (first + 2) / 4


def test_kuhn_equilibrium_value():
    """Kuhn's equilibrium against itself: player_0 loses 1/18 a hand on average (Kuhn 1950)."""
    rng = np.random.default_rng(0)
    total = sum(
        play(KuhnPokerEnv(), lambda env, agent: env.solver_action(agent, rng), seed)[0]["player_0"]
        for seed in range(6000)
    )
    assert abs(total / 6000 + 1 / 18) < 0.04


@pytest.mark.parametrize("alpha", [0.0, 0.1, 1.0 / 3.0])
def test_kuhn_equilibrium_family_is_unexploitable(alpha):
    def policy(card, history):
        if not history:
            return {0: alpha, 1: 0.0, 2: 3 * alpha}[card]
        if history == (PASS, BET):
            return {0: 0.0, 1: alpha + 1 / 3, 2: 1.0}[card]
        return equilibrium_bet_probability(card, history)

    assert abs(exploitability(policy)) < 1e-12


@pytest.mark.parametrize(
    ("policy", "expected"), [(lambda c, h: 0.0, 1.0), (lambda c, h: 1.0, 1 / 3)]
)
def test_kuhn_exploitability_of_pure_strategies(policy, expected):
    assert exploitability(policy) == pytest.approx(expected)


# -- Liar's dice ----------------------------------------------------------------------------------
def test_liars_dice_resolution_and_legality():
    env = LiarsDiceEnv(num_dice=2)
    env.reset(seed=0)
    env.dice = np.array([[5, 5], [5, 2]])
    assert env.infos["player_0"]["action_mask"][env.liar] == 0  # no bid to challenge yet
    env.step(env.parse_action("3x5", "player_0"))
    assert env.infos["player_1"]["action_mask"][: (3 - 1) * 6 + 4 + 1].sum() == 0  # no lower bids
    env.step(env.liar)  # the bid holds: three fives -> the caller loses
    assert env.rewards == {"player_0": 1.0, "player_1": -1.0}
    env.reset(seed=0)
    env.dice = np.array([[5, 5], [5, 2]])
    env.step(env.parse_action("4x5", "player_0"))
    env.step(env.liar)  # only three fives -> the bidder loses
    assert env.rewards == {"player_0": -1.0, "player_1": 1.0}
    env.reset(seed=0)
    env.step(env.liar)  # liar without a bid: forfeit
    assert env.rewards["player_0"] == -1.0 and "action_error" in env.infos["player_0"]


# -- Negotiation ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("counts", "values", "keeps", "expected"),
    [
        ([1, 2, 3], [[4, 0, 2], [0, 2, 2]], [1, 0, 3], (1.0, 0.4)),
        ([1, 2, 3], [[4, 0, 2], [0, 2, 2]], [0, 0, 0], (0.0, 1.0)),
        ([2, 2, 1], [[0, 2, 6], [3, 1, 2]], [0, 1, 1], (0.8, 0.7)),
        ([4, 1, 1], [[0, 4, 6], [1, 1, 5]], [4, 1, 1], (1.0, 0.0)),
    ],
)
def test_deal_payoffs_on_hand_written_deals(counts, values, keeps, expected):
    assert deal_payoffs(counts, values, keeps) == pytest.approx(expected)


def test_deal_payoffs_rejects_impossible_split():
    with pytest.raises(ValueError, match="not within the pool"):
        deal_payoffs([1, 1, 1], [[5, 3, 2], [2, 3, 5]], [2, 0, 0])


def test_negotiation_accepted_deal_pays_both():
    env = NegotiationEnv()
    env.reset(seed=0)
    env.counts = np.array([2, 2, 1])
    env.values = np.array([[0, 2, 6], [3, 1, 2]])
    env.step(env.parse_action("I want one hat and the ball: propose 0 1 1", "player_0"))
    env.step(env.parse_action("accept", "player_1"))
    assert env.rewards == pytest.approx({"player_0": 0.8, "player_1": 0.7})
    assert env.infos["player_1"]["deal"] == {"player_0": [0, 1, 1], "player_1": [2, 1, 0]}
    assert env.infos["player_0"]["success"] is True


def test_negotiation_counter_offer_and_disagreement():
    env = NegotiationEnv(max_cycles=2)
    env.reset(seed=0)
    env.counts = np.array([1, 2, 3])
    env.values = np.array([[4, 0, 2], [0, 2, 2]])
    assert env.infos["player_0"]["action_mask"][env.accept] == 0  # nothing to accept yet
    env.step(env.parse_action("propose 1 2 3", "player_0"))
    env.step(env.parse_action("propose 0 2 3", "player_1"))  # player_1 keeps hats and balls
    env.step(env.parse_action("propose 1 0 3", "player_0"))
    env.step(env.parse_action("propose 0 2 1", "player_1"))
    assert env.truncations == {"player_0": True, "player_1": True}
    assert env.rewards == {"player_0": 0.0, "player_1": 0.0}
    assert env.infos["player_0"]["success"] is False and env.infos["player_0"]["deal"] is None


def test_negotiation_oversized_proposal_forfeits():
    env = NegotiationEnv()
    env.reset(seed=0)
    env.counts = np.array([1, 1, 1])
    env.step(env.parse_action("propose 4 4 4", "player_0"))
    assert env.rewards == {"player_0": -1.0, "player_1": 0.0}
    assert "not a legal move" in env.infos["player_0"]["action_error"]


def test_negotiation_values_are_valid():
    env = NegotiationEnv()
    for seed in range(50):
        env.reset(seed=seed)
        assert 5 <= env.counts.sum() <= 7 and env.counts.min() >= 1
        assert (env.values @ env.counts == 10).all()
        assert ((env.values > 0).any(axis=0)).all()


# -- Proposer/solver -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("solved", "expected"), [(0, 0.0), (1, 0.75), (2, 0.5), (3, 0.25), (4, 0.0)]
)
def test_proposer_reward(solved, expected):
    assert proposer_reward(solved, 4) == expected


def test_proposer_solver_rewards():
    env = ProposerSolverEnv(num_attempts=4)
    env.reset(seed=0)
    env.step(env.parse_action("Let me set 37 * 58", "proposer_0"))
    assert env.task == (37, 58)
    answers = ["2146", "the result is 2146", "2164", "<think>37*58=2146</think> 2000"]
    solver_return = 0.0
    for text in answers:
        env.step(env.parse_action(text, "solver_0"))
        solver_return += env.rewards["solver_0"]
    assert solver_return == pytest.approx(0.5)
    assert env.rewards["proposer_0"] == pytest.approx(0.5)
    assert env.infos["proposer_0"]["success"] is True and env.infos["solver_0"]["success"] is False
    assert env.infos["solver_0"]["solve_rate"] == 0.5


def test_proposer_bounds_are_enforced():
    env = ProposerSolverEnv(min_operand=10, max_operand=99)
    env.reset(seed=0)
    from verigym.core import ActionParseError

    with pytest.raises(ActionParseError, match="10..99"):
        env.parse_action("5 * 7", "proposer_0")
    env.step(env.action_space("proposer_0").n - 1)
    assert env.task == (99, 99)


# -- shared properties -----------------------------------------------------------------------------
@pytest.mark.parametrize("game", GAMES)
def test_max_cycles_bounds_moves_per_agent(game):
    env = game(max_cycles=1)
    rng = np.random.default_rng(0)
    for seed in range(5):
        env.reset(seed=seed)
        moves = dict.fromkeys(env.possible_agents, 0)
        for agent in env.agent_iter():
            _, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                assert "success" in info and 0.0 <= info["score"] <= 1.0
                env.step(None)
                continue
            moves[agent] += 1
            env.step(int(rng.choice(np.flatnonzero(env.infos[agent]["action_mask"]))))
        assert max(moves.values()) <= 1


@pytest.mark.parametrize("game", GAMES)
def test_pickle_and_deepcopy_continue_identically(game):
    env = game()
    rng = np.random.default_rng(0)
    env.reset(seed=3)
    env.step(int(rng.choice(np.flatnonzero(env.infos[env.agent_selection]["action_mask"]))))
    copies = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env)]
    trajectories = []
    for e in [env, *copies]:
        r = np.random.default_rng(1)
        trace = []
        for agent in e.agent_iter(40):
            obs, reward, terminated, truncated, _ = e.last()
            trace.append((agent, obs.tobytes(), reward, terminated, truncated))
            e.step(
                None
                if terminated or truncated
                else int(r.choice(np.flatnonzero(e.infos[agent]["action_mask"])))
            )
        trajectories.append(trace)
    assert trajectories[0] == trajectories[1] == trajectories[2]


@pytest.mark.parametrize("game", GAMES)
def test_text_view_round_trips_every_action(game):
    env = game()
    env.reset(seed=0)
    for agent in env.possible_agents:
        n = int(env.action_space(agent).n)
        for action in range(0, n, max(1, n // 300)):
            text = env.action_text(action, agent)
            assert (
                env.parse_action(f"<think>scratch 1 2 3</think> My move: {text}", agent) == action
            )
        assert env.instructions(agent).strip()
        assert env.observation_text(env.observe(agent), agent).strip()


def test_registered_with_pettingzoo():
    env = pettingzoo.make("aec", "verigym/TicTacToe-v0")
    assert isinstance(env, TicTacToeEnv) and env.metadata["family"] == "multiagent"
    ids = {r.id for r in verigym.rows("multiagent")}
    assert {
        "verigym/TicTacToe-v0",
        "verigym/Pursuit-v0",
        "verigym/Spread-v0",
        "verigym/TicTacToe-Minimax-v0",
    } <= ids
    assert len(ids) >= 8


def test_docs_self_play_example(capsys):
    import pathlib
    import re

    doc = pathlib.Path(__file__).parents[3] / "docs" / "environments.md"
    readme = doc.read_text(encoding="utf-8")
    blocks = [
        b
        for b in re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
        if "verigym/TicTacToe-v0" in b
    ]
    assert blocks, "docs/environments.md lost its self-play example"
    exec(compile(blocks[0], "docs/environments.md", "exec"), {})
    assert capsys.readouterr().out.strip().endswith("0.5")
