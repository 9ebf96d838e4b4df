"""How long the loader takes on one spec file at the size cap, and on a workspace of many jobs.

The per-file cap (specs/parse/reading.py MAX_FILE_BYTES) is chosen so that even ruamel's slowest input
loads well under a second. Prints the time and the rate of each case; run with the project venv:
    .venv/bin/python bench/loader_cap.py [jobs]
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specs.errors import SpecError  # noqa: E402
from specs.load.loader import load_workspace  # noqa: E402
from specs.parse.reading import MAX_FILE_BYTES  # noqa: E402

JOB = ("---\nkind: Job\nname: j{i}\ncluster: h20\nworkload: command\nentrypoint: [python3, train.py, --seed, '{i}']\n"
       "env: {{HF_HOME: /mnt/shared/hf, WANDB_API_KEY: '${{env:WANDB_API_KEY}}'}}\nentrypoint_num_cpus: 1\n")


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    cases = {"real jobs": _fill(JOB),
             "flow list": "x: [" + ", ".join(["1"] * (MAX_FILE_BYTES // 3 - 10)) + "]\n",
             "block list": "\n".join(["- a"] * (MAX_FILE_BYTES // 4 - 1)) + "\n"}
    for name, text in cases.items():
        seconds = _best(lambda root, text=text: (root / "big.yaml").write_text(text))
        kib = len(text) / 1024
        print(f"one file, {name:10} {kib:5.1f} KiB  {seconds:.2f} s  {kib / seconds:.0f} KiB/s")
    seconds = _best(lambda root: _many(root, jobs), runs=1)
    print(f"{jobs} job files: {seconds:.1f} s  {seconds / jobs * 1000:.1f} ms a file")


def _fill(piece: str) -> str:
    out, i = "", 0
    while len(out) + len(piece.format(i=i)) <= MAX_FILE_BYTES:
        out += piece.format(i=i)
        i += 1
    return out


def _many(root: Path, count: int) -> None:
    (root / "jobs").mkdir()
    for i in range(count):
        (root / "jobs" / f"j{i}.yaml").write_text(JOB.format(i=i))


def _best(prepare: Callable[[Path], object], runs: int = 3) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "argus.yaml").write_text("kind: Workspace\nname: bench\n")
        (root / "c.yaml").write_text("kind: Cluster\nname: h20\naddress: http://x:1\nshared_root: /mnt/shared\n")
        prepare(root)
        best = float("inf")
        for _ in range(runs):
            start = time.perf_counter()
            with contextlib.suppress(SpecError):  # lists are not resources: saying so is what is timed
                load_workspace(root)
            best = min(best, time.perf_counter() - start)
        return best


if __name__ == "__main__":
    main()
