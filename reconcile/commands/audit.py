"""argus audit verify|show: check the audit log's hash chain and anchor (and HMACs, with
ARGUS_AUDIT_KEY), and read it. What a crash leaves is reported and exits 0; tampering exits 1."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reconcile.boundary import EXIT_ERROR, EXIT_OK
from reconcile.commands.common import load
from specs.diagnostics import plain


def verify(directory: Path) -> int:
    from state.audit import log as audit

    desired = load(directory)
    failed = False
    for root in sorted(set(desired.shared_roots.values())):
        result = audit.check(root, desired.workspace.name)
        where = audit.audit_path(root, desired.workspace.name)
        if result.problems:
            failed = True
            typer.echo(f"{where}: {len(result.problems)} problem(s) in {result.records} record(s):")
            typer.echo("\n".join(f"  {p}" for p in result.problems))
        else:
            typer.echo(f"{where}: {result.records} record(s), chain intact.")
        for warning in result.warnings:
            typer.echo(f"  warning: {warning}")
        if result.hmac_checked:
            typer.echo(f"  HMACs checked with {audit.KEY_VARIABLE}.")
    return EXIT_ERROR if failed else EXIT_OK


def show(directory: Path, as_json: bool, job: str | None, since: str | None) -> int:
    """The records every log holds, oldest first; lines no record can be read from are named on
    stderr (exit 1 when no crash explains them)."""
    from state.audit import log as audit

    desired = load(directory)
    entries, tampered = [], False
    for root in sorted(set(desired.shared_roots.values())):
        found = audit.reading(root, desired.workspace.name)
        where = audit.audit_path(root, desired.workspace.name)
        for note in (*found.skipped, *([found.torn] if found.torn else [])):
            typer.echo(f"{where}: {note}", err=True)
        tampered = tampered or bool(found.skipped)
        entries += found.entries
    entries = sorted(entries, key=lambda e: str(e.get("time", "")))
    entries = [e for e in entries if (job is None or e.get("address") == f"job.{job}")
               and (since is None or str(e.get("time", "")) >= since)]
    for entry in entries:
        typer.echo(json.dumps(entry, sort_keys=True) if as_json else _line(entry))
    return EXIT_ERROR if tampered else EXIT_OK


def _line(entry: dict) -> str:
    what = str(entry.get("event", "?"))
    if what == "action":
        run = entry.get("submission_id") or ""
        what = f"{entry.get('action')} {entry.get('address')} {run} -> {entry.get('outcome')}"
    elif what.startswith("apply."):
        what = f"{what} {entry.get('outcome', '')}".strip()
    elif what == "claim":
        what = plain(_claim_text(entry), lines=False)
    elif what == "run.stopping":
        what = f"{what} {entry.get('submission_id')} ({entry.get('why')})"
    elif what == "audit.recovered":
        what = f"{what} after {entry.get('torn_bytes')} torn byte(s)"
    error = f"  error: {entry['error']}" if entry.get("error") else ""
    # every field is as the log holds it, and any job can write the log: no terminal escape reaches the screen
    return plain(f"{entry.get('time', '?')}  {entry.get('actor', '?')}@{entry.get('host', '?')}  "
                 f"plan {entry.get('plan_id', '-')}  commit {str(entry.get('commit', '-'))[:12]}  {what}{error}",
                 lines=False)


def _claim_text(entry: dict) -> str:
    """`claim DIR of REPO`, and the owner it moved from or the untrusted claim it replaced."""
    previous = entry.get("previous")
    moved = f" (moved from {previous.get('directory')} of {previous.get('repository')})" \
        if isinstance(previous, dict) else f" (replaced: {entry['replaced']})" if entry.get("replaced") else ""
    return f"claim {entry.get('directory')} of {entry.get('repository')}{moved}"
