"""verigym.progress: the one counting bar layout that training and evaluation share."""

from __future__ import annotations

import io

from rich.console import Console

from verigym.progress import counter_bar


def test_counter_bar_in_a_log_prints_counts_stats_and_eta_as_lines():
    log = io.StringIO()
    with counter_bar(
        "{task.fields[rate]} ep/s  mean score {task.fields[score]}",
        console=Console(file=log, force_terminal=False),
        interval_s=0.0,
    ) as bar:
        task = bar.add_task("random on starter", total=4, rate="-", score="-")
        bar.update(task, advance=1, rate="2.0", score="0.500")
    lines = log.getvalue().splitlines()
    assert len(lines) == 1 and "━" not in lines[0]
    assert lines[0].startswith("random on starter 1/4 2.0 ep/s mean score 0.500 0:00:00 ETA")


def test_training_and_evaluation_bars_share_the_layout():
    from verigym.agents.common.callbacks import ProgressBar
    from verigym.leaderboards.runner import _Progress

    training = ProgressBar(10, "ppo on CartPole-v1")
    training.close()
    evaluation = _Progress(4, "random on starter", enabled=True)
    layout = [[type(column) for column in training.progress.columns]]
    layout.append([type(column) for column in evaluation.progress.columns])
    assert layout[0] == layout[1] == [type(c) for c in counter_bar("").columns]
