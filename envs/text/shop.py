"""Shop: a WebShop-style text store with a generated catalog, search, product pages and a buy."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from verigym.core import ActionParseError
from verigym.envs.text.base import DIFFICULTIES, TextGameEnv
from verigym.validation import check_choice

__all__ = ["Product", "ShopEnv"]

_CATEGORIES = ("t-shirt", "hoodie", "sneakers", "backpack", "jacket", "socks", "cap", "scarf")
_MATERIALS = ("cotton", "wool", "polyester", "leather", "linen", "denim")
_FEATURES = ("waterproof", "organic", "recycled", "slim-fit", "lightweight", "handmade")
_COLOURS = ("red", "blue", "black", "white", "green", "grey", "navy", "beige")
_SIZES = ("xs", "s", "m", "l", "xl")
_BRANDS = ("Northwind", "Aster", "Kestrel", "Lumen", "Orchid", "Quarry", "Tidal", "Vela")
# difficulty -> (catalog size, uses size option, uses a feature attribute, step limit)
_LEVELS = {
    "easy": (30, False, False, 15),
    "medium": (60, True, False, 20),
    "hard": (120, True, True, 25),
}
_PAGE = 5
_ACTION = re.compile(r"(search|click)\s*\[(.*?)\]|\b(buy)\b", re.DOTALL)
_TOKEN = re.compile(r"[a-z0-9\-]+")


@dataclass(frozen=True)
class Product:
    """One catalog entry; ``price`` in US dollars."""

    pid: str
    brand: str
    category: str
    material: str
    features: tuple[str, ...]
    colours: tuple[str, ...]
    sizes: tuple[str, ...]
    price: float

    @property
    def title(self) -> str:
        extra = " ".join(self.features)
        return f"{self.brand} {extra + ' ' if extra else ''}{self.material} {self.category}"

    def tokens(self) -> set[str]:
        return set(_TOKEN.findall(self.title.lower())) | set(self.colours) | set(self.sizes)


class ShopEnv(TextGameEnv):
    """A procedurally generated web shop in the manner of WebShop (Yao et al., 2022).

    ## Description
    A catalog of products (brand, category, material, features, colour and size options, price)
    is generated per episode together with an instruction such as "buy a red cotton t-shirt in
    size m under $20". The target product exists; the catalog also holds near misses (the same
    product over budget, other materials, categories, colours). The agent searches, opens
    product pages, selects options and buys. The oracle is an attribute matcher.

    ## Action Space
    ``UnicodeText(8192)``: ``search[query]`` (on the search page), ``click[...]`` on a button or
    link shown on the page (a product id, ``next >``, ``< prev``, ``back to search``, an option
    value, ``buy now``) or ``buy``. ``info["action_candidates"]`` lists the clickable actions of
    the current page plus ``search[<instruction>]`` on the search page.

    ## Observation Space
    ``UnicodeText``: the instruction and the current page as text.

    ## Rewards
    On buying, ``reward = score`` = share of the requirements met by the bought product and the
    selected options: category, material, feature (hard), colour, size (medium, hard), and
    price under budget. ``invalid_action_reward`` (default ``-0.05``) for an action that is not
    on the page (the step is spent).

    ## Starting State
    Catalog sizes: easy 30, medium 60, hard 120 products.

    ## Episode End
    Terminated on ``buy`` (success when every requirement is met); truncated after the step limit
    (easy 15, medium 20, hard 25) with score 0.

    ## Arguments
    * ``difficulty``: ``"easy"``, ``"medium"`` or ``"hard"``.
    * ``invalid_action_reward`` (float).

    ## Version History
    * v0: initial version.

    References: S. Yao et al., "WebShop: Towards Scalable Real-World Web Interaction with Grounded
    Language Agents", NeurIPS 2022.
    """

    partial_reward_on_loss = True

    def __init__(
        self,
        *,
        difficulty: str = "medium",
        invalid_action_reward: float = -0.05,
        render_mode: str | None = None,
    ):
        self.difficulty = check_choice("difficulty", difficulty, DIFFICULTIES)
        self.catalog_size, self.use_size, self.use_feature, limit = _LEVELS[difficulty]
        self._init_base(
            max_turns=limit, invalid_action_reward=invalid_action_reward, render_mode=render_mode
        )
        self._catalog: list[Product] = []
        self._tokens: dict[str, set[str]] = {}
        self._by_id: dict[str, Product] = {}
        self._search_cache: dict[str, list[Product]] = {}
        self._goal: dict[str, Any] = {}
        self._page: tuple[Any, ...] = ("search",)
        self._selected: dict[str, str] = {}
        self._score = 0.0

    # -- task ------------------------------------------------------------------------------------------
    def _choice(self, options: tuple[str, ...], k: int = 1) -> list[str]:
        picks = self.np_random.choice(len(options), size=k, replace=False)
        return [options[int(i)] for i in sorted(picks)]

    def _product(
        self,
        index: int,
        category: str,
        material: str,
        features: tuple[str, ...],
        colours: list[str],
        sizes: list[str],
        price: float,
    ) -> Product:
        brand = _BRANDS[int(self.np_random.integers(len(_BRANDS)))]
        return Product(
            f"p{index:03d}",
            brand,
            category,
            material,
            features,
            tuple(colours),
            tuple(sizes),
            round(price, 2),
        )

    def _new_task(self) -> str:
        category, material = self._choice(_CATEGORIES)[0], self._choice(_MATERIALS)[0]
        feature = self._choice(_FEATURES)[0] if self.use_feature else None
        colour = self._choice(_COLOURS)[0]
        size = self._choice(_SIZES)[0] if self.use_size else None
        budget = float(self.np_random.integers(3, 12)) * 5.0
        features = (feature,) if feature else ()

        def options(must: str | None, pool: tuple[str, ...], k: int) -> list[str]:
            chosen = set(self._choice(pool, k))
            if must:
                chosen.add(must)
            return [v for v in pool if v in chosen]

        products = []
        target_price = budget * float(self.np_random.uniform(0.5, 0.95))
        products.append(
            (
                "target",
                category,
                material,
                features,
                options(colour, _COLOURS, 2),
                options(size, _SIZES, 3),
                target_price,
            )
        )
        # near misses: over budget twin, other material, other category, missing colour/feature
        products.append(
            (
                "near",
                category,
                material,
                features,
                options(colour, _COLOURS, 2),
                options(size, _SIZES, 3),
                budget * float(self.np_random.uniform(1.1, 1.6)),
            )
        )
        other_material = [m for m in _MATERIALS if m != material][
            int(self.np_random.integers(len(_MATERIALS) - 1))
        ]
        products.append(
            (
                "near",
                category,
                other_material,
                features,
                options(colour, _COLOURS, 2),
                options(size, _SIZES, 3),
                target_price * 0.9,
            )
        )
        other_category = [c for c in _CATEGORIES if c != category][
            int(self.np_random.integers(len(_CATEGORIES) - 1))
        ]
        products.append(
            (
                "near",
                other_category,
                material,
                features,
                options(colour, _COLOURS, 2),
                options(size, _SIZES, 3),
                target_price * 0.8,
            )
        )
        products.append(
            (
                "near",
                category,
                material,
                (),
                options(None, tuple(c for c in _COLOURS if c != colour), 2),
                options(size, _SIZES, 3),
                target_price * 0.85,
            )
        )
        while len(products) < self.catalog_size:
            products.append(
                (
                    "random",
                    self._choice(_CATEGORIES)[0],
                    self._choice(_MATERIALS)[0],
                    tuple(self._choice(_FEATURES))
                    if self.use_feature and self.np_random.random() < 0.5
                    else (),
                    options(None, _COLOURS, 3),
                    options(None, _SIZES, 3) if self.use_size else [],
                    float(self.np_random.uniform(5, 80)),
                )
            )
        order = self.np_random.permutation(len(products))
        self._catalog = []
        for index, position in enumerate(order):
            _, cat, mat, feats, cols, sizes, price = products[int(position)]
            self._catalog.append(
                self._product(index, cat, mat, feats, cols, sizes if self.use_size else [], price)
            )
        self._tokens = {p.pid: p.tokens() for p in self._catalog}
        self._by_id = {p.pid: p for p in self._catalog}
        self._search_cache: dict[str, list[Product]] = {}
        self._goal = {
            "category": category,
            "material": material,
            "feature": feature,
            "colour": colour,
            "size": size,
            "budget": budget,
        }
        self._page = ("search",)
        self._selected = {}
        self._score = 0.0
        return f"{self.instructions()}\n{self._render_page()}"

    def _instruction(self) -> str:
        g = self._goal
        feature = f"{g['feature']} " if g["feature"] else ""
        size = f" in size {g['size']}" if g["size"] else ""
        return f"buy a {g['colour']} {feature}{g['material']} {g['category']}{size} under ${g['budget']:.2f}"

    def instructions(self) -> str:
        if not self._goal:
            return "Shop: follow the instruction. Actions: search[query], click[button], buy."
        return (
            f"Instruction: {self._instruction()}. Actions: search[query] on the search page, "
            "click[...] on a link or button of the page (product id, next >, < prev, back to search, "
            "an option value, buy now), buy. Select every option the instruction asks for before buying."
        )

    # -- pages -------------------------------------------------------------------------------------
    def _results(self, query: str) -> list[Product]:
        """Up to 15 products sharing the most words with the query (ties by id), cached per query."""
        if query not in self._search_cache:
            words = set(_TOKEN.findall(query.lower()))
            overlap = {p.pid: len(words & self._tokens[p.pid]) for p in self._catalog}
            ranked = sorted(
                (p for p in self._catalog if overlap[p.pid]), key=lambda p: (-overlap[p.pid], p.pid)
            )
            self._search_cache[query] = ranked[: 3 * _PAGE]
        return self._search_cache[query]

    def _render_page(self) -> str:
        kind = self._page[0]
        if kind == "search":
            return "[Search page] Type search[your query]."
        if kind == "results":
            _, query, page = self._page
            hits = self._results(query)
            shown = hits[page * _PAGE : (page + 1) * _PAGE]
            lines = [f"[Results for {query!r}, page {page + 1}] [back to search]"]
            lines += [f"[{p.pid}] {p.title} - ${p.price:.2f}" for p in shown] or [
                "No products found."
            ]
            if page > 0:
                lines.append("[< prev]")
            if (page + 1) * _PAGE < len(hits):
                lines.append("[next >]")
            return "\n".join(lines)
        product = self._product_by_id(self._page[1])
        lines = [
            f"[Product {product.pid}] {product.title} - ${product.price:.2f} [< prev] [back to search]"
        ]
        lines.append("colour: " + " ".join(f"[{c}]" for c in product.colours))
        if product.sizes:
            lines.append("size: " + " ".join(f"[{s}]" for s in product.sizes))
        if self._selected:
            lines.append(
                "selected: " + ", ".join(f"{k} {v}" for k, v in sorted(self._selected.items()))
            )
        lines.append("[buy now]")
        return "\n".join(lines)

    def _product_by_id(self, pid: str) -> Product:
        return self._by_id[pid]

    def _clickables(self) -> list[str]:
        kind = self._page[0]
        if kind == "search":
            return []
        if kind == "results":
            _, query, page = self._page
            hits = self._results(query)
            links = ["back to search"] + [p.pid for p in hits[page * _PAGE : (page + 1) * _PAGE]]
            if page > 0:
                links.append("< prev")
            if (page + 1) * _PAGE < len(hits):
                links.append("next >")
            return links
        product = self._product_by_id(self._page[1])
        return ["< prev", "back to search", *product.colours, *product.sizes, "buy now"]

    def action_candidates(self) -> list[str]:
        if self._page[0] == "search":
            return [f"search[{self._instruction()}]"] if self._goal else []
        return [f"click[{c}]" for c in self._clickables()]

    # -- moves -------------------------------------------------------------------------------------
    def _parse(self, text: str) -> tuple[str, str]:
        found = _ACTION.findall(text)
        if not found:
            raise ActionParseError("reply search[query], click[button] or buy")
        verb, argument, buy = found[-1]
        if buy:
            return "click", "buy now"
        return verb, " ".join(argument.split())

    def _play(self, move: Any) -> tuple[str, bool, bool]:
        verb, argument = move
        if verb == "search":
            if self._page[0] != "search":
                raise ActionParseError(
                    "search[...] works on the search page; click[back to search] first"
                )
            if not argument:
                raise ActionParseError("search[...] needs a query")
            self._page = ("results", argument, 0)
            return self._render_page(), False, False
        if argument not in self._clickables():
            raise ActionParseError(f"{argument!r} is not a link or button on this page")
        kind = self._page[0]
        if argument == "back to search":
            self._page, self._selected = ("search",), {}
        elif kind == "results":
            _, query, page = self._page
            if argument == "next >":
                self._page = ("results", query, page + 1)
            elif argument == "< prev":
                self._page = ("results", query, page - 1)
            else:
                self._page, self._selected = ("product", argument, self._page), {}
        elif argument == "< prev":
            self._page, self._selected = self._page[2], {}
        elif argument == "buy now":
            self._score = self._verify(self._product_by_id(self._page[1]))
            return (
                f"You bought {self._page[1]} (score {self._score:.2f}).",
                self._score >= 1.0,
                self._score < 1.0,
            )
        else:
            self._selected["size" if argument in _SIZES else "colour"] = argument
        return self._render_page(), False, False

    def _verify(self, product: Product) -> float:
        """Share of requirements met by the bought product and the selected options."""
        g = self._goal
        checks = [
            product.category == g["category"],
            product.material == g["material"],
            self._selected.get("colour") == g["colour"],
            product.price <= g["budget"],
        ]
        if g["feature"]:
            checks.append(g["feature"] in product.features)
        if g["size"]:
            checks.append(self._selected.get("size") == g["size"])
        return sum(checks) / len(checks)

    def _partial_score(self) -> float:
        return self._score

    def oracle_action(self) -> str:
        """Match products against the instruction: search, open the match, select, buy."""
        g = self._goal
        kind = self._page[0]
        if kind == "search":
            return f"search[{self._instruction()}]"
        if kind == "results":
            _, query, page = self._page
            for pid in self._clickables():
                product = self._by_id.get(pid)
                if product and self._matches(product):
                    return f"click[{pid}]"
            return "click[next >]" if "next >" in self._clickables() else "click[back to search]"
        product = self._product_by_id(self._page[1])
        if not self._matches(product):
            return "click[< prev]"
        if self._selected.get("colour") != g["colour"]:
            return f"click[{g['colour']}]"
        if g["size"] and self._selected.get("size") != g["size"]:
            return f"click[{g['size']}]"
        return "click[buy now]"

    def _matches(self, product: Product) -> bool:
        g = self._goal
        return (
            product.category == g["category"]
            and product.material == g["material"]
            and product.price <= g["budget"]
            and g["colour"] in product.colours
            and (not g["size"] or g["size"] in product.sizes)
            and (not g["feature"] or g["feature"] in product.features)
        )
