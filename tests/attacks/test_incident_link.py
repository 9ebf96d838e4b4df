"""A job that plants a symlink where argus keeps its incident record, then fails: argus writes nothing through
the link (the file it points at is untouched) and keeps the record in the run's directory all the same."""

from __future__ import annotations

import json
import sys

from tests.support.cluster import wait_for
from tests.support.loops import runs_of

PLANT = "import os, sys; os.symlink(sys.argv[2], sys.argv[1]); sys.exit(3)"


def test_a_link_at_the_record_is_never_written_through(workspace, argus, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    target = "${shared_root}/jobs/${submission_id}/incident.json"
    workspace.job("planter", [sys.executable, "-c", PLANT, target, str(victim)])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [sid] = runs_of(workspace, "planter")
    wait_for(workspace.address, sid, {"FAILED"})
    record = workspace.shared / "jobs" / sid / "incident.json"
    assert record.is_symlink()  # the job did plant it
    turn = argus("apply", workspace.root, "--auto-approve")
    assert turn.code == 0, turn.err

    assert victim.read_text() == "untouched\n"
    assert not record.is_symlink() and json.loads(record.read_text())["submission_id"] == sid
