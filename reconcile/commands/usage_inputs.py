"""argus usage --inputs: the bytes each sealed Dataset and Model version holds on the shared roots, by version and
by the workspace (team) that sealed it, and how many runs name each version. Offline and read-only.

Every workspace's versions are counted, not only this one's: a team sees what the shared root holds for whom, and
which versions no run names (what `argus plan --prune` of their owner would free)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import load
from state.inputs.manifest import stored_versions
from state.inputs.usage import Usage, input_usage
from state.queue.usage import read_runs, readable


def run(directory: Path, as_json: bool) -> int:
    desired = load(directory)
    clusters: dict[str, list[str]] = {}  # by root: clusters may share one (named together, counted once)
    for name, root in sorted(desired.shared_roots.items()):
        if Path(root).is_dir():
            clusters.setdefault(root, []).append(name)
    usage = input_usage({",".join(names): stored_versions(root) for root, names in clusters.items()})
    named = Counter(rel for r in read_runs([root for root in clusters if readable(root)])
                    for rel in _versions(r.record.submission))
    typer.echo(_json(usage, named) if as_json else render(usage, named))
    return EXIT_OK


def _versions(submission) -> list[str]:
    return sorted((submission.inputs or {}).values()) if submission is not None else []


def _json(usage: Usage, named: Counter[str]) -> str:
    return json.dumps({"versions": [{**asdict(v), "runs": named[v.rel]} for v in usage.versions],
                       "by_workspace": usage.by_workspace, "by_cluster": usage.by_cluster, "total": usage.total},
                      indent=2)


def render(usage: Usage, named: Counter[str]) -> str:
    if not usage.versions:
        return "No Dataset or Model version is sealed on these shared roots."
    rows = sorted(usage.versions, key=lambda v: (-v.bytes, v.rel))
    lines = [f"{'VERSION':<44} {'CLUSTER':<12} {'WORKSPACE':<20} {'FILES':>6} {'BYTES':>14} {'RUNS':>5}"]
    lines += [f"{v.rel:<44} {v.cluster:<12} {v.workspace:<20} {v.files:>6} {v.bytes:>14} {named[v.rel]:>5}"
              for v in rows]
    lines += ["", f"{'WORKSPACE':<20} {'BYTES':>14}"]
    lines += [f"{team:<20} {total:>14}" for team, total in sorted(usage.by_workspace.items(), key=lambda t: -t[1])]
    unnamed = sum(v.bytes for v in usage.versions if not named[v.rel])
    lines += ["", f"{usage.total} bytes in all; {unnamed} in versions no run names (their owner's "
                  "`argus plan --prune` frees them)."]
    return "\n".join(lines)
