"""Code snapshots on a real shared root and a real two-node Ray cluster."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from state.audit import log as audit
from state.code import snapshots
from tests.support.cluster import jobs_of, sdk, until, wait_for

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "multi-version"
PAUSED_APPLY = """
import sys, threading
from reconcile.cli import main
from state.code import snapshots

stored, link = [0], snapshots._link_or_copy

def pause_mid_export(source, dest):
    link(source, dest)
    stored[0] += 1
    if stored[0] == 100:
        print("PAUSED", flush=True)
        threading.Event().wait()  # until the test kills this apply

snapshots._link_or_copy = pause_mid_export
sys.exit(main(sys.argv[1:]))
"""
"""`argus apply` that stops for good after exporting 100 files of a snapshot and says so: the test
kills it exactly there, with no race against the export."""


def make_marker_repo(path: Path) -> Path:
    subprocess.run([EXAMPLE / "make-repo.sh", path], check=True, capture_output=True)
    return path


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args], cwd=repo,
                          check=True, capture_output=True, text=True)
    return done.stdout.strip()


def snapshot_spec(ws, name: str, source: str, extra: str = "") -> None:
    ws.write(f"code/{name}.yaml", f"kind: CodeSnapshot\nname: {name}\ncluster: local\n{source}\n{extra}")


def test_multi_version_example_runs_both_versions_at_once(tmp_path, argus, ray_cluster):
    ws_root = tmp_path / "multi-version"
    shutil.copytree(EXAMPLE, ws_root, ignore=shutil.ignore_patterns(".shared", ".repo"))
    make_marker_repo(ws_root / ".repo" / "marker")
    cluster_yaml = ws_root / "cluster.yaml"
    cluster_yaml.write_text(cluster_yaml.read_text().replace("http://127.0.0.1:8265", ray_cluster.address))

    applied = argus("apply", ws_root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    ids = {j.metadata["argus.job"]: j.submission_id for j in jobs_of(ray_cluster.address, "multi-version")}
    _wait_all_running(ray_cluster.address, list(ids.values()))

    for job, marker in (("job-a", "codeA"), ("job-b", "codeB")):
        snapshot = ws_root / ".shared" / "common" / "code" / "marker" / f"marker-{job[-1]}"
        manifest = json.loads((snapshot / ".argus-snapshot.json").read_text())
        assert manifest["source"] == {"git": {"url": ".repo/marker", "ref": f"v{'ab'.index(job[-1]) + 1}"}}
        assert (snapshot / "mvp_marker.py").stat().st_mode & 0o222 == 0
        logs = _wait_log(argus, ws_root, job, "MARKER=")
        assert f"MARKER={marker} from {snapshot}" in logs
        info = sdk(ray_cluster.address).get_job_info(ids[job])
        assert "driver node role: worker" in logs and info.driver_node_id in _worker_node_ids(ray_cluster.address)
        debug = ws_root / ".shared" / "jobs" / ids[job] / "debug"
        assert "alive nodes: 2" in (debug / "ray_status_pre.txt").read_text()
        assert ids[job] in (debug / "ray_job_list_post.txt").read_text()
    shared_file = ws_root / ".shared" / "common" / "code" / "marker"
    assert (shared_file / "marker-a" / "show_marker.py").stat().st_ino == \
        (shared_file / "marker-b" / "show_marker.py").stat().st_ino  # identical files are stored once
    assert argus("plan", ws_root, "--detailed-exitcode", "--verify-snapshots").code == 0


def test_an_interrupted_materialization_leaves_nothing_half_made(workspace, argus):
    repo = workspace.root.parent / "big"
    repo.mkdir()
    git(repo, "init", "-q")
    for i in range(4000):
        (repo / f"m{i:04d}.py").write_text(f"VALUE = {i}\n" * 20)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "big")
    snapshot_spec(workspace, "big", f"git: {{url: {repo}, ref: HEAD}}")
    parent = workspace.shared / "common" / "code" / "big"

    apply = subprocess.Popen([sys.executable, "-c", PAUSED_APPLY, "apply", workspace.root, "--auto-approve"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    watchdog = threading.Timer(300, apply.kill)  # a deadline for a hung apply, not a guess at timing
    watchdog.start()
    paused = any(line == "PAUSED\n" for line in apply.stdout)  # reads until the export pauses (or apply ends)
    watchdog.cancel()
    apply.send_signal(signal.SIGKILL)
    apply.wait()
    apply.stdout.close()
    assert paused, "the apply never reached the middle of the export"
    assert [p.name.startswith(".tmp-big.") for p in parent.iterdir()] == [True]
    assert not (parent / "big").exists()

    # The killed apply's lock names a process of this host that is gone: the next apply breaks it.
    resumed = argus("apply", workspace.root, "--auto-approve")
    assert resumed.code == 0 and "exported 3000/4000 files" in resumed.out  # progress of a long export
    [broken] = [e for e in audit.read(str(workspace.shared), workspace.name) if e["event"] == "unlock"]
    assert broken["reason"] == "holder process is gone" and broken["lock"]["pid"] == apply.pid
    assert not list(parent.glob(".tmp-*"))
    manifest = snapshots.read_manifest(parent / "big")
    assert manifest is not None and manifest.files == 4000
    assert snapshots.verify(parent / "big", manifest) is None


def test_tampering_is_detected_and_blocks_jobs(workspace, argus):
    repo = make_marker_repo(workspace.root.parent / "marker")
    snapshot_spec(workspace, "code-a", f"git: {{url: {repo}, ref: v1}}")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    victim = workspace.shared / "common" / "code" / "marker" / "code-a" / "mvp_marker.py"
    victim.chmod(0o644)
    victim.write_text('MARKER = "evil"\n')

    assert argus("plan", workspace.root).code == 0  # without verification, the manifest is trusted
    verified = argus("plan", workspace.root, "--verify-snapshots")
    assert verified.code == 1 and "code.code-a is damaged" in verified.out
    workspace.job("uses-a", ["python3", "-m", "show_marker"], extra="code: code-a\n")
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 1 and "is damaged" in applied.err and "Not submitting" in applied.err
    assert jobs_of(workspace.address, workspace.name) == []


def test_a_materialized_snapshot_is_never_fetched_again_and_its_source_is_fixed(workspace, argus):
    repo = make_marker_repo(workspace.root.parent / "marker")
    snapshot_spec(workspace, "code-a", f"git:\n  url: {repo}\n  ref: v1")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    made = git(repo, "rev-parse", "v1")
    git(repo, "tag", "-f", "v1", "v2")  # the tag moves upstream: the snapshot keeps what it holds
    plan = argus("plan", workspace.root)
    assert plan.code == 0 and f"materialized at commit {made[:12]}" in plan.out, plan.out
    snapshot_spec(workspace, "code-a", f"git:\n  url: {repo}\n  ref: v2")
    moved = argus("plan", workspace.root)
    assert moved.code == 1 and "code/code-a.yaml:6: code.code-a was materialized from" in moved.out, moved.out
    assert "snapshots are immutable: give the new source a new name" in moved.out


def test_prune_deletes_only_snapshots_no_unfinished_run_uses(workspace, argus):
    repo = make_marker_repo(workspace.root.parent / "marker")
    snapshot_spec(workspace, "code-a", f"git: {{url: {repo}, ref: v1}}")
    workspace.job("holder", ["python3", "-m", "show_marker", "--hold=120"], extra="code: code-a\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    target = workspace.shared / "common" / "code" / "marker" / "code-a"

    workspace.remove("code/code-a.yaml")
    workspace.remove("jobs/holder.yaml")
    kept = argus("plan", workspace.root)
    assert "code.code-a: no longer in the desired state; kept" in kept.out
    refused = argus("plan", workspace.root, "--prune", "--allow-empty")
    assert refused.code == 1 and "code.code-a cannot be pruned: unfinished run(s)" in refused.out
    assert argus("apply", workspace.root, "--auto-approve", "--allow-empty").code == 0  # stops, keeps the code
    assert target.is_dir()
    pruned = argus("apply", workspace.root, "--auto-approve", "--prune")
    assert pruned.code == 0, pruned.out + pruned.err
    assert "- code.code-a" in pruned.out and not target.exists()


def test_a_dirty_working_copy_is_refused_unless_allowed(workspace, argus):
    repo = make_marker_repo(workspace.root.parent / "marker")
    (repo / "mvp_marker.py").write_text('MARKER = "work in progress"\n')
    snapshot_spec(workspace, "wip", f"path: {repo}")
    refused = argus("plan", workspace.root)
    assert refused.code == 1
    assert "code/wip.yaml:4: " in refused.out and "has uncommitted changes" in refused.out

    snapshot_spec(workspace, "wip", f"path: {repo}", extra="allow_dirty: true\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    snapshot = workspace.shared / "common" / "code" / "marker" / "wip"
    assert (snapshot / "mvp_marker.py").read_text() == 'MARKER = "work in progress"\n'
    assert snapshots.read_manifest(snapshot).dirty


def test_bad_sources_name_the_spec_line(workspace, argus):
    repo = make_marker_repo(workspace.root.parent / "marker")
    snapshot_spec(workspace, "nowhere", f"git:\n  url: {workspace.root.parent / 'no-such-repo'}\n  ref: v1")
    snapshot_spec(workspace, "no-ref", f"git:\n  url: {repo}\n  ref: v9")
    plan = argus("plan", workspace.root)
    assert plan.code == 1
    assert "code/nowhere.yaml:5: git failed:" in plan.out
    assert "code/no-ref.yaml:6: ref 'v9' not found" in plan.out


def test_a_job_moved_to_another_snapshot_is_replaced(workspace, argus):
    repo = make_marker_repo(workspace.root.parent / "marker")
    snapshot_spec(workspace, "code-a", f"git: {{url: {repo}, ref: v1}}")
    snapshot_spec(workspace, "code-b", f"git: {{url: {repo}, ref: v2}}")
    workspace.job("mover", ["python3", "-m", "show_marker", "--hold=120"], extra="code: code-a\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [first] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, first.submission_id, {"RUNNING"})
    workspace.job("mover", ["python3", "-m", "show_marker", "--hold=120"], extra="code: code-b\n")
    plan = argus("plan", workspace.root)
    assert "-/+ job.mover" in plan.out and "~ code.snapshot: code-a -> code-b" in plan.out


def _wait_all_running(address: str, ids: list[str], timeout: float = 60) -> None:
    until(lambda: all(str(sdk(address).get_job_status(i).value) == "RUNNING" for i in ids),
          f"{ids} all RUNNING at once", timeout)


def _wait_log(argus, root: Path, job: str, text: str, timeout: float = 30) -> str:
    def log_with_text() -> str | None:
        out = argus("logs", job, root).out
        return out if text in out else None

    return until(log_with_text, f"{text!r} in the log of {job}", timeout)


def _worker_node_ids(address: str) -> set[str]:
    from state.ray.client import RayClient

    return {n.node_id for n in RayClient("local", address).alive_nodes() if "worker_node" in n.resources}
