"""SearchQA: multi-hop questions over a generated fictional encyclopedia, with BM25 search."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from verigym.core import ActionParseError
from verigym.envs.tool.base import ToolEnv, tool_call_text
from verigym.kwargs_policy import IntRange, OneOf, client, operator_only
from verigym.toolcalls import Tool, ToolCall
from verigym.validation import check_int
from verigym.verifiers import is_hedged

__all__ = ["OPEN_TOOL", "SEARCH_TOOL", "SearchQAEnv", "answer_f1", "normalize_answer"]

TOP_K = 5
SEARCH_TOOL = Tool(
    name="search",
    description=f"BM25 search over the encyclopedia; returns the titles and first sentences of the top {TOP_K} articles.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "keywords"}},
        "required": ["query"],
    },
)
OPEN_TOOL = Tool(
    name="open",
    description="Return the full text of the article with this exact title.",
    parameters={
        "type": "object",
        "properties": {"title": {"type": "string", "description": "an article title"}},
        "required": ["title"],
    },
)

_ONSETS = (
    "b",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "kr",
    "st",
    "th",
    "vel",
    "mor",
    "tal",
)
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ia", "ou")
_CODAS = ("", "", "n", "r", "s", "th", "l", "nd", "x")
_PROFESSIONS = (
    "cartographer",
    "glassblower",
    "astronomer",
    "composer",
    "shipwright",
    "botanist",
    "archivist",
    "engineer",
)
_ORG_KINDS = (
    "guild",
    "observatory",
    "trading company",
    "conservatory",
    "foundry",
    "library society",
    "shipyard",
)
_FILLER = (
    "Local records describe the place as unusually quiet in winter.",
    "Several later chronicles mention it only in passing.",
    "Its archives were partly lost in a flood.",
    "Travellers often remarked on its markets.",
    "Little else is known with certainty.",
)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD-style normalization: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in string.punctuation)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_f1(prediction: str, gold: str) -> float:
    """Token-level F1 between normalized prediction and gold (HotpotQA/SQuAD)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return float(pred == ref)
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


