"""The terminal progress bar: count of total, rate and ETA, drawn by rich on stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn,
    TimeElapsedColumn, TimeRemainingColumn,
)
from rich.text import Text

__all__ = ["rich_progress"]


class _Rate(ProgressColumn):
    """Items per second over rich's moving window."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.1f} {self.unit}/s" if speed else f"- {self.unit}/s")


@contextmanager
def rich_progress(total: int | None, unit: str, label: str) -> Iterator[Callable[[], None]]:
    """``advance()`` once per item; the bar is removed from the screen when done."""
    console = Console(file=sys.stderr)
    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                          MofNCompleteColumn(), _Rate(unit), TimeElapsedColumn(),
                          TextColumn("ETA"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(label, total=total)

        def advance() -> None:
            progress.advance(task)
        yield advance
