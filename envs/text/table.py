"""Registration rows of the text family (imported by ``import verigym``; keep it light).

The reasoning-gym ids are built from :data:`REASONING_GYM_DATASETS`, a static, sorted list
generated once from the installed reasoning-gym 0.1.25 (``sorted(reasoning_gym.factory.DATASETS)``
without ``composite``): importing reasoning_gym here would make ``import verigym`` slow.
``tests/envs/text/test_reasoning_gym.py`` checks the list against the installed registry.
"""

from __future__ import annotations

from verigym.registration import EnvRow, variants

REASONING_GYM_EXCLUDED = {
    "composite": "a weighted mixture of other datasets, not a task; it needs a list of datasets",
    "knight_swap": (
        "about 0.6 s of CPU per generated item (and its curriculum level 0 is an invalid config), "
        "too slow for the conformance checks of every id; use "
        "ReasoningGymEnv(dataset='knight_swap') directly"
    ),
}
"""reasoning-gym datasets without an id, and why."""

REASONING_GYM_ROW_KWARGS: dict[str, dict[str, int]] = {
    name: {"level": 0}
    for name in ("futoshiki", "intermediate_integration", "quantum_lock", "zebra_puzzles")
}
"""Ids registered at curriculum level 0 instead of the dataset's default config: their default
items take 50-100 ms of CPU each to generate, level 0 items 0.1-6 ms. ``gym.make(id, level=k)``
or ``level=None`` gives the harder distributions."""

REASONING_GYM_DATASETS: tuple[tuple[str, str], ...] = (
    ("ab", "A::B token-rewriting puzzles"),
    ("acre", "abstract causal reasoning (ACRE) blicket detection"),
    ("advanced_geometry", "coordinate geometry: angles, orthocenters, incircles"),
    ("aiw", "Alice-in-Wonderland family counting questions"),
    ("arc_1d", "one-dimensional ARC grid transformations"),
    ("arc_agi", "ARC-AGI grid transformation tasks"),
    ("base_conversion", "convert numbers between bases"),
    ("basic_arithmetic", "integer arithmetic expressions"),
    ("bf", "predict the output of a Brainf*ck program"),
    ("binary_alternation", "minimum swaps to make a binary string alternate"),
    ("binary_matrix", "distance to the nearest 0 in a binary matrix"),
    ("bitwise_arithmetic", "bitwise and shift arithmetic in hex"),
    ("boxnet", "multi-agent box-moving plans (checked by a simulator)"),
    ("caesar_cipher", "decrypt Caesar-shifted text"),
    ("calendar_arithmetic", "weekday and date arithmetic"),
    ("chain_sum", "chains of additions and subtractions"),
    ("circuit_logic", "evaluate ASCII logic circuits"),
    ("codeio", "predict inputs/outputs of Python functions"),
    ("coin_flip", "coin-flip probabilities"),
    ("color_cube_rotation", "colours of a cube after rotations"),
    ("complex_arithmetic", "complex-number arithmetic"),
    ("count_bits", "count set bits of an integer"),
    ("count_primes", "count primes in an interval"),
    ("countdown", "reach a target number with given numbers and + - * /"),
    ("course_schedule", "can all courses be finished (cycle detection)"),
    ("cryptarithm", "letter-digit addition puzzles"),
    ("decimal_arithmetic", "decimal arithmetic with precedence"),
    ("decimal_chain_sum", "chains of decimal additions and subtractions"),
    ("dice", "dice-sum probabilities as fractions"),
    ("emoji_mystery", "decode a sentence hidden in emoji variation selectors"),
    ("family_relationships", "infer family relations from a story"),
    ("figlet_font", "read a word rendered in FIGlet ASCII art"),
    ("fraction_simplification", "reduce fractions"),
    ("futoshiki", "Futoshiki inequality Latin squares"),
    ("game_of_life", "Game of Life states after n steps"),
    ("game_of_life_halting", "does a Game of Life pattern die out"),
    ("gcd", "greatest common divisors"),
    ("graph_color", "colour a graph with k colours (checked)"),
    ("group_anagrams", "group words into anagrams"),
    ("gsm_symbolic", "GSM8K-style templated word problems"),
    ("intermediate_integration", "indefinite integrals by substitution and by parts"),
    ("isomorphic_strings", "are two strings isomorphic"),
    ("jugs", "water-jug measuring plans"),
    ("kakurasu", "Kakurasu weighted-sum grid puzzles"),
    ("knights_knaves", "knights-and-knaves logic puzzles"),
    ("largest_island", "largest island area in a grid"),
    ("lcm", "least common multiples"),
    ("leg_counting", "count the legs of listed animals"),
    ("letter_counting", "count a letter in a text"),
    ("letter_jumble", "unscramble jumbled words"),
    ("list_functions", "induce a list function from examples"),
    ("mahjong_puzzle", "Mahjong peng/chi round outcomes"),
    ("manipulate_matrix", "apply a sequence of matrix operations"),
    ("maze", "shortest path length in an ASCII maze"),
    ("mini_sudoku", "4x4 Sudoku"),
    ("modulo_grid", "complete a grid pattern defined modulo n"),
    ("n_queens", "complete an n-queens board"),
    ("needle_haystack", "find a fact in a long distractor text"),
    ("number_filtering", "filter numbers by a threshold"),
    ("number_format", "compare numbers written in different formats"),
    ("number_sequence", "continue an integer sequence"),
    ("number_sorting", "sort numbers"),
    ("palindrome_generation", "build a palindrome from letters (checked)"),
    ("palindrome_partitioning", "all palindrome partitions of a string"),
    ("path_star", "path from a star graph's centre to a target"),
    ("polynomial_equations", "real roots of polynomials"),
    ("polynomial_multiplication", "expand products of polynomials"),
    ("pool_matrix", "max/average pooling of a matrix"),
    ("power_function", "compute x^n"),
    ("prime_factorization", "prime factorizations"),
    ("products", "multiplications"),
    ("propositional_logic", "derive a valid conclusion from premises (checked)"),
    ("puzzle24", "make 24 from four numbers"),
    ("quantum_lock", "shortest button sequence for a state-dependent lock"),
    ("ransom_note", "can a note be built from a magazine"),
    ("rearc", "RE-ARC grid transformation tasks"),
    ("rectangle_count", "count rectangles in ASCII art"),
    ("rotate_matrix", "rotate a matrix"),
    ("rotten_oranges", "minutes until all oranges rot"),
    ("rubiks_cube", "solve a scrambled Rubik's cube (checked by a simulator)"),
    ("rush_hour", "solve Rush Hour (checked by a simulator)"),
    ("self_reference", "self-referential truth puzzles"),
    ("sentence_reordering", "restore a shuffled sentence"),
    ("shortest_path", "shortest path on a grid"),
    ("simple_equations", "solve linear equations"),
    ("simple_geometry", "the missing angle of a polygon"),
    ("simple_integration", "indefinite integrals of polynomials"),
    ("sokoban", "solve Sokoban (checked by a simulator)"),
    ("spell_backward", "spell a word backwards"),
    ("spiral_matrix", "read a matrix in spiral order"),
    ("string_insertion", "insert characters after patterns"),
    ("string_manipulation", "apply string rewriting rules"),
    ("string_splitting", "machine-part splitting rules"),
    ("string_synthesis", "block-synthesis rules"),
    ("sudoku", "9x9 Sudoku"),
    ("survo", "Survo row/column-sum puzzles"),
    ("syllogism", "is a syllogism valid"),
    ("time_intervals", "durations between times and dates"),
    ("tower_of_hanoi", "Tower of Hanoi move lists (checked)"),
    ("tsumego", "Go life-and-death: the vital move"),
    ("word_ladder", "word ladders (checked)"),
    ("word_sequence_reversal", "reverse a word sequence"),
    ("word_sorting", "sort words by ASCII or reverse order"),
    ("zebra_puzzles", "Zebra (Einstein) logic puzzles"),
)
"""(dataset name, one-line description), sorted by name."""


