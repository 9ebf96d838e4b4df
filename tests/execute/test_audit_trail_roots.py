"""An apply's audit trail over several shared roots (reconcile.execute.world.AuditTrail): a root whose log cannot
be written loses no other root's records, neither the steps sent there nor the apply's end."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconcile.execute.world import AuditTrail, Provenance
from specs.errors import ArgusError
from state.audit import log as audit
from state.audit.events import ApplyEnded, StepCarriedOut


def events(root: str) -> list[tuple[str, str]]:
    return [(e["event"], e.get("outcome", "")) for e in audit.read(root, "unit")]


def test_a_broken_root_keeps_no_healthy_roots_records_from_being_written(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    Path(a).mkdir()
    Path(b).mkdir()
    appended = audit.append_all

    def broken_a(root, workspace, records, stamp=None):
        if root == a:
            raise ArgusError("a: another process has held the audit log's lock for 10s; nothing was recorded.")
        appended(root, workspace, records, stamp)

    monkeypatch.setattr(audit, "append_all", broken_a)
    trail = AuditTrail({"ca": a, "cb": b}, "unit", Provenance("p", "c", False))
    step = StepCarriedOut(address="job.x", action="create", step="submit", submission_id=None, outcome="submitted")
    trail.send("ca", step)
    trail.send("cb", step)
    with pytest.raises(ArgusError, match="could not be written, twice"):  # what apply_plan does: flush, and on
        trail.flush()  # its failure, apply.end everywhere
    with pytest.raises(ArgusError, match="a: another process"):
        trail.everywhere(ApplyEnded(outcome="failed", error="x"))
    assert events(b) == [("action", "submitted"), ("apply.end", "failed")]
