"""argus usage: GPU-hours and run counts by workspace, job or actor, from the runs' own records.

The platform's report: it reads the records of every workspace on each shared root of the desired
state, not only this workspace's. Offline and read-only: no Ray cluster is asked, nothing is written.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import load
from specs.errors import ArgusError
from state.queue.usage import Key, Usage, parse_time, read_runs, readable, summarize

COLUMNS = ("runs", "succeeded", "failed", "refused")


class BadSince(ArgusError):
    """--since is not a date or time: the report would silently count the wrong window."""


def run(directory: Path, by: Key, since: str | None, as_json: bool) -> int:
    start = since_of(since)
    desired = load(directory)
    roots = sorted(set(desired.shared_roots.values()))
    for root in [r for r in roots if not readable(r)]:
        typer.echo(f"Note: {root}/jobs is not a directory here: no run of that shared root is counted.", err=True)
    rows = summarize(read_runs(roots), by, datetime.now(timezone.utc), start)
    typer.echo(usage_json(rows) if as_json else render(rows, by, since))
    return EXIT_OK


def since_of(text: str | None) -> datetime | None:
    if text is None:
        return None
    moment = parse_time(text)
    if moment is None:
        raise BadSince(f"--since {text!r} is not an ISO date or datetime. Give one such as 2025-06-01, "
                       "2025-06-01T08:00 (UTC) or 2025-06-01T08:00+02:00.")
    return moment


def usage_json(rows: list[Usage]) -> str:
    return json.dumps([{"key": row.key, **{name: getattr(row, name) for name in COLUMNS},
                        "gpu_hours": round(row.gpu_hours, 6)} for row in rows], indent=2)


def render(rows: list[Usage], by: Key, since: str | None) -> str:
    from rich.console import Console
    from rich.table import Table

    if not rows:
        return "No runs" + (f" since {since}." if since else ".")
    table = Table(title=f"GPU-hours by {by}" + (f" since {since}" if since else ""))
    table.add_column(by)
    for name in (*COLUMNS, "GPU-hours"):
        table.add_column(name, justify="right")
    for row in rows:
        table.add_row(row.key, *(str(getattr(row, name)) for name in COLUMNS), f"{row.gpu_hours:.2f}")
    console = Console(highlight=False)
    with console.capture() as captured:
        console.print(table)
    return captured.get().rstrip("\n")
