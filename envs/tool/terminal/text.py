"""Terminal templates, group ``text``: log and text processing whose result is a file."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from verigym.envs.tool.terminal.core import (
    WORDS,
    Snapshot,
    Template,
    Verdict,
    choice,
    sample,
    scored,
)

SERVICES = ("auth", "billing", "cache", "gateway", "mailer", "search", "storage", "worker")
LEVELS = ("INFO", "DEBUG", "WARN", "ERROR")


def _lines_equal(snap: Snapshot, path: str, expected: list[str]) -> Verdict:
    """Items: each expected line at its place (and no extra line) in ``path``."""
    text = snap.text(path)
    if text is None:
        return False, 0.0, f"{path} is missing or not UTF-8 text"
    got = text.rstrip("\n").split("\n") if text.strip() else []
    got = [line.rstrip() for line in got]
    items = [i < len(got) and got[i] == line for i, line in enumerate(expected)]
    guards = [len(got) == len(expected)]
    return scored(items, guards, f"{path}: {len(got)} lines, {len(expected)} expected")


# -- error_counts --------------------------------------------------------------------------------
def _error_counts_generate(rng: np.random.Generator):
    services = sample(rng, SERVICES, int(rng.integers(3, 7)))
    files: dict[str, Any] = {}
    counts: Counter[str] = Counter()
    for day in range(int(rng.integers(2, 4))):
        lines = []
        for i in range(int(rng.integers(40, 90))):
            svc = choice(rng, services)
            level = LEVELS[int(rng.choice(4, p=[0.45, 0.2, 0.15, 0.2]))]
            if level == "ERROR":
                counts[svc] += 1
            msg = " ".join(sample(rng, WORDS, 3))
            lines.append(
                f"2026-03-{day + 10:02d}T{i % 24:02d}:{i % 60:02d}:00Z {level} [{svc}] {msg}"
            )
        files[f"logs/app-{day + 1}.log"] = "\n".join(lines) + "\n"
    # a decoy: ERROR inside a message of a non-error line
    files["logs/app-1.log"] += (
        f"2026-03-10T23:59:00Z INFO [{services[0]}] user typed ERROR in a form\n"
    )
    files["logs/README"] = "Rotated application logs, one file per day.\n"
    expected = [f"{s} {n}" for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    instruction = (
        "The directory logs/ holds application logs (logs/*.log); each line is "
        "`<timestamp> <LEVEL> [<service>] <message>`. Count the lines whose LEVEL is ERROR, per service, "
        "over all the .log files, and write report/errors.txt with one line `<service> <count>` per service "
        "that has at least one error, sorted by count (largest first), ties by service name."
    )
    return instruction, files, {"expected": expected}


def _error_counts_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    return _lines_equal(snap, "report/errors.txt", expect["expected"])


def _error_counts_oracle(expect: dict) -> list[str]:
    return [
        "mkdir -p report && cat logs/*.log | grep -E '^[^ ]+ ERROR \\[' | sed -E 's/^[^ ]+ ERROR \\[([^]]+)\\].*/\\1/' "
        "| sort | uniq -c | sort -k1,1nr -k2,2 | sed -E 's/^ *([0-9]+) (.*)$/\\2 \\1/' > report/errors.txt"
    ]


# -- unique_ips ----------------------------------------------------------------------------------
def _ip(rng: np.random.Generator) -> str:
    return ".".join(
        str(int(v)) for v in [rng.choice([10, 172, 192, 203]), *rng.integers(0, 256, 3)]
    )


def _unique_ips_generate(rng: np.random.Generator):
    pool = [_ip(rng) for _ in range(int(rng.integers(8, 20)))]
    lines = []
    for _ in range(int(rng.integers(60, 150))):
        ip = choice(rng, pool)
        status = choice(rng, (200, 200, 200, 301, 404, 500))
        path = "/" + "/".join(sample(rng, WORDS, int(rng.integers(1, 3))))
        lines.append(
            f'{ip} - - [12/Mar/2026:10:{int(rng.integers(60)):02d}:00 +0000] "GET {path} HTTP/1.1" {status} {int(rng.integers(100, 9000))}'
        )
    status_filter = choice(rng, (404, 500))
    wanted = sorted(
        {ln.split()[0] for ln in lines if ln.split()[-2] == str(status_filter)},
        key=lambda s: tuple(int(p) for p in s.split(".")),
    )
    if not wanted:  # make sure there is at least one
        lines[0] = lines[0].rsplit(" ", 2)[0] + f" {status_filter} 512"
        wanted = [lines[0].split()[0]]
    instruction = (
        "web/access.log is a web server access log (common log format: the client IP first, the status code "
        f"second to last). Write web/ips.txt with every distinct client IP that received status {status_filter}, "
        "one per line, sorted numerically (by each of the four numbers in turn, so 10.0.0.9 comes before 10.0.0.10)."
    )
    return (
        instruction,
        {"web/access.log": "\n".join(lines) + "\n"},
        {"expected": wanted, "status": status_filter},
    )


def _unique_ips_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    return _lines_equal(snap, "web/ips.txt", expect["expected"])


def _unique_ips_oracle(expect: dict) -> list[str]:
    return [
        f"grep -E ' {expect['status']} [0-9]+$' web/access.log | cut -d' ' -f1 | sort -u "
        "| sort -t. -k1,1n -k2,2n -k3,3n -k4,4n > web/ips.txt"
    ]


# -- top_words -----------------------------------------------------------------------------------
def _top_words_generate(rng: np.random.Generator):
    vocab = sample(rng, WORDS, 25)
    weights = rng.dirichlet(np.ones(len(vocab)) * 0.6)
    paragraphs = []
    for _ in range(int(rng.integers(4, 9))):
        words = [
            vocab[int(i)] for i in rng.choice(len(vocab), size=int(rng.integers(20, 60)), p=weights)
        ]
        words = [w.capitalize() if rng.random() < 0.2 else w for w in words]
        paragraphs.append(" ".join(words) + ".")
    text = "\n\n".join(paragraphs) + "\n"
    n = int(rng.integers(3, 7))
    counts = Counter(w.strip(".").lower() for w in text.split())
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    instruction = (
        f"Find the {n} most frequent words of notes/essay.txt (words are separated by whitespace; ignore case and "
        f"the trailing periods). Write notes/top.txt with {n} lines `<word> <count>` (the word in lowercase), "
        "most frequent first, ties in alphabetical order."
    )
    return (
        instruction,
        {"notes/essay.txt": text},
        {"expected": [f"{w} {c}" for w, c in top], "n": n},
    )


def _top_words_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    return _lines_equal(snap, "notes/top.txt", expect["expected"])


def _top_words_oracle(expect: dict) -> list[str]:
    return [
        "tr -s ' \\n' '\\n\\n' < notes/essay.txt | tr -d '.' | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c "
        f"| sort -k1,1nr -k2,2 | head -n {expect['n']} | sed -E 's/^ *([0-9]+) (.*)$/\\2 \\1/' > notes/top.txt"
    ]


# -- slow_requests -------------------------------------------------------------------------------
def _slow_requests_generate(rng: np.random.Generator):
    threshold = int(rng.integers(3, 9)) * 100
    lines, slow = [], []
    for i in range(int(rng.integers(50, 120))):
        rid = f"req-{int(rng.integers(16**6)):06x}"
        ms = int(rng.integers(5, 2 * threshold))
        if ms == threshold:
            ms += 1
        endpoint = choice(rng, ("/api/login", "/api/items", "/api/cart", "/health", "/api/search"))
        lines.append(f"t={i:04d} id={rid} endpoint={endpoint} latency_ms={ms}")
        if ms > threshold:
            slow.append(rid)
    instruction = (
        f"service/requests.log has one request a line with fields `id=...` and `latency_ms=...`. Write "
        f"service/slow.txt listing the ids of the requests slower than {threshold} ms (latency_ms > {threshold}), "
        "one per line, sorted alphabetically, without duplicates."
    )
    return (
        instruction,
        {"service/requests.log": "\n".join(lines) + "\n"},
        {
            "expected": sorted(set(slow)),
            "threshold": threshold,
        },
    )


def _slow_requests_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    return _lines_equal(snap, "service/slow.txt", expect["expected"])


def _slow_requests_oracle(expect: dict) -> list[str]:
    t = expect["threshold"]
    return [
        "python3 - <<'EOF'\n"
        "ids = set()\n"
        "for line in open('service/requests.log'):\n"
        "    f = dict(p.split('=', 1) for p in line.split())\n"
        f"    if int(f['latency_ms']) > {t}:\n"
        "        ids.add(f['id'])\n"
        "open('service/slow.txt', 'w').write(''.join(i + '\\n' for i in sorted(ids)))\n"
        "EOF"
    ]


# -- dedupe_lines --------------------------------------------------------------------------------
def _dedupe_lines_generate(rng: np.random.Generator):
    names = [f"{a}-{b}@example.org" for a, b in zip(sample(rng, WORDS, 30), sample(rng, WORDS, 30))]
    pool = names[: int(rng.integers(8, 20))]
    lines = [choice(rng, pool) for _ in range(int(rng.integers(30, 70)))]
    lines.append(lines[0])  # at least one duplicate
    seen, expected = set(), []
    for line in lines:
        if line not in seen:
            seen.add(line)
            expected.append(line)
    instruction = (
        "mail/subscribers.txt has one address a line, with repeats. Remove the repeated lines in place: keep "
        "only the first occurrence of each line, in the original order, in mail/subscribers.txt itself."
    )
    return instruction, {"mail/subscribers.txt": "\n".join(lines) + "\n"}, {"expected": expected}


def _dedupe_lines_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    return _lines_equal(snap, "mail/subscribers.txt", expect["expected"])


def _dedupe_lines_oracle(expect: dict) -> list[str]:
    return [
        "python3 -c \"import sys; p='mail/subscribers.txt'; s=[]; "
        "[s.append(l) for l in open(p).read().splitlines() if l not in s]; open(p,'w').write(''.join(l+'\\n' for l in s))\""
    ]


TEMPLATES = [
    Template(
        "error_counts", "text", _error_counts_generate, _error_counts_check, _error_counts_oracle
    ),
    Template("unique_ips", "text", _unique_ips_generate, _unique_ips_check, _unique_ips_oracle),
    Template("top_words", "text", _top_words_generate, _top_words_check, _top_words_oracle),
    Template(
        "slow_requests",
        "text",
        _slow_requests_generate,
        _slow_requests_check,
        _slow_requests_oracle,
    ),
    Template(
        "dedupe_lines", "text", _dedupe_lines_generate, _dedupe_lines_check, _dedupe_lines_oracle
    ),
]
