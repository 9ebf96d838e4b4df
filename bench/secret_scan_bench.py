"""What scanning specs for literal secrets (specs/secrets/secret_scan.py) adds to loading a workspace.

Loads the same workspace of many jobs (one file each, with env, entrypoint and verl-style overrides)
with the scan and with the scan replaced by a no-op, alternately, best of 5 each (the machine is
shared: alternating keeps a busy moment from landing on one side only), and prints both times and their
ratio, measured in this run:
    .venv/bin/python bench/secret_scan_bench.py [jobs]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specs.load.loader import load_workspace  # noqa: E402
from specs.secrets import secret_scan  # noqa: E402

CLUSTER = "kind: Cluster\nname: h20\naddress: http://10.0.0.1:8265\nshared_root: /mnt/shared\n"
JOB = ("kind: Job\nname: j{i}\ncluster: h20\nworkload: command\n"
       "entrypoint: [python3, train.py, --model, /mnt/models/Qwen2.5-0.5B-Instruct, --seed, '{i}',\n"
       "  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4, data.train_files=/mnt/shared/datasets/gsm8k/train]\n"
       "env: {{HF_HOME: /mnt/shared/hf, WANDB_API_KEY: '${{env:WANDB_API_KEY}}', RUN: ppo-qwen2-5-gsm8k-{i}}}\n"
       "description: PPO on GSM8K, commit a1b2c3d4e5f60718293a4b5c6d7e8f9012345678\n")


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "argus.yaml").write_text("kind: Workspace\nname: bench\n")
        (root / "cluster.yaml").write_text(CLUSTER)
        (root / "jobs").mkdir()
        for i in range(jobs):
            (root / "jobs" / f"j{i}.yaml").write_text(JOB.format(i=i))
        load_workspace(root)  # warm: imports, compiled patterns, the page cache
        scanned, bare = [], []
        for _ in range(5):
            scanned.append(_timed(root))
            bare.append(_timed(root, without_scan=True))
        scanned, bare = min(scanned), min(bare)
    print(f"load {jobs} jobs: {bare:.2f} s without the scan, {scanned:.2f} s with it: ratio {scanned / bare:.2f}")


def _timed(root: Path, without_scan: bool = False) -> float:
    real = secret_scan.scan
    if without_scan:
        secret_scan.scan = lambda strings, document, rel: ([], [])  # type: ignore[assignment]
    try:
        start = time.perf_counter()
        load_workspace(root)
        return time.perf_counter() - start
    finally:
        secret_scan.scan = real


if __name__ == "__main__":
    main()
