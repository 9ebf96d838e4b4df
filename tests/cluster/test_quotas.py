"""Quotas as reviewed desired state on the real GPU cluster (conftest's `gpu_cluster`, 3 logical GPUs).

The platform workspace administers the cluster (`admin: q-platform` on every team's copy of it); a team's
2-GPU job is held to the quotas argus obeys: first the hand-edited file of earlier versions, then the
platform's Quotas, planned, applied and audited; a record a job rewrites counts for nothing.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from specs.kinds.models import Quotas
from tests.support.gpu_queue import active, gpu_job, stop_all, team
from tests.support.workspace import Workspace

ADMIN = "q-platform"


def quotas(ws: Workspace, caps: str) -> None:
    ws.write("quotas.yaml", "kind: Quotas\ncluster: local\nworkspaces:\n" + textwrap.indent(caps, "  "))


def audited(shared: Path) -> list[dict]:
    log = shared / ".argus" / "audit" / f"{ADMIN}.jsonl"
    return [e for e in map(json.loads, log.read_text().splitlines()) if e.get("event") == "quotas.applied"]


def test_quotas_are_planned_applied_and_audited_by_the_admin_and_replace_the_hand_edited_file(
        gpu_cluster, shared, tmp_path, argus):
    (shared / ".argus").mkdir(exist_ok=True)
    (shared / ".argus" / "quotas.yaml").write_text("q-team: {GPU: 1}\n")
    platform = team(tmp_path, ADMIN, gpu_cluster, shared, admin=ADMIN)
    rl = team(tmp_path, "q-team", gpu_cluster, shared, admin=ADMIN)
    gpu_job(rl, shared, "train", gpus=2, seconds=30)
    try:
        before = argus("plan", platform.root)
        assert before.code == 0 and "still come from the hand-edited .argus/quotas.yaml" in before.out, before.out
        assert 'q-team: {"GPU": 1}' in before.out  # the spec to commit, ready to paste
        held = argus("plan", rl.root)
        assert held.code == 1 and "can never start under workspace q-team's quota" in held.out, held.out

        quotas(platform, "q-team: {GPU: 2}\n")
        planned = argus("plan", platform.root)
        assert planned.code == 0 and "+ quotas.local  (create: first quotas from git" in planned.out, planned.out
        assert "~ workspaces.q-team.GPU: 1 -> 2" in planned.out
        applied = argus("apply", platform.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        [first] = audited(shared)
        assert first["workspaces"] == {"q-team": {"GPU": 2.0}}
        reviewed = Quotas(kind="Quotas", cluster="local", workspaces={"q-team": {"GPU": 2}})
        assert first["digest"] == reviewed.digest(ADMIN)
        assert not (shared / ".argus" / "quotas.yaml").exists()  # read for migration only
        assert (shared / ".argus" / "quotas.yaml.migrated").read_text() == "q-team: {GPU: 1}\n"
        assert "No changes" in argus("plan", platform.root).out

        started = argus("apply", rl.root, "--auto-approve")
        assert started.code == 0 and active(rl) == ["train"], started.out + started.err
        shown = argus("queue", rl.root)
        assert f"Quotas (applied by workspace {ADMIN}, its admin): q-team GPU 2" in shown.out, shown.out

        quotas(platform, "q-team: {GPU: 3}\n")
        changed = argus("apply", platform.root, "--auto-approve")
        assert changed.code == 0 and "1 to update" in changed.out and "2 -> 3" in changed.out.replace("→", "->"), \
            changed.out
        assert [e["workspaces"]["q-team"]["GPU"] for e in audited(shared)] == [2.0, 3.0]
    finally:
        stop_all(gpu_cluster.address, platform, rl)


def test_a_record_a_job_rewrites_admits_nothing_until_the_admin_applies_again(gpu_cluster, shared, tmp_path, argus):
    platform = team(tmp_path, ADMIN, gpu_cluster, shared, admin=ADMIN)
    greedy = team(tmp_path, "q-greedy", gpu_cluster, shared, admin=ADMIN)
    quotas(platform, "q-greedy: {GPU: 0}\n")
    gpu_job(greedy, shared, "grab", gpus=2)
    try:
        assert argus("apply", platform.root, "--auto-approve").code == 0
        record = shared / ".argus" / "quotas.json"
        forged = json.loads(record.read_text())
        forged["workspaces"] = {"q-greedy": {"GPU": 3.0}}  # what a job on the cluster can write
        forged["digest"] = Quotas(kind="Quotas", cluster="local", workspaces=forged["workspaces"]).digest(ADMIN)
        record.write_text(json.dumps(forged))

        tried = argus("apply", greedy.root, "--auto-approve")
        assert tried.code == 1 and "a job may have written or removed them" in tried.out + tried.err, tried.out
        assert active(greedy) == []  # the harm: never started under quotas the admin did not apply
        record.unlink()  # removing the record does not lift the caps either
        assert argus("apply", greedy.root, "--auto-approve").code == 1 and active(greedy) == []

        repaired = argus("apply", platform.root, "--auto-approve")
        assert repaired.code == 0 and "can't be trusted" in repaired.out, repaired.out
        held = argus("plan", greedy.root)
        assert held.code == 1 and "can never start under workspace q-greedy's quota" in held.out, held.out
    finally:
        stop_all(gpu_cluster.address, platform, greedy)
