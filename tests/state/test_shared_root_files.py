"""Every file argus reads on a shared root is opened as a regular file beneath it, capped, never waited on.

Any Ray job can write the shared root. At each place argus reads there, a job plants a FIFO (an open
for reading would wait for a writer for ever), a character device like /dev/zero (endless bytes), a
symlink to /dev/zero, a symlink to a secret outside the root, a 2 GB sparse file, or swaps a directory
on the way for a link out. Each read must end within seconds, hold far less memory than the file,
and read nothing from outside the root; `argus plan`, `status`, `logs` and a serve turn must finish.
docs/shared-root.md lists what a job can and cannot make argus do; each line names a test here.
"""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specs.errors import ArgusError
from state import beneath, claims
from state.audit import files as audit_files
from state.code import snapshots
from state.queue import ledger as queue_ledger
from state.queue import lock, usage
from state.queue.lease import Lease
from state.queue.quotas import QuotaFileError, load_quotas
from state.queue.sent_events import SentLedger, key_hash
from state.runs import activity as run_activity
from state.runs import index as run_index
from state.runs import logs as run_logs
from state.runs import progress as run_progress
from state.runs import records
from state.runs.past import Archive
from tests.support.status_page import get, report, serving

WS = "team"
SID = "team.train.0123456789ab.1"
CHANNEL = "0123456789abcdef"
SECRET = "the secret outside the shared root"
BOUND = 10.0
"""Seconds any read may take: each needs milliseconds; a hung one (a FIFO) never ends."""
MEMORY = 256 * 1024
"""KiB the process's peak may grow by while reading: a 2 GB file read whole would add 2,000,000."""
ARGUS = Path(sys.executable).parent / "argus"


# What a job plants, and where (`path`: a file under the shared root; `outside`: a file beside it).

def fifo(path: Path, outside: Path) -> None:
    os.mkfifo(path)


