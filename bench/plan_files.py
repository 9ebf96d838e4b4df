"""Files a plan opens on the shared root, with no past runs and with 10,000, in the same run.

Target (issue 16): `argus plan` reads a bounded number of files whatever the history: 10,000 past
finished runs of the workspace cost at most 10% more FILES OPENED than none (on NFS each open is a
round trip), and seconds are printed too. Runs the real read path of a plan (state.observe.observe:
records, ends, settling, the run index, snapshots, layout, queue) against a shared root on disk; Ray's
answer is given as data (this workspace's live runs listed RUNNING), so no cluster is started.
Every open, listing and scandir is counted with an audit hook (sys.addaudithook), bytes with
/proc/self/io. Also: what a serve turn reads of an audit log of 100,000 records against one of 10.
    .venv/bin/python bench/plan_files.py [past_runs] [rounds]
"""

from __future__ import annotations

import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specs.desired import DesiredState  # noqa: E402
from specs.load.loader import load_workspace  # noqa: E402
from specs.workloads.submission import RunId, labels, resolve, spec_hash  # noqa: E402
from state.audit import files as audit_files
from state.audit import log as audit  # noqa: E402
from state.audit.events import ApplyEnded, StepCarriedOut  # noqa: E402
from state.audit.follow import AuditFollower  # noqa: E402
from state.observe import observe  # noqa: E402
from state.observed import ClusterState, RayJob, RunRecord, RunStatus  # noqa: E402
from state.runs import index as run_index
from state.runs import records

WS, JOBS, OTHERS = "bench", 20, 5_000
"""This workspace's jobs (each with one live run), and other workspaces' runs on the same root."""


class Counter:
    """Opens (builtins.open, io.open, os.open), listings and scandirs, while switched on."""

    def __init__(self) -> None:
        self.on, self.opened, self.listed = False, 0, 0
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple) -> None:
        if not self.on:
            return
        if event == "open" and not isinstance(args[0], int):  # os.fdopen of an open descriptor is no open
            self.opened += 1
        elif event in ("os.listdir", "os.scandir"):
            self.listed += 1

    def measure(self, call: Callable[[], object]) -> tuple[int, int, int, float]:
        """(files opened, directories listed, bytes read, seconds) of one call."""
        self.opened = self.listed = 0
        before = _bytes_read()
        self.on, start = True, time.perf_counter()
        try:
            call()
        finally:
            self.on = False
        return self.opened, self.listed, _bytes_read() - before, time.perf_counter() - start


