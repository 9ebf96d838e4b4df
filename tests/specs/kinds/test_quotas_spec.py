"""A Quotas spec: loaded only in the workspace the cluster names as its admin, every problem located."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.load.loader import load_workspace
from tests.support.workspace import Workspace

QUOTAS = """
    kind: Quotas
    cluster: h20
    workspaces:
      llm-rl: {GPU: 8}
      vision: {GPU: 4, CPU: 64}
    """


def workspace(tmp_path: Path, name: str, admin: str | None) -> Workspace:
    ws = Workspace(tmp_path, name, "http://127.0.0.1:1")
    ws.write("argus.yaml", f"kind: Workspace\nname: {name}\n")
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: h20
        address: http://10.0.0.1:8265
        shared_root: /mnt/shared
        {f"admin: {admin}" if admin else ""}
        """)
    return ws


def problems(ws: Workspace) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    return [str(d) for d in caught.value.diagnostics]


def test_the_admin_workspace_declares_the_clusters_quotas(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "platform", "platform")
    ws.write("quotas.yaml", QUOTAS)
    state = load_workspace(ws.root)
    assert state.quotas["h20"].workspaces == {"llm-rl": {"GPU": 8.0}, "vision": {"GPU": 4.0, "CPU": 64.0}}
    assert state.source("quotas.h20").file == "quotas.yaml"


def test_a_team_cannot_set_quotas_for_a_cluster_it_does_not_administer(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "llm-rl", "platform")
    ws.write("quotas.yaml", QUOTAS)
    assert problems(ws) == ["quotas.yaml:2: cluster: cluster 'h20' is administered by workspace 'platform': only its "
                            "quotas apply; ask them to change them"]


def test_a_cluster_without_an_admin_or_unknown_cluster_is_named(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "platform", None)
    ws.write("quotas.yaml", QUOTAS)
    ws.write("more.yaml", "kind: Quotas\ncluster: nowhere\n")
    found = problems(ws)
    assert any(p.startswith("quotas.yaml:2: cluster: cluster 'h20' names no admin: add `admin: platform`")
               for p in found), found
    assert "more.yaml:2: cluster: no Cluster named 'nowhere' (known: h20)" in found


def test_bad_caps_and_a_second_quotas_are_located(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "platform", "platform")
    ws.write("quotas.yaml", textwrap.dedent(QUOTAS) + "---\n"
             + "kind: Quotas\ncluster: h20\nworkspaces:\n  Bad_Name: {GPU: 1}\n"
             "  ok: {GPU: -1, '': 2}\n")
    ws.write("again.yaml", "kind: Quotas\ncluster: h20\n")
    found = "\n".join(problems(ws))
    assert "Bad_Name" in found and "greater than or equal to 0" in found and "duplicate Quotas 'h20'" in found
