"""apply's progress on a terminal: a bar of the batch's submits under the lines apply prints.

Only for a terminal: elsewhere (CI, tests, a pipe) apply prints its plain lines alone
(execute.batch.lines), which is what a log keeps and what tests read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconcile.execute.batch import Shown


@contextmanager
def submit_bar(total: int) -> Iterator[Shown]:
    """"37/100 submitted" while a batch runs; the bar is gone afterwards, the lines stay."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (BarColumn(), MofNCompleteColumn(), TextColumn("submitted"), TimeElapsedColumn())
    with Progress(*columns, console=Console(highlight=False), transient=True) as bar:
        yield _Bar(bar, bar.add_task("submit", total=total))


class _Bar:
    def __init__(self, bar, task) -> None:  # noqa: ANN001 (rich's types, imported lazily)
        self._bar, self._task, self._lock = bar, task, threading.Lock()

    def echo(self, line: str) -> None:
        """Above the bar, whole, as written: no rich markup or highlighting (names are user data)."""
        with self._lock:
            self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def advance(self) -> None:
        self._bar.advance(self._task)
