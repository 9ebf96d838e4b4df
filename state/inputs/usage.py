"""How much of each shared root the sealed data sets and models take, per version and per workspace (team) that
sealed them: pure, over what observation read (ObservedState.stored_inputs); a command renders it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from state.observed import InputManifest


@dataclass(frozen=True)
class VersionUsage:
    """One sealed version on one cluster's shared root."""

    cluster: str
    rel: str
    kind: str
    name: str
    workspace: str
    """The workspace that sealed it (the one charged: a second workspace sharing it adds nothing)."""
    files: int
    bytes: int
    created_at: str


@dataclass(frozen=True)
class Usage:
    versions: tuple[VersionUsage, ...]
    """Sorted by cluster, then rel."""
    by_workspace: dict[str, int]
    """Bytes per sealing workspace, over every cluster."""
    by_cluster: dict[str, int]
    total: int


def input_usage(stored: Mapping[str, Mapping[str, InputManifest]]) -> Usage:
    versions = tuple(VersionUsage(cluster, rel, m.kind, m.name, m.workspace, len(m.files), m.bytes, m.created_at)
                     for cluster in sorted(stored) for rel, m in sorted(stored[cluster].items()))
    by_workspace: dict[str, int] = {}
    by_cluster: dict[str, int] = {}
    for version in versions:
        by_workspace[version.workspace] = by_workspace.get(version.workspace, 0) + version.bytes
        by_cluster[version.cluster] = by_cluster.get(version.cluster, 0) + version.bytes
    return Usage(versions, dict(sorted(by_workspace.items())), dict(sorted(by_cluster.items())),
                 sum(v.bytes for v in versions))
