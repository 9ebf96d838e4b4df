"""argus usage --inputs: the bytes each sealed Dataset and Model version holds on the shared roots, by version and
by the workspace (team) that asked for it, and how many runs name each version. Offline and read-only.

Every workspace's versions are counted, not only this one's: a team sees what the shared root holds for whom, and
which versions no run names (what `argus plan --prune` of their owner would free)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass

from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import load
from state.inputs.manifest import stored_versions
from state.queue.usage import read_runs


@dataclass(frozen=True)
class VersionRow:
    root: str
    rel: str
    input: str
    workspace: str
    files: int
    bytes: int
    runs: int
    """Runs (of any workspace, in any state) whose submission names this version."""
    created_at: str


def run(directory: Path, as_json: bool) -> int:
    desired = load(directory)
    roots = sorted(set(desired.shared_roots.values()))
    rows = version_rows(roots)
    typer.echo(json.dumps([asdict(r) for r in rows], indent=2) if as_json else render(rows))
    return EXIT_OK


def version_rows(roots: list[str]) -> list[VersionRow]:
    named = Counter(rel for run in read_runs(roots) for rel in _inputs(run.record))  # a key names one version
    rows = []
    for root in roots:
        for rel, manifest in sorted(stored_versions(root).items()):
            rows.append(VersionRow(root=root, rel=rel, input=f"{manifest.kind.lower()}.{manifest.name}",
                                   workspace=manifest.workspace, files=len(manifest.files), bytes=manifest.bytes,
                                   runs=named[rel], created_at=manifest.created_at))
    return sorted(rows, key=lambda r: (-r.bytes, r.rel))


def _inputs(record) -> list[str]:
    sub = record.submission
    return sorted((sub.inputs or {}).values()) if sub is not None else []


def render(rows: list[VersionRow]) -> str:
    if not rows:
        return "No Dataset or Model version is sealed on these shared roots."
    lines = [f"{'VERSION':<44} {'INPUT':<24} {'WORKSPACE':<20} {'FILES':>6} {'BYTES':>14} {'RUNS':>5}"]
    lines += [f"{r.rel:<44} {r.input:<24} {r.workspace:<20} {r.files:>6} {r.bytes:>14} {r.runs:>5}" for r in rows]
    teams: Counter[str] = Counter()
    for r in rows:
        teams[r.workspace] += r.bytes
    lines += ["", f"{'WORKSPACE':<20} {'BYTES':>14}"]
    lines += [f"{team:<20} {total:>14}" for team, total in sorted(teams.items(), key=lambda t: (-t[1], t[0]))]
    unnamed = sum(r.bytes for r in rows if r.runs == 0)
    lines += ["", f"{unnamed} bytes are in versions no run names (their owner's `argus plan --prune` frees them)."]
    return "\n".join(lines)