def zero_device(path: Path, outside: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device needs root")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers: endless zeros


def link_to_dev_zero(path: Path, outside: Path) -> None:
    path.symlink_to("/dev/zero")


def link_outside(path: Path, outside: Path) -> None:
    path.symlink_to(outside)


def sparse_2gb(path: Path, outside: Path) -> None:
    with open(path, "wb") as handle:
        handle.truncate(2 * 2**30)  # 2 GiB that take no disk


def directory_link_outside(path: Path, outside: Path) -> None:
    """The directory holding the file is a link to a directory outside holding one of the same name."""
    os.replace(outside, outside.parent / path.name)
    path.parent.rmdir()
    path.parent.symlink_to(outside.parent)


PLANTS = [fifo, zero_device, link_to_dev_zero, link_outside, sparse_2gb, directory_link_outside]


# Each place argus reads: the file a job replaces, and what argus reads there (a value that must say
# "nothing usable", never the planted content).

def _lease(root: Path) -> Any:
    return Lease(str(root), WS, ttl=30.0)._read()


def _quotas(root: Path) -> Any:
    try:
        return load_quotas(root)
    except QuotaFileError as err:
        return str(err)


READERS: dict[str, tuple[str, Callable[[Path], Any], Callable[[Any], bool]]] = {
    "run record": (f"jobs/{SID}/status.json", lambda r: records.read_record(str(r), SID), lambda v: v is None),
    "end record": (f"jobs/{SID}/exit.json", lambda r: records.read_end(str(r), SID), lambda v: v is None),
    # a log as big as the disk is still the run's log: only its end is read
    "log tail (failure class)": (f"jobs/{SID}/logs/driver.log", lambda r: records.log_tail(str(r), SID),
                                 lambda v: v == "" or v == "\0" * records.TAIL_BYTES),
    "log tail (status page)": (f"jobs/{SID}/logs/driver.log", lambda r: run_logs.tail(str(r), SID, 4096),
                               lambda v: v == "" or v == "\0" * 4096),
    "argus logs": (f"jobs/{SID}/logs/driver.log", lambda r: "".join(run_logs.chunks(str(r), SID, 4096)),
                   lambda v: v == "" or v.startswith("[argus: the log is 2147483648 bytes; showing its last 4096.")
                   and v.endswith("]\n" + "\0" * 4096)),
    "log kept?": (f"jobs/{SID}/logs/driver.log", lambda r: records.has_log(str(r), SID, "driver.log"),
                  lambda v: isinstance(v, bool)),
    "log activity": (f"jobs/{SID}/logs/driver.log", lambda r: run_activity.log_changed_at({"c": str(r)}, [("c", SID)]),
                     lambda v: v == {} or list(v) == [SID]),
    "run progress": (f"jobs/{SID}/logs/driver.log", lambda r: run_progress.reading_of(str(r), SID),
                     lambda v: v is None),
    "submit log": (f"jobs/{SID}/logs/submit.out",
                   lambda r: records._text_or_empty(str(r), f"jobs/{SID}/logs/submit.out", 1 << 20), lambda v: v == ""),
    "serve lease": (f".argus/serve/{WS}.lease", _lease, lambda v: v is None or v == {"holder": "(unreadable lease)"}),
    "apply lock": (f".argus/locks/{WS}.lock", lambda r: lock.read(lock.lock_path(str(r), WS)), lambda v: v is None),
    # a linked ledger directory is an OSError: the notifier reports it ("the ledger cannot be used")
    "sent-event ledger": (f".argus/serve/{WS}/sent/{CHANNEL}/{key_hash('failed:x')}.json",
                          lambda r: SentLedger(str(r), WS).was_sent(CHANNEL, "failed:x"),
                          lambda v: v is False or isinstance(v, OSError)),
    "sent-event tries": (f".argus/serve/{WS}/sent/{CHANNEL}/{key_hash('failed:x')}.tries",
                         lambda r: SentLedger(str(r), WS).tries(CHANNEL, "failed:x"),
                         lambda v: v == 0 or isinstance(v, OSError)),
    "queue ledger": (".argus/queue/other.json", lambda r: queue_ledger.read_ledgers(str(r)),
                     lambda v: v == () or isinstance(v, queue_ledger.QueueUnreadable) and "symlink" in str(v)),
    "run index": (f".argus/runs/{WS}.json", lambda r: run_index.read_runs(str(r), WS),
                  lambda v: v.problem is not None and not v.records),
    "archived runs": (f".argus/runs/{WS}.past/ppo.json", lambda r: Archive([str(r)], WS).of("ppo", "0" * 64),
                      lambda v: v == ()),
    "snapshot manifest": (f"common/code/repo/snap/{snapshots.MANIFEST}",
                          lambda r: snapshots.read_manifest(r / "common/code/repo/snap"), lambda v: v is None),
    "audit log": (f".argus/audit/{WS}.jsonl", lambda r: audit_files.read_log(str(r), WS),
                  lambda v: v[0] is None and v[1] is not None),
    "audit log (usage's actors)": (f".argus/audit/{WS}.jsonl", lambda r: usage.plan_actors(str(r), WS),
                                   lambda v: v == {}),
    "quota file": (".argus/quotas.yaml", _quotas, lambda v: isinstance(v, str) and "quotas.yaml" in v),
    "name claim": (f".argus/claims/{WS}.json", lambda r: claims.read(str(r), WS),
                   lambda v: v.owner is None and v.problem is not None),
}


def bounded(call: Callable[[], Any], seconds: float = BOUND, errors: bool = False) -> tuple[Any, float]:
    """call()'s value (`errors`: or the OSError or ArgusError it raised), or a test failure when it has not
    returned within `seconds` (it is left blocked)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as err:  # noqa: BLE001 -- shown by the assertion below
            box["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds:g} s: argus would hang"
    if "error" in box:
        if errors and isinstance(box["error"], OSError | ArgusError):
            return box["error"], time.monotonic() - start
        raise box["error"]
    return box.get("value"), time.monotonic() - start


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


@pytest.mark.parametrize("plant", PLANTS, ids=[p.__name__ for p in PLANTS])
@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
def test_each_reader_refuses_each_planted_file_in_bounded_time_and_memory(tmp_path: Path, reader: str,
                                                                          plant: Callable) -> None:
    root, rel = tmp_path / "shared", READERS[reader][0]
    outside = tmp_path / "elsewhere" / "secret"
    outside.parent.mkdir()
    outside.write_text(SECRET + "\n")
    (root / rel).parent.mkdir(parents=True)
    plant(root / rel, outside)
    before = peak_kib()
    value, _ = bounded(lambda: READERS[reader][1](root), errors=True)
    assert READERS[reader][2](value), f"{reader} read something from a planted {plant.__name__}: {value!r:.300}"
    if plant is not sparse_2gb and reader in ("log kept?", "log activity"):
        assert not value, f"{reader}: {value!r}"  # only a regular file beneath the root is a log
    assert SECRET not in repr(value)
    assert peak_kib() - before < MEMORY


def test_a_refusal_says_what_the_file_is(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    (root / "jobs").mkdir(parents=True)
    fifo(root / "jobs/pipe", root)
    zero_device(root / "jobs/zero", root)
    sparse_2gb(root / "jobs/big", root)
    (root / "jobs/link").symlink_to("/etc/passwd")
    (root / "out").symlink_to("/etc")
    said = {}
    for name, rel in {"pipe": "jobs/pipe", "zero": "jobs/zero", "big": "jobs/big", "link": "jobs/link",
                      "way": "out/passwd"}.items():
        with pytest.raises(beneath.NotBeneath) as caught:
            bounded(lambda rel=rel: beneath.read_regular(root, rel, 4096))
        said[name] = str(caught.value)
    assert said["pipe"] == f"{root}/jobs/pipe is not a regular file (a FIFO)"
    assert said["zero"] == f"{root}/jobs/zero is not a regular file (a character device)"
    assert said["big"] == f"{root}/jobs/big is larger than 4096 bytes"
    assert said["link"] == f"{root}/jobs/link is a symlink, which argus does not follow"
    assert said["way"].startswith(f"{root}/out: 'out' is a symlink or not a directory")
    assert beneath.read_regular(root, "jobs/absent", 10) is None and beneath.read_regular(root, "no/dir", 10) is None
    assert beneath.read_regular(tmp_path / "unmounted", "jobs/x", 10) is None


def test_a_shared_root_that_is_itself_a_link_is_the_operators_and_is_followed(tmp_path: Path) -> None:
    (tmp_path / "mnt/jobs").mkdir(parents=True)
    (tmp_path / "mnt/jobs/file").write_bytes(b"ok")
    (tmp_path / "shared").symlink_to(tmp_path / "mnt")
    assert beneath.read_regular(tmp_path / "shared", "jobs/file", 10) == b"ok"


def test_a_directory_of_many_entries_is_listed_in_bounded_memory(tmp_path: Path) -> None:
    """40,000 names a job made: listing keeps only those wanted; past the cap it is refused, not half-read."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for n in range(40_000):
        os.mkdir(jobs / f"other.run.{n:08d}.1")
    os.mkdir(jobs / f"{SID}")
    tracemalloc.start()
    try:
        kept = beneath.names_in(jobs, lambda name: name.startswith(f"{WS}."), 10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept == [SID]
    assert peak < 256 * 1024, f"{peak} bytes held to list 40,000 names (os.listdir holds ~3 MB)"
    with pytest.raises(beneath.TooBig, match=r"jobs: more than 100 entries argus would read"):
        beneath.names_in(jobs, lambda name: True, 100, str(jobs))


def test_too_many_run_directories_of_a_workspace_are_a_problem_not_a_partial_read(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch
                                                                                  ) -> None:
    monkeypatch.setattr(records, "MAX_RUN_DIRS", 5)
    for n in range(6):
        (tmp_path / "jobs" / f"{WS}.train.{n:012x}.1").mkdir(parents=True)
    read = run_index.read_runs(str(tmp_path), WS)
    assert not read.records and not read.scanned
    assert read.problem is not None and "more than 5 entries argus would read" in read.problem


def test_too_many_queue_ledgers_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_ledger, "MAX_LEDGERS", 3)
    (tmp_path / queue_ledger.QUEUE_DIR).mkdir(parents=True)
    for n in range(4):
        (tmp_path / queue_ledger.QUEUE_DIR / f"w{n}.json").write_text("{}")
    with pytest.raises(queue_ledger.QueueUnreadable, match="holds more than 3 ledgers"):
        queue_ledger.read_ledgers(str(tmp_path))


def test_argus_logs_of_a_huge_log_prints_its_end_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_logs, "MAX_SHOWN", 1024)
    log = tmp_path / "jobs" / SID / "logs" / "driver.log"
    log.parent.mkdir(parents=True)
    sparse_2gb(log, tmp_path)
    with open(log, "r+b") as handle:
        handle.seek(2 * 2**30 - 8)
        handle.write(b"the end\n")
    before = peak_kib()
    text, _ = bounded(lambda: "".join(run_logs.chunks(str(tmp_path), SID, run_logs.MAX_SHOWN)))
    header = f"[argus: the log is {2 * 2**30} bytes; showing its last 1024. The whole log is {log}]\n"
    assert text.startswith(header) and text.endswith("the end\n") and len(text) == len(header) + 1024
    assert peak_kib() - before < MEMORY


