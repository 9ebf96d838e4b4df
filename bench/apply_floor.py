"""The bodies `argus apply` sends Ray for new command jobs, built without argus's apply: the floor of
bench/apply_bench.py submits them bare.

Same entrypoint text (argus's recording wrapper around the command, reconcile/execute/wrapper.py, whose
job directory is on a shared root at a path as long as the bench's workspace's), same runtime_env (the
checkpoint directory argus hands a command job), same metadata keys and value lengths (argus's labels,
state/runs), submission ids of the same shape (`<workspace>.<job>.<12 hex of the spec hash>.<attempt>`).
Only the text of the wrapper is argus's: building it costs nothing measured.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from reconcile.execute.wrapper import wrapped


def argus_bodies(shared_root: Path, workspace: str, jobs: int, cpus: float) -> list[dict[str, Any]]:
    """JobSubmissionClient.submit_job's keyword arguments for each of `jobs` jobs named j0.. in `workspace`."""
    bodies = []
    for i in range(jobs):
        spec_hash = hashlib.sha256(f"{workspace}/j{i}".encode()).hexdigest()
        submission_id = f"{workspace}.j{i}.{spec_hash[:12]}.1"
        bodies.append({
            "submission_id": submission_id,
            "entrypoint": wrapped("true", str(shared_root / "jobs" / submission_id)),
            "runtime_env": {"env_vars": {
                "ARGUS_CHECKPOINT_DIR": str(shared_root / "outputs" / workspace / "checkpoints" / f"j{i}" / "run-1")}},
            "metadata": {
                "argus.workspace": workspace, "argus.job": f"j{i}", "argus.spec_hash": spec_hash,
                "argus.attempt": "1", "argus.commit": "none", "argus.plan": spec_hash[-12:],
                "argus.demand": json.dumps({"d": {"CPU": cpus, "worker_node": 1.0}}, separators=(",", ":"))},
            "entrypoint_num_cpus": cpus,
            "entrypoint_resources": {"worker_node": 1},
        })
    return bodies
