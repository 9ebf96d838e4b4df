"""From what argus saw to the doctor's checks: plain data in, levels and words out."""

from __future__ import annotations

from specs.kinds.models import JobDefaults
from state.doctor.probe import ProbeResult
from state.doctor.script import NodeReport
from state.doctor.verdicts import auth, gpus, head_skew, node_skew, probe, unplaceable
from state.observed import Node

WORKER = Node(node_id="w" * 56, ip="10.0.0.2", is_head=False, resources={"CPU": 8, "GPU": 8, "worker_node": 1})
HEAD = Node(node_id="h" * 56, ip="10.0.0.1", is_head=True, resources={"CPU": 8})
NONCE = "0123456789abcdef"


def ran(**report: object) -> ProbeResult:
    said = {"uid": "1000", "user": "ray", "clock": 1000, "sees": True, "wrote": True, "owner": "500", "done": True,
            "writable": {".": "yes", ".argus": "no", ".argus/audit": "no"}} | report
    return ProbeResult(submission_id=f"argus-doctor-{NONCE}", submitted=True, status="SUCCEEDED",
                       driver_node_id=WORKER.node_id, report=NodeReport(**said), answer=f"{NONCE} {said['uid']}",
                       submitted_between=(999.5, 1000.5), head_start_ms=1_000_000, ended_at=1001.0, deleted=True)


def levels(result: ProbeResult) -> dict[str, str]:
    return {check.name: check.level for check in probe(result, (HEAD, WORKER), 60, {"worker_node": 1})}


def test_separate_users_pass_every_check():
    assert levels(ran()) == {"probe": "ok", "shared-root": "ok", "argus-state": "ok", "clock": "ok", "cleanup": "ok"}


def test_jobs_that_can_write_argus_state_are_a_warning_saying_how_to_prevent_it():
    [state] = [c for c in probe(ran(uid="500", writable={".argus": "yes", ".argus/queue": "yes"}), (WORKER,), 60, {})
               if c.name == "argus-state"]
    assert state.level == "warn" and "a file in .argus, .argus/queue" in state.message
    assert "(the jobs' own user)" in state.message and "as a Unix user other than argus's" in state.message


def test_a_node_that_does_not_see_argus_file_fails_and_says_nothing_of_the_root_it_has():
    checks = probe(ran(sees=False, wrote=False), (WORKER,), 60, {})
    assert [(c.name, c.level) for c in checks] == [("probe", "ok"), ("shared-root", "fail"), ("clock", "ok"),
                                                  ("cleanup", "ok")]
    assert "the worker's root is not argus's: on worker 10.0.0.2" in checks[1].message


def test_an_answer_argus_cannot_read_back_fails():
    result = ProbeResult(**{**ran().__dict__, "answer": None})
    assert levels(result)["shared-root"] == "fail"


def test_a_probe_pending_at_its_timeout_fails_and_says_what_was_left():
    pending = ProbeResult(submission_id="argus-doctor-x", submitted=True, status="PENDING",
                          left=("job argus-doctor-x in Ray's table (PENDING; ...)",))
    checks = probe(pending, (WORKER,), 5, {"worker_node": 1})
    assert [(c.name, c.level) for c in checks] == [("probe", "fail"), ("cleanup", "warn")]
    assert "did not start within 5s" in checks[0].message and "(worker_node: 1)" in checks[0].message


def test_clock_skew_is_measured_against_the_submit_and_warned_past_five_seconds():
    assert head_skew(ran()) == 0.0 and node_skew(ran()) == 0.0
    late = ProbeResult(**{**ran().__dict__, "head_start_ms": 1_010_500})
    assert head_skew(late) == 10.0 and levels(late)["clock"] == "warn"
    assert node_skew(ran(clock=990)) == -8.5


def test_no_token_required_is_a_warning_and_a_required_working_one_is_ok():
    assert auth(False, False).level == "warn" and "anyone who reaches it" in auth(False, False).message
    assert auth(True, True).level == "ok"


def test_gpus_and_placement():
    assert gpus((HEAD, WORKER)).level == "ok" and "8 GPU(s)" in gpus((HEAD, WORKER)).message
    assert gpus((HEAD,)).level == "warn"
    assert unplaceable((HEAD, WORKER), JobDefaults(entrypoint_resources={"worker_node": 1})) is None
    blocked = unplaceable((HEAD,), JobDefaults(entrypoint_num_cpus=1, entrypoint_resources={"worker_node": 1}))
    assert blocked is not None and blocked.level == "fail" and "(CPU: 1, worker_node: 1)" in blocked.message
