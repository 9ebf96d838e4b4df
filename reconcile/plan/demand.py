"""A job's whole demand, from its spec: what admission must find free before it starts. Pure.

verl makes one placement group per node: `nnodes` bundles of `n_gpus_per_node` GPUs and the CPUs
verl asks per GPU, each bundle on one node, plus the driver. A `command` job declares `demand:`
(its driver included, spread over any nodes); without it, the driver's own resources.
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches

from reconcile.model import Ask
from reconcile.plan.admission import Demand
from specs import verl
from specs.models import Job, Trainer
from specs.submission import Submission, driver_needs


def demand_of(job: Job, sub: Submission) -> Demand:
    if job.workload == "command":
        driver = driver_needs(sub)
        if job.demand is None:
            return Demand(driver=driver)
        # the driver is part of the job: a demand that names less than the driver asks Ray for is raised to it
        return Demand(spread={k: max(job.demand.get(k, 0.0), driver.get(k, 0.0)) for k in {*job.demand, *driver}})
    trainer, per_gpu = job.trainer or Trainer(), verl.WORKLOADS[job.workload].cpus_per_gpu
    bundle = {"GPU": float(trainer.n_gpus_per_node), "CPU": float(trainer.n_gpus_per_node * per_gpu)}
    return Demand(bundles=tuple(dict(bundle) for _ in range(trainer.nnodes)), driver=driver_needs(sub))


def describe(demand: Demand) -> str:
    """"4 GPU, 8 CPU as 2 node(s) x (2 GPU, 4 CPU); driver 1 CPU": the shape people check a plan against."""
    parts = []
    if demand.bundles:
        first = demand.bundles[0]
        same = all(b == first for b in demand.bundles)
        each = _amounts(first) if same else "; ".join(_amounts(b) for b in demand.bundles)
        parts.append(f"{len(demand.bundles)} node(s) x ({each})" if same else f"bundles ({each})")
    if demand.spread:
        parts.append(_amounts(demand.spread))
    if demand.driver:
        parts.append(f"driver {_amounts(demand.driver)}")
    return "; ".join(parts) or "nothing (the driver asks for no resources)"


def gpus(demand: Demand) -> float:
    return demand.total().get("GPU", 0.0)


def _amounts(resources: dict[str, float] | object) -> str:
    items = sorted(dict(resources).items(), key=lambda kv: (kv[0] != "GPU", kv[0] != "CPU", kv[0]))  # type: ignore[call-overload]
    return ", ".join(f"{v:g} {k}" for k, v in items if v)


def ask_of(job: Job, sub: Submission) -> Ask:
    demand = demand_of(job, sub)
    return Ask(job=job.name, bundles=demand.bundles, driver=demand.driver, spread=demand.spread,
               priority=job.priority, preemptible=job.preemptible)


def unoffered(demand: Demand, offered: Iterable[str]) -> str:
    """The resources a demand names that no alive node offers, with the names meant, for people:
    "`worker_nodes` (did you mean `worker_node`?)"; empty when every name is offered."""
    names = sorted(set(offered))
    missing = sorted(k for k, v in demand.total().items() if v > 0 and k not in names)
    return ", ".join(f"`{k}`" + (f" (did you mean `{near[0]}`?)" if (near := get_close_matches(k, names, 1, 0.6))
                                 else "") for k in missing)

