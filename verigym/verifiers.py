"""Answer extraction and hardened answer checks shared by the text and tool environments.

The rules (stable; other families import them):

* **Extraction** (:func:`extract_answer`): everything inside ``<think>...</think>`` is ignored (an
  unclosed ``<think>`` hides the rest of the reply); chat special tokens such as ``<|im_end|>`` are
  deleted; the final answer is the content of the **last** ``<answer>...</answer>`` tag or
  ``\\boxed{...}`` (whichever starts last). With ``fallback_to_text=True`` a reply with neither is
  taken whole (stripped). A ``\\boxed{`` whose braces nest deeper than :data:`MAX_BRACE_DEPTH` or
  never close is ignored.
* **No credit for containing the oracle** (:func:`is_hedged`, :func:`contains_oracle`): an answer
  that lists alternatives ("A or B or C", "41, 42, 43") one of which is the oracle is a hedge; a
  longer answer that merely contains the oracle is not the oracle.
* **Look-alikes** (:func:`has_lookalikes`): answers are NFKC-normalized (fullwidth digits become
  ASCII); an answer that still has non-ASCII letters or digits where the oracle is pure ASCII (a
  Cyrillic "а" for a Latin "a") is refused.
* **Bounded symbolic checks** (:func:`symbolic_equal`): symbolic work runs in the verifier worker
  process of :func:`verigym.workers.call_bounded`, which is killed when it exceeds its time limit,
  so the bound holds off the main thread too. Agent text is never passed to ``eval``; text that
  reaches a sympy parser first passes :func:`safe_expression` (a character and identifier
  allow-list).

The rules are pure functions; this module starts no process itself. It imports only the standard
library and :mod:`verigym.workers` at import time; ``math_verify`` and ``sympy`` are imported inside
the worker process.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from verigym.workers import VerifierTimeout, call_bounded

__all__ = [
    "MAX_BRACE_DEPTH",
    "SAFE_FUNCTION_NAMES",
    "UnsafeExpression",
    "alternatives",
    "contains_oracle",
    "extract_answer",
    "has_lookalikes",
    "is_hedged",
    "normalize_answer",
    "safe_expression",
    "strip_special_tokens",
    "strip_think",
    "symbolic_equal",
]

logger = logging.getLogger(__name__)

MAX_BRACE_DEPTH = 64
"""Deepest ``{`` nesting read inside ``\\boxed{...}``; deeper boxes are ignored."""

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_SPECIAL_TOKEN = re.compile(r"<\|[^|<>\s]{1,40}\|>")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_HEDGE_WORDS = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibly|probably|otherwise|alternatively)\b", re.IGNORECASE
)
_SEPARATORS = (",", ";", "|", "\n", " and ", "/", "&")
_LIST_SEPARATORS = (
    ",",
    ";",
    "|",
    "\n",
    " and ",
    " or ",
)  # not "/" or "&": division, LaTeX alignment
_LATEX_TEXT = re.compile(
    r"\\(?:text|textbf|textit|textrm|texttt|mathrm|mathbf|mathit|mathtt|operatorname|mbox|hbox)\s*\{([^{}]*)\}"
)
_LATEX_OR = re.compile(r"\\(?:lor|vee|mid)\b|\|\||\u2228")
_LATEX_PLUS_MINUS = re.compile(r"\\(?:pm|mp)\b|[\u00b1\u2213]")
_LATEX_BREAK = re.compile(r"\\\\|\\(?:newline|quad|qquad|hfill)\b|\\[;:]")
_LATEX_NOISE = re.compile(r"\$|\\(?:left|right|displaystyle|big|Big)\b|\\[{}]")
_DIGIT_GROUP = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_BRACKETS = "()[]{}<>\"'`"


class UnsafeExpression(ValueError):
    """Text refused by :func:`safe_expression` (it would reach a parser that evaluates code)."""


# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------


def strip_think(text: str) -> str:
    """``text`` without its ``<think>...</think>`` blocks (an unclosed block runs to the end)."""
    if "<think>" not in text.lower():
        return text
    return _THINK_BLOCK.sub(" ", text)


def strip_special_tokens(text: str) -> str:
    """``text`` without chat special tokens of the ``<|name|>`` form (``<|im_end|>``, ...)."""
    return _SPECIAL_TOKEN.sub("", text) if "<|" in text else text


def _boxed_spans(text: str) -> list[tuple[int, str]]:
    """(start, content) of each ``\\boxed{...}`` with balanced braces no deeper than the limit."""
    spans = []
    for match in _BOXED.finditer(text):
        depth, position = 1, match.end()
        while position < len(text) and depth:
            char = text[position]
            if char == "{":
                depth += 1
                if depth > MAX_BRACE_DEPTH:
                    break
            elif char == "}":
                depth -= 1
            position += 1
        if depth == 0:
            spans.append((match.start(), text[match.end() : position - 1]))
    return spans


def extract_answer(text: str, *, fallback_to_text: bool = False) -> str | None:
    """The final answer of a reply, by the module's extraction rule.

    Args:
        text: the agent's whole reply.
        fallback_to_text: with no ``<answer>`` tag and no ``\\boxed{}``, return the visible reply
            (outside ``<think>``) stripped, instead of ``None``.

    Returns:
        The stripped content of the last ``<answer>`` tag or ``\\boxed{}`` outside ``<think>``;
        ``None`` when there is none (and no fallback), or when the visible reply is empty.

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"extract_answer takes a str, got {type(text).__name__}")
    if text.startswith("<answer>") and text.endswith("</answer>"):
        inner = text[8:-9]  # (the two tags cannot overlap: such a text has at least 17 characters)
        if "<" not in inner and "\\" not in inner:
            return inner.strip()  # the common "<answer>X</answer>": the rule below gives the same
    visible = strip_special_tokens(strip_think(text))
    candidates = [(m.start(), m.group(1)) for m in _ANSWER_TAG.finditer(visible)]
    # Boxes inside an answer tag start after the tag, so they win over it.
    candidates.extend(_boxed_spans(visible))
    if candidates:
        return max(candidates, key=lambda c: c[0])[1].strip()
    if fallback_to_text:
        stripped = visible.strip()
        return stripped or None
    return None


