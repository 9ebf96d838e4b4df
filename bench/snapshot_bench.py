"""Disk and time of a second snapshot of a nearby commit, against the first snapshot.

Identical files are hard-linked from argus's content store, so the second snapshot should cost
a small fraction of the first in disk and less in time. Prints ratios; run with the project venv:
    .venv/bin/python bench/snapshot_bench.py [files] [changed-percent]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specs.kinds.models import CodeSnapshot  # noqa: E402
from state.code import snapshots  # noqa: E402
from state.code.sources import resolve_source  # noqa: E402


def main() -> None:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    changed = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = make_repo(base / "repo", files, changed)
        shared = base / "shared"
        first = measure(repo, shared, "v1")
        second = measure(repo, shared, "v2")
    print(f"files={files} changed={changed}% of them between v1 and v2")
    print(f"first snapshot:  {first[0]:.3f}s, {first[1] / 1e6:.2f} MB new on disk")
    print(f"second snapshot: {second[0]:.3f}s, {second[1] / 1e6:.2f} MB new on disk")
    print(f"ratio second/first: time {second[0] / first[0]:.2f}, disk {second[1] / first[1]:.3f}")


def measure(repo: Path, shared: Path, ref: str) -> tuple[float, int]:
    spec = CodeSnapshot(kind="CodeSnapshot", name=f"bench-{ref}", cluster="c", git={"url": str(repo), "ref": ref})
    source = resolve_source(spec, str(repo), str(shared))  # fetch + digest: part of plan, not timed
    before = disk_usage(shared)
    start = time.perf_counter()
    snapshots.materialize(spec, source, "bench", str(repo), str(shared), shared / "common/code/repo" / spec.name)
    return time.perf_counter() - start, disk_usage(shared) - before


def make_repo(repo: Path, files: int, changed: float) -> Path:
    repo.mkdir(parents=True)
    run(repo, "init", "-q")
    for i in range(files):
        (repo / f"pkg{i % 30}").mkdir(exist_ok=True)
        (repo / f"pkg{i % 30}" / f"mod{i}.py").write_text(f"# module {i}\n" + "x = 1\n" * 600)
    run(repo, "add", "-A")
    run(repo, "commit", "-qm", "v1")
    run(repo, "tag", "v1")
    for i in range(0, files, max(1, int(100 / changed))):
        (repo / f"pkg{i % 30}" / f"mod{i}.py").write_text(f"# module {i}, edited\n" + "y = 2\n" * 600)
    run(repo, "commit", "-qam", "v2")
    run(repo, "tag", "v2")
    return repo


def disk_usage(root: Path) -> int:
    """Bytes of distinct inodes under root: hard links count once, as on a real disk."""
    seen, total = set(), 0
    for folder, _, names in os.walk(root):
        for name in names:
            info = os.lstat(Path(folder) / name)
            if info.st_ino not in seen:
                seen.add(info.st_ino)
                total += info.st_blocks * 512
    return total


def run(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@localhost", *args], cwd=repo, check=True)


if __name__ == "__main__":
    main()
