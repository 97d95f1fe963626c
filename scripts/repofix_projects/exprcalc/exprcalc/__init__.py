"""A tokenizer, a precedence-climbing parser and an evaluator for arithmetic expressions."""

from exprcalc.evaluator import evaluate, variables
from exprcalc.lexer import LexError, Token, tokenize
from exprcalc.parser import ParseError, parse

__all__ = ["LexError", "ParseError", "Token", "evaluate", "parse", "tokenize", "variables"]
