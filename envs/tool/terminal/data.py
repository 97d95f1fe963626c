"""Terminal templates, group ``data``: CSV and JSON transformation (filter, aggregate, convert, join)."""

from __future__ import annotations

import csv
import io
import json
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

REGIONS = ("north", "south", "east", "west")
CATEGORIES = ("books", "garden", "kitchen", "music", "sports", "toys")


def _rows(snap: Snapshot, path: str) -> list[list[str]] | None:
    text = snap.text(path)
    if text is None:
        return None
    try:
        return [row for row in csv.reader(io.StringIO(text)) if row]
    except csv.Error:
        return None


def _csv_equal(snap: Snapshot, path: str, expected: list[list[str]]) -> Verdict:
    got = _rows(snap, path)
    if got is None:
        return False, 0.0, f"{path} is missing or not CSV text"
    items = [i < len(got) and got[i] == row for i, row in enumerate(expected)]
    return scored(
        items, [len(got) == len(expected)], f"{path}: {len(got)} rows, {len(expected)} expected"
    )


def _json_value(snap: Snapshot, path: str) -> Any:
    text = snap.text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # deep nesting is not the JSON asked for
        return None


def _csv_text(rows: list[list[Any]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


# -- csv_filter ----------------------------------------------------------------------------------
def _sales(rng: np.random.Generator, n: int) -> list[list[str]]:
    rows = [["order_id", "region", "category", "amount"]]
    for i in range(n):
        rows.append(
            [
                str(1000 + i),
                choice(rng, REGIONS),
                choice(rng, CATEGORIES),
                f"{int(rng.integers(100, 50000)) / 100:.2f}",
            ]
        )
    return rows


def _csv_filter_generate(rng: np.random.Generator):
    rows = _sales(rng, int(rng.integers(40, 90)))
    region = choice(rng, REGIONS)
    floor = int(rng.integers(5, 30)) * 10
    kept = [rows[0]] + [r for r in rows[1:] if r[1] == region and float(r[3]) > floor]
    if len(kept) == 1:
        rows[1][1], rows[1][3] = region, f"{floor + 1:.2f}"
        kept = [rows[0]] + [r for r in rows[1:] if r[1] == region and float(r[3]) > floor]
    instruction = (
        f"data/sales.csv has the columns order_id,region,category,amount. Write data/big_{region}.csv with the "
        f"header row and only the rows whose region is {region} and whose amount is greater than {floor}, in "
        "their original order, the columns unchanged (plain comma-separated, no quoting needed)."
    )
    return (
        instruction,
        {"data/sales.csv": _csv_text(rows)},
        {
            "expected": kept,
            "region": region,
            "floor": floor,
        },
    )


def _csv_filter_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    return _csv_equal(snap, f"data/big_{expect['region']}.csv", expect["expected"])


def _csv_filter_oracle(expect: dict) -> list[str]:
    return [
        "python3 - <<'EOF'\nimport csv\n"
        "rows = list(csv.reader(open('data/sales.csv')))\n"
        f"keep = [rows[0]] + [r for r in rows[1:] if r[1] == {expect['region']!r} and float(r[3]) > {expect['floor']}]\n"
        f"csv.writer(open('data/big_{expect['region']}.csv', 'w'), lineterminator='\\n').writerows(keep)\nEOF"
    ]


# -- csv_aggregate -------------------------------------------------------------------------------
def _csv_aggregate_generate(rng: np.random.Generator):
    rows = _sales(rng, int(rng.integers(40, 90)))
    totals: dict[str, int] = {}
    for r in rows[1:]:
        totals[r[2]] = totals.get(r[2], 0) + round(float(r[3]) * 100)
    expected = {k: v / 100 for k, v in sorted(totals.items())}
    instruction = (
        "data/sales.csv has the columns order_id,region,category,amount. Write data/totals.json: a JSON object "
        "mapping each category to the sum of its amounts, as a number rounded to 2 decimals."
    )
    return instruction, {"data/sales.csv": _csv_text(rows)}, {"expected": expected}


def _csv_aggregate_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    got = _json_value(snap, "data/totals.json")
    if not isinstance(got, dict):
        return False, 0.0, "data/totals.json is missing or not a JSON object"
    exp = expect["expected"]
    items = [
        isinstance(got.get(k), (int, float))
        and not isinstance(got.get(k), bool)
        and abs(got[k] - v) < 0.005
        for k, v in exp.items()
    ]
    return scored(items, [set(got) == set(exp)], "per-category totals")


def _csv_aggregate_oracle(expect: dict) -> list[str]:
    return [
        "python3 - <<'EOF'\nimport csv, json\nt = {}\n"
        "for r in csv.DictReader(open('data/sales.csv')):\n"
        "    t[r['category']] = t.get(r['category'], 0) + round(float(r['amount']) * 100)\n"
        "json.dump({k: v / 100 for k, v in t.items()}, open('data/totals.json', 'w'), indent=1)\nEOF"
    ]


# -- json_to_csv ---------------------------------------------------------------------------------
def _json_to_csv_generate(rng: np.random.Generator):
    users = []
    ids = sample(rng, list(range(1, 500)), int(rng.integers(8, 25)))
    for uid in ids:
        first = choice(rng, WORDS)
        users.append(
            {
                "id": uid,
                "name": first.capitalize() + " " + choice(rng, WORDS).capitalize(),
                "email": f"{first}{uid}@example.org",
                "active": bool(rng.random() < 0.7),
                "tags": sample(rng, WORDS, int(rng.integers(0, 3))),
            }
        )
    expected = [["id", "name", "email"]] + [
        [str(u["id"]), u["name"], u["email"]]
        for u in sorted(users, key=lambda u: u["id"])
        if u["active"]
    ]
    instruction = (
        "export/users.json is a JSON list of user objects. Write export/active_users.csv with the header "
        "`id,name,email` and one row per user whose `active` is true, sorted by id (numerically)."
    )
    return (
        instruction,
        {"export/users.json": json.dumps(users, indent=2) + "\n"},
        {"expected": expected},
    )


def _json_to_csv_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    return _csv_equal(snap, "export/active_users.csv", expect["expected"])


def _json_to_csv_oracle(expect: dict) -> list[str]:
    return [
        "python3 - <<'EOF'\nimport csv, json\nu = json.load(open('export/users.json'))\n"
        "w = csv.writer(open('export/active_users.csv', 'w'), lineterminator='\\n')\nw.writerow(['id', 'name', 'email'])\n"
        "for x in sorted(u, key=lambda x: x['id']):\n    if x['active']:\n        w.writerow([x['id'], x['name'], x['email']])\nEOF"
    ]


# -- jsonl_latest --------------------------------------------------------------------------------
def _jsonl_latest_generate(rng: np.random.Generator):
    keys = sample(rng, WORDS, int(rng.integers(6, 14)))
    latest: dict[str, dict] = {}
    files = {}
    version = 0
    for part in range(int(rng.integers(2, 4))):
        lines = []
        for _ in range(int(rng.integers(8, 20))):
            version += int(rng.integers(1, 5))
            key = choice(rng, keys)
            record = {"key": key, "version": version, "value": int(rng.integers(0, 1000))}
            lines.append(json.dumps(record))
            latest[key] = record
        order = rng.permutation(len(lines))  # files are not in version order
        files[f"events/part-{part}.jsonl"] = "\n".join(lines[int(i)] for i in order) + "\n"
    expected = {k: latest[k]["value"] for k in sorted(latest)}
    instruction = (
        'events/*.jsonl hold JSON records {"key", "version", "value"}, one a line, in no particular order; '
        "versions are unique integers. Write events/state.json: a JSON object mapping each key to the `value` "
        "of its record with the highest version."
    )
    return instruction, files, {"expected": expected}


def _jsonl_latest_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    got = _json_value(snap, "events/state.json")
    if not isinstance(got, dict):
        return False, 0.0, "events/state.json is missing or not a JSON object"
    exp = expect["expected"]
    items = [type(got.get(k)) is int and got[k] == v for k, v in exp.items()]
    return scored(items, [set(got) == set(exp)], "latest values")


def _jsonl_latest_oracle(expect: dict) -> list[str]:
    return [
        "python3 - <<'EOF'\nimport glob, json\nbest = {}\n"
        "for f in glob.glob('events/*.jsonl'):\n    for line in open(f):\n        r = json.loads(line)\n"
        "        if r['key'] not in best or r['version'] > best[r['key']]['version']:\n            best[r['key']] = r\n"
        "json.dump({k: r['value'] for k, r in best.items()}, open('events/state.json', 'w'))\nEOF"
    ]


# -- csv_join ------------------------------------------------------------------------------------
def _csv_join_generate(rng: np.random.Generator):
    ids = sample(rng, list(range(100, 999)), int(rng.integers(8, 20)))
    names = [["product_id", "name"]] + [
        [str(i), choice(rng, WORDS) + "-" + choice(rng, WORDS)] for i in ids
    ]
    stock_ids = [i for i in ids if rng.random() < 0.75] or ids[:1]
    extra = [int(v) for v in rng.integers(1000, 1100, 2)]  # stock rows without a product: dropped
    stock_rows = [[str(i), str(int(rng.integers(0, 300)))] for i in stock_ids + extra]
    order = rng.permutation(len(stock_rows))
    stock = [["product_id", "quantity"]] + [stock_rows[int(k)] for k in order]
    name_of = {r[0]: r[1] for r in names[1:]}
    expected = [["product_id", "name", "quantity"]] + [
        [pid, name_of[pid], qty]
        for pid, qty in sorted(stock[1:], key=lambda r: int(r[0]))
        if pid in name_of
    ]
    instruction = (
        "inventory/products.csv (product_id,name) and inventory/stock.csv (product_id,quantity) share product_id. "
        "Write inventory/report.csv with the header product_id,name,quantity and one row per product present in "
        "both files (an inner join), sorted by product_id numerically."
    )
    files = {"inventory/products.csv": _csv_text(names), "inventory/stock.csv": _csv_text(stock)}
    return instruction, files, {"expected": expected}


def _csv_join_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    return _csv_equal(snap, "inventory/report.csv", expect["expected"])


def _csv_join_oracle(expect: dict) -> list[str]:
    return [
        "python3 - <<'EOF'\nimport csv\nn = dict(list(csv.reader(open('inventory/products.csv')))[1:])\n"
        "s = list(csv.reader(open('inventory/stock.csv')))[1:]\n"
        "w = csv.writer(open('inventory/report.csv', 'w'), lineterminator='\\n')\nw.writerow(['product_id', 'name', 'quantity'])\n"
        "for pid, q in sorted(s, key=lambda r: int(r[0])):\n    if pid in n:\n        w.writerow([pid, n[pid], q])\nEOF"
    ]


TEMPLATES = [
    Template("csv_filter", "data", _csv_filter_generate, _csv_filter_check, _csv_filter_oracle),
    Template(
        "csv_aggregate",
        "data",
        _csv_aggregate_generate,
        _csv_aggregate_check,
        _csv_aggregate_oracle,
    ),
    Template("json_to_csv", "data", _json_to_csv_generate, _json_to_csv_check, _json_to_csv_oracle),
    Template(
        "jsonl_latest", "data", _jsonl_latest_generate, _jsonl_latest_check, _jsonl_latest_oracle
    ),
    Template("csv_join", "data", _csv_join_generate, _csv_join_check, _csv_join_oracle),
]
