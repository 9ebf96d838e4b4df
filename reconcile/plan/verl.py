"""Plan-time checks of verl jobs that need no I/O: capacity, node expectations, checkpoint clashes."""

from __future__ import annotations

from collections.abc import Mapping

from reconcile.model import Action, Change
from reconcile.plan.admission import Demand
from reconcile.plan.checkpoints import resume_problem
from reconcile.plan.demand import unoffered
from specs import verl
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.models import Cluster, Job, Trainer
from specs.submission import driver_needs, resolve
from state.observed import ClusterState, Node, ObservedState

STARTING = (Action.SUBMIT, Action.REPLACE, Action.RETRY, Action.QUEUE)


def verl_diagnostics(desired: DesiredState, observed: ObservedState) -> list[Diagnostic]:
    """Whether each job fits *now* is admission's (reconcile.plan.queue): here, whether it can ever fit."""
    found = [d for _, checked in sorted(observed.workload_checks.items()) for d in checked]  # located already
    found += _checkpoint_clashes(desired)
    for _, job in sorted(desired.jobs.items()):
        cluster = observed.clusters.get(job.cluster)
        if job.workload != "command" and cluster is not None and job.state == "running":
            found += _capacity(desired, job, cluster)
    for name, cluster in sorted(desired.clusters.items()):
        if name in observed.clusters:
            found += _node_expectations(desired, cluster, observed.clusters[name])
    return found


def _checkpoint_clashes(desired: DesiredState) -> list[Diagnostic]:
    """Two jobs writing one checkpoint directory would resume from each other's state."""
    first: dict[tuple[str, str], str] = {}
    found = []
    for name, job in sorted(desired.jobs.items()):
        if job.workload == "command":
            continue
        key = (desired.shared_root(job.cluster), verl.checkpoint_dir(job))
        if key in first:
            address = Address.job(name)
            found.append(Diagnostic(severity="error", address=address, field="trainer.checkpoint_dir",
                                    message=f"{address} writes checkpoints to {key[1]}, like "
                                            f"{Address.job(first[key])}; "
                                            "give one of them its own `trainer.checkpoint_dir`",
                                    ).located(desired.source(address)))
        first.setdefault(key, name)
    return found


def _capacity(desired: DesiredState, job: Job, cluster: ClusterState) -> list[Diagnostic]:
    trainer, per_gpu = job.trainer or Trainer(), verl.WORKLOADS[job.workload].cpus_per_gpu
    gpus, cpus = trainer.n_gpus_per_node, trainer.n_gpus_per_node * per_gpu
    fitting = [n for n in cluster.nodes if n.resources.get("GPU", 0) >= gpus and n.resources.get("CPU", 0) >= cpus]
    address = Address.job(job.name)
    source = desired.source(address)
    if len(fitting) < trainer.nnodes:
        return [Diagnostic(severity="error", address=address, field="trainer",
                           message=f"{address} can never fit on cluster {cluster.name!r}: it needs {trainer.nnodes} "
                                   f"node(s) with {gpus} GPUs and {cpus} CPUs each ({per_gpu} CPUs per GPU for "
                                   f"{job.workload}); {len(fitting)} alive node(s) have that").located(source)]
    driver = driver_needs(resolve(desired.workspace, desired.cluster_of(job), job))
    if not any(all(n.resources.get(k, 0) >= v for k, v in driver.items()) for n in cluster.nodes):
        missing = unoffered(Demand(driver=driver), (k for n in cluster.nodes for k in n.resources))
        named = f": it asks for {missing}, which none offers" if missing else ""
        return [Diagnostic(severity="error", address=address, field="entrypoint_resources",
                           message=f"no alive node of cluster {cluster.name!r} offers the driver's {driver}{named}",
                           ).located(source)]
    return []


def _node_expectations(desired: DesiredState, cluster: Cluster, state: ClusterState) -> list[Diagnostic]:
    """The cluster's `nodes:` are expectations: a missing worker or GPU is a warning, never created."""
    address = Address.cluster(cluster.name)
    found = []
    for index, expected in enumerate(cluster.nodes):
        have = [n for n in state.nodes if n.is_head == (expected.role == "head") and _offers(n, expected.resources)]
        if len(have) < expected.count:
            # Ray keeps DEAD entries after a node restarts: they matter only when something is missing.
            dead = f" ({state.dead_nodes} dead node(s) on the cluster)" if state.dead_nodes else ""
            wanted = ", ".join(f"{k}={v:g}" for k, v in expected.resources.items()) or "any resources"
            found.append(Diagnostic(severity="warning", address=address, field=f"nodes.{index}",
                                    message=f"expected {expected.count} alive {expected.role} node(s) with {wanted}; "
                                            f"{len(have)} found{dead}").located(desired.source(address)))
    return found


def _offers(node: Node, resources: Mapping[str, float]) -> bool:
    return all(node.resources.get(k, 0) >= v for k, v in resources.items())


def resume_diagnostics(desired: DesiredState, observed: ObservedState, changes: list[Change]) -> list[Diagnostic]:
    """A verl run about to start (or waiting to) resumes from its checkpoint directory: only from a
    complete checkpoint saved by as many GPUs as it has now."""
    found = []
    for change in changes:
        job = desired.jobs.get(change.address.removeprefix("job."))
        if job is None or job.workload == "command" or change.action not in STARTING:
            continue
        trainer = job.trainer or Trainer()
        problem = resume_problem(job.name, trainer.nnodes * trainer.n_gpus_per_node, observed.checkpoints.get(job.name))
        if problem:
            found.append(Diagnostic(severity="error", address=change.address, field="trainer.checkpoint_dir",
                                    message=problem).located(desired.source(change.address)))
    return found