class _World:
    """A fictional world drawn from an rng: countries, cities, people, organizations, articles."""

    def __init__(self, rng: np.random.Generator, size: int):
        used: set[str] = set()

        def name(parts: int) -> str:
            while True:
                word = "".join(
                    _ONSETS[int(rng.integers(len(_ONSETS)))]
                    + _VOWELS[int(rng.integers(len(_VOWELS)))]
                    + _CODAS[int(rng.integers(len(_CODAS)))]
                    for _ in range(parts)
                ).capitalize()
                if word not in used and len(word) >= 4:
                    used.add(word)
                    return word

        self.countries = [name(2) for _ in range(max(3, size // 3))]
        self.cities = [name(2) for _ in range(size)]
        self.city_country = {
            c: self.countries[int(rng.integers(len(self.countries)))] for c in self.cities
        }
        self.people = [f"{name(2)} {name(2)}" for _ in range(size)]
        self.born_in = {p: self.cities[int(rng.integers(len(self.cities)))] for p in self.people}
        self.born_year = {p: int(rng.integers(1650, 1900)) for p in self.people}
        self.profession = {
            p: _PROFESSIONS[int(rng.integers(len(_PROFESSIONS)))] for p in self.people
        }
        self.orgs = [
            f"{name(2)} {_ORG_KINDS[int(rng.integers(len(_ORG_KINDS)))].title()}"
            for _ in range(size)
        ]
        self.founder = {o: self.people[int(rng.integers(len(self.people)))] for o in self.orgs}
        self.seat = {o: self.cities[int(rng.integers(len(self.cities)))] for o in self.orgs}
        self.founded = {
            o: self.born_year[self.founder[o]] + int(rng.integers(20, 60)) for o in self.orgs
        }
        filler = lambda: _FILLER[int(rng.integers(len(_FILLER)))]  # noqa: E731
        self.articles: dict[str, str] = {}
        for country in self.countries:
            members = sorted(c for c in self.cities if self.city_country[c] == country)
            listed = ", ".join(members) if members else "no large cities"
            self.articles[country] = (
                f"{country} is a country. Its principal cities are {listed}. {filler()}"
            )
        for city in self.cities:
            self.articles[city] = (
                f"{city} is a city in the country of {self.city_country[city]}. {filler()}"
            )
        for person in self.people:
            self.articles[person] = (
                f"{person} (born {self.born_year[person]}) was a {self.profession[person]} "
                f"born in the city of {self.born_in[person]}. {filler()}"
            )
        for org in self.orgs:
            self.articles[org] = (
                f"The {org} was founded in {self.founded[org]} by {self.founder[org]}. "
                f"Its seat is in {self.seat[org]}. {filler()}"
            )


class SearchQAEnv(ToolEnv):
    """Multi-hop question answering over a fictional encyclopedia (HotpotQA-style, contamination-free).

    ## Description
    Each reset generates a world (countries, cities, people, organizations; ``corpus_size`` of each
    kind but countries) and its encyclopedia, one article per entity, from the seed, so no model
    has seen the answers (as FictionalHot-style corpora). The question needs ``hops`` articles: e.g.
    "In which country was the founder of the Velmor Guild born?" (organization -> founder -> birth
    city -> country). Tools: ``search`` (BM25 via ``bm25s``, top 5) and ``open`` (an article by
    exact title).

    ## Action Space
    ``UnicodeText``: ``<tool_call>{"name": "search", "arguments": {"query": "..."}}</tool_call>``,
    ``<tool_call>{"name": "open", "arguments": {"title": "..."}}</tool_call>`` or ``<answer>NAME</answer>``.

    ## Observation Space
    ``UnicodeText``: the question on reset; then search hits or an article.

    ## Rewards
    With ``reward="em"`` (default) ``1`` for an exact match after SQuAD normalization (case,
    punctuation, articles), else ``0``; with ``reward="f1"`` the token F1, but ``0`` for a hedge:
    an answer that lists alternatives one of which is the gold (``"A or B"``, ``"A, B, C"``:
    :func:`verigym.verifiers.is_hedged`) or names another entity of the world beside it
    (``"Rostales Sulmora"``). ``info["searches"]`` (searches this episode) is reported;
    ``invalid_action_reward`` for a malformed reply or an unknown title.

    ## Starting State
    World, articles and question from the reset seed.

    ## Episode End
    Terminated at the final answer (``success`` = exact match); truncated after ``max_turns``.

    ## Arguments
    * ``hops`` (int, 2-3): articles the question chains through.
    * ``corpus_size`` (int, 6-200): cities, people and organizations each.
    * ``reward`` (``"em"`` or ``"f1"``).
    * ``max_turns``, ``invalid_action_reward``, ``max_action_length``: see :class:`ToolEnv`.

    ## Version History
    * v0: initial version. Verifier fix (same version): with ``reward="f1"``, a hedge that lists
      the gold among alternatives or names another entity beside it scores 0 (``"A or B"``
      earned F1 0.5 and ``"A B"`` 0.67 whichever of the two was right).
    """

    metadata = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {
        "hops": client(IntRange(2, 3)),
        "corpus_size": operator_only(
            IntRange(6, 200), why="generator work: 200 costs about 0.2 s a reset"
        ),
        "reward": client(OneOf(("em", "f1"))),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        hops: int = 2,
        corpus_size: int = 24,
        reward: str = "em",
        max_turns: int = 10,
        **kwargs: Any,
    ):
        super().__init__(max_turns=max_turns, **kwargs)
        self.hops = check_int("hops", hops, 2, 3)
        self.corpus_size = check_int("corpus_size", corpus_size, 6, 200)
        if reward not in ("em", "f1"):
            raise ValueError(f"reward must be 'em' or 'f1', got {reward!r}")
        self.reward_kind = reward
        self._articles: dict[str, str] = {}
        self._titles: list[str] = []
        self._retriever: Any = None
        self._chain: list[str] = []
        self._gold = ""
        self._searches = 0
        self._opened: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_retriever"] = None  # rebuilt from the articles on demand
        return state

    def _task_instructions(self) -> str:
        return (
            "Answer the question using the encyclopedia of a fictional world: search it, open articles, follow the "
            "facts from article to article. Answer with the name only: <answer>Name</answer>."
        )

    def _tools(self) -> Sequence[Tool]:
        return (SEARCH_TOOL, OPEN_TOOL)

    def _generate(self) -> str:
        rng = self.np_random
        world = _World(rng, self.corpus_size)
        org = world.orgs[int(rng.integers(len(world.orgs)))]
        founder = world.founder[org]
        kind = int(rng.integers(2))
        if self.hops == 2 and kind == 0:
            question, self._chain, self._gold = (
                f"In which city was the founder of the {org} born?",
                [org, founder],
                world.born_in[founder],
            )
        elif self.hops == 2:
            question, self._chain, self._gold = (
                f"In which country is the seat of the {org}?",
                [org, world.seat[org]],
                world.city_country[world.seat[org]],
            )
        else:
            city = world.born_in[founder]
            phrasing = (
                "In which country was the founder of the {} born?",
                "The {} was founded by someone born in a city. In which country is that city?",
            )[kind]
            question, self._chain, self._gold = (
                phrasing.format(org),
                [org, founder, city],
                world.city_country[city],
            )
        self._articles = world.articles
        self._titles = sorted(self._articles)
        self._retriever = None
        self._searches = 0
        self._opened = set()
        return f"Question: {question}"

    def _index(self) -> Any:
        if self._retriever is None:
            import bm25s

            retriever = bm25s.BM25()
            texts = [f"{title}. {self._articles[title]}" for title in self._titles]
            retriever.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
            self._retriever = retriever
        return self._retriever

    def _call_tool(self, call: ToolCall) -> str:
        if call.name == "search":
            self._searches += 1
            return self._search(call.arguments["query"])
        title = call.arguments["title"].strip()
        match = next(
            (
                t
                for t in self._titles
                if t.lower() == title.lower() or t.lower() == f"the {title.lower()}"
            ),
            None,
        )
        if match is None:
            raise ActionParseError(f"no article titled {title[:100]!r}; use search to find titles")
        self._opened.add(match)
        return f"# {match}\n{self._articles[match]}"

    def _search(self, query: str) -> str:
        import bm25s

        tokens = bm25s.tokenize([query[:1000]], return_ids=False, show_progress=False)
        if not tokens[0]:
            return "No results (the query has no searchable words)."
        documents, scores = self._index().retrieve(
            tokens, k=min(TOP_K, len(self._titles)), show_progress=False, n_threads=1
        )
        hits = [(int(d), float(s)) for d, s in zip(documents[0], scores[0]) if s > 0]
        if not hits:
            return "No results."
        lines = []
        for rank, (document, _) in enumerate(hits, 1):
            title = self._titles[document]
            lines.append(f"{rank}. {title}: {self._articles[title].split('. ')[0]}.")
        return "\n".join(lines)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        info["searches"] = self._searches
        return observation, reward, terminated, truncated, info

    def _verify(self, answer: str) -> tuple[bool, float]:
        exact = normalize_answer(answer) == normalize_answer(self._gold)
        if exact:
            return True, 1.0
        if self.reward_kind != "f1" or is_hedged(answer, self._gold):
            return False, 0.0  # "A or B", "A, B, C": no partial credit for listing the gold
        extra = set(normalize_answer(answer).split()) - set(normalize_answer(self._gold).split())
        if extra & self._name_words():
            return False, 0.0  # "Rostales Sulmora": another name of the world beside the gold
        return False, answer_f1(answer, self._gold)

    def _name_words(self) -> set[str]:
        """The words of the encyclopedia's names (titles without the organization kinds)."""
        kinds = {word for kind in _ORG_KINDS for word in kind.split()}
        return {w for title in self._titles for w in normalize_answer(title).split()} - kinds

    def oracle_action(self) -> str:
        """Search for the first entity, open each article of the chain, answer with the last fact."""
        if self._searches == 0:
            return tool_call_text("search", query=self._chain[0])
        for title in self._chain:
            if title not in self._opened:
                return tool_call_text("open", title=title)
        return f"<answer>{self._gold}</answer>"
