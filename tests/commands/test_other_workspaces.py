"""Two teams on one real cluster: each one's `argus status` and `argus plan` sum the other team's runs up in
one line, list the jobs argus did not submit while they run, and list everything on request or in JSON."""

from __future__ import annotations

import json
import re

from tests.support.cluster import QUICK, SLEEP, jobs_of, sdk, until, wait_for
from tests.support.workspace import make_workspace


def _applied(argus, workspace) -> list:
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    return jobs_of(workspace.address, workspace.name)


def test_two_workspaces_see_each_other_summed_up(workspace, argus, tmp_path):
    client = sdk(workspace.address)
    nlp = make_workspace(tmp_path / "nlp", workspace.name[:30] + "-nlp", workspace.address)
    nlp.job("train", SLEEP)
    nlp.job("eval", QUICK)
    workspace.job("mine", SLEEP)  # running: ranked among the few active workspaces of the shared cluster, never
    # among the finished-only ones that earlier tests left on it, which the summary's bound may cut to one line
    by_hand = client.submit_job(entrypoint="sleep 120")
    try:
        assert argus("apply", nlp.root, "--auto-approve").code == 0
        theirs = {j.metadata["argus.job"]: j.submission_id for j in jobs_of(workspace.address, nlp.name)}
        wait_for(workspace.address, theirs["eval"], {"SUCCEEDED"})
        wait_for(workspace.address, theirs["train"], {"RUNNING"})
        wait_for(workspace.address, by_hand, {"RUNNING"})
        # the shared cluster's worker slots may all be held by earlier tests' runs late in the suite: the job then
        # waits in argus's queue (whole demands only), and an apply once a slot is free starts it
        [mine] = until(lambda: _applied(argus, workspace), "mine started by an apply", timeout=180, every=3)
        wait_for(workspace.address, mine.submission_id, {"RUNNING"})

        status = argus("status", workspace.root)
        assert status.code == 0, status.out + status.err
        assert f"  workspace {nlp.name}: 1 running, 1 finished on local\n" in status.out
        assert f"  not submitted by argus, on local: {by_hand} RUNNING\n" in status.out
        assert theirs["train"] not in status.out and theirs["eval"] not in status.out
        assert "`--all-workspaces` lists each job" in status.out

        plan = argus("plan", workspace.root)
        assert plan.code == 0 and f"    workspace {nlp.name}: 1 running, 1 finished on local\n" in plan.out
        assert theirs["train"] not in plan.out

        listed = argus("status", workspace.root, "--all-workspaces")
        for submission_id in theirs.values():
            assert re.search(rf"  local: {re.escape(submission_id)} (RUNNING|SUCCEEDED) \(owner: {nlp.name}\)",
                             listed.out)
        assert f"local: {by_hand} RUNNING (owner: none, submitted by hand)" in listed.out

        every = json.loads(argus("status", workspace.root, "--format", "json").out)["unmanaged"]
        owners = {j["submission_id"]: j["owner"] for j in every}
        assert owners.items() >= {**{s: nlp.name for s in theirs.values()}, by_hand: None}.items()

        back = argus("status", nlp.root)  # and the other way round: this team is one line in nlp's status
        assert f"  workspace {workspace.name}: 1 running on local\n" in back.out
    finally:
        for job in [*jobs_of(workspace.address, nlp.name), *jobs_of(workspace.address, workspace.name)]:
            if job.status.value in ("PENDING", "RUNNING"):
                client.stop_job(job.submission_id)
        client.stop_job(by_hand)
