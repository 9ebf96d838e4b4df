"""`argus usage --inputs` where two clusters share one shared root (argus allows it; prune sees each version once):
each version is counted once, not once per cluster."""

from __future__ import annotations

import json
from pathlib import Path

from reconcile.commands import usage_inputs
from state.inputs.seal import Expected
from tests.support.sealing import sealed, sha, spec, stage, step_for
from tests.support.workspace import Workspace

DATA = b"q,a\n"


def test_a_version_on_a_root_two_clusters_share_is_counted_once(tmp_path: Path, capsys):
    shared = tmp_path / "nfs"
    shared.mkdir()
    input_spec = spec({"url": {"url": "https://h/t.csv", "sha256": sha(DATA)}})
    step = step_for(input_spec)
    stage(root=shared, step=step, files={"t.csv": DATA})
    sealed(shared, input_spec, step, Expected(files={"t.csv": sha(DATA)}))
    ws = Workspace(tmp_path / "ws", "team", "http://127.0.0.1:1")
    ws.write("argus.yaml", "kind: Workspace\nname: team\n")
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: a
        address: http://10.0.0.1:8265
        shared_root: {shared}
        ---
        kind: Cluster
        name: b
        address: http://10.0.0.2:8265
        shared_root: {shared}
        """)
    usage_inputs.run(ws.root, as_json=True)
    shown = json.loads(capsys.readouterr().out)
    assert len(shown["versions"]) == 1 and shown["total"] == len(DATA)