# ---------------------------------------------------------------------------------------------
# Comparing an answer with the oracle
# ---------------------------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """NFKC, surrounding whitespace and one trailing period removed, inner whitespace collapsed,
    lower case. Used by the hedge and containment tests, never as the dataset's own comparison."""
    text = unicodedata.normalize("NFKC", text).strip()
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    return " ".join(text.split()).lower()


def has_lookalikes(answer: str, oracle: str) -> bool:
    """True when ``oracle`` is ASCII but ``answer`` (after NFKC) has a non-ASCII letter or digit."""
    if not oracle.isascii() or answer.isascii():
        return False
    answer = unicodedata.normalize("NFKC", answer)
    return not answer.isascii() and any(
        not c.isascii() and unicodedata.category(c)[0] in "LN" for c in answer
    )


def contains_oracle(answer: str, oracle: str) -> bool:
    """True when the normalized ``answer`` contains the normalized ``oracle`` but is longer."""
    a, o = normalize_answer(answer), normalize_answer(oracle)
    return bool(o) and o in a and a != o


def _hedge_form(text: str) -> str:
    """``text`` for hedge detection: NFKC, lower case, LaTeX wrappers (``\\text{...}``) unwrapped,
    LaTeX "or" (``\\lor``, ``\\vee``, ``||``) spelled " or ", ``\\pm`` spelled "±", LaTeX line
    breaks and wide spaces made newlines, ``$`` and ``\\left``/``\\right`` dropped. Newlines kept."""
    text = unicodedata.normalize("NFKC", text).lower()
    for _ in range(8):
        unwrapped = _LATEX_TEXT.sub(lambda m: f" {m.group(1)} ", text)
        if unwrapped == text:
            break
        text = unwrapped
    text = _LATEX_OR.sub(" or ", text)
    text = _LATEX_PLUS_MINUS.sub(" \u00b1 ", text)
    text = _LATEX_BREAK.sub("\n", text)
    text = _LATEX_NOISE.sub(" ", text)
    text = _DIGIT_GROUP.sub("", text)
    return "\n".join(" ".join(line.split()) for line in text.splitlines()).strip()


def _part(text: str) -> str:
    """One alternative of a list, normalized, without surrounding brackets and quotes."""
    return normalize_answer(text).strip(_BRACKETS + " ").strip()