def rg_env_id(dataset: str) -> str:
    """``verigym/RG-<CamelCase>-v0`` for a reasoning-gym dataset name (``basic_arithmetic`` ->
    ``verigym/RG-BasicArithmetic-v0``)."""
    return (
        "verigym/RG-" + "".join(part[:1].upper() + part[1:] for part in dataset.split("_")) + "-v0"
    )


_GAMES = (
    (
        "Wordle",
        "wordle",
        "WordleEnv",
        "Wordle: guess a five-letter word from G/Y/. letter feedback.",
    ),
    (
        "Mastermind",
        "mastermind",
        "MastermindEnv",
        "Mastermind: find a colour code from black/white pegs (Knuth oracle).",
    ),
    (
        "Hangman",
        "hangman",
        "HangmanEnv",
        "Hangman: reveal a word letter by letter before the lives run out.",
    ),
    (
        "Minesweeper",
        "minesweeper",
        "MinesweeperEnv",
        "Minesweeper on boards cleared by deduction alone.",
    ),
    (
        "Countdown",
        "countdown",
        "CountdownEnv",
        "24 game / Countdown numbers with the value of each attempt as feedback.",
    ),
    (
        "TwentyQuestions",
        "twenty_questions",
        "TwentyQuestionsEnv",
        "Twenty questions: identify an object by yes/no questions.",
    ),
    (
        "Household",
        "household",
        "HouseholdEnv",
        "ALFWorld-style household: clean/heat/cool objects and put them in place.",
    ),
    (
        "Shop",
        "shop",
        "ShopEnv",
        "WebShop-style store: search, open products, pick options, buy to spec.",
    ),
)
"""(id name, module, class, description) of the multi-turn games; each has ``-Easy``,
``-Medium`` and ``-Hard`` ids."""

ROWS: list[EnvRow] = [
    *variants(
        "verigym/GuessNumber{}-v0",
        "verigym.envs.text.guess_number:GuessNumberEnv",
        family="text",
        rows={"": {}, "-Hard": {"max_number": 1000, "slack_turns": 0}},
        description="Guess a secret integer from higher/lower feedback (the tutorial env).",
    ),
    *[
        row
        for name, module, cls, text in _GAMES
        for row in variants(
            f"verigym/{name}{{}}-v0",
            f"verigym.envs.text.{module}:{cls}",
            family="text",
            rows={
                f"-{level.title()}": {"difficulty": level} for level in ("easy", "medium", "hard")
            },
            description=text,
        )
    ],
    *[
        EnvRow(
            id=rg_env_id(name),
            entry_point="verigym.envs.text.reasoning_gym_env:ReasoningGymEnv",
            family="text",
            kwargs={"dataset": name, **REASONING_GYM_ROW_KWARGS.get(name, {})},
            description=f"reasoning-gym {name}: {text}"
            + (" (curriculum level 0)." if name in REASONING_GYM_ROW_KWARGS else "."),
        )
        for name, text in REASONING_GYM_DATASETS
    ],
]
