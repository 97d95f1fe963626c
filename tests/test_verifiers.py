"""verigym.verifiers: the extraction rule, hedges, look-alikes, the expression screen, symbolic
equality (the bounded worker itself is tested in tests/test_processes.py)."""

from __future__ import annotations

import time

import pytest

from verigym.verifiers import (
    UnsafeExpression,
    contains_oracle,
    extract_answer,
    has_lookalikes,
    is_hedged,
    safe_expression,
    symbolic_equal,
)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("<answer>42</answer>", "42"),
        ("<answer> 41 </answer> and finally <answer>42</answer>", "42"),
        ("<answer>41</answer> so \\boxed{42}", "42"),
        ("\\boxed{42} hmm <answer>41</answer>", "41"),
        ("<answer>\\boxed{\\frac{1}{2}}</answer>", "\\frac{1}{2}"),
        ("<think><answer>42</answer></think>", None),
        ("<think>42</think><answer>41</answer>", "41"),
        ("<answer>41</answer><think>never closed <answer>42</answer>", "41"),
        ("<answer>42</answer><|im_end|>", "42"),
        ("<ANSWER>42</ANSWER>", "42"),
        ("no tags here", None),
        ("\\boxed{" + "{" * 100 + "}" * 100 + "}", None),
    ],
)
def test_extract_answer(reply, expected):
    assert extract_answer(reply) == expected


def test_fallback_to_text_uses_visible_reply_only():
    assert extract_answer("<think>x</think> 42 ", fallback_to_text=True) == "42"
    assert extract_answer("<think>42</think>", fallback_to_text=True) is None


def test_extraction_of_huge_inputs_is_fast():
    start = time.perf_counter()
    assert extract_answer("\\boxed{" + "{" * 100_000 + "}" * 100_000 + "}") is None
    assert extract_answer("x" * (1 << 20) + "<answer>1</answer>") == "1"
    assert time.perf_counter() - start < 5.0


def test_extract_answer_rejects_non_str():
    with pytest.raises(TypeError):
        extract_answer(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "oracle", "hedged"),
    [
        ("41 or 42", "42", True),
        ("either 42 or 43", "42", True),
        ("41, 42, 43", "42", True),
        ("41\n42", "42", True),
        ("maybe 42", "42", True),
        ("41 42 43", "42", True),
        ("42", "42", False),
        ("42.", "42", False),
        ("4 apples", "4", False),
        ("1, 2, 3", "1, 2, 3", False),
        ("cat", "dog", False),
        # every spelling of a hedge (issue 16, section 3)
        ("\\text{41 or 42}", "42", True),
        ("\\text{41} \\text{ or } \\text{42}", "42", True),
        ("[41, 42]", "42", True),
        ("\\{41, 42\\}", "42", True),
        ("['cat', 'dog']", "dog", True),
        ("41 \\lor 42", "42", True),
        ("41 \\vee 42", "42", True),
        ("41 || 42", "42", True),
        ("41 \\\\ 42", "42", True),
        ("41 \\quad 42", "42", True),
        ("$41$ or $42$", "42", True),
        ("\\pm 42", "42", True),
        ("± 42", "42", True),
        ("cat\n\ndog", "dog", True),
        ("cat & dog", "dog", True),
        ("alternatively 42", "42", True),
        ("1,000", "1000", False),
        ("[1, 2]", "[1, 2]", False),
        ("\\frac{1}{2}", "1/2", False),
        ("x = 3", "3", False),
    ],
)
def test_is_hedged(answer, oracle, hedged):
    assert is_hedged(answer, oracle) is hedged


def test_contains_oracle_and_lookalikes():
    assert contains_oracle("the answer is cat", "cat")
    assert not contains_oracle("cat", "cat")
    assert has_lookalikes("с\u0430t", "cat")  # Cyrillic es and a
    assert not has_lookalikes("４２", "42")  # fullwidth digits are NFKC-equal, not look-alikes
    assert not has_lookalikes("naïve", "naïve")


@pytest.mark.parametrize("text", ["x**2 + 3*x", "sin(x) + C", "(1 + 2) * 3 / 4", "x^2 = 4"])
def test_safe_expression_accepts_plain_math(text):
    assert safe_expression(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "x.__class__",
        "lambda: 1",
        "[1, 2]",
        "exec",
        "(" * 30 + "1" + ")" * 30,
        "1" * 500,
        "x)(",
    ],
)
def test_safe_expression_refuses_code(text):
    with pytest.raises(UnsafeExpression):
        safe_expression(text)


@pytest.mark.parametrize(
    "answer",
    [
        "41 or 42",
        "\\text{41 or 42}",
        "[41, 42]",
        "\\{41, 42\\}",
        "41, 42",
        "41\n42",
        "41 \\\\ 42",
        "41 \\lor 42",
        "\\pm 42",
        "42; 43",
    ],
)
def test_symbolic_equal_refuses_hedges_in_every_spelling(answer):
    assert not symbolic_equal(answer, "42", timeout=30.0)


def test_symbolic_equal_still_accepts_lists_the_reference_has():
    assert symbolic_equal("1,000", "1000", timeout=30.0)
    assert symbolic_equal("1/2", "0.5", timeout=30.0)  # a division is not a list
    assert symbolic_equal("\\{1, 2\\}", "\\{1, 2\\}", timeout=30.0)


def test_symbolic_equal_is_bounded():
    assert symbolic_equal("\\frac{1}{2}", "0.5", timeout=30.0)
    assert not symbolic_equal("\\frac{1}{3}", "0.5", timeout=30.0)
    start = time.perf_counter()
    assert not symbolic_equal("10^{10^{10}}", "5", timeout=2.0)
    assert not symbolic_equal("{" * 100_000 + "}" * 100_000, "5", timeout=2.0)
    assert time.perf_counter() - start < 10.0


def test_symbolic_equal_parses_the_answer_whole_and_refuses_unevaluated_constructs():
    """Not a piece of the answer (math-verify's free-text extraction took ``2`` of ``2\\sqrt{2}``),
    not the question restated (a sum, limit or integral left unevaluated), not another variable."""
    refused = [
        ("2\\sqrt{2}", "2"),
        ("3x+2", "3"),
        ("2^{10}", "2"),
        ("not 10", "10"),
        ("the answer is 10", "10"),
        ("\\sum_{k=1}^{10} k", "55"),
        ("\\sum_{k=1}^{10} k", "1"),
        ("\\prod_{k=1}^{4} k", "24"),
        ("\\lim_{x\\to 0} x+10", "10"),
        ("\\int_0^1 x\\,dx", "\\frac{1}{2}"),
        ("\\frac{d}{dx} x^2", "2x"),
        ("Sum(k, (k, 1, 10))", "55"),
        ("Limit(1/x, x, oo)", "0"),
        ("Integral(x, (x, 0, 1))", "1/2"),
        ("y=3", "x=3"),
    ]
    for answer, reference in refused:
        assert not symbolic_equal(answer, reference, timeout=30.0), (answer, reference)
    accepted = [
        ("55", "55"),
        ("55.", "55"),
        ("x=3", "3"),
        ("x = 3", "x=3"),
        ("2\\sqrt{2}", "\\sqrt{8}"),
        ("1024", "2^{10}"),
        ("\\dfrac{1}{2}", "0.5"),
        ("2x", "\\frac{d}{dx} x^2"),
        ("\\sum_{k=1}^{n} k", "\\sum_{k=1}^{n} k"),
    ]
    for answer, reference in accepted:
        assert symbolic_equal(answer, reference, timeout=30.0), (answer, reference)
