"""A job's whole demand: what admission must find free before it starts. Pure.

verl makes one placement group per node and resource pool: for each pool its snapshot's verl builds
(read from the composed config: the trainer's, a reward model's, a distillation teacher's, 0.9's separate
rollout), `nnodes` bundles of `n_gpus_per_node` GPUs and the CPUs verl asks per GPU, each bundle on one
node; plus the driver. Without a composed config, the trainer's pool from the spec. A `command` job
declares `demand:` (its driver included, spread over any nodes); without it, the driver's own resources.
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches

from reconcile.model import Ask
from reconcile.plan.placement import Demand, Resources
from specs.kinds.models import Job, Trainer
from specs.workloads import verl
from specs.workloads.submission import Submission, driver_needs
from specs.workloads.verl_profile import Pool, VerlProfile


def demand_of(job: Job, sub: Submission, profile: VerlProfile | None = None) -> Demand:
    if job.workload == "command":
        driver = driver_needs(sub)
        if job.demand is None:
            return Demand(driver=driver)
        # the driver is part of the job: a demand that names less than the driver asks Ray for is raised to it
        return Demand(spread={k: max(job.demand.get(k, 0.0), driver.get(k, 0.0)) for k in {*job.demand, *driver}})
    pools = profile.pools if profile is not None else _spec_pools(job)
    bundles = [(pool.name, {pool.gpu_resource: float(pool.gpus_per_node),
                            "CPU": float(pool.gpus_per_node * pool.cpus_per_gpu)})
               for pool in pools for _ in range(pool.nnodes)]
    spread = {"CPU": profile.driver_cpus} if profile is not None and profile.driver_cpus else {}
    return Demand(bundles=tuple(b for _, b in bundles), driver=driver_needs(sub), spread=spread,
                  pools=tuple(name for name, _ in bundles) if len(pools) > 1 else ())


def _spec_pools(job: Job) -> tuple[Pool, ...]:
    """The trainer's pool as the spec says it, for a job whose config did not compose (its error says why)."""
    trainer = job.trainer or Trainer()
    if job.entry is not None and job.entry.launcher == "torchrun":
        return ()
    return (Pool(name="global_pool", nnodes=trainer.nnodes, gpus_per_node=trainer.n_gpus_per_node,
                 cpus_per_gpu=verl.WORKLOADS[job.workload].cpus_per_gpu),)


def describe(demand: Demand) -> str:
    """"4 GPU, 8 CPU as 2 node(s) x (2 GPU, 4 CPU); driver 1 CPU": the shape people check a plan against;
    with verl's pools named ("global_pool 2 node(s) x (...) + reward_pool 1 node(s) x (...)")."""
    parts = []
    if demand.bundles:
        groups = _groups(demand)
        parts.append(" + ".join(f"{name} {_bundles(bundles)}".strip() for name, bundles in groups))
    if demand.spread:
        parts.append(_amounts(demand.spread))
    if demand.driver:
        parts.append(f"driver {_amounts(demand.driver)}")
    return "; ".join(parts) or "nothing (the driver asks for no resources)"


def _groups(demand: Demand) -> list[tuple[str, list[Resources]]]:
    names = demand.pools if len(demand.pools) == len(demand.bundles) else ("",) * len(demand.bundles)
    groups: list[tuple[str, list[Resources]]] = []
    for name, bundle in zip(names, demand.bundles, strict=True):
        if groups and groups[-1][0] == name:
            groups[-1][1].append(bundle)
        else:
            groups.append((name, [bundle]))
    return groups


def _bundles(bundles: list[Resources]) -> str:
    first = bundles[0]
    if all(b == first for b in bundles):
        return f"{len(bundles)} node(s) x ({_amounts(first)})"
    return f"bundles ({'; '.join(_amounts(b) for b in bundles)})"


def gpus(demand: Demand) -> float:
    return demand.total().get("GPU", 0.0)


def _amounts(resources: dict[str, float] | object) -> str:
    items = sorted(dict(resources).items(), key=lambda kv: (kv[0] != "GPU", kv[0] != "CPU", kv[0]))  # type: ignore[call-overload]
    return ", ".join(f"{v:g} {k}" for k, v in items if v)


def ask_of(job: Job, sub: Submission, profile: VerlProfile | None = None) -> Ask:
    demand = demand_of(job, sub, profile)
    return Ask(job=job.name, bundles=demand.bundles, driver=demand.driver, spread=demand.spread, pools=demand.pools,
               priority=job.priority, preemptible=job.preemptible)


def unreserved(job: Job, sub: Submission) -> str | None:
    """What a `command` job's `demand:` asks beyond its driver: argus counts it, Ray reserves none of it
    (the driver's own resources are all Ray holds for a job). Said plainly, so nobody counts on Ray
    to keep other work off those GPUs. The driver is not made to hold them: a command that starts Ray
    tasks or actors of its own would then wait forever for GPUs its own driver holds."""
    if job.workload != "command" or not job.demand:
        return None
    asked, reserved = job.demand.get("GPU", 0.0), driver_needs(sub).get("GPU", 0.0)
    if asked <= reserved:
        return None
    return (f"demand: {asked:g} GPU are held for this job in argus's queue (no other argus job is admitted into "
            f"them), but Ray reserves only what its driver asks ({reserved:g} GPU): work started outside argus can "
            "still take them. Set `entrypoint_num_gpus` to have the driver itself hold the GPUs it uses directly.")


def unoffered(demand: Demand, offered: Iterable[str]) -> str:
    """The resources a demand names that no alive node offers, with the names meant, for people:
    "`worker_nodes` (did you mean `worker_node`?)"; empty when every name is offered."""
    names = sorted(set(offered))
    missing = sorted(k for k, v in demand.total().items() if v > 0 and k not in names)
    return ", ".join(f"`{k}`" + (f" (did you mean `{near[0]}`?)" if (near := get_close_matches(k, names, 1, 0.6))
                                 else "") for k in missing)

