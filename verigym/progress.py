"""Progress bars that stay readable in a log.

On a terminal (or a notebook), :class:`Progress` is ``rich``'s live bar. When the output is a file
or a pipe (CI logs, ``nohup``, ``| tee``) a live bar has nothing to redraw: there the same columns
are printed as one plain, whole line (no bar glyphs, no cursor movement, no carriage returns)
every ``interval_s`` seconds and once more when the bar stops. :func:`counter_bar` builds the one
layout verigym's counting bars share (training steps, evaluation episodes).
:func:`quiet_library_bars` turns off the tqdm bars of the libraries that load models when stderr is
a log.
"""

from __future__ import annotations

import io
import time
from typing import Any

from rich import get_console
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as _RichProgress

__all__ = ["Progress", "counter_bar", "quiet_library_bars"]


def quiet_library_bars(stream: Any = None) -> bool:
    """Turn off transformers' and huggingface_hub's own (tqdm) bars when ``stream`` (default
    stderr) is not a terminal: in a log they are carriage-return redraws, not lines.

    Returns:
        True when the bars were turned off.
    """
    import sys

    stream = sys.stderr if stream is None else stream
    if getattr(stream, "isatty", lambda: False)():
        return False
    try:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    except ImportError:
        pass
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except ImportError:
        pass
    return True


class Progress(_RichProgress):
    """``rich.progress.Progress`` that prints whole lines when the console is not a terminal.

    Args:
        *columns: the bar's columns, as for ``rich.progress.Progress``.
        interval_s: seconds between two lines in a log (the last line is always printed).
        console: where to draw (default: rich's console on stdout).
        disable: no output at all.
        **kwargs: passed on to ``rich.progress.Progress``.
    """

    def __init__(
        self,
        *columns: Any,
        interval_s: float = 10.0,
        console: Console | None = None,
        disable: bool = False,
        **kwargs: Any,
    ):
        console = console or get_console()
        self.lines = not disable and not (console.is_terminal or console.is_jupyter)
        """True when progress is printed as lines (the console is a file or a pipe)."""
        super().__init__(*columns, console=console, disable=disable or self.lines, **kwargs)
        self.interval_s = float(interval_s)
        self._last_line = time.monotonic()
        self._stopped = False
        self._last_text = ""

    def update(self, task_id: TaskID, **kwargs: Any) -> None:  # type: ignore[override]
        super().update(task_id, **kwargs)
        if self.lines and time.monotonic() - self._last_line >= self.interval_s:
            self.print_lines()

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        if self.lines and time.monotonic() - self._last_line >= self.interval_s:
            self.print_lines()

    def stop(self) -> None:
        super().stop()
        if self.lines and not self._stopped and self.tasks:
            self.print_lines()
        self._stopped = True

    def print_lines(self) -> None:
        """Print each visible task as one plain line (its columns without the bar glyphs)."""
        self._last_line = time.monotonic()
        columns = self.columns
        self.columns = tuple(c for c in columns if not isinstance(c, BarColumn))
        try:
            buffer = io.StringIO()
            plain = Console(
                file=buffer, width=10_000, color_system=None, force_terminal=False, soft_wrap=True
            )
            for task in self.tasks:
                if task.visible:
                    plain.print(self.make_tasks_table([task]))
        finally:
            self.columns = columns
        text = "\n".join(
            " ".join(line.split()) for line in buffer.getvalue().splitlines() if line.strip()
        )
        if text and text != self._last_text:  # the line at the stop repeats nothing already printed
            self.console.print(text, markup=False, highlight=False, soft_wrap=True, crop=False)
            self._last_text = text


def counter_bar(stats: str, **kwargs: Any) -> Progress:
    """A :class:`Progress` counting work items: description, bar, ``done/total``, ``stats``,
    elapsed time and ETA (``ppo on CartPole-v1 ━━━ 512/2048  830 steps/s  return 21.5 0:00:01 ETA
    0:00:02``).

    Args:
        stats: a ``rich`` format template over the task's fields for the running statistics, e.g.
            ``"{task.fields[sps]:>7.0f} steps/s  return {task.fields[ret]}"``; each field is
            given to ``add_task`` and ``update``.
        **kwargs: passed on to :class:`Progress` (``console``, ``interval_s``, ``disable``, ...).

    Returns:
        The bar, not started (use it as a context manager, or ``start``/``stop``).
    """
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(stats),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        **kwargs,
    )