def main() -> None:
    past = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    counter = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        none = _plan_reads(counter, Path(tmp) / "none", 0, rounds)
        many = _plan_reads(counter, Path(tmp) / "many", past, rounds)
        full = _full_read(counter, Path(tmp) / "many")
    _report("plan", none, many, past, target=1.10)
    print(f"  before the index (every record read, as issue 16 found it): {full[0]} files opened, "
          f"{full[2] / 1e6:.1f} MB, {full[3]:.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        small = _audit_turns(counter, Path(tmp) / "small", 10)
        big = _audit_turns(counter, Path(tmp) / "big", 100_000)
    for records_, found in ((10, small), (100_000, big)):
        print(f"serve turn's audit view, {records_} records: first turn (full) {found[0][0]} files "
              f"{found[0][2] / 1e3:.0f} kB {found[0][3]:.3f} s; next turn {found[1][0]} files "
              f"{found[1][2] / 1e3:.1f} kB {found[1][3]:.4f} s")
    print(f"serve turn's audit view: next turn 100,000 vs 10 records: files {big[1][0] / small[1][0]:.2f}x, "
          f"bytes {big[1][2] / small[1][2]:.2f}x, seconds {big[1][3] / small[1][3]:.2f}x")


def _plan_reads(counter: Counter, base: Path, past: int, rounds: int) -> tuple[int, int, int, float]:
    desired, cluster = _world(base, past)
    ray = {"local": _Answered(cluster)}
    observe(desired, ray)  # the first plan after an upgrade reads every record once and builds the index
    found = [counter.measure(lambda: observe(desired, ray)) for _ in range(rounds)]
    opened, listed, read, _ = found[-1]
    return opened, listed, read, statistics.median(f[3] for f in found)


def _full_read(counter: Counter, base: Path) -> tuple[int, int, int, float]:
    return counter.measure(lambda: records.read_records(str(base / "shared"), WS))


def _audit_turns(counter: Counter, root: Path, count: int) -> list[tuple[int, int, int, float]]:
    """A serve process's audit view of a log of `count` records: its first turn, and one after an apply."""
    shared = str(root)
    audit.append(shared, WS, ApplyEnded(outcome="ok", changes=1))  # the log, its directories, its anchor
    lines, newest = audit._records([StepCarriedOut(address=f"job.j{n}", action="submit", step="submit", outcome="ok")
                                    for n in range(count - 1)], {"plan": "p1"}, audit.read(shared, WS)[-1]["hash"],
                                   WS, None)
    with open(audit.audit_path(shared, WS), "a", encoding="utf-8") as handle:
        handle.write("".join(f"{line}\n" for line in lines))
    audit_files.write_anchor(shared, WS, audit._anchor_text(count, newest, WS, None))
    follower = AuditFollower()
    first = counter.measure(lambda: follower.view(shared, WS))
    audit.append(shared, WS, ApplyEnded(outcome="ok", changes=2))
    following = counter.measure(lambda: follower.view(shared, WS))
    assert follower.view(shared, WS).problems == (), "the bench's log must verify"
    return [first, following]


def _report(what: str, none: tuple, many: tuple, past: int, target: float) -> None:
    print(f"{what}: no past runs: {none[0]} files opened, {none[1]} listed, {none[2] / 1e3:.0f} kB, {none[3]:.3f} s")
    print(f"{what}: {past} past runs: {many[0]} files opened, {many[1]} listed, {many[2] / 1e3:.0f} kB, "
          f"{many[3]:.3f} s")
    print(f"{what}: ratio files opened {(many[0] + many[1]) / (none[0] + none[1]):.2f} (target <= {target}), "
          f"bytes {many[2] / max(none[2], 1):.1f}x, seconds {many[3] / none[3]:.2f}x")


class _Answered:
    """Ray's answer as data: the job list of the cluster, nothing else is asked of it."""

    def __init__(self, cluster: ClusterState) -> None:
        self._cluster = cluster

    def snapshot(self) -> ClusterState:
        return self._cluster


def _world(base: Path, past: int):
    shared = base / "shared"
    (base / "ws").mkdir(parents=True)
    (base / "ws" / "argus.yaml").write_text(f"kind: Workspace\nname: {WS}\n")
    (base / "ws" / "cluster.yaml").write_text(f"kind: Cluster\nname: local\naddress: http://127.0.0.1:1\n"
                                              f"shared_root: {shared}\n")
    for j in range(JOBS):
        (base / "ws" / f"j{j}.yaml").write_text(f"kind: Job\nname: j{j}\ncluster: local\nworkload: command\n"
                                               f"entrypoint: [python3, -c, 'print({j})']\n")
    desired = load_workspace(base / "ws")
    live = [_run(WS, f"j{j}", f"live{j}", RunStatus.RUNNING, digest=_current(desired, f"j{j}")) for j in range(JOBS)]
    for record in live:
        run_index.mark_open(str(shared), WS, record.submission_id)  # as apply does before each intent
    history = [_run(WS, f"j{n % JOBS}", f"past{n}", _ended(n), attempt=n % 3 + 1) for n in range(past)]
    others = [_run(f"other{n % 7}", "job", f"o{n}", RunStatus.SUCCEEDED) for n in range(OTHERS)]
    for record in [*live, *history, *others]:
        records.write_status(str(shared), record)
    jobs = tuple(RayJob(submission_id=r.submission_id, status=RunStatus.RUNNING, start_time=1,
                        metadata=labels(_id(r), "c0ffee", "p1")) for r in live)
    cluster = ClusterState(name="local", address="http://127.0.0.1:1", session_name="s1", ray_version="2.60",
                           nodes=(), jobs=jobs)
    return desired, cluster


def _current(desired: DesiredState, job: str) -> str:
    """The spec hash of the job as it is desired: its live run is in sync (nothing to do), as a workspace is
    between merges. The past runs are of earlier specs of the job."""
    return spec_hash(resolve(desired.workspace, desired.cluster_of(desired.jobs[job]), desired.jobs[job]))


def _run(workspace: str, job: str, seed: str, status: RunStatus, attempt: int = 1, digest: str = "") -> RunRecord:
    digest = digest or hashlib.sha256(seed.encode()).hexdigest()
    run = RunId(workspace=workspace, job=job, spec_hash=digest, attempt=attempt)
    failure = "oom" if status is RunStatus.FAILED else None
    return RunRecord(submission_id=run.submission_id, workspace=workspace, job=job, cluster="local",
                     spec_hash=run.spec_hash, attempt=attempt, status=status, submitted_at="2026-01-01T00:00:00+00:00",
                     updated_at="2026-01-01T00:00:00+00:00", plan_id="p1", commit="c0ffee", session_name="s1",
                     failure=failure)


def _id(record: RunRecord) -> RunId:
    return RunId(workspace=record.workspace, job=record.job, spec_hash=record.spec_hash, attempt=record.attempt)


def _ended(n: int) -> RunStatus:
    return (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.STOPPED)[n % 3]


def _bytes_read() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


if __name__ == "__main__":
    main()
