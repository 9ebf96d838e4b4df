"""`entry.demand`, a recipe's declared pools and CPUs: a bad size or name is refused at its own line."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.load.loader import load_workspace
from tests.support.workspace import Workspace

JOB = """kind: Job
name: recipe
cluster: h20
code: verl
workload: grpo
model: /mnt/shared/models/qwen
data: {{train: /mnt/shared/d.parquet, val: /mnt/shared/v.parquet}}
entry:
  module: recipe.x.main_x
  demand:
    pools:
      - name: rollout_pool
        nnodes: {nnodes}
        gpus_per_node: 8
        cpus_per_gpu: {cpus}
    cpus: 21
"""


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path, "team", "http://127.0.0.1:1")
    ws.write("argus.yaml", "kind: Workspace\nname: team\n")
    ws.write("clusters/c.yaml", "kind: Cluster\nname: h20\naddress: http://10.0.0.1:8265\nshared_root: /mnt/shared\n")
    ws.write("code.yaml", "kind: CodeSnapshot\nname: verl\ncluster: h20\ngit: {url: https://example.invalid/v.git, "
                          "ref: main}\n")
    return ws


def test_a_declared_demand_loads(ws: Workspace) -> None:
    ws.write("jobs/recipe.yaml", JOB.format(nnodes=2, cpus=2))
    demand = load_workspace(ws.root).jobs["recipe"].entry.demand
    assert [(p.name, p.nnodes, p.gpus_per_node, p.cpus_per_gpu) for p in demand.pools] == [("rollout_pool", 2, 8, 2)]
    assert demand.cpus == 21


def test_a_declared_pool_of_no_nodes_or_negative_cpus_is_refused_at_its_line(ws: Workspace) -> None:
    ws.write("jobs/recipe.yaml", JOB.format(nnodes=0, cpus=-1))
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    found = [str(d) for d in caught.value.diagnostics]
    assert any(d.startswith("jobs/recipe.yaml:13: entry.demand.pools.0.nnodes: ") for d in found), found
    assert any(d.startswith("jobs/recipe.yaml:15: entry.demand.pools.0.cpus_per_gpu: ") for d in found), found
