"""Word statistics."""

import re

_WORD = re.compile(r"[a-z0-9']+")


def word_counts(text, stop_words=()):
    """Lowercase word -> count, apostrophes kept inside words, stripped at the edges."""
    counts = {}
    stop = {w.lower() for w in stop_words}
    for raw in _WORD.findall(text.lower()):
        word = raw.strip("'")
        if not word or word in stop:
            continue
        counts[word] = counts.get(word, 0) + 1
    return counts


def top_words(text, n, stop_words=()):
    """The ``n`` most frequent words as (word, count), ties broken alphabetically."""
    counts = word_counts(text, stop_words)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:n]
