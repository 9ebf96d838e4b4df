"""The pull-request loop on a real git repository: a plan reviewed on the branch applies after a
merge commit, a squash or a rebase — the commit differs, the decisions do not."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.cluster import QUICK, gated, jobs_of, wait_for
from tests.support.workspace import make_workspace


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args], cwd=repo,
                          check=True, capture_output=True, text=True)
    return done.stdout.strip()


def repository(tmp_path: Path, name: str, address: str):
    """main holds infra/argus with two jobs, both applied; `slow` is still running."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    ws = make_workspace(repo / "infra" / "argus", name, address)
    (tmp_path / "shared").mkdir()  # the NFS mount: argus never makes it
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {address}
        shared_root: {tmp_path / 'shared'}
        job_defaults:
          entrypoint_num_cpus: 0.5
          entrypoint_resources: {{worker_node: 1}}
        """)
    ws.job("base", QUICK)
    ws.job("slow", gated(tmp_path / "gate"))
    (repo / "README.md").write_text("infra\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "main")
    return repo, ws


def reviewed_pull_request(tmp_path: Path, argus, name: str, address: str):
    """main applied; branch `pr` adds job `feature`; its plan saved outside the checkout."""
    repo, ws = repository(tmp_path, name, address)
    assert argus("apply", ws.root, "--auto-approve").code == 0
    git(repo, "checkout", "-q", "-b", "pr")
    ws.job("feature", QUICK)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "Add the feature job")
    plan_file = tmp_path / "plan.json"
    assert argus("plan", ws.root, "-o", plan_file).code == 0
    return repo, ws, plan_file


def merge(repo: Path, how: str) -> None:
    git(repo, "checkout", "-q", "main")
    if how == "merge-commit":
        git(repo, "merge", "-q", "--no-ff", "pr", "-m", "Merge pull request")
    elif how == "squash":
        git(repo, "merge", "-q", "--squash", "pr")
        git(repo, "commit", "-qm", "Squashed pull request")
    else:
        git(repo, "checkout", "-q", "pr")
        git(repo, "rebase", "-q", "main")
        git(repo, "checkout", "-q", "main")
        git(repo, "merge", "-q", "--ff-only", "pr")


@pytest.mark.parametrize("how", ["merge-commit", "squash", "rebase"])
def test_the_reviewed_plan_applies_after_every_kind_of_merge(tmp_path, argus, ray_cluster, how):
    repo, ws = repository(tmp_path, f"merges-{how}", ray_cluster.address)
    assert argus("apply", ws.root, "--auto-approve").code == 0
    slow = next(j for j in jobs_of(ws.address, ws.name) if j.metadata["argus.job"] == "slow")
    wait_for(ws.address, slow.submission_id, {"RUNNING"})

    git(repo, "checkout", "-q", "-b", "pr")
    ws.job("feature", QUICK)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "Add the feature job")
    reviewed_commit = git(repo, "rev-parse", "HEAD")
    plan_file = ws.root / "plan.json"  # inside the workspace: the checkout is dirty from here on
    planned = argus("plan", ws.root, "-o", plan_file)
    assert planned.code == 0 and "+ job.feature" in planned.out, planned.out + planned.err

    git(repo, "checkout", "-q", "main")  # main moves on with something that is not a spec
    (repo / "README.md").write_text("infra, reviewed\n")
    git(repo, "commit", "-qam", "Unrelated change on main")
    (tmp_path / "gate").touch()
    wait_for(ws.address, slow.submission_id, {"SUCCEEDED"})  # a run finishes between review and merge
    merge(repo, how)
    merged_commit = git(repo, "rev-parse", "HEAD")
    assert merged_commit != reviewed_commit

    applied = argus("apply", plan_file, "--dir", ws.root)
    assert applied.code == 0, applied.out + applied.err
    assert "Note:" not in applied.err  # the specs are the reviewed ones
    [feature] = [j for j in jobs_of(ws.address, ws.name) if j.metadata["argus.job"] == "feature"]
    plan_id = json.loads(plan_file.read_text())["plan_id"]
    assert (feature.metadata["argus.plan"], feature.metadata["argus.commit"]) == (plan_id, merged_commit)
    audit = [json.loads(line) for line in (tmp_path / "shared" / ".argus" / "audit" / f"{ws.name}.jsonl")
             .read_text().splitlines()]
    submitted = next(e for e in audit if e.get("address") == "job.feature" and e.get("event") == "action")
    assert (submitted["commit"], submitted["reviewed_commit"]) == (merged_commit, reviewed_commit)


def test_a_job_changed_differently_on_main_is_refused_naming_it(tmp_path, argus, ray_cluster):
    repo, ws, plan_file = reviewed_pull_request(tmp_path, argus, "merges-conflict", ray_cluster.address)

    git(repo, "checkout", "-q", "main")
    ws.job("base", QUICK, extra="run: 2\n")  # someone asked main for a new run of base meanwhile
    git(repo, "commit", "-qam", "Run base again")
    merge(repo, "merge-commit")
    before = {j.submission_id for j in jobs_of(ws.address, ws.name)}
    refused = argus("apply", plan_file, "--dir", ws.root)
    assert refused.code == 1 and "Saved plan is stale" in refused.err, refused.out + refused.err
    assert "job.base: reviewed no change; now `" in refused.err  # a replace or a submit, by timing
    assert {j.submission_id for j in jobs_of(ws.address, ws.name)} == before


def test_a_description_changed_on_main_is_noted_but_decides_nothing(tmp_path, argus, ray_cluster):
    repo, ws, plan_file = reviewed_pull_request(tmp_path, argus, "merges-cosmetic", ray_cluster.address)
    git(repo, "checkout", "-q", "main")
    ws.job("base", QUICK, extra="description: the first job\n")
    git(repo, "commit", "-qam", "Describe base")
    merge(repo, "rebase")
    applied = argus("apply", plan_file, "--dir", ws.root)
    assert applied.code == 0, applied.out + applied.err
    assert "Note: the desired state differs from the one reviewed" in applied.err
    assert "feature" in {j.metadata["argus.job"] for j in jobs_of(ws.address, ws.name)}
