"""Red-team round 5: ``verigym leaderboard --train-logs`` reads any file it is given within
bounds. Before, a line that was a JSON list, a NaN or 1e308 step, a 400-digit step or a byte that
is not UTF-8 each ended the command with a traceback after the standings were computed (nothing
written), and every point of a log was kept in memory and drawn."""

from __future__ import annotations

import json

from tests.leaderboards.rows import episode_row
from verigym.cli import main
from verigym.leaderboards.standings import MAX_CURVE_POINTS, load_curves
from verigym.leaderboards.store import ResultsStore

BAD_LINES = [
    "[1]",
    '"text"',
    '{"step": NaN, "return": 1}',
    '{"step": 1e308, "return": 1}',
    '{"step": 5, "return": -Infinity}',
    '{"step": 1' + "0" * 400 + ', "return": 1}',
    '{"step": true, "return": 1}',
    '{"step": 5, "return": 1e300}',
    '{"step": -1, "return": 1}',
]


def test_lines_that_are_no_point_are_skipped_and_bad_bytes_replaced(tmp_path, capsys):
    log = tmp_path / "run.jsonl"
    good = ['{"step": 10, "return": 0.5}', '{"global_step": 20, "charts/episodic_return": 2}']
    log.write_bytes(("\n".join(BAD_LINES + good) + "\n").encode() + b"\xff\xfe\n")
    assert load_curves([log]) == {"run": [(10.0, 0.5), (20.0, 2.0)]}
    out = tmp_path / "results"
    with ResultsStore(out) as store:
        store.add(episode_row())
    assert main(["leaderboard", "--out", str(out), "--train-logs", str(log)]) == 0
    assert "learning curves" in (out / "leaderboard.html").read_text()
    assert main(["leaderboard", "--out", str(out), "--train-logs", str(tmp_path / "no.jsonl")]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_a_long_log_is_thinned_evenly_as_it_is_read(tmp_path):
    log = tmp_path / "metrics.jsonl"
    count = 2 * MAX_CURVE_POINTS + 123
    log.write_text("".join(json.dumps({"step": i, "return": 1.0}) + "\n" for i in range(count)))
    (points,) = load_curves([log]).values()
    assert MAX_CURVE_POINTS // 2 <= len(points) <= MAX_CURVE_POINTS
    steps = [step for step, _ in points]
    assert steps[0] == 0 and len({b - a for a, b in zip(steps, steps[1:])}) == 1
