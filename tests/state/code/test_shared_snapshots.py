"""Two workspaces on one shared root naming a snapshot alike (common/code/<repo>/<name>): the very files are
shared, and the owner's prune spares them while the other's job runs from them; other content under the name
is a plan error naming both workspaces. A real shared root, real git, a real Ray cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.cluster import jobs_of, sdk, wait_for
from tests.support.workspace import make_workspace

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "multi-version"


def other_workspace(tmp_path: Path, name: str, address: str, shared: Path):
    ws = make_workspace(tmp_path / name, name, address)
    ws.write("cluster.yaml", f"kind: Cluster\nname: local\naddress: {address}\nshared_root: {shared}\n"
                             "job_defaults: {entrypoint_num_cpus: 0.5, entrypoint_resources: {worker_node: 1}}\n")
    return ws


def snapshot(ws, ref: str, repo: Path) -> None:
    ws.write("code/code-a.yaml", f"kind: CodeSnapshot\nname: code-a\ncluster: local\n"
                                 f"git: {{url: {repo}, ref: {ref}}}\n")


def test_same_files_are_shared_and_other_files_under_one_name_name_both_workspaces(
        tmp_path, workspace, argus, ray_cluster):
    repo = tmp_path / "marker"
    subprocess.run([EXAMPLE / "make-repo.sh", repo], check=True, capture_output=True)
    snapshot(workspace, "v1", repo)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    target = workspace.shared / "common" / "code" / "marker" / "code-a"
    shared = workspace.shared.resolve()
    twin = other_workspace(tmp_path, "twin-team", ray_cluster.address, shared)
    try:
        snapshot(twin, "v1", repo)  # the same commit
        twin.job("holder", ["python3", "-m", "show_marker", "--hold=120"], extra="code: code-a\n")
        planned = argus("plan", twin.root)
        assert planned.code == 0, planned.out + planned.err
        assert f"materialized by workspace {workspace.name!r}" in planned.out and "shared: the same source" in \
            planned.out
        assert argus("apply", twin.root, "--auto-approve").code == 0
        [held] = jobs_of(ray_cluster.address, "twin-team")
        wait_for(ray_cluster.address, held.submission_id, {"RUNNING"})

        # the owner no longer wants it: its prune spares what the twin's job runs from
        workspace.remove("code/code-a.yaml")
        refused = argus("plan", workspace.root, "--prune", "--allow-empty")
        assert refused.code == 1 and f"code.code-a cannot be pruned: unfinished run(s) {held.submission_id}" in \
            refused.out, refused.out
        assert argus("apply", workspace.root, "--auto-approve", "--prune", "--allow-empty").code == 1
        assert (target / "mvp_marker.py").read_text() == 'MARKER = "codeA"\n'

        other = other_workspace(tmp_path, "other-team", ray_cluster.address, shared)
        snapshot(other, "v2", repo)  # another commit under the same name
        clash = argus("plan", other.root)
        commit = subprocess.run(["git", "-C", repo, "rev-parse", "v1"], capture_output=True, text=True).stdout
        assert clash.code == 1
        assert (f"code/code-a.yaml:2: code.code-a's place (common/code/marker/code-a) holds workspace "
                f"{workspace.name!r}'s snapshot of git '{repo}' at 'v1' (commit {commit[:12]}), and workspace "
                f"'other-team''s names git '{repo}' at 'v2': one name holds one source") in clash.out, clash.out
    finally:
        for job in jobs_of(ray_cluster.address, "twin-team"):
            if job.status.value in ("PENDING", "RUNNING"):
                sdk(ray_cluster.address).stop_job(job.submission_id)


def test_an_apply_racing_another_workspaces_snapshot_names_its_owner(tmp_path, monkeypatch):
    """Both planned before either applied: the second export finds the other's files there, and says whose."""
    import pytest

    from specs.errors import ArgusError
    from specs.kinds.models import CodeSnapshot
    from state.code import snapshots
    from state.code.sources import resolve_source

    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "marker"
    subprocess.run([EXAMPLE / "make-repo.sh", repo], check=True, capture_output=True)
    shared, target = tmp_path / "shared", tmp_path / "shared" / "common" / "code" / "marker" / "code-a"
    shared.mkdir()
    made = {}
    for workspace, ref in (("first-team", "v1"), ("second-team", "v2")):
        spec = CodeSnapshot(kind="CodeSnapshot", name="code-a", cluster="local", git={"url": str(repo), "ref": ref})
        made[workspace] = (spec, resolve_source(spec, str(tmp_path), str(tmp_path / "cache"), 60))
    spec, source = made["first-team"]
    assert snapshots.materialize(spec, source, "first-team", str(tmp_path), str(shared), target) == "created"
    spec, source = made["second-team"]
    with pytest.raises(ArgusError, match=r"already exists with other content \(workspace 'first-team''s, commit "
                                         r"[0-9a-f]{12}\); snapshots are immutable: give workspace 'second-team''s "
                                         r"code.code-a a new name"):
        snapshots.materialize(spec, source, "second-team", str(tmp_path), str(shared), target)
    assert (target / "mvp_marker.py").read_text() == 'MARKER = "codeA"\n'
