"""Two repositories pick one workspace name on one shared root (the session's real Ray cluster): the first
apply claims the name; the second's plan is an error naming both, its apply submits nothing (Ray's job
list is the witness) and writes nothing under the root; `argus claim --move-from` then hands the name
over, and the audit log says from whom to whom."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from tests.support.cluster import jobs_of, until, wait_for
from tests.support.workspace import Workspace

NAME = "claims-shared-name"


def _repository(top: Path, origin: str, job: str, address: str, shared: Path) -> Workspace:
    """A git repository whose teams/nlp is workspace NAME with one quick command job, on the shared root."""
    ws = Workspace(top / "teams" / "nlp", NAME, address)
    ws.write("argus.yaml", f"kind: Workspace\nname: {NAME}\n")
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {address}
        shared_root: {shared}
        job_defaults:
          entrypoint_num_cpus: 0.5
          entrypoint_resources: {{worker_node: 1}}
        """)
    ws.job(job, ["echo", job])
    for args in (["init", "-q", "-b", "main"], ["remote", "add", "origin", origin], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "specs"]):
        subprocess.run(["git", "-C", str(top), *args], check=True, capture_output=True)
    return ws


def _tree(root: Path) -> dict[str, str]:
    """Every file under the root (links as their target), each with its content's digest."""
    found = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = os.readlink(path) if path.is_symlink() else \
                hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _jobs_named(address: str, job: str) -> list[str]:
    return [j.submission_id for j in jobs_of(address, NAME) if (j.metadata or {}).get("argus.job") == job]


def test_a_second_repository_with_the_same_name_acts_on_nothing_until_the_claim_is_moved(tmp_path, ray_cluster,
                                                                                         argus, shared):
    first = _repository(tmp_path / "a", "https://bot:ghp_TOKEN@github.com/org/first.git", "from-first",
                        ray_cluster.address, shared)
    second = _repository(tmp_path / "b", "git@github.com:org/second.git", "from-second",
                         ray_cluster.address, shared)
    applied = argus("apply", first.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    claim = json.loads((shared / ".argus" / "claims" / f"{NAME}.json").read_text())
    assert (claim["repository"], claim["directory"]) == ("github.com/org/first", "teams/nlp")
    assert "TOKEN" not in json.dumps(claim)
    [ran] = _jobs_named(ray_cluster.address, "from-first")
    wait_for(ray_cluster.address, ran, {"SUCCEEDED"})
    until(lambda: (shared / "jobs" / ran / "exit.json").exists(), "the first's run wrote its end: the root rests")

    planned = argus("plan", second.root)
    assert planned.code == 1
    assert "directory teams/nlp of github.com/org/first" in planned.out, planned.out
    assert "directory teams/nlp of github.com/org/second" in planned.out
    assert "argus claim DIR --move-from github.com/org/first" in planned.out
    assert "argus.yaml:2" in planned.out  # the `name:` line that collides

    before = _tree(shared)
    refused = argus("apply", second.root, "--auto-approve")
    assert refused.code == 1, refused.out + refused.err
    assert _jobs_named(ray_cluster.address, "from-second") == []
    assert _tree(shared) == before, "the second repository's apply wrote nothing under the root"
    served = argus("serve", second.root, "--once")  # nor does its serve take the lease from the owner's
    assert served.code == 1 and "is claimed on" in served.err, served.out + served.err
    assert not (shared / ".argus" / "serve").exists() and _jobs_named(ray_cluster.address, "from-second") == []

    wrong = argus("claim", second.root, "--move-from", "github.com/org/someone-else", "--yes")
    assert wrong.code == 1 and _tree(shared) == before
    moved = argus("claim", second.root, "--move-from", "github.com/org/first", "--yes")
    assert moved.code == 0, moved.out + moved.err
    audit = [json.loads(line) for line in (shared / ".argus" / "audit" / f"{NAME}.jsonl").read_text().splitlines()]
    record = [r for r in audit if r["event"] == "claim"]
    assert [(r["repository"], r["previous"]) for r in record] == [
        ("github.com/org/first", None),
        ("github.com/org/second", {"repository": "github.com/org/first", "directory": "teams/nlp"})]
    shown = argus("audit", "show", second.root)
    assert "claim teams/nlp of github.com/org/second (moved from teams/nlp of github.com/org/first)" in shown.out

    taken = argus("apply", second.root, "--auto-approve")
    assert taken.code == 0, taken.out + taken.err
    assert _jobs_named(ray_cluster.address, "from-second")
    assert argus("plan", first.root).code == 1, "the first repository is now the one refused"
