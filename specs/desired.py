"""The loaded desired state: validated specs plus where each of them came from.
May import: base, diagnostics, address, kinds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from specs.address import Address
from specs.diagnostics import Where
from specs.kinds.inputs import Dataset, Model
from specs.kinds.models import Cluster, CodeSnapshot, Job, Quotas, Workspace


@dataclass(frozen=True)
class Source:
    """Where a resource was defined: its file, first line, and the line of each field."""

    file: str
    line: int
    field_lines: Mapping[str, int] = field(default_factory=dict)

    def line_of(self, path: str) -> int:
        """Line of a dotted field path, or of its nearest defined ancestor."""
        while path:
            if path in self.field_lines:
                return self.field_lines[path]
            path = path.rpartition(".")[0]
        return self.line

    def at(self, path: str = "") -> Where:
        return Where(self.file, self.line_of(path))


@dataclass(frozen=True)
class DesiredState:
    """Everything the workspace's YAML asks for, validated and cross-referenced."""

    root: str
    workspace: Workspace
    clusters: Mapping[str, Cluster]
    jobs: Mapping[str, Job]
    snapshots: Mapping[str, CodeSnapshot]
    sources: Mapping[str, Source]
    """Keyed by address: `workspace`, `cluster.NAME`, `job.NAME`."""
    shared_roots: Mapping[str, str]
    """Absolute shared root of each cluster (a relative one resolved against the workspace root)."""
    quotas: Mapping[str, Quotas] = field(default_factory=dict)
    """By cluster: the quotas this workspace sets as the cluster's `admin` (the loader refuses any other)."""
    inputs: Mapping[str, Dataset | Model] = field(default_factory=dict)
    """Datasets and Models by address (`dataset.NAME`, `model.NAME`): their versions' paths are
    specs.kinds.inputs.version_rel, beside snapshot_rel."""

    def included_files(self) -> list[str]:
        """The shared files (the Workspace's `include:`) its Clusters came from, relative to `root`: the only
        files read from outside the workspace, so always `../`-prefixed."""
        return sorted({source.file for source in self.sources.values() if source.file.startswith("../")})

    def source(self, address: str) -> Source:
        return self.sources[address]

    def cluster_of(self, job: Job) -> Cluster:
        return self.clusters[job.cluster]

    def shared_root(self, cluster: str) -> str:
        return self.shared_roots[cluster]

    def snapshot_dir(self, snapshot: CodeSnapshot) -> str:
        """Where a snapshot lives on the shared filesystem (absolute)."""
        return f"{self.shared_roots[snapshot.cluster]}/{snapshot_rel(snapshot)}"


def snapshot_rel(snapshot: CodeSnapshot) -> str:
    return f"common/code/{snapshot.repo_dir}/{snapshot.name}"


def address_of(kind: str, name: str) -> str:
    """The address a resource is known by in plans, targets and the audit log (specs.address makes it)."""
    return Address.of_spec(kind, name)
