"""One probe job on a cluster: submitted as the cluster's jobs are placed, waited for, read back, and removed
from Ray's table and the shared root, whatever happened in between.

Its submission id, `argus-doctor-<nonce>`, says what it is in `ray job list`; its metadata carries
`argus.doctor` and none of the labels of a run (state.observed.RayJob.run_id is None for it), so no
workspace ever takes it for one of its runs: it shows, while it lives, as a job argus did not submit.
Ray's job manager may write a job's status once more after its end (its monitor sees the supervisor actor
gone a second later, and, the row deleted, writes a new FAILED one, "Entrypoint not found.", without metadata):
so the probe is deleted again until its row has stayed away for SETTLE seconds.
A probe still PENDING when the time is up cannot be stopped (Ray stops a pending job only once it
starts) and so cannot be deleted yet: its directory is gone, so when it starts it writes nothing but
its log, and the next `argus doctor` deletes it from Ray's table once it has ended (delete_leftovers).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from specs.errors import ArgusError
from specs.kinds.models import JobDefaults
from state.doctor.place import ProbePlace
from state.doctor.script import NodeReport, parse_report, probe_script
from state.observed import TERMINAL, RayJob
from state.ray.client import RayClient

PROBE_LABEL = "argus.doctor"
"""The probe's one metadata key (its nonce): marks a job as argus doctor's probe, never a run."""
PROBE_ID = re.compile(r"^argus-doctor-([0-9a-f]{16})$")
POLL = 0.25
CLEANUP_WAIT = 10.0
"""Seconds a probe stopped at its timeout is given to end, so that it can be deleted."""
SETTLE = 3.0
"""Seconds a deleted probe's row must stay away: Ray's monitor of a job checks it every second."""
SETTLE_WAIT = 20.0
RAY_REWRITTEN = "Entrypoint not found."
"""The entrypoint of a row Ray's job manager wrote for a job whose row had been deleted."""
MAX_LOG = 256 * 1024
"""Characters of Ray's copy of the driver log that are read: the report is its first lines."""


@dataclass(frozen=True)
class ProbeResult:
    """What happened to one probe, from argus's side and the node's."""

    submission_id: str
    submitted: bool = False
    status: str | None = None
    """Ray's last status of the probe: PENDING when it never started in time."""
    message: str = ""
    """Ray's message of a probe that ended otherwise than SUCCEEDED, or why it was never submitted."""
    driver_node_id: str | None = None
    report: NodeReport = NodeReport()
    answer: str | None = None
    """The node's answer as argus read it under its own root (None: argus found none)."""
    submitted_between: tuple[float, float] = (0.0, 0.0)
    """argus's clock before and after the submit: Ray's start_time falls between them, or the head's clock is off."""
    head_start_ms: int | None = None
    ended_at: float = 0.0
    """argus's clock when it saw the probe end."""
    seconds: float = 0.0
    deleted: bool = False
    left: tuple[str, ...] = ()
    """What the probe could not remove (a job still in Ray's table, a directory), for the message."""
    log_tail: str = ""

    @property
    def nonce(self) -> str:
        return self.submission_id.removeprefix("argus-doctor-")

    @property
    def ran(self) -> bool:
        return self.status in ("SUCCEEDED", "FAILED") and self.report.uid is not None


def run_probe(client: RayClient, root: str, defaults: JobDefaults, timeout: float) -> ProbeResult:
    """Submit the probe, wait up to `timeout` seconds for it to end, read what it reported, clean up."""
    nonce = secrets.token_hex(8)
    place = ProbePlace(root, nonce)
    result = ProbeResult(submission_id=f"argus-doctor-{nonce}")
    try:
        place.prepare()
    except OSError as err:
        place.remove()
        return _with(result, message=f"argus cannot make the probe's directory {root}/{place.rel}: {err}")
    try:
        result = _submit_and_wait(client, result, _payload(root, nonce, defaults), timeout)
        answer = place.answer()
    finally:  # ^C included: the root is left as it was
        left = place.remove()
    deleted, gone = _delete(client, result)
    return _with(result, answer=answer, deleted=deleted, left=tuple(left + gone))


def delete_leftovers(client: RayClient, jobs: tuple[RayJob, ...]) -> list[str]:
    """Earlier probes that ended after their doctor gave up on them (PENDING at its timeout), or that Ray wrote
    again after their delete: deleted now, for good. Only finished jobs both named and labelled as probes (or in
    the shape of Ray's rewritten row, which keeps no metadata): a job of anyone else is never touched."""
    ended = [job.submission_id for job in jobs if _a_probe(job) and job.status in TERMINAL]
    try:
        left = _deleted_for_good(client, ended)
    except ArgusError:
        return []  # a leftover is no reason to fail this doctor: the next one tries again
    return [sid for sid in ended if sid not in left]


