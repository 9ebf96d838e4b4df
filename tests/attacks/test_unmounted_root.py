"""A typo'd shared root and an NFS that is not mounted, with `apply --auto-approve`, on the real cluster: nothing
is created and nothing is submitted again (reconcile.plan.root, state.root.identity; the anchor is argus's
identity on the real root and Ray's own list of the workspace's runs)."""

from __future__ import annotations

import shutil

from tests.support.cluster import QUICK, jobs_of, wait_for


def _applied_once(workspace, argus, ray_cluster) -> str:
    workspace.job("hello", QUICK)
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    [job] = jobs_of(ray_cluster.address, workspace.name)
    wait_for(ray_cluster.address, job.submission_id, {"SUCCEEDED"})
    assert (workspace.shared / ".argus" / "root.json").is_file()
    return job.submission_id


def test_a_typod_root_creates_nothing_and_submits_nothing(workspace, argus, ray_cluster, tmp_path):
    _applied_once(workspace, argus, ray_cluster)
    typo = tmp_path / "mnt" / "sharde"
    cluster = workspace.root / "cluster.yaml"
    cluster.write_text(cluster.read_text().replace("shared_root: .shared", f"shared_root: {typo}"))
    planned = argus("plan", workspace.root)
    assert planned.code == 1 and "does not exist on this machine" in planned.out + planned.err
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 1, applied.out + applied.err
    assert not typo.exists() and not typo.parent.exists()
    assert len(jobs_of(ray_cluster.address, workspace.name)) == 1


def test_an_empty_mount_point_is_an_error_and_nothing_runs_again(workspace, argus, ray_cluster, tmp_path):
    ran = _applied_once(workspace, argus, ray_cluster)
    shutil.move(workspace.shared, tmp_path / "the-real-nfs")  # unmounted: an empty directory at the same path
    workspace.shared.mkdir()
    planned = argus("plan", workspace.root)
    assert planned.code == 1 and "looks unmounted" in planned.out + planned.err, planned.out + planned.err
    assert "stop and delete" not in planned.out + planned.err  # its own run is never called foreign
    for _ in range(2):
        applied = argus("apply", workspace.root, "--auto-approve")
        assert applied.code == 1, applied.out + applied.err
    assert [j.submission_id for j in jobs_of(ray_cluster.address, workspace.name)] == [ran]
    # no layout, no identity, no record, no audit log; the apply lock (taken before the plan) left with its folders
    assert sorted(str(p.relative_to(workspace.shared)) for p in workspace.shared.rglob("*")) == []


def test_an_apply_targeted_elsewhere_writes_nothing_on_an_empty_mount_point(workspace, argus, ray_cluster, tmp_path):
    """Cluster `other` (the same Ray, another root) looks unmounted: an apply targeted at a job of `local` goes
    ahead, and leaves `other`'s root empty (no audit log there would make it look laid out by argus)."""
    _applied_once(workspace, argus, ray_cluster)
    empty = tmp_path / "other-nfs"
    empty.mkdir()
    text = (workspace.root / "cluster.yaml").read_text().replace("name: local", "name: other")
    workspace.write("clusters/other.yaml", text.replace("shared_root: .shared", f"shared_root: {empty}"))
    there = workspace.job("there", QUICK)
    there.write_text(there.read_text().replace("cluster: local", "cluster: other"))
    workspace.job("here", QUICK)
    planned = argus("plan", workspace.root)
    assert planned.code == 1 and "looks unmounted" in planned.out, planned.out + planned.err
    applied = argus("apply", workspace.root, "--auto-approve", "--target", "job.here")
    assert applied.code == 0, applied.out + applied.err
    assert sorted(str(p.relative_to(empty)) for p in empty.rglob("*")) == []
    assert [j for j in jobs_of(ray_cluster.address, workspace.name) if j.metadata.get("argus.job") == "there"] == []


def test_serve_on_an_empty_mount_point_says_why_nothing_is_planned_and_runs_nothing_again(workspace, argus,
                                                                                         ray_cluster, tmp_path):
    """The loop's turn planned nothing there and said nothing of it (`ok=True jobs=0` in its log, /healthz ok):
    the root's distrust is an incident, told in the log (and /healthz, the page, the notifications)."""
    ran = _applied_once(workspace, argus, ray_cluster)
    shutil.move(workspace.shared, tmp_path / "the-real-nfs")
    (workspace.shared / ".argus").mkdir(parents=True)  # bare, but a loop may take its lease there (no .argus: not)
    served = argus("serve", workspace.root, "--once", "--sync", "auto")
    said = served.out + served.err
    assert "incident: the shared root of cluster local is not trusted, so none of its jobs is planned" in said, said
    assert "looks unmounted" in said and "events=['incident']" in said, said
    assert [j.submission_id for j in jobs_of(ray_cluster.address, workspace.name)] == [ran]
