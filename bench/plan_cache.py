"""A plan that pays for what changed (issue 41): argus's memo (state/memo.py) against the work it saves, in one run.

Each measurement is a process of its own (so nothing one run learnt in memory helps the next: only the memo on
disk may), timed in CPU around the work only, start-up and imports left out on both sides; best of `rounds`,
rounds interleaved. The cluster is a real two-node Ray cluster on loopback started here (only it is torn down).
    .venv/bin/python bench/plan_cache.py [jobs] [changed] [rounds]
Printed, each a ratio of two measurements of this run:
1. The spec work of a re-plan of `jobs` unchanged specs (argus's loader with a warm memo: listing with the
   hostile-file checks, reading, and every check across files) against the floor: only opening, reading,
   parsing (PyYAML's C loader) and validating (pydantic) the same files, with nothing of argus. Target <= 0.5.
2. The whole re-plan (load, observe, plan, render) warm, against the same floor: shown, with where it goes.
3. A plan where `changed` of the `jobs` specs changed (the rest warm) against the plan of those `changed` alone
   (a cold memo) plus the re-plan of the unchanged ones (warm). Target <= 1.2.

Measured 2026-11-28 (2 cores shared with four other engineers' work, load 6-10; ratios only), 5,000 specs, 10
changed, best of 3: floor 0.561 s; re-plan with a warm memo 2.319 s (load 0.277, observe 0.201, plan 1.585,
render 0.228). 1. spec work 0.49, PASS (0.82 before the whole desired state was kept: the checks across files
and the replay of 5,000 files' entries; a run of 2 rounds before the planner's cuts below gave load 0.537 and
plan 1.955). 2. whole re-plan 4.13x the floor, see below. 3. 10 changed 1.05, PASS (2.505 s against 0.058 s for
the 10 alone and 2.319 s unchanged). Before the memo a plan's load was 1.2-1.3 s (2.2x the floor).

Why 2 cannot be <= 0.5: the memo keeps what a spec gives, not what the plan decides from it. A plan's decisions read
the world at the time of the plan (Ray's job list, the run records, the admission ledgers, `observed_at`
for deadlines, leases and liveness) and admission orders every waiting job of the cluster against all the
others, so a decision kept from an earlier plan is a decision about an earlier world: exactly what a stale
cache must never change. What per-job work the decisions need was made cheaper instead (the spec hash is
made once a submission, not three times; the 'N ahead' reason of a waiting job no longer walks the queue;
a spec never registered is not probed in the registry; addresses are made once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from plan_scale import compile_argus, make_workspace  # noqa: E402

from state.ray import local  # noqa: E402

SPEC_TARGET = 0.5
CHANGED_TARGET = 1.2

FLOOR = """
import json, os, sys, time
import yaml
from specs.kinds.models import Job
started = time.process_time()
texts = []
for folder, dirs, names in os.walk(sys.argv[1]):
    dirs[:] = [d for d in dirs if not d.startswith(".")]
    for name in names:
        if name.endswith(".yaml"):
            with open(os.path.join(folder, name), "rb") as spec:
                texts.append(spec.read().decode())