def test_the_status_page_never_serves_a_log_through_a_linked_directory(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "driver.log").write_text(SECRET + "\n")
    run_dir = tmp_path / "shared" / "jobs" / "ppo-a1"
    run_dir.mkdir(parents=True)
    (run_dir / "logs").symlink_to(outside)  # the directory, not the file: O_NOFOLLOW on the file alone misses it
    with serving(roots={"gpu": str(tmp_path / "shared")}) as (server, publish):
        publish(report())
        status, body = get(server, "/logs/ppo-a1")
    assert status == 200 and SECRET not in body and "has no driver log" in body


# The real CLI on a real cluster, against a shared root a job has filled with traps.

def run_cli(tmp_path: Path, *args: str | Path, timeout: float = 120.0) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr, peak RSS in KiB) of the real `argus` in a child process. The peak is the
    high-water mark of argus's own memory (VmHWM, polled until it exits): wait4's ru_maxrss would also count
    this test process's memory, which a forked child holds until its exec (pytest grows over a whole suite)."""
    out_path, err_path = tmp_path / "cli.out", tmp_path / "cli.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([str(ARGUS), *map(str, args)], stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    deadline, peak = time.monotonic() + timeout, 0
    while proc.poll() is None:
        peak = max(peak, _high_water(proc.pid))
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail(f"argus {' '.join(map(str, args))} still ran after {timeout:g} s: a planted file hung it")
        time.sleep(0.01)
    return proc.returncode, out_path.read_text(), err_path.read_text(), peak


