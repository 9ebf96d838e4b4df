"""A plan over 10,000 past runs registered in argus's audit log against a plan over none (issue 36).

Target: the history bar stays flat with the registry of submissions read every plan: observe + plan with
10,000 past runs (each registered in the chain as apply writes it: apply.start, run.submitting, the submit
step, run.finished, apply.end) at most 1.1x the same with none, median of `rounds`, with argus's cache on
this machine warm (a plan reads only what was appended since the last one, state.audit.registry). The first
read (a cold cache: CI's fresh runner) verifies the whole log, and is printed beside it. The shared root
and Ray's answer as in bench/plan_files.py (no cluster is started).
    .venv/bin/python bench/registry_bench.py [past_runs] [rounds]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_files import WS, _Answered, _world  # noqa: E402

from reconcile.plan.planner import plan  # noqa: E402
from state.audit import files as audit_files  # noqa: E402
from state.audit import log as audit  # noqa: E402
from state.audit import registry  # noqa: E402
from state.audit.events import (  # noqa: E402
    ApplyEnded,
    ApplyStarted,
    RegistryAdopted,
    RunFinished,
    RunSubmitting,
    StepCarriedOut,  # noqa: E402
)
from state.observe import observe  # noqa: E402
from state.runs import records  # noqa: E402

TARGET = 1.10
CHILD = """
import sys
sys.path[:0] = [sys.argv.pop(1), sys.argv.pop(1)]
from plan_files import _Answered
from state.observed import ClusterState
import reconcile.commands.plan as command
cluster = ClusterState.model_validate_json(open(sys.argv.pop(1)).read())
command.connect = lambda desired, timeout: {"local": _Answered(cluster)}
from reconcile.cli import main
main()
"""
"""A whole `argus plan` in its own process, Ray's answer given as data (nothing else differs from the command)."""


def main() -> None:
    past = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ARGUS_CACHE_DIR"] = str(Path(tmp) / "cache")
        none = _plans(Path(tmp) / "none", 0, rounds)
        many = _plans(Path(tmp) / "many", past, rounds)
    print(f"observe + plan, no past runs: {none[1]:.3f} s (first, cold cache {none[0]:.3f} s)")
    print(f"observe + plan, {past} past runs registered: {many[1]:.3f} s (first, cold cache: the whole log "
          f"verified, {many[0]:.3f} s; {many[2] / 1e6:.1f} MB of log); the same without the registry "
          f"{many[3]:.3f} s: the registry adds {many[1] / many[3]:.2f}x")
    print("  (the rest grows with history already: the run index's rows and a view per run, bench/plan_files.py)")
    print(f"registry read, warm: {none[4] * 1e3:.1f} ms over no past runs, {many[4] * 1e3:.1f} ms over {past}")
    print(f"the whole `argus plan` command (its own process: start-up, load, observe, plan, output): "
          f"{none[5]:.3f} s over no past runs, {many[5]:.3f} s over {past}")
    for what, ratio in (("argus plan, the command", many[5] / none[5]),
                        ("observe + plan in process", many[1] / none[1]),
                        ("registry read", many[4] / max(none[4], 1e-9)),
                        ("plan with the registry vs without, same history", many[1] / many[3])):
        print(f"ratio {what}: {ratio:.2f}x, target <= {TARGET}x: {'PASS' if ratio <= TARGET else 'MISS'}")


def _plans(base: Path, past: int, rounds: int) -> tuple[float, float, int, float, float, float]:
    """(the first plan, the median of the next ones, the log's size, the median without the registry, the
    median of the registry's read alone, the median of a whole `argus plan` command)."""
    (base / "shared").mkdir(parents=True)  # argus never creates a shared root
    desired, cluster = _world(base, past)
    shared = str(base / "shared")
    _register(shared, past)
    ray = {"local": _Answered(cluster)}
    first = _timed(lambda: plan(desired, observe(desired, ray)))
    found, bare, reads = [], [], []
    for _ in range(rounds):  # interleaved: the machine's drift hits every side alike
        found.append(_timed(lambda: plan(desired, observe(desired, ray))))
        bare.append(_timed(lambda: plan(desired, observe(desired, ray).model_copy(update={"registries": {}}))))
        reads.append(_timed(lambda: registry.read(shared, WS, os.environ["ARGUS_CACHE_DIR"])))
    assert len(registry.read(shared, WS, os.environ["ARGUS_CACHE_DIR"]).submitted) >= past
    answer = base / "ray.json"
    answer.write_text(cluster.model_dump_json())
    commands = [_command(base, answer) for _ in range(rounds)]
    return (first, statistics.median(found), audit.audit_path(shared, WS).stat().st_size, statistics.median(bare),
            statistics.median(reads), statistics.median(commands))


def _command(base: Path, answer: Path) -> float:
    here = Path(__file__).resolve().parent
    argv = [sys.executable, "-c", CHILD, str(here.parent), str(here), str(answer), "plan", str(base / "ws")]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode not in (0, 2):  # 2: changes planned
        raise SystemExit(f"argus plan failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return took


def _register(shared: str, past: int) -> None:
    """What argus's applies wrote: the registry adopted, then per run the records of the apply that sent it
    (the live runs too: a run the chain does not hold is no run of argus's)."""
    audit.append(shared, WS, RegistryAdopted(submission_ids=()))
    events = []
    for record in records.read_records(shared, WS).values():
        if not record.submission_id.startswith(f"{WS}."):
            continue
        ended = [] if record.status.value == "RUNNING" else [
            RunFinished(address=f"job.{record.job}", submission_id=record.submission_id, status=record.status.value)]
        events += [ApplyStarted(changes=1, options={}),
                   RunSubmitting(submission_id=record.submission_id, address=f"job.{record.job}", job=record.job,
                                 spec_hash=record.spec_hash, attempt=record.attempt, cluster="local"),
                   StepCarriedOut(address=f"job.{record.job}", action="submit", step="submit",
                                  submission_id=record.submission_id, outcome="submitted"),
                   *ended, ApplyEnded(outcome="ok", changes=1)]
    if not events:
        return
    lines, newest = audit._records(events, {"plan_id": "p1", "commit": "c0ffee"}, audit.read(shared, WS)[-1]["hash"],
                                   WS, None)
    with open(audit.audit_path(shared, WS), "a", encoding="utf-8") as handle:
        handle.write("".join(f"{line}\n" for line in lines))
    audit_files.write_anchor(shared, WS, audit._anchor_text(1 + len(lines), newest, WS, None))


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
