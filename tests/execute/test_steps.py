"""The step table, and what one `argus apply` costs in Ray requests, git processes and snapshot hashing."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Literal

import pytest

from reconcile.execute.steps import EXECUTORS, execute, step_types
from reconcile.model import StepModel
from tests.support.cluster import until

ROOT = Path(__file__).resolve().parents[2]
MAKE_REPO = ROOT / "examples" / "multi-version" / "make-repo.sh"


def test_every_step_type_has_a_description_and_an_executor():
    """Plan shows what apply runs: neither may know a step type the other does not."""
    assert set(EXECUTORS) == set(step_types())
    for kind in step_types():
        assert "describe" in vars(kind), f"{kind.__name__} renders with no description of its own"


def test_a_step_without_a_description_cannot_exist():
    class Unshown(StepModel):
        kind: Literal["unshown"] = "unshown"
        cluster: str

    with pytest.raises(TypeError, match="describe"):
        Unshown(cluster="local")


def test_a_step_type_missing_from_the_table_is_a_bug_not_a_no_op():
    class Unknown(StepModel):
        kind: Literal["unknown"] = "unknown"
        cluster: str

        def describe(self) -> str:
            return "do something nobody can run"

    with pytest.raises(TypeError, match="no executor for step type Unknown"):
        execute(Unknown(cluster="local"), world=None)  # type: ignore[arg-type]


class Costs:
    """Counts every dashboard request, git process and snapshot re-hash while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from urllib.parse import urlsplit

        import ray.job_submission  # noqa: F401 - imported before Popen is wrapped: ray subclasses Popen

        from state.code import snapshots
        from state.ray import jobs_api

        self.requests: Counter[str] = Counter()
        self.git: Counter[str] = Counter()
        self.verified = 0
        request, popen, verify = jobs_api.request_within, subprocess.Popen, snapshots.verify

        def counted_request(seconds, method, url, **kwargs):  # every dashboard request passes here
            self.requests[f"{method} {urlsplit(url).path}"] += 1
            return request(seconds, method, url, **kwargs)

        def counted_popen(args, *rest, **kwargs):
            if isinstance(args, list) and args and args[0] == "git":
                self.git[next(a for a in args[1:] if not a.startswith("-"))] += 1
            return popen(args, *rest, **kwargs)

        def counted_verify(*args, **kwargs):
            self.verified += 1
            return verify(*args, **kwargs)

        monkeypatch.setattr(jobs_api, "request_within", counted_request)
        monkeypatch.setattr(subprocess, "Popen", counted_popen)
        monkeypatch.setattr(snapshots, "verify", counted_verify)

    def reset(self) -> dict[str, object]:
        seen = {"requests": sum(self.requests.values()), "by_request": dict(self.requests),
                "git": sum(self.git.values()), "by_git": dict(self.git), "verified": self.verified}
        self.requests.clear()
        self.git.clear()
        self.verified = 0
        return seen


def test_what_one_apply_costs(workspace, argus, monkeypatch):
    """A git snapshot used by two jobs: apply submits both, then stops one, then finds nothing to do."""
    subprocess.run([MAKE_REPO, workspace.root / ".repo" / "marker"], check=True, capture_output=True)
    workspace.write("code.yaml", "kind: CodeSnapshot\nname: marker-a\ncluster: local\n"
                                 "git: {url: .repo/marker, ref: v1}\n")
    for name in ("one", "two"):
        workspace.job(name, ["python3", "-c", "import time; time.sleep(120)"], extra="code: marker-a\n")
    costs = Costs(monkeypatch)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    first = costs.reset()
    # The runs write their own driver.log (the wrapper), so stopping one fetches no log from Ray.
    logs = workspace.shared / "jobs"
    until(lambda: len(list(logs.glob("*/logs/driver.log"))) == 2, "both runs wrote their NFS log")
    workspace.job("two", ["python3", "-c", "import time; time.sleep(120)"], extra="code: marker-a\nstate: stopped\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    second = costs.reset()
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    third = costs.reset()
    print("\napply costs: submit", first, "\nstop", second, "\nnothing to do", third)

    # Submitting: one observation (version, nodes, use, list_jobs), one admission of both submits
    # (nodes, use, list_jobs: the queue decided again under the admission lock, for the batch), two
    # submits (the version check of their fields reuses the observation's version), and one list_jobs of
    # the touched cluster to refresh the records.
    # what Ray holds is read only while runs are active on the cluster (another test's may be: the cluster is shared)
    holds = {"GET /api/v0/placement_groups": 1, "GET /api/v0/actors": 1}
    submitted = {k: v for k, v in first["by_request"].items() if k not in holds}
    assert submitted == {"GET /api/version": 1, "GET /api/v0/nodes": 2, "GET /api/jobs/": 3,
                         "GET /api/cluster_status": 2, "POST /api/jobs/": 2}
    assert all(first["by_request"].get(k, 0) <= 2 for k in holds)
    assert first["by_git"]["fetch"] == 1  # the observation's: the export reuses it
    assert first["verified"] == 1  # two jobs on one snapshot: hashed once
    stopped = _id(second, "stop")
    rest = dict(second["by_request"])
    assert rest.pop(f"GET /api/jobs/{stopped}") >= 1  # wait_terminal's polls: as many as the stop takes
    # with runs active, the observation reads what Ray holds for them: placement groups and actors, once each
    assert rest == {"GET /api/version": 1, "GET /api/v0/nodes": 1, "GET /api/jobs/": 2, "GET /api/cluster_status": 1,
                    f"POST /api/jobs/{stopped}/stop": 1, **holds}
    assert second["git"] == 0 and second["verified"] == 0
    assert third == {"requests": 6, "by_request": {"GET /api/version": 1, "GET /api/v0/nodes": 1, "GET /api/jobs/": 1,
                                                   "GET /api/cluster_status": 1, **holds},
                     "git": 0, "by_git": {}, "verified": 0}


def _id(costs: dict, verb: str) -> str:
    """The submission id of the one request ending in /<verb>."""
    [key] = [k for k in costs["by_request"] if k.endswith(f"/{verb}")]
    return key.split("/")[3]