def alternatives(
    answer: str, reference: str, *, separators: Iterable[str] | None = None
) -> set[str]:
    """The distinct alternatives ``answer`` lists at separators ``reference`` does not use.

    Separators: ``,`` ``;`` ``|`` ``&`` ``/`` newline (LaTeX ``\\\\`` and ``\\quad`` too), "and",
    "or" (``\\lor``, ``\\vee``, ``||`` too). Brackets and quotes around a part are dropped, so
    ``[41, 42]`` and ``\\{41, 42\\}`` list ``{"41", "42"}``.

    Args:
        answer: the answer.
        reference: the reference answer.
        separators: the separators to split at (default: all of the above).

    Returns:
        The normalized parts; fewer than two means the answer lists no alternatives.
    """
    a, o = _hedge_form(answer), _hedge_form(reference)
    parts = {a}
    for separator in (*_SEPARATORS, " or ") if separators is None else separators:
        if separator in o or (separator.strip() and separator.strip() in o.split()):
            continue
        parts = {piece for part in parts for piece in part.split(separator)}
    return {_part(p) for p in parts} - {""}


def is_hedged(answer: str, oracle: str) -> bool:
    """True when ``answer`` offers alternatives, one of which is ``oracle``.

    Every spelling counts: plain text, newlines, lists and sets (``[41, 42]``, ``\\{41, 42\\}``),
    LaTeX (``\\text{41 or 42}``, ``41 \\lor 42``, ``41 \\\\ 42``, ``\\pm 42``). An answer is hedged
    when it differs from the oracle (normalized) and (a) it uses a hedge word ("or", "either",
    "maybe", ...) or a plus-minus sign the oracle does not use, or (b) its
    :func:`alternatives` are two or more, one equal to the oracle, or (c) the oracle is a number
    and the answer holds two or more different numbers, one equal to it.
    """
    if normalize_answer(answer) == normalize_answer(oracle):
        return False
    a, o = _hedge_form(answer), _hedge_form(oracle)
    if " ".join(a.split()) == " ".join(o.split()):
        return False
    if _HEDGE_WORDS.search(a) and not _HEDGE_WORDS.search(o):
        return True
    if "\u00b1" in a and "\u00b1" not in o:
        return True
    parts = alternatives(answer, oracle)
    if len(parts) >= 2 and _part(oracle) in parts:
        return True
    if _NUMBER.fullmatch(normalize_answer(oracle)):
        numbers = set()
        for found in _NUMBER.findall(a):
            try:
                numbers.add(float(found))
            except ValueError:  # pragma: no cover - the pattern only matches floats
                continue
        try:
            target = float(normalize_answer(oracle))
        except ValueError:  # pragma: no cover
            return False
        if len(numbers) >= 2 and target in numbers:
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Expressions that may reach sympy
# ---------------------------------------------------------------------------------------------

SAFE_FUNCTION_NAMES = frozenset(
    "sin cos tan cot sec csc asin acos atan sinh cosh tanh exp log ln sqrt pi oo Abs abs".split()
)
"""Multi-letter identifiers :func:`safe_expression` accepts (single letters are always accepted)."""

_EXPRESSION_CHARS = re.compile(r"[0-9A-Za-z\s+\-*/^().,=]*")
_IDENTIFIER = re.compile(r"[A-Za-z]+")


def safe_expression(
    text: str,
    *,
    names: Iterable[str] = SAFE_FUNCTION_NAMES,
    max_length: int = 400,
    max_depth: int = 24,
) -> str:
    """Return ``text`` if it is a plain arithmetic/algebraic expression, else raise.

    Allowed: digits, letters, whitespace, ``+ - * / ^ ( ) . , =``; identifiers are single letters
    or in ``names``; parentheses nest at most ``max_depth``. No quotes, brackets, underscores,
    attribute access or keywords can pass, so sympy's ``parse_expr`` cannot be steered into
    running code.

    Raises:
        UnsafeExpression: the text is too long, has another character or identifier, or nests
            too deep.
    """
    if len(text) > max_length:
        raise UnsafeExpression(
            f"expression has {len(text)} characters; at most {max_length} are read"
        )
    if not _EXPRESSION_CHARS.fullmatch(text):
        bad = sorted({c for c in text if not _EXPRESSION_CHARS.fullmatch(c)})[:5]
        raise UnsafeExpression(f"expression has characters that are not allowed: {bad}")
    allowed = set(names)
    for identifier in _IDENTIFIER.findall(text):
        if len(identifier) > 1 and identifier not in allowed:
            raise UnsafeExpression(f"unknown name {identifier!r} in expression")
    depth = 0
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if depth > max_depth:
            raise UnsafeExpression(f"parentheses nest deeper than {max_depth}")
        if depth < 0:
            raise UnsafeExpression("unbalanced parentheses")
    return text


_TRAILING_STOP = re.compile(r"\.\s*$")


