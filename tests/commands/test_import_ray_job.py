"""`argus import ray-job`: a job submitted by hand (as `ray job submit` does, through Ray's job API), adopted into the
workspace on a real Ray cluster: then in sync, still running, never submitted twice, and audited; and refusals."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest
import yaml

from specs.load.loader import load_workspace
from specs.workloads.submission import resolve, spec_hash
from state.observed import RunRecord, RunStatus
from state.runs import records
from tests.support.cluster import sdk, wait_for
from tests.support.workspace import make_workspace

KEY = "wandb-" + "0123456789abcdef" * 3
"""A secret the hand-submitted job carries in its env: it must reach no spec, output or record."""


@pytest.fixture
def by_hand(workspace):
    """A job submitted by hand (no argus labels), stopped when the test ends: argus must never stop it."""
    client, made = sdk(workspace.address), []

    def submit(entrypoint: str = "sleep 600", **fields) -> str:
        sid = f"hand-{secrets.token_hex(4)}"
        client.submit_job(entrypoint=entrypoint, submission_id=sid, entrypoint_num_cpus=0.5,
                          entrypoint_resources={"worker_node": 1}, **fields)
        made.append(sid)
        return sid

    yield submit
    for sid in made:
        if client.get_job_info(sid).status.value in ("PENDING", "RUNNING"):
            client.stop_job(sid)


def test_an_imported_job_is_in_sync_still_running_and_never_submitted_twice(workspace, argus, by_hand):
    sid = by_hand(runtime_env={"env_vars": {"MODE": "fast", "WANDB_API_KEY": KEY}})
    wait_for(workspace.address, sid, {"RUNNING"})
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # the workspace's layout, as any has
    assert sid in _unmanaged(argus("plan", workspace.root, "--json").out)  # foreign until imported

    done = argus("import", "ray-job", sid, "--dir", workspace.root, "--name", "trainer")
    assert done.code == 0, done.err
    text = (workspace.root / "jobs" / "trainer.yaml").read_text()
    assert "workload: command" in text and "entrypoint: sleep 600" in text and "MODE: fast" in text
    assert KEY not in text + done.out + done.err and "WANDB_API_KEY" in done.out

    plan = argus("plan", workspace.root, "--detailed-exitcode")
    assert plan.code == 0, plan.out + plan.err
    assert "job.trainer: " + sid + " is RUNNING" in plan.out
    assert sid not in _unmanaged(argus("plan", workspace.root, "--json").out)
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.err
    rows = [j for j in sdk(workspace.address).list_jobs() if j.entrypoint == "sleep 600"
            and (j.submission_id == sid or (j.metadata or {}).get("argus.workspace") == workspace.name)]
    assert [j.submission_id for j in rows] == [sid]
    assert sdk(workspace.address).get_job_info(sid).status.value == "RUNNING"
    # no deadline, preemption or idle rule stops it: the import writes none, and a later plan and apply leave it
    assert not {"max_runtime", "idle", "deadline", "preemptible", "priority"} & set(yaml.safe_load(text))
    again = argus("plan", workspace.root, "--detailed-exitcode")
    assert again.code == 0 and "job.trainer: " + sid + " is RUNNING" in again.out, again.out + again.err
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    assert sdk(workspace.address).get_job_info(sid).status.value == "RUNNING"

    shown = argus("audit", "show", workspace.root, "--json")
    events = [json.loads(line) for line in shown.out.splitlines() if line.strip()]
    imported = [e for e in events if e.get("event") == "run.imported"]
    assert len(imported) == 1 and imported[0]["submission_id"] == sid and imported[0]["job"] == "trainer"
    assert imported[0].get("commit") and imported[0].get("user", imported[0].get("actor"))
    assert KEY not in shown.out

    again = argus("import", "ray-job", sid, "--dir", workspace.root, "--name", "other")
    assert again.code == 1 and "already a run of workspace" in again.err
    assert not (workspace.root / "jobs" / "other.yaml").exists()


def test_a_finished_job_an_unknown_one_and_one_argus_submitted_are_refused(workspace, argus, by_hand):
    done = by_hand(entrypoint="true")
    wait_for(workspace.address, done, {"SUCCEEDED"})
    refused = argus("import", "ray-job", done, "--dir", workspace.root, "--name", "a")
    assert refused.code == 1 and "is SUCCEEDED" in refused.err

    unknown = argus("import", "ray-job", "nobody-submitted-this", "--dir", workspace.root, "--name", "b")
    assert unknown.code == 1 and "has no job nobody-submitted-this" in unknown.err

    labelled = by_hand(metadata={"argus.workspace": "someone-else", "argus.job": "x"})
    refused = argus("import", "ray-job", labelled, "--dir", workspace.root, "--name", "c")
    assert refused.code == 1 and "argus's labels" in refused.err
    assert not list(workspace.root.glob("jobs/*.yaml"))
    assert not (workspace.shared / ".argus" / "audit" / f"{workspace.name}.jsonl").exists()


def test_a_record_on_the_shared_root_does_not_adopt_a_job_without_the_chain(workspace, argus, by_hand):
    """The chain, not the shared root, makes an imported run: a record naming a hand-made job as the spec's run
    (any job can write one there) leaves it foreign, and the job is still submitted as the spec says."""
    sid = by_hand()
    wait_for(workspace.address, sid, {"RUNNING", "PENDING"})
    workspace.write("jobs/trainer.yaml", "kind: Job\nname: trainer\ncluster: local\nworkload: command\n"
                                         "entrypoint: sleep 600\n")
    desired = load_workspace(workspace.root)
    sub = resolve(desired.workspace, desired.clusters["local"], desired.jobs["trainer"])
    records.write_status(desired.shared_root("local"), RunRecord(
        submission_id=sid, workspace=workspace.name, job="trainer", cluster="local", spec_hash=spec_hash(sub),
        attempt=1, status=RunStatus.RUNNING, updated_at=records.now(), plan_id="import", commit="x", submission=sub))
    plan = argus("plan", workspace.root, "--detailed-exitcode")
    assert plan.code == 2 and "+ job.trainer" in plan.out, plan.out
    assert sid in _unmanaged(argus("plan", workspace.root, "--json").out)


def _unmanaged(plan_json: str) -> list[str]:
    return [job["submission_id"] for job in json.loads(plan_json)["unmanaged"]]


HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"


def test_an_entrypoint_holding_a_secret_is_refused_and_no_secret_leaks(workspace, argus, by_hand):
    """The entrypoint is the spec, so a secret in it cannot be redacted: refused, nothing written or recorded.
    Secrets elsewhere (runtime_env, metadata, an env var named by a token) reach no output and no file."""
    hex_key = "0123456789abcdef" * 2 + "01234567"
    inline = by_hand(entrypoint=f"WANDB_API_KEY={hex_key} sleep 600")
    refused = argus("import", "ray-job", inline, "--dir", workspace.root, "--name", "inline")
    assert refused.code == 1 and "WANDB_API_KEY" in refused.err and "secrets:" in refused.err
    assert hex_key not in refused.out + refused.err
    assert not (workspace.root / "jobs" / "inline.yaml").exists()
    assert not (workspace.shared / ".argus" / "audit" / f"{workspace.name}.jsonl").exists()

    sid = by_hand(metadata={"note": HF}, runtime_env={"env_vars": {HF: "x", "MODE": HF, "SAFE": "1"}})
    done = argus("import", "ray-job", sid, "--dir", workspace.root, "--name", "meta")
    assert done.code == 0, done.err
    assert "SAFE" in (workspace.root / "jobs" / "meta.yaml").read_text()
    for secret in (HF, hex_key):
        assert secret not in done.out + done.err
        assert not [p for p in (*workspace.root.rglob("*"), *workspace.shared.rglob("*"))
                    if p.is_file() and secret.encode() in p.read_bytes()]


def test_two_workspaces_on_one_root_importing_one_job_at_once_adopt_it_once(workspace, by_hand, tmp_path):
    """Check-then-append under the root's lock: two imports started together into two workspaces sharing the root
    (two processes, as two people would run them) leave one chain naming the job, and the other refused."""
    sid = by_hand()
    other = make_workspace(tmp_path / "other", "other-" + workspace.name[:30], workspace.address)
    other.write("cluster.yaml", f"kind: Cluster\nname: local\naddress: {workspace.address}\n"
                                f"shared_root: {workspace.shared}\n")
    racers = [subprocess.Popen([sys.executable, "-m", "reconcile.cli", "import", "ray-job", sid, "--dir", str(ws.root),
                                "--name", "adopted"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for ws in (workspace, other)]
    results = [(r.returncode, err) for r in racers for _, err in [r.communicate(timeout=120)]]
    assert sorted(code for code, _ in results) == [0, 1], results
    assert any("already a run of workspace" in err for code, err in results if code == 1), results
    chains = (workspace.shared / ".argus" / "audit").glob("*.jsonl")
    claims = [line for chain in chains for line in chain.read_text().splitlines() if '"run.imported"' in line]
    assert len(claims) == 1 and sid in claims[0]
