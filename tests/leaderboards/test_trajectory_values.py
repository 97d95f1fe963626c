"""Red-team round 5: a stored trajectory's values (its kwargs, actions, rewards, generation) are
read within bounds by every reader, and one unreadable trajectory never stops the others.

Each trajectory here is written through :meth:`ResultsStore.add`, so it is bound to its row (the
digest matches): anyone who can add a row can store it.
"""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from tests.leaderboards.rows import episode_row
from tests.leaderboards.rows import trajectory_doc as _doc
from verigym.cli import main
from verigym.leaderboards.store import ResultsStore
from verigym.leaderboards.suite import EVAL_SEED_START
from verigym.leaderboards.trajectories import (
    MAX_DECODED_ARRAY_BYTES,
    MAX_VALUE_DEPTH,
    decode,
    decode_value,
)
from verigym.leaderboards.viewer import episode_filename

GUESS = "verigym/GuessNumber-v0"
SEED = EVAL_SEED_START


def _store(tmp_path, *docs: dict):
    """A store with one row per document (seeds SEED, SEED + 1, ...); its folder."""
    with ResultsStore(tmp_path) as store:
        for index, doc in enumerate(docs):
            doc = {**doc, "seed": SEED + index}
            row = episode_row(seed=SEED + index, score=0.0, success=False, length=1)
            store.add(row, zlib.compress(json.dumps(doc).encode()))
    return tmp_path


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def _zeros(nbytes: int) -> dict:
    """An encoded uint8 array of ``nbytes`` zeros (a few dozen compressed bytes)."""
    data = base64.b64encode(zlib.compress(bytes(nbytes), 9)).decode()
    return {"__array__": {"dtype": "|u1", "shape": [nbytes], "zlib": data}}


def test_many_small_arrays_cannot_inflate_a_trajectory_past_the_total_bound(tmp_path, capsys):
    # ten actions at the per-array cap: a 713-byte blob, 1 GB of viewer HTML and 5.9 GB of memory
    doc = _doc({"action": _zeros(MAX_DECODED_ARRAY_BYTES)})
    doc["steps"] = [dict(doc["steps"][0], terminated=False) for _ in range(9)] + doc["steps"]
    blob = zlib.compress(json.dumps(doc).encode(), 9)
    assert len(blob) < 4096
    with pytest.raises(ValueError, match="together"):
        decode(blob)
    one = _doc({"action": _zeros(1 << 10)})
    assert (
        decode(zlib.compress(json.dumps(one).encode()))["steps"][0]["action"]
        == one["steps"][0]["action"]
    ), "an honest array action is read"
    out = _store(tmp_path, doc)
    code, text = _cli(capsys, "leaderboard", "--out", str(out))
    assert code == 0, text
    page = out / "episodes" / episode_filename(episode_row(seed=SEED))
    assert page.stat().st_size < 64 << 10 and "not shown" in page.read_text()
    code, text = _cli(capsys, "export", "--out", str(out), "--path", str(out / "x.jsonl"))
    assert code == 1 and "together" in text, text


# deeper than the 32 levels a document may nest, and shallow enough for json.dumps under xdist
DEEP = json.loads("[" * 200 + "]" * 200)
BAD_TRAJECTORIES = {
    "generation not an object": _doc({"generation": "hello"}),
    "action nested 200 deep": _doc({"action": DEEP}),
    "scalar action beyond int64": _doc(
        {"action": {"__scalar__": {"dtype": "<i8", "value": 10**400}}}
    ),
    "scalar action holding a list": _doc(
        {"action": {"__scalar__": {"dtype": "<f8", "value": [1, 2]}}}
    ),
    "kwarg beyond int64": _doc(
        env_kwargs={"n": {"__scalar__": {"dtype": "<i8", "value": 10**400}}}
    ),
    "array action of objects": _doc(
        {"action": {"__array__": {"dtype": "O", "shape": [1], "zlib": ""}}}
    ),
}


@pytest.mark.parametrize("name", BAD_TRAJECTORIES)
def test_an_unreadable_trajectory_is_refused_by_each_reader_and_stops_no_other(
    tmp_path, capsys, name
):
    # before: leaderboard crashed (AttributeError, RecursionError, OverflowError) or stopped with
    # one line for the whole store; reverify and export crashed on the OverflowError
    out = _store(tmp_path, _doc(), BAD_TRAJECTORIES[name])
    code, text = _cli(capsys, "leaderboard", "--out", str(out))
    assert code == 0, text
    bad = (out / "episodes" / episode_filename(episode_row(seed=SEED + 1))).read_text()
    good = (out / "episodes" / episode_filename(episode_row(seed=SEED))).read_text()
    assert "not shown" in bad and 'id="transcript"' not in bad
    assert 'id="transcript"' in good
    code, text = _cli(capsys, "export", "--out", str(out), "--path", str(out / "x.jsonl"))
    assert code == 1 and f"seed {SEED + 1}" in text and "Traceback" not in text, text
    assert len((out / "x.jsonl").read_text().splitlines()) == 1
    code, text = _cli(capsys, "reverify", "--out", str(out))
    assert code == 1 and f"seed {SEED + 1}" in text, text


def test_values_are_nested_at_most_the_bound_and_scalars_fit_their_dtype():
    fine = _doc({"action": json.loads("[" * MAX_VALUE_DEPTH + "]" * MAX_VALUE_DEPTH)})
    assert decode(zlib.compress(json.dumps(fine).encode()))
    deep = MAX_VALUE_DEPTH + 1
    too_deep = _doc({"reward": json.loads("[" * deep + "]" * deep)})
    with pytest.raises(ValueError, match="nests more than"):
        decode(zlib.compress(json.dumps(too_deep).encode()))
    with pytest.raises(ValueError, match="does not fit"):
        decode_value({"__scalar__": {"dtype": "<u1", "value": 256}})
    assert decode_value({"__scalar__": {"dtype": "<u1", "value": 255}}) == 255


def test_a_patch_similarity_that_is_no_fraction_is_not_shown(tmp_path, capsys):
    out = _store(tmp_path, _doc({"info": {"patch": "+x\n", "patch_similarity": 10**400}}))
    code, text = _cli(capsys, "leaderboard", "--out", str(out))
    page = (out / "episodes" / episode_filename(episode_row(seed=SEED))).read_text()
    assert code == 0 and 'id="diff"' in page and "similarity to the reference" not in page, text
