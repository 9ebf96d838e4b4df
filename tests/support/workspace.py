"""Real workspace directories whose cluster is a test's Ray cluster, and what one CLI call returned."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Workspace:
    """A real workspace directory whose cluster is the test's Ray cluster."""

    root: Path
    name: str
    address: str

    @property
    def shared(self) -> Path:
        return self.root / ".shared"

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    def job(self, name: str, entrypoint: str | list[str], extra: str = "") -> Path:
        rendered = entrypoint if isinstance(entrypoint, str) else "[" + ", ".join(_quote(a) for a in entrypoint) + "]"
        body = f"kind: Job\nname: {name}\ncluster: local\nworkload: command\nentrypoint: {rendered}\n"
        return self.write(f"jobs/{name}.yaml", body + textwrap.dedent(extra).lstrip())

    def allow(self, *secrets: str) -> None:
        """Let the workspace's jobs read these variables of argus's environment (the Workspace's `secrets:`)."""
        self.write("argus.yaml", f"kind: Workspace\nname: {self.name}\nsecrets: [{', '.join(secrets)}]\n")

    def remove(self, rel: str) -> None:
        (self.root / rel).unlink()


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "''") + "'"


def make_workspace(root: Path, name: str, address: str, secrets: tuple[str, ...] = ()) -> Workspace:
    """`secrets`: the variables of argus's environment its jobs may read as `${env:NAME}`."""
    ws = Workspace(root, name, address)
    listed = f"secrets: [{', '.join(secrets)}]\n" if secrets else ""
    ws.write("argus.yaml", f"kind: Workspace\nname: {name}\n{listed}")
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {address}
        shared_root: .shared
        job_defaults:
          entrypoint_num_cpus: 0.5
          entrypoint_resources: {{worker_node: 1}}
        """)
    ws.shared.mkdir(exist_ok=True)  # as apply makes a relative root before its lock (state.root.own)
    return ws


@dataclass
class Result:
    code: int
    out: str
    err: str
