"""A batch of new jobs for concurrent apply (reconcile.execute.batch) on the session's Ray cluster: JOBS
trivial jobs in a test's workspace, the plan of them with an apply context that keeps what apply prints,
and the submits the audit log recorded. The concurrent apply's tests and their review's build on them."""

from __future__ import annotations

from reconcile.commands.common import load
from reconcile.execute.applier import ApplyContext
from reconcile.execute.cycle import connect, observe_and_plan
from reconcile.model import Plan, SubmitStep
from state.audit import log as audit
from state.code.gitinfo import GitInfo

JOBS = 20
"""Well over the pool's 8 threads: a thread takes later changes after its first, and a failure always finds
some not yet started (14 left none now and then)."""


def tiny_jobs(workspace, count: int, extra: str = "") -> None:
    """`count` jobs of a trivial command whose drivers all fit at once beside other tests' runs."""
    workspace.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {workspace.address}
        shared_root: .shared
        job_defaults:
          entrypoint_num_cpus: 0.05
          entrypoint_resources: {{worker_node: 0.1}}
        """)
    for i in range(count):
        workspace.job(f"j{i:02d}", ["true"], extra=extra)


def planned(workspace) -> tuple[Plan, ApplyContext, list[SubmitStep], list[str]]:
    """The plan of JOBS new jobs, and a context that keeps what apply prints."""
    tiny_jobs(workspace, JOBS)
    desired = load(workspace.root)
    ray = connect(desired, 10)
    observed, plan = observe_and_plan(desired, ray)
    submits = [s for s in plan.steps() if isinstance(s, SubmitStep)]
    assert len(submits) == JOBS and all(s.ask is not None for s in submits)  # each admitted, under the lock
    said: list[str] = []
    ctx = ApplyContext(desired, ray, GitInfo("abc", False), "plan1", observed=observed, echo=said.append)
    return plan, ctx, submits, said


def submit_actions(workspace) -> list[dict]:
    return [e for e in audit.read(str(workspace.shared), workspace.name)
            if e["event"] == "action" and e["step"] == "submit"]
