"""How long `make test`'s suite takes and where the time goes: by room, by phase, by test, and how busy
the machine was meanwhile.

    .venv/bin/python bench/suite_time.py [pytest args...]      e.g. tests/cluster, or nothing for all

Runs pytest once with `--durations=0` and prints:
- the wall time;
- the share of the machine's CPU left idle (from /proc/stat). Near 0 means the suite is bound by CPU:
  more pytest workers on the same cores would only queue behind Ray's processes;
- the seconds spent in each test room (setup, call and teardown; session fixtures such as the shared
  Ray clusters are charged to the first test that asks for them, as pytest reports them);
- the slowest tests.

Measured 2026-11-26 on the 2-core machine: see the closing table of docs/architecture.md's "How long
the tests take".
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(tests/\S+?\.py)::(\S+)")


def cpu_times() -> tuple[int, int]:
    """(idle, total) jiffies of the whole machine."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return fields[3] + fields[4], sum(fields)


def room_of(path: str) -> str:
    return str(Path(path).parent.relative_to("tests")) or "."


def main(args: list[str]) -> int:
    idle0, total0 = cpu_times()
    began = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
                          "--durations-min=0.005", *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - began
    idle1, total1 = cpu_times()
    rows = [(float(m[1]), m[2], m[3], m[4]) for m in map(LINE.match, run.stdout.splitlines()) if m]
    by_room: dict[str, float] = defaultdict(float)
    by_phase: dict[str, float] = defaultdict(float)
    by_test: dict[str, float] = defaultdict(float)
    for seconds, phase, path, name in rows:
        by_room[room_of(path)] += seconds
        by_phase[phase] += seconds
        by_test[f"{path}::{name}"] += seconds
    for line in run.stdout.splitlines():
        if line.startswith(("FAILED", "ERROR")):
            print(line[:200])
    print(run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:])
    print(f"wall {wall:.0f} s; the machine's CPU idle {(idle1 - idle0) / max(total1 - total0, 1):.0%} of the time")
    print("phases: " + ", ".join(f"{phase} {seconds:.0f} s" for phase, seconds in sorted(by_phase.items())))
    print("\nseconds by room:")
    for room, seconds in sorted(by_room.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds:7.1f}  {seconds / max(wall, 1):5.1%}  tests/{room}/")
    print("\nslowest tests (setup + call + teardown):")
    for test, seconds in sorted(by_test.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {seconds:7.1f}  {test}")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
