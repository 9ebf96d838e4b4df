"""Three teams' workspaces, each with a job called `train`, on one cluster and one shared root: each run's
checkpoint directory is its own team's (outputs/<workspace>/), and what one writes the others never see."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cluster import jobs_of, wait_for
from tests.support.workspace import make_workspace

WRITES = ["sh", "-c", 'mkdir -p "$ARGUS_CHECKPOINT_DIR" && echo "$TEAM" >> "$ARGUS_CHECKPOINT_DIR/owner"']


def test_three_teams_jobs_of_one_name_write_three_directories(tmp_path: Path, shared: Path, argus, ray_cluster,
                                                                request) -> None:
    teams = [f"{name}-{request.node.name[-6:].strip('_-').lower()}" for name in ("nlp", "vision", "speech")]
    for team in teams:
        ws = make_workspace(tmp_path / team, team, ray_cluster.address)
        cluster = ws.root / "cluster.yaml"
        cluster.write_text(cluster.read_text().replace("shared_root: .shared", f"shared_root: {shared}"))
        ws.job("train", WRITES, f"env: {{TEAM: {team}}}\n")
        applied = argus("apply", ws.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        [job] = jobs_of(ray_cluster.address, team)
        wait_for(ray_cluster.address, job.submission_id, {"SUCCEEDED"})
    for team in teams:
        owner = shared / "outputs" / team / "checkpoints" / "train" / "run-1" / "owner"
        assert owner.read_text() == f"{team}\n"  # its own, once: no other team wrote here
    assert not any((shared / "outputs" / "checkpoints").iterdir())  # the directory before outputs were per workspace
    marks = [json.loads(p.read_text()) for p in (shared / ".argus" / "outputs").iterdir()]
    assert sorted(m["workspace"] for m in marks) == sorted(teams)  # each submit marked its own directory
