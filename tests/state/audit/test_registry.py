"""The registry of argus's submissions read from a real audit log in a real directory (state.audit.registry)."""

from __future__ import annotations

from pathlib import Path

from state.audit import log as audit
from state.audit import registry
from state.audit.events import ApplyEnded, RegistryAdopted, RunRefused, RunStopping, RunSubmitting, StepCarriedOut

WS = "team"


def submitting(sid: str) -> RunSubmitting:
    return RunSubmitting(submission_id=sid, address="job.j", job="j", spec_hash="0" * 64, attempt=1, cluster="c")


def test_submits_refusals_adoptions_and_earlier_submit_steps_make_the_registry(tmp_path: Path) -> None:
    root, cache = str(tmp_path / "root"), str(tmp_path / "cache")
    (tmp_path / "root").mkdir()
    assert registry.read(root, WS, cache).submitted == {}
    audit.append_all(root, WS, [StepCarriedOut(address="job.j", action="submit", step="submit", submission_id="old",
                                               outcome="submitted")])
    before = registry.read(root, WS, cache)
    assert set(before.submitted) == {"old"} and not before.adopted  # an earlier argus's log: not adopted
    audit.append_all(root, WS, [RegistryAdopted(submission_ids=("kept",)), submitting("a"), submitting("b"),
                                RunRefused(submission_id="b", error="no")])
    after = registry.read(root, WS, cache)
    assert set(after.submitted) == {"old", "kept", "a"} and after.adopted and after.problems == ()


def test_a_later_read_verifies_only_what_was_appended_and_sees_a_broken_chain(tmp_path: Path) -> None:
    root, cache = str(tmp_path / "root"), str(tmp_path / "cache")
    (tmp_path / "root").mkdir()
    audit.append_all(root, WS, [RegistryAdopted(submission_ids=()), submitting("a")])
    assert set(registry.read(root, WS, cache).submitted) == {"a"}
    audit.append(root, WS, submitting("b"))
    assert set(registry.read(root, WS, cache).submitted) == {"a", "b"}
    path = audit.audit_path(root, WS)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if '"b"' not in line))  # a job removes the newest record
    damaged = registry.read(root, WS, cache)
    assert damaged.problems and "b" in damaged.submitted  # reported; and what this machine saw stays registered
    fresh = registry.read(root, WS, str(tmp_path / "elsewhere"))  # another machine, reading everything
    assert fresh.problems and set(fresh.submitted) == {"a"}


def test_with_the_key_a_rewritten_log_does_not_verify(tmp_path: Path, monkeypatch) -> None:
    root = str(tmp_path / "root")
    (tmp_path / "root").mkdir()
    monkeypatch.setenv(audit.KEY_VARIABLE, "k" * 32)
    audit.append_all(root, WS, [RegistryAdopted(submission_ids=()), submitting("a"), ApplyEnded(outcome="ok")])
    assert registry.read(root, WS, str(tmp_path / "c1")).problems == ()
    monkeypatch.setenv(audit.KEY_VARIABLE, "another key, as a forger would have")
    assert any("HMAC" in p for p in registry.read(root, WS, str(tmp_path / "c2")).problems)


def test_argus_own_stops_are_read_from_the_chain_whole_and_then_onward(tmp_path: Path) -> None:
    root, cache = str(tmp_path / "root"), str(tmp_path / "cache")
    (tmp_path / "root").mkdir()
    earlier = StepCarriedOut(address="job.j", action="stop", step="stop", submission_id="old", outcome="stopped")
    audit.append_all(root, WS, [RegistryAdopted(submission_ids=("old", "a")), earlier,
                                RunStopping(submission_id="a", why="deadline")])
    assert registry.read(root, WS, cache).stops == {"old": registry.EARLIER_STOP, "a": "deadline"}
    audit.append(root, WS, RunStopping(submission_id="b", why="preempt"))  # read onward, from the cache
    assert registry.read(root, WS, cache).stops == {"old": "stop", "a": "deadline", "b": "preempt"}
    assert registry.read(root, WS, str(tmp_path / "elsewhere")).stops == {"old": "stop", "a": "deadline",
                                                                         "b": "preempt"}