jobs = [Job.model_validate(d) for t in texts for d in yaml.load_all(t, Loader=yaml.CSafeLoader) if d["kind"] == "Job"]
print(json.dumps({"floor": time.process_time() - started, "jobs": len(jobs)}))
"""

STAGES = """
import gc, json, sys, time
from pathlib import Path
from reconcile import cli
from reconcile.commands.common import load
from reconcile.execute.cycle import connect
from reconcile.model import PlanOptions
from reconcile.plan.planner import plan
from reconcile.views.human import render_plan
from state.code.sources import DEFAULT_FETCH_TIMEOUT
from state.observe import observe
gc.set_threshold(cli.GC_THRESHOLD, *gc.get_threshold()[1:])
gc.freeze()
marks = [time.process_time()]
desired = load(Path(sys.argv[1])); marks.append(time.process_time())
observed = observe(desired, connect(desired, 10.0), False, DEFAULT_FETCH_TIMEOUT); marks.append(time.process_time())
made = plan(desired, observed, PlanOptions()); marks.append(time.process_time())
render_plan(made, colour=False); marks.append(time.process_time())
print(json.dumps(dict(zip(("load", "observe", "plan", "render"), (b - a for a, b in zip(marks, marks[1:]))))))
"""


def main() -> None:
    args = [int(a) for a in sys.argv[1:]]
    jobs, changed, rounds = (args + [5000, 10, 3][len(args):])[:3]
    compile_argus()
    with tempfile.TemporaryDirectory(prefix="argus-plan-cache-") as tmp:
        base = Path(tmp)
        cluster = local.up(base / "ray", dashboard_port=local._free_port(), cpus_per_node=2)
        try:
            _measure(base, cluster.address, jobs, changed, rounds)
        finally:
            local.down(base / "ray")


def _measure(base: Path, address: str, jobs: int, changed: int, rounds: int) -> None:
    workspace = make_workspace(base / "ws", address, jobs, 1)
    warm_env = _environment(base / "cache")
    _run(STAGES, workspace, warm_env)  # the memo made once, as by the plan before
    best: dict[str, float] = {}
    for round_ in range(rounds):
        floor = _run(FLOOR, workspace / "jobs", warm_env)
        assert floor["jobs"] == jobs, floor
        unchanged = _run(STAGES, workspace, warm_env)
        edited = _edit(workspace, changed, round_)
        after_edit = _run(STAGES, workspace, warm_env)
        alone = _run(STAGES, _alone(base / f"alone-{round_}", workspace, address, edited), _environment(
            base / f"cold-{round_}"))
        for name, value in (("floor", floor["floor"]), ("unchanged", sum(unchanged.values())),
                            ("load", unchanged["load"]), ("changed", sum(after_edit.values())),
                            ("alone", sum(alone.values()))):
            best[name] = min(best.get(name, float("inf")), value)
        for stage, value in unchanged.items():
            best[f"stage:{stage}"] = min(best.get(f"stage:{stage}", float("inf")), value)
    _report(best, jobs, changed)


def _report(best: dict[str, float], jobs: int, changed: int) -> None:
    print(f"{jobs} specs, one file each; best of the rounds, CPU seconds of the work alone:")
    print(f"  floor (read, parse with PyYAML's C loader, validate): {best['floor']:.3f} s")
    stages = ", ".join(f"{k.split(':')[1]} {v:.3f}" for k, v in best.items() if k.startswith("stage:"))
    print(f"  re-plan, nothing changed (warm memo): {best['unchanged']:.3f} s ({stages})")
    spec = best["load"] / best["floor"]
    print(f"1. spec work of the re-plan / floor: {spec:.2f} (target <= {SPEC_TARGET}): {_verdict(spec <= SPEC_TARGET)}")
    print(f"2. whole re-plan / floor: {best['unchanged'] / best['floor']:.2f} (decisions are made again: see above)")
    share = best["changed"] / (best["alone"] + best["unchanged"])
    print(f"3. {changed} of {jobs} changed: {best['changed']:.3f} s against {changed} alone {best['alone']:.3f} s "
          f"+ unchanged {best['unchanged']:.3f} s: {share:.2f} (target <= {CHANGED_TARGET}): "
          f"{_verdict(share <= CHANGED_TARGET)}")


def _edit(workspace: Path, count: int, round_: int) -> list[Path]:
    """`count` job files changed (a new SEED: a new spec), new to the memo each round."""
    edited = sorted((workspace / "jobs").glob("j*.yaml"))[round_ * count:(round_ + 1) * count]
    for path in edited:
        text = path.read_text()
        path.write_text(text.replace("SEED: '", f"SEED: 'r{round_}-", 1))
    return edited


def _alone(root: Path, workspace: Path, address: str, edited: list[Path]) -> Path:
    """A workspace of only the changed jobs, on the same cluster."""
    made = make_workspace(root, address, 0, 1)
    for path in edited:
        (made / "jobs" / path.name).write_text(path.read_text())
    return made


def _run(script: str, target: Path, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", script, str(target)], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"a measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _environment(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ARGUS_"))}
    return {**env, "ARGUS_CACHE_DIR": str(cache), "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT)}


def _verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


if __name__ == "__main__":
    main()
