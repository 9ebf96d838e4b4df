"""A run's progress as people read it: `12/100 (12%) eta 1h02m`, in `argus status`, on the page and in JSON."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from specs.workloads.run_progress import Progress

if TYPE_CHECKING:
    from reconcile.model import Change, RunView


def progress_text(progress: Progress | None, running: bool = True) -> str:
    """"12/100 (12%) eta 1h02m", "12/?" without a total, "-" without progress; " ckpt 10" once checkpointed.
    A run no longer running shows where it got to (its record's), without an ETA."""
    if progress is None:
        return "-"
    total = "?" if progress.total is None else str(progress.total)
    text = f"{progress.step}/{total}"
    if progress.fraction is not None:
        text += f" ({int(progress.fraction * 100)}%)"
    if running and progress.eta_seconds is not None:
        text += f" eta {duration(progress.eta_seconds)}"
    if progress.checkpoint_step is not None:
        text += f" ckpt {progress.checkpoint_step}"
    return text


def with_progress_column(rows: list[tuple[str, ...]], jobs: Sequence[Change]) -> list[tuple[str, ...]]:
    """The status table with a PROGRESS column before its last (RUN), when any job's current run reports
    progress: a workspace whose jobs report none reads as before."""
    runs = [change.current for change in jobs]
    if not any(run is not None and run.progress is not None for run in runs):
        return rows
    cells = ["PROGRESS", *(progress_text(run.progress, run.status == "RUNNING") if run else "-" for run in runs)]
    return [(*row[:-1], cell, row[-1]) for row, cell in zip(rows, cells, strict=True)]


def duration(seconds: float) -> str:
    """3d04h, 1h02m, 5m07s, 42s: two units at most, as an ETA needs no more."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def percent(progress: Progress | None) -> float | None:
    """0..100 for a bar, when the total is known."""
    return None if progress is None or progress.fraction is None else round(progress.fraction * 100, 1)


def progress_html(progress: Progress | None) -> str:
    """A bar (HTML's own <progress>: no script, no inline style) and the text under it; "" without progress.
    Numbers only come from the validated model, and are escaped all the same."""
    if progress is None:
        return ""
    text = escape(progress_text(progress), quote=True)
    if progress.total is None:  # no total: a bar without value is drawn as under way
        return f'<div class="progress"><progress aria-label="step {progress.step}"></progress> {text}</div>'
    return (f'<div class="progress"><progress value="{progress.step}" max="{progress.total}" '
            f'aria-label="{text}"></progress> {text}</div>')


def progress_json(run: RunView | None) -> dict:
    """Only for a job whose current run reports progress: the other rows keep their keys as before."""
    if run is None or run.progress is None:
        return {}
    return {"progress": run.progress.model_dump(mode="json")}