def _a_probe(job: RayJob) -> bool:
    match = PROBE_ID.match(job.submission_id)
    return match is not None and (job.metadata.get(PROBE_LABEL) == match.group(1)
                                  or (not job.metadata and job.entrypoint == RAY_REWRITTEN))


def _payload(root: str, nonce: str, defaults: JobDefaults) -> dict[str, Any]:
    """The probe as the cluster's jobs are placed (their job_defaults' entrypoint fields), with no env:
    the defaults' env may name secrets, and the probe needs none."""
    return {"entrypoint": probe_script(root, nonce), "metadata": {PROBE_LABEL: nonce},
            "entrypoint_num_cpus": defaults.entrypoint_num_cpus, "entrypoint_num_gpus": defaults.entrypoint_num_gpus,
            "entrypoint_memory": defaults.entrypoint_memory,
            "entrypoint_resources": dict(defaults.entrypoint_resources) or None}


def _submit_and_wait(client: RayClient, result: ProbeResult, payload: dict[str, Any], timeout: float) -> ProbeResult:
    before = time.time()
    try:
        client.submit(result.submission_id, payload)
    except ArgusError as err:
        return _with(result, message=str(err))
    result = _with(result, submitted=True, submitted_between=(before, time.time()))
    try:
        return _waited(client, result, time.monotonic() + timeout)
    except ArgusError as err:  # the dashboard failed while the probe ran: still submitted, still to delete
        return _with(result, message=str(err), seconds=time.time() - before)


def _waited(client: RayClient, result: ProbeResult, deadline: float) -> ProbeResult:
    sid, before = result.submission_id, result.submitted_between[0]
    job = _until_ended(lambda: client.job(sid), deadline)
    if job is None:
        return _with(result, status="GONE", message="the probe vanished from Ray's table before it ended",
                     seconds=time.time() - before)
    result = _with(result, status=job.status.value, message=job.message, driver_node_id=job.driver_node_id,
                   head_start_ms=job.start_time, ended_at=time.time(), seconds=time.time() - before)
    if job.status.value in ("PENDING", "RUNNING"):
        return result
    log = client.logs(sid)[:MAX_LOG]
    return _with(result, report=parse_report(log), log_tail="\n".join(log.splitlines()[-5:]))


def _until_ended(read: Callable[[], RayJob | None], deadline: float) -> RayJob | None:
    """The probe once ended (or gone), else as it was when the time ran out."""
    while True:
        job = read()
        if job is None or job.status in TERMINAL or time.monotonic() >= deadline:
            return job
        time.sleep(POLL)


def _delete(client: RayClient, result: ProbeResult) -> tuple[bool, list[str]]:
    """The probe out of Ray's table: stopped first if it still runs. (deleted, what was left)."""
    sid = result.submission_id
    if not result.submitted:
        return False, []
    try:
        job = client.job(sid)
        if job is not None and job.status not in TERMINAL:
            client.stop(sid)
            job = _until_ended(lambda: client.job(sid), time.monotonic() + CLEANUP_WAIT)
        if job is not None and job.status not in TERMINAL:
            return False, [f"job {sid} in Ray's table ({job.status.value}; the next `argus doctor` deletes it "
                           f"once it has ended, or `ray job delete {sid}`)"]
        if not _deleted_for_good(client, [sid]):
            return True, []
        return False, [f"job {sid} in Ray's table (Ray wrote it again after each delete; the next `argus doctor` "
                       "deletes it)"]
    except ArgusError as err:
        return False, [f"job {sid} in Ray's table (its delete failed: {err})"]


def _deleted_for_good(client: RayClient, ids: list[str]) -> list[str]:
    """Delete the ended probes, again each time Ray writes a row anew, until every row has stayed away SETTLE
    seconds; the ids still there when SETTLE_WAIT is up."""
    deadline, quiet_since, present = time.monotonic() + SETTLE_WAIT, time.monotonic(), list(ids)
    while ids and time.monotonic() < deadline:
        present = [sid for sid in ids if client.job(sid) is not None]
        for sid in present:
            client.delete(sid)
        if present:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= SETTLE:
            return []
        time.sleep(POLL)
    return present


def _with(result: ProbeResult, **changes: Any) -> ProbeResult:
    return replace(result, **changes)
