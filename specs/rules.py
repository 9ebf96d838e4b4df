"""Rules across fields and resources that pydantic cannot see one model at a time."""

from __future__ import annotations

from collections.abc import Callable

from specs import verl
from specs.desired import Source, address_of
from specs.errors import Problem
from specs.models import Cluster, CodeSnapshot, Job


def broken_references(clusters: dict[str, Cluster], snapshots: dict[str, CodeSnapshot], jobs: dict[str, Job],
                       sources: dict[str, Source]) -> list[Problem]:
    found = []
    for resource in [*snapshots.values(), *jobs.values()]:
        src = sources[address_of(resource.kind, resource.name)]
        if resource.cluster not in clusters:
            known = ", ".join(sorted(clusters)) or "none defined"
            found.append(Problem(src.file, src.line_of("cluster"), "cluster",
                                 f"no Cluster named {resource.cluster!r} (known: {known})"))
        code = getattr(resource, "code", None)
        if code is not None and code not in snapshots:
            known = ", ".join(sorted(snapshots)) or "none defined"
            found.append(Problem(src.file, src.line_of("code"), "code",
                                 f"no CodeSnapshot named {code!r} (known: {known})"))
        elif code is not None and snapshots[code].cluster != resource.cluster:
            found.append(Problem(src.file, src.line_of("code"), "code",
                                 f"CodeSnapshot {code!r} lives on cluster {snapshots[code].cluster!r}, "
                                 f"not on {resource.cluster!r}: snapshot the code on the job's cluster"))
    return found


def workload_problems(job: Job, src: Source) -> list[Problem]:
    """What each workload needs and forbids; verl overrides may not set keys argus types."""
    def at(path: str, message: str) -> Problem:
        return Problem(src.file, src.line_of(path), path, message)

    verl_fields = [f for f in ("model", "data", "trainer", "overrides") if getattr(job, f)]
    if job.workload == "command":
        found = [at(f, f"`{f}` is for verl workloads (ppo, grpo, sft), not `workload: command`")
                 for f in verl_fields]
        return found + ([] if job.entrypoint else [at("entrypoint", "`workload: command` needs an `entrypoint`")])
    found = [at(f, f"`workload: {job.workload}` needs `{f}`") for f in ("model", "data", "code")
             if getattr(job, f) is None]
    if job.entrypoint is not None:
        found.append(at("entrypoint", f"`workload: {job.workload}` builds its own entrypoint (verl); "
                                      "put extra Hydra settings in `overrides:`"))
    found += _verl_field_problems(job, at)
    for index, override in enumerate(job.overrides):
        field = verl.typed_override(override, job.workload)
        if field is not None:
            found.append(at(f"overrides.{index}", f"{override!r} sets a key argus types: use `{field}` instead"))
    return found


def _verl_field_problems(job: Job, at: Callable[[str, str], Problem]) -> list[Problem]:
    found = []
    if job.workload in ("ppo", "grpo") and job.data is not None and job.data.val is None:
        found.append(at("data", "PPO and GRPO validate on `data.val`: without it verl reads its own default path"))
    paths = [("data.train", job.data.train if job.data else None), ("data.val", job.data.val if job.data else None),
             ("trainer.checkpoint_dir", job.trainer.checkpoint_dir if job.trainer else None)]
    for field, value in paths:
        if value and not (value.startswith("/") or value.startswith("${shared_root}/")):
            found.append(at(field, f"{value!r} must be on the shared filesystem: `${{shared_root}}/...` or an "
                                   "absolute path (a job runs inside its read-only code snapshot)"))
    trainer = job.trainer
    if trainer is not None and trainer.total_training_steps and trainer.total_epochs:
        found.append(at("trainer.total_epochs", "give `total_training_steps` or `total_epochs`, not both"))
    return found
