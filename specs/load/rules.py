"""Rules across fields and resources that pydantic cannot see one model at a time."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from specs.address import Address
from specs.desired import Source
from specs.diagnostics import Diagnostic
from specs.kinds.models import NAME_PATTERN, Cluster, CodeSnapshot, Job, Quotas, Trainer
from specs.workloads import verl


def broken_references(clusters: dict[str, Cluster], snapshots: dict[str, CodeSnapshot], jobs: dict[str, Job],
                       sources: dict[str, Source]) -> list[Diagnostic]:
    found = []
    for resource in [*snapshots.values(), *jobs.values()]:
        address = Address.of_spec(resource.kind, resource.name)
        at = partial(_error, address, sources[address])
        if resource.cluster not in clusters:
            known = ", ".join(sorted(clusters)) or "none defined"
            found.append(at("cluster", f"no Cluster named {resource.cluster!r} (known: {known})"))
        code = getattr(resource, "code", None)
        if code is not None and code not in snapshots:
            known = ", ".join(sorted(snapshots)) or "none defined"
            found.append(at("code", f"no CodeSnapshot named {code!r} (known: {known})"))
        elif code is not None and snapshots[code].cluster != resource.cluster:
            found.append(at("code", f"CodeSnapshot {code!r} lives on cluster {snapshots[code].cluster!r}, "
                                    f"not on {resource.cluster!r}: snapshot the code on the job's cluster"))
    return found


def quota_diagnostics(workspace: str, clusters: Mapping[str, Cluster], quotas: Mapping[str, Quotas],
                      sources: Mapping[str, Source]) -> list[Diagnostic]:
    """A cluster's quotas are set by its `admin` workspace alone: a team can't raise its own cap by declaring
    quotas in its own workspace (the apply also refuses quotas another admin owns: reconcile.plan.quotas)."""
    found = []
    for cluster in sorted(quotas):
        at = partial(_error, Address.quotas(cluster), sources[Address.quotas(cluster)])
        if cluster not in clusters:
            known = ", ".join(sorted(clusters)) or "none defined"
            found.append(at("cluster", f"no Cluster named {cluster!r} (known: {known})"))
        elif clusters[cluster].admin is None:
            found.append(at("cluster", f"cluster {cluster!r} names no admin: add `admin: {workspace}` to its Cluster "
                                       "if this workspace administers it (quotas are the administrator's)"))
        elif clusters[cluster].admin != workspace:
            found.append(at("cluster", f"cluster {cluster!r} is administered by workspace "
                                       f"{clusters[cluster].admin!r}: only its quotas apply; ask them to change them"))
    return found


def dangling(invalid: list[tuple[Any, Source]], clusters: set[str], snapshots: set[str]) -> list[Diagnostic]:
    """References of resources that failed validation, reported with their other problems in one run."""
    found = []
    for raw, source in invalid:
        if not isinstance(raw, dict) or raw.get("kind") not in ("Job", "CodeSnapshot", "Dataset", "Model"):
            continue
        for field, known, kind in (("cluster", clusters, "Cluster"), ("code", snapshots, "CodeSnapshot")):
            value = raw.get(field)
            if isinstance(value, str) and re.fullmatch(NAME_PATTERN, value) and value not in known:
                listed = ", ".join(sorted(known)) or "none defined"
                found.append(Diagnostic.in_file(source.file, source.line_of(field), field,
                                                f"no {kind} named {value!r} (known: {listed})"))
    return found


def workload_diagnostics(job: Job, src: Source) -> list[Diagnostic]:
    """What each workload needs and forbids; verl overrides may not set keys argus types."""
    at = partial(_error, Address.job(job.name), src)
    verl_fields = [f for f in ("model", "data", "trainer", "entry", "overrides") if getattr(job, f)]
    derived = []
    if job.workload != "command" and job.demand is not None:
        derived = [at("demand", f"`workload: {job.workload}` derives its demand from `trainer` (nnodes x "
                             "n_gpus_per_node GPUs, the CPUs verl asks per GPU, and the driver): remove `demand`")]
    if job.workload == "command":
        found = [at(f, f"`{f}` is for verl workloads (ppo, grpo, sft), not `workload: command`")
                 for f in verl_fields]
        return found + ([] if job.entrypoint else [at("entrypoint", "`workload: command` needs an `entrypoint`")])
    found = derived + [at(f, f"`workload: {job.workload}` needs `{f}`") for f in ("model", "data", "code")
                       if getattr(job, f) is None]
    if job.entrypoint is not None:
        found.append(at("entrypoint", f"`workload: {job.workload}` builds its own entrypoint (verl)",
                        hint="put extra Hydra settings in `overrides:`"))
    found += _verl_field_diagnostics(job, at)
    for index, override in enumerate(job.overrides):
        field = verl.typed_override(override, job.workload)
        if field is not None:
            found.append(at(f"overrides.{index}", f"{override!r} sets a key argus types: use `{field}` instead"))
        elif (flag := verl.hydra_flag(override, verl.entry_point(job).module)) is not None:
            found.append(at(f"overrides.{index}", f"{override!r} {flag}"))
        elif (unsafe := verl.unsafe_override(override)) is not None:
            found.append(at(f"overrides.{index}", f"{override!r} {unsafe}"))
    return found


def _verl_field_diagnostics(job: Job, at: Callable[..., Diagnostic]) -> list[Diagnostic]:
    found = []
    if job.workload in ("ppo", "grpo") and job.data is not None and job.data.val is None:
        found.append(at("data", "PPO and GRPO validate on `data.val`: without it verl reads its own default path"))
    for field, value in _paths(job):
        if not value.startswith(("/", "${shared_root}/", "${dataset:", "${model:")):
            found.append(at(field, f"{value!r} must be on the shared filesystem: `${{shared_root}}/...` or an "
                                   "absolute path (a job runs inside its read-only code snapshot)",
                            "or name a Dataset or Model: `${dataset:NAME}/train.parquet`"))
    trainer = job.trainer
    for name in ("save_freq", "test_freq"):
        if trainer is not None and getattr(trainer, name) == "after_each_epoch" and job.workload != "sft":
            found.append(at(f"trainer.{name}", "`after_each_epoch` is the SFT trainers' value: verl's PPO trainer "
                                               "counts steps; give a number of steps (-1: never)"))
    return found + _entry_diagnostics(job, at)


def _entry_diagnostics(job: Job, at: Callable[..., Diagnostic]) -> list[Diagnostic]:
    entry, trainer = job.entry, job.trainer
    if entry is None or entry.launcher != "torchrun":
        return []
    if job.workload != "sft":
        return [at("entry.launcher", "`launcher: torchrun` is for SFT trainers; PPO and GRPO place their workers "
                                     "with Ray (leave `launcher` out)")]
    if trainer is not None and trainer.nnodes > 1:
        return [at("trainer.nnodes", "torchrun runs on the driver's node only: set `nnodes: 1`, or use the Ray SFT "
                                     "trainer (leave `launcher` out) to train on several nodes")]
    gpus = (trainer or Trainer()).n_gpus_per_node
    if job.entrypoint_num_gpus is not None and job.entrypoint_num_gpus < gpus:
        return [at("entrypoint_num_gpus", f"torchrun runs {gpus} processes on GPUs the driver must hold: leave "
                                          f"`entrypoint_num_gpus` out (argus asks for {gpus}) or raise it")]
    return []


def _paths(job: Job) -> list[tuple[str, str]]:
    """Every path a verl job's fields name, with the field (and index, for a list) it is in."""
    found = []
    for field, value in (("data.train", job.data.train if job.data else None),
                         ("data.val", job.data.val if job.data else None),
                         ("trainer.checkpoint_dir", job.trainer.checkpoint_dir if job.trainer else None)):
        if isinstance(value, list):
            found += [(f"{field}.{index}", item) for index, item in enumerate(value)]
        elif value:
            found.append((field, value))
    return found


def _error(address: str, source: Source, field: str, message: str, hint: str | None = None) -> Diagnostic:
    return Diagnostic(severity="error", address=address, field=field, message=message, hint=hint).located(source)
