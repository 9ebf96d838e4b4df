"""Workspaces for Dataset and Model specs: two clusters (h20, a100) and a CodeSnapshot on each, no inputs yet
(tests/specs' input tests add theirs)."""

from __future__ import annotations

from pathlib import Path

from tests.support.workspace import Workspace


def workspace(tmp_path: Path, cluster_env: str = "") -> Workspace:
    ws = Workspace(tmp_path, "llm-rl", "http://127.0.0.1:1")
    ws.write("argus.yaml", "kind: Workspace\nname: llm-rl\n")
    ws.write("cluster.yaml", """
        kind: Cluster
        name: h20
        address: http://10.0.0.1:8265
        shared_root: /mnt/shared
        """ + cluster_env + """
        ---
        kind: Cluster
        name: a100
        address: http://10.0.0.2:8265
        shared_root: /mnt/other
        ---
        kind: CodeSnapshot
        name: verl
        cluster: h20
        path: ../verl
        ---
        kind: CodeSnapshot
        name: elsewhere
        cluster: a100
        path: ../verl
        """)
    return ws