def _parse_whole(text: str) -> list[Any]:
    """math-verify's parse of ``text`` as one LaTeX expression (``$text$``), never of a fragment.

    ``math_verify.parse`` alone extracts an answer from free text: from an answer already extracted
    it would take a piece (``2`` of ``2\\sqrt{2}``, ``3`` of ``3x+2``, ``1`` of ``\\sum_{k=1}^{10} k``).
    """
    from math_verify import LatexExtractionConfig, parse

    return parse(
        f"${_TRAILING_STOP.sub('', text.strip())}$", extraction_config=[LatexExtractionConfig()]
    )


_UNEVALUATED = ("Sum", "Product", "Limit", "Integral", "Derivative")
"""sympy constructs that state a computation instead of its value"""


def _unevaluated(parsed: list[Any]) -> set[str]:
    import sympy

    kinds = [getattr(sympy, name) for name in _UNEVALUATED]
    return {
        kind.__name__
        for item in parsed
        if isinstance(item, sympy.Basic)
        for kind in kinds
        if item.has(kind)
    }


def _math_verify_equal(answer: str, reference: str) -> bool:
    import sympy
    from math_verify import parse, verify

    # math_verify's own signal-based timeouts work here: this is the worker's main thread.
    target = _parse_whole(answer)
    if not any(isinstance(item, (sympy.Basic, sympy.MatrixBase)) for item in target):
        return False  # not one expression: text, or sympy code such as "Sum(k, (k, 1, 10))"
    gold = _parse_whole(reference)
    if not any(isinstance(item, (sympy.Basic, sympy.MatrixBase)) for item in gold):
        gold = parse(reference)  # the reference is trusted: its free-text form is fine
    if _unevaluated(target) - _unevaluated(gold):
        return False  # "\\sum_{k=1}^{10} k" for 55: the question restated, not answered
    return bool(verify(gold, target))


def symbolic_equal(
    answer: str, reference: str, *, timeout: float = 2.0, max_length: int = 1000
) -> bool:
    """Whether ``answer`` and ``reference`` are mathematically equal (math-verify), time-bounded.

    Both strings may be LaTeX (``\\frac{1}{2}``) or plain (``0.5``). The comparison runs in the
    verifier worker process (:func:`verigym.workers.call_bounded`); an answer longer than
    ``max_length`` characters, nesting braces deeper than :data:`MAX_BRACE_DEPTH`, a hedge in any
    spelling (a hedge word or ``\\pm`` the reference does not use, or two or more
    :func:`alternatives`, e.g. ``[41, 42]`` or ``\\text{41 or 42}``), a parse failure or a timeout
    all count as *not equal*.

    The answer is parsed whole, as one LaTeX (or plain math) expression, never searched for a piece
    that matches (``2\\sqrt{2}`` is not ``2``, ``3x+2`` is not ``3``). An answer that leaves a sum,
    product, limit, integral or derivative unevaluated where the reference has none is not equal
    (``\\sum_{k=1}^{10} k`` is not ``55``). Equations follow math-verify: ``x=3`` equals ``3`` (an
    assignment gives its value), but against an equation the variables must match (``y=3`` is not
    ``x=3``).

    Args:
        answer: the agent's final answer (already extracted, e.g. by :func:`extract_answer`).
        reference: the oracle answer (trusted).
        timeout: CPU seconds the comparison may take in the verifier worker.
        max_length: longer answers are refused unparsed.

    Raises:
        TypeError: ``answer`` or ``reference`` is not a str.
    """
    if not isinstance(answer, str) or not isinstance(reference, str):
        raise TypeError("symbolic_equal takes two str")
    if len(answer) > max_length or _max_brace_depth(answer) > MAX_BRACE_DEPTH:
        return False
    hedge = _hedge_form(answer)
    if (_HEDGE_WORDS.search(hedge) and not _HEDGE_WORDS.search(_hedge_form(reference))) or (
        "\u00b1" in hedge and "\u00b1" not in _hedge_form(reference)
    ):
        return False  # "41 or 42", "\\text{41 or 42}", "\\pm 42": a hedge is never equal
    if len(alternatives(answer, reference, separators=_LIST_SEPARATORS)) >= 2:
        return False  # "41, 42", "[41, 42]", "41 \\\\ 42": several values where one is asked for
    try:
        return bool(call_bounded(_math_verify_equal, answer, reference, timeout=timeout))
    except (VerifierTimeout, RuntimeError) as exc:
        logger.debug("symbolic_equal(%r, %r) refused: %s", answer[:80], reference[:80], exc)
        return False


def _max_brace_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif char == "}":
            depth = max(0, depth - 1)
    return deepest
