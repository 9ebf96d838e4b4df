"""argus audit verify|show: check the audit log's hash chain, and read it."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reconcile.boundary import EXIT_ERROR, EXIT_OK
from reconcile.commands.common import load


def verify(directory: Path) -> int:
    from state import audit

    desired = load(directory)
    failed = False
    for root in sorted(set(desired.shared_roots.values())):
        count, problems = audit.verify(root, desired.workspace.name)
        where = audit.audit_path(root, desired.workspace.name)
        if problems:
            failed = True
            typer.echo(f"{where}: {len(problems)} problem(s) in {count} record(s):")
            typer.echo("\n".join(f"  {p}" for p in problems))
        else:
            typer.echo(f"{where}: {count} record(s), chain intact.")
    return EXIT_ERROR if failed else EXIT_OK


def show(directory: Path, as_json: bool, job: str | None, since: str | None) -> int:
    from state import audit

    desired = load(directory)
    entries = sorted((e for root in sorted(set(desired.shared_roots.values()))
                      for e in audit.read(root, desired.workspace.name)), key=lambda e: e.get("time", ""))
    entries = [e for e in entries if (job is None or e.get("address") == f"job.{job}")
               and (since is None or e.get("time", "") >= since)]
    for entry in entries:
        typer.echo(json.dumps(entry, sort_keys=True) if as_json else _line(entry))
    return EXIT_OK


def _line(entry: dict) -> str:
    what = entry.get("event", "?")
    if what == "action":
        run = entry.get("submission_id") or ""
        what = f"{entry.get('action')} {entry.get('address')} {run} -> {entry.get('outcome')}"
    elif what.startswith("apply."):
        what = f"{what} {entry.get('outcome', '')}".strip()
    error = f"  error: {entry['error']}" if entry.get("error") else ""
    return (f"{entry.get('time', '?')}  {entry.get('actor', '?')}@{entry.get('host', '?')}  "
            f"plan {entry.get('plan_id', '-')}  commit {str(entry.get('commit', '-'))[:12]}  {what}{error}")
