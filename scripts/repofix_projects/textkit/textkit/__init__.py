"""Text utilities: wrapping and justification, slugs, case conversion, word statistics."""

from textkit.case import camel_to_snake, snake_to_camel, title_case
from textkit.stats import top_words, word_counts
from textkit.wrap import center, justify, slugify, truncate, wrap

__all__ = [
    "camel_to_snake",
    "center",
    "justify",
    "slugify",
    "snake_to_camel",
    "title_case",
    "top_words",
    "truncate",
    "word_counts",
    "wrap",
]
