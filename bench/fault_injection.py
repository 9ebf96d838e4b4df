"""Fault injection against a real local Ray cluster; writes the figures to docs/reliability.md.

    .venv/bin/python bench/fault_injection.py [--kills 30] [--races 10] [--restarts 3] [--edits 20]

Every trial ends by applying until argus exits 0, then checks: no job spec ran twice (at most one
run per job and spec hash, and no attempt beyond 1), no record left SUBMITTING, an audit log that
verifies. Trials:
- kills: `argus apply` SIGKILLed after a random delay (before, during and after submits and exports);
- races: 4 applies started at once;
- restarts: the whole cluster stopped in the middle of an apply, then started again;
- edits: one audit record edited, removed, duplicated or swapped; `argus audit verify` must name it.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from state.audit import log as audit  # noqa: E402
from state.audit.events import StepCarriedOut  # noqa: E402
from state.ray import local  # noqa: E402

ARGUS = str(Path(sys.executable).with_name("argus"))


def main() -> None:
    args = _parse()
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="argus-faults-") as tmp:
        base = Path(tmp)
        cluster = local.up(base / "cluster", dashboard_port=local._free_port(), cpus_per_node=8,
                           worker_resources={"worker_node": 8.0})
        try:
            rows = [kills(base, cluster, args.kills), races(base, cluster, args.races),
                    restarts(base, cluster, args.restarts), edits(base, args.edits)]
        finally:
            local.down(base / "cluster")
    report(rows)


def kills(base: Path, cluster, trials: int) -> dict:
    ws = workspace(base / "kills", "kills", cluster.address)
    found = Counter()
    for trial in range(trials):
        specs(ws, trial)
        apply = subprocess.Popen([ARGUS, "apply", str(ws), "--auto-approve"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(random.uniform(0.5, 4.0))
        apply.kill()
        apply.wait()
        found += converge_and_check(ws, cluster.address)
    return {"trials": trials, "name": "SIGKILL of apply at a random moment", **found}


def races(base: Path, cluster, trials: int) -> dict:
    ws = workspace(base / "races", "races", cluster.address)
    found = Counter()
    for trial in range(trials):
        specs(ws, trial)
        racers = [subprocess.Popen([ARGUS, "apply", str(ws), "--auto-approve"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL) for _ in range(4)]
        for racer in racers:
            racer.wait()
        found += converge_and_check(ws, cluster.address)
    return {"trials": trials, "name": "4 applies started at once", **found}


def restarts(base: Path, cluster, trials: int) -> dict:
    ws = workspace(base / "restarts", "restarts", cluster.address)
    found = Counter()
    for trial in range(trials):
        specs(ws, trial)
        apply = subprocess.Popen([ARGUS, "apply", str(ws), "--auto-approve"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(random.uniform(1.0, 3.0))
        local.down(base / "cluster")  # dashboard and head gone mid-apply
        apply.wait()
        local.up(base / "cluster", dashboard_port=cluster.dashboard_port, cpus_per_node=8,
                 worker_resources={"worker_node": 8.0})
        found += converge_and_check(ws, cluster.address)
    return {"trials": trials, "name": "cluster stopped mid-apply, then restarted", **found}


def edits(base: Path, trials: int) -> dict:
    found = Counter()
    for trial in range(trials):
        shared = base / "edits" / str(trial)
        for number in range(6):
            audit.append(str(shared), "edits", StepCarriedOut(address=f"job.j{number}", action="submit",
                                                                    step="submit", outcome="ok"))
        path = audit.audit_path(str(shared), "edits")
        lines = path.read_text().splitlines()
        kind = ["edit", "remove", "duplicate", "swap"][trial % 4]
        i = random.randrange(1, len(lines) - 1)
        if kind == "edit":
            lines[i] = lines[i].replace('"ok"', '"forged"')
        elif kind == "remove":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i - 1])
        else:
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        path.write_text("\n".join(lines) + "\n")
        _, problems = audit.verify(str(shared), "edits")
        found["undetected"] += not problems
    found["undetected"] += 0  # keep the key when every edit was caught
    return {"trials": trials, "name": "audit record edited, removed, duplicated or swapped", **found}


def converge_and_check(ws: Path, address: str) -> Counter:
    found = Counter()
    for _ in range(10):
        done = subprocess.run([ARGUS, "apply", str(ws), "--auto-approve", "--allow-empty", "--lock-timeout", "60"],
                              capture_output=True, text=True)
        if done.returncode == 0:
            break
        found["retries_needed"] += 1
        time.sleep(2)
    else:
        found["not_converged"] += 1
    from ray.job_submission import JobSubmissionClient

    jobs = [j for j in JobSubmissionClient(address).list_jobs() if (j.metadata or {}).get("argus.workspace")
            == ws.name]
    per_spec = Counter((j.metadata["argus.job"], j.metadata["argus.spec_hash"]) for j in jobs)
    found["duplicates"] += sum(n - 1 for n in per_spec.values() if n > 1)
    found["duplicates"] += sum(j.metadata.get("argus.attempt") != "1" for j in jobs)
    shared = ws / ".shared"
    statuses = [json.loads(p.read_text())["status"] for p in shared.glob("jobs/*/status.json")]
    found["records_left_submitting"] += sum(s == "SUBMITTING" for s in statuses)
    found["audit_broken"] += bool(audit.verify(str(shared), ws.name)[1])
    return found


def workspace(root: Path, name: str, address: str) -> Path:
    (root / "jobs").mkdir(parents=True)
    (root / "argus.yaml").write_text(f"kind: Workspace\nname: {name}\n")
    (root / "cluster.yaml").write_text(f"kind: Cluster\nname: local\naddress: {address}\nshared_root: .shared\n"
                                       "job_defaults: {entrypoint_num_cpus: 0.2, entrypoint_resources: "
                                       "{worker_node: 1}}\n")
    return root


def specs(ws: Path, trial: int) -> None:
    """Three jobs whose specs change every trial: each apply has submits and stops to do."""
    for name in ("a", "b", "c"):
        (ws / "jobs" / f"{name}.yaml").write_text(
            f"kind: Job\nname: {name}\ncluster: local\nworkload: command\nrun: {trial + 1}\n"
            f"entrypoint: [python3, -c, 'import time; time.sleep({random.choice([0, 2, 30])})']\n")


def report(rows: list[dict]) -> None:
    lines = ["# Reliability: fault injection", "",
             "Measured by `bench/fault_injection.py` against a local two-node Ray cluster. Each trial ends "
             "by applying until argus succeeds, then counts duplicate runs (a job spec with more than one run, or "
             "an attempt beyond 1), records left `SUBMITTING`, and audit logs that do not verify.", "",
             "| fault | trials | duplicates | records left SUBMITTING | audit broken | not converged | "
             "extra applies needed | undetected edits |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = ("duplicates", "records_left_submitting", "audit_broken", "not_converged", "retries_needed")
        shown = ["-"] * len(cells) if "undetected" in r else [str(r.get(c, 0)) for c in cells]
        lines.append(f"| {r['name']} | {r['trials']} | {' | '.join(shown)} | {r.get('undetected', '-')} |")
    text = "\n".join(lines) + "\n"
    (ROOT / "docs" / "reliability.md").write_text(text)
    print(text)


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name, default in (("kills", 30), ("races", 10), ("restarts", 3), ("edits", 20), ("seed", 7)):
        parser.add_argument(f"--{name}", type=int, default=default)
    return parser.parse_args()


if __name__ == "__main__":
    main()
