"""A plan over 10,000 past runs registered in argus's audit log against a plan over none (issue 36).

Target: the history bar stays flat with the registry of submissions read every plan: observe + plan with
10,000 past runs (each registered in the chain as apply writes it: apply.start, run.submitting, the submit
step, run.finished, apply.end) at most 1.1x the same with none, median of `rounds`, with argus's cache on
this machine warm (a plan reads only what was appended since the last one, state.audit.registry). The first
read (a cold cache: CI's fresh runner) verifies the whole log, and is printed beside it. The shared root
and Ray's answer as in bench/plan_files.py (no cluster is started). A third world holds 60 past runs, the
run index's heads (each job's three newest specs, kept whatever the history): what grows past them is history.
Every world is built before any is timed, and the rounds alternate between them (the command's too).
    .venv/bin/python bench/registry_bench.py [past_runs] [rounds]

Measured 2026-11-28 (issue 41), 2 shared cores under load 7-11 (other engineers' tests), 7 rounds, three runs:
  argus plan, the command, over 10,000 vs none: median wall 1.01x, 1.19x, 1.25x (1.72-2.37 s); fastest round
  1.10x; CPU time 0.97x, 0.99x, 1.09x. The same code swings that much from run to run on this machine: the
  wall-clock 1.1x can be neither shown nor refuted here. What the command does more, counted directly (the
  audit hook of bench/plan_files.py, /proc/self/io, CPU of main() alone): 2 more files opened (439 vs 437),
  565 kB more read (the registry's cache, 546 kB, and the run index's heads), 6-10 ms more CPU of 160-230 ms:
  1-4% of the command's own work, under 1% with start-up.
  observe + plan in process: over the 60 heads 1.01x, 1.00x (1.29x once, in the run where the command was
  1.19x); over none 1.18x-1.74x (20-50 ms: the heads, bounded by design, and the registry's cache).
  registry read, warm, CPU best of 40: 2.3-2.9 ms over 10,000 ids, was 4.6-5.1 ms (0.4 ms over none).
The 1.19x the issue found (1.44x in this bench's first run that day, load 1-5) was at least partly the
bench's order: it timed the 7 commands over none, then built the 10,000-run world (15,000 records, a 19 MB
log, still being written back) and timed the 7 over it, so the drift fell on one side. Now every world is
built first and the rounds interleave. What still grows with history is the registry's cache, which holds
every registered id (at most once is checked against all of them, on this machine): parsed by pydantic's
JSON reader and type-checked by hand (2 ms per 10,000 ids) instead of json and a second validation
(4.6 ms), and taken as it is when nothing was appended (no copy, no comparison, no save). Of the history a
warm plan reads the run index (its heads), no archived run (state.runs.past: only for a spec reverted to)
and no audit record but those appended since the last plan.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_files import JOBS, WS, _Answered, _world  # noqa: E402

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
HEADS = 3 * JOBS
"""Past runs the run index keeps as heads (each job's three newest specs, one run each here): bounded, not history."""
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
        worlds = {name: _World(Path(tmp) / name, runs)
                  for name, runs in (("none", 0), ("heads", HEADS), ("many", past))}
        for _ in range(rounds):  # interleaved: the machine's drift (2 shared cores) hits every world alike
            for world in worlds.values():
                world.round()
        none, heads, many = (worlds[name].medians() for name in ("none", "heads", "many"))
    print(f"observe + plan, no past runs: {none['plan']:.3f} s (first, cold cache {worlds['none'].first:.3f} s)")
    print(f"observe + plan, {HEADS} past runs (the run index's heads: 3 specs a job): {heads['plan']:.3f} s")
    print(f"observe + plan, {past} past runs registered: {many['plan']:.3f} s (first, cold cache: the whole log "
          f"verified, {worlds['many'].first:.3f} s; {worlds['many'].size / 1e6:.1f} MB of log); the same without "
          f"the registry {many['bare']:.3f} s: the registry adds {many['plan'] / many['bare']:.2f}x")
    print(f"registry read, warm: {none['read'] * 1e3:.1f} ms over no past runs, {many['read'] * 1e3:.1f} ms over "
          f"{past}")
    print(f"the whole `argus plan` command (its own process: start-up, load, observe, plan, output): "
          f"{none['command']:.3f} s over no past runs, {many['command']:.3f} s over {past}; CPU "
          f"{none['cpu']:.3f} s and {many['cpu']:.3f} s")
    fastest = {name: min(world.found["command"]) for name, world in worlds.items()}
    for what, ratio in (("argus plan, the command", many["command"] / none["command"]),
                        ("argus plan, the command, fastest of the rounds", fastest["many"] / fastest["none"]),
                        ("argus plan, the command's CPU time", many["cpu"] / none["cpu"]),
                        ("observe + plan in process", many["plan"] / none["plan"]),
                        (f"observe + plan in process, {past} past runs vs {HEADS}", many["plan"] / heads["plan"]),
                        ("registry read", many["read"] / max(none["read"], 1e-9)),
                        ("plan with the registry vs without, same history", many["plan"] / many["bare"])):
        print(f"ratio {what}: {ratio:.2f}x, target <= {TARGET}x: {'PASS' if ratio <= TARGET else 'MISS'}")


class _World:
    """A workspace, its shared root with `past` runs registered, and what each round measured of it."""

    def __init__(self, base: Path, past: int) -> None:
        (base / "shared").mkdir(parents=True)  # argus never creates a shared root
        self.base, self.past = base, past
        self.desired, cluster = _world(base, past)
        self.shared = str(base / "shared")
        _register(self.shared, past)
        self.ray = {"local": _Answered(cluster)}
        self.answer = base / "ray.json"
        self.answer.write_text(cluster.model_dump_json())
        self.first = _timed(lambda: plan(self.desired, observe(self.desired, self.ray)))
        self.size = audit.audit_path(self.shared, WS).stat().st_size
        self.found: dict[str, list[float]] = {"plan": [], "bare": [], "read": [], "command": [], "cpu": []}

    def round(self) -> None:
        desired, ray, cache = self.desired, self.ray, os.environ["ARGUS_CACHE_DIR"]
        self.found["plan"].append(_timed(lambda: plan(desired, observe(desired, ray))))
        self.found["bare"].append(_timed(lambda: plan(desired, observe(desired, ray).model_copy(
            update={"registries": {}}))))
        self.found["read"].append(_timed(lambda: registry.read(self.shared, WS, cache)))
        took, cpu = _command(self.base, self.answer)
        self.found["command"].append(took)
        self.found["cpu"].append(cpu)

    def medians(self) -> dict[str, float]:
        assert len(registry.read(self.shared, WS, os.environ["ARGUS_CACHE_DIR"]).submitted) >= self.past
        return {what: statistics.median(times) for what, times in self.found.items()}


def _command(base: Path, answer: Path) -> tuple[float, float]:
    """(seconds, CPU seconds of the process: what a load on the shared cores does not add to)."""
    here = Path(__file__).resolve().parent
    argv = [sys.executable, "-c", CHILD, str(here.parent), str(here), str(answer), "plan", str(base / "ws")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 2):  # 2: changes planned
        raise SystemExit(f"argus plan failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


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