def _high_water(pid: int) -> int:
    """KiB: the process's peak resident memory so far (0 once it has exited, or before its exec shows)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def test_plan_status_logs_and_a_serve_turn_finish_over_a_booby_trapped_root(workspace, argus, tmp_path) -> None:
    from tests.support.cluster import jobs_of, wait_for

    workspace.job("train", ["sh", "-c", "echo trained"])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [job] = [j for j in jobs_of(workspace.address, workspace.name) if j.metadata["argus.job"] == "train"]
    assert wait_for(workspace.address, job.submission_id, {"SUCCEEDED"}) == "SUCCEEDED"
    assert argus("plan", workspace.root).code == 0  # settles the record while the files are argus's own

    shared, sid = workspace.shared, job.submission_id
    outside = tmp_path / "secret.log"
    outside.write_text(SECRET + "\n")
    traps = {f"jobs/{sid}/exit.json": zero_device, f"jobs/{sid}/logs/driver.log": link_outside,
             f".argus/runs/{workspace.name}.json": fifo, ".argus/queue/other.json": sparse_2gb,
             f".argus/serve/{workspace.name}/sent/{CHANNEL}/{key_hash('x')}.json": fifo,
             f"jobs/{workspace.name}.trap.000000000000.1/status.json": fifo}
    for rel, plant in traps.items():
        path = shared / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        plant(path, outside)
    peaks = {}
    for command in (["plan", workspace.root], ["status", workspace.root], ["logs", "train", workspace.root],
                    ["serve", workspace.root, "--once"]):
        start = time.monotonic()
        code, out, err, peak = run_cli(tmp_path, *command)
        peaks[command[0]] = (peak, time.monotonic() - start)
        assert "Traceback" not in err, err
        assert SECRET not in out + err
        if command[0] == "logs":
            assert code == 0 and "trained" in out, out + err  # Ray still has it: Ray's copy is shown
            assert f"not reading the run's log on the shared root: {shared}/jobs/{sid}/logs/driver.log is a symlink" \
                in err, err
        elif command[0] == "plan":
            assert code == 0, out + err
    assert all(kib < 1024 * 1024 for kib, _ in peaks.values()), peaks  # a 2 GB file read whole would be above
    assert outside.read_text() == SECRET + "\n"  # a link is replaced when argus keeps Ray's log, never written through
    print("peak KiB and seconds per command:", peaks)


def test_every_line_of_the_trust_model_names_a_test_that_exists() -> None:
    """docs/shared-root.md: each claim of what a job cannot make argus do names its test; none may rot."""
    import re

    repo = Path(__file__).resolve().parents[2]
    doc = (repo / "docs" / "shared-root.md").read_text()
    named = re.findall(r"`(tests/(?:\w+/)*test_\w+\.py)::(test_\w+)`", doc)
    assert len(named) >= 20
    for module, test in named:
        source = (repo / module).read_text()
        assert re.search(rf"^def {test}\(", source, re.MULTILINE), f"docs/shared-root.md names {module}::{test}"
    claims = doc.split("## Files: what a job cannot make argus do")[1].split("## What a job can still do")[0]
    for bullet in re.split(r"\n(?=- )", claims):
        if bullet.startswith("- "):
            assert "`tests/" in bullet, f"a line of the trust model names no test: {bullet[:80]}"


def test_a_run_directory_made_a_link_in_advance_is_never_written_through(tmp_path: Path) -> None:
    """Submission ids are predictable (<workspace>.<job>.<hash>.<attempt>): a job can make the next
    run's directory, or the lock and lease directories, links to a place of its choosing first."""
    from state.observed import RunRecord

    root, victim = tmp_path / "shared", tmp_path / "victim"
    victim.mkdir()
    (root / "jobs").mkdir(parents=True)
    (root / "jobs" / SID).symlink_to(victim)
    (root / ".argus").mkdir()
    for linked in ("locks", "serve"):
        (root / ".argus" / linked).symlink_to(victim)
    record = RunRecord(submission_id=SID, workspace=WS, job="train", cluster="c", spec_hash="0" * 64, attempt=1,
                       status="SUBMITTING", updated_at=records.now(), plan_id="p", commit="c", submission={})
    with pytest.raises(beneath.NotBeneath, match=f"'{SID}' is a symlink or not a directory"):
        records.write_intent(str(root), record, {"jobspec": "kind: Job\n"}, {})
    for write in (lambda: records.write_log(str(root), SID, "driver.log", "x"),
                  lambda: records.append_submit_log(str(root), SID, "x"),
                  lambda: lock.acquire(str(root), lock.LockInfo(id="l", workspace=WS, user="u", host="h", pid=1,
                                                                started=records.now(), plan_id="p"), 0.1)):
        with pytest.raises(OSError):
            write()
    assert Lease(str(root), WS, ttl=30.0).try_hold() is False  # an unreadable lease is waited out, not written
    # a debug copy for people is left out for the linked run; apply's refresh goes on
    records.write_debug_to_all(str(root), [f"{WS}.train.0123456789ab.2", SID], "jobs.txt", "x")
    assert list(victim.iterdir()) == []
    assert (root / f"jobs/{WS}.train.0123456789ab.2/debug/jobs.txt").read_text() == "x"
