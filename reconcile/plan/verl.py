"""Plan-time checks of verl jobs that need no I/O: capacity, node expectations, checkpoint clashes."""

from __future__ import annotations

from collections.abc import Mapping

from reconcile.model import Action, Change, VerlNote
from reconcile.plan.admission import never_fits
from reconcile.plan.checkpoints import judge, resume_note
from reconcile.plan.demand import demand_of, describe, unoffered
from reconcile.plan.driver_room import crowded_out
from reconcile.plan.placement import Demand
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.kinds.models import Cluster, Job
from specs.load.command_verl import command_verl_diagnostics
from specs.workloads import verl
from specs.workloads.submission import driver_needs, resolve
from state.observed import ClusterState, Node, ObservedState

STARTING = (Action.SUBMIT, Action.REPLACE, Action.RETRY, Action.QUEUE)


def verl_diagnostics(desired: DesiredState, observed: ObservedState) -> list[Diagnostic]:
    """Whether each job fits *now* is admission's (reconcile.plan.queue): here, whether it can ever fit."""
    found = [d for _, checked in sorted(observed.workload_checks.items()) for d in checked]  # located already
    found += _checkpoint_clashes(desired) + command_verl_diagnostics(desired)
    for _, job in sorted(desired.jobs.items()):
        cluster = observed.clusters.get(job.cluster)
        if job.workload != "command" and cluster is not None and job.state == "running":
            found += _capacity(desired, observed, job, cluster)
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
        key = (desired.shared_root(job.cluster), verl.checkpoint_dir(job, desired.workspace.name))
        if key in first:
            address = Address.job(name)
            found.append(Diagnostic(severity="error", address=address, field="trainer.checkpoint_dir",
                                    message=f"{address} writes checkpoints to {key[1]}, like "
                                            f"{Address.job(first[key])}; "
                                            "give one of them its own `trainer.checkpoint_dir`",
                                    ).located(desired.source(address)))
        first.setdefault(key, name)
    return found


def _capacity(desired: DesiredState, observed: ObservedState, job: Job, cluster: ClusterState) -> list[Diagnostic]:
    """Every pool verl will build, each bundle on a node, all at once on the idle cluster."""
    sub = resolve(desired.workspace, desired.cluster_of(job), job)
    demand = demand_of(job, sub, observed.verl_profiles.get(job.name))
    address = Address.job(job.name)
    source = desired.source(address)
    pools = Demand(bundles=demand.bundles, pools=demand.pools)
    if demand.bundles and never_fits(pools, [n.resources for n in cluster.nodes]):
        return [Diagnostic(severity="error", address=address, field="trainer",
                           message=f"{address} can never fit on cluster {cluster.name!r}: verl asks for "
                                   f"{describe(pools)} at once, each node's share on one node; the "
                                   f"{len(cluster.nodes)} alive node(s) do not have that").located(source)]
    if crowded := crowded_out(job, demand, [n.resources for n in cluster.nodes], cluster.name):
        return [Diagnostic(severity="error", address=address, field="trainer", message=crowded).located(source)]
    driver = driver_needs(sub)
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
    """A verl run about to start (or waiting to) resumes as its trainer.resume_mode says: only from a
    complete checkpoint its verl can load on the GPUs it has now, and never silently from one another
    spec saved (reconcile.plan.checkpoints)."""
    found = []
    for change in changes:
        judged = judge(desired, observed, change) if change.action in STARTING else None
        if judged is None:
            continue
        source = desired.source(change.address)
        field = _resume_field(desired.jobs[change.address.removeprefix("job.")])
        found += [Diagnostic(severity=severity, address=change.address, field=field, message=message).located(source)
                  for severity, messages in (("error", judged.errors), ("warning", judged.warnings))
                  for message in messages]
    return found


def _resume_field(job: Job) -> str:
    """Where the checkpoint a run resumes from is named: the override giving trainer.resume_from_path, else
    the checkpoint directory."""
    index = verl.last_override(job, ("trainer.resume_from_path",))
    return "trainer.checkpoint_dir" if index is None else f"overrides.{index}"


def with_verl_notes(desired: DesiredState, observed: ObservedState, changes: list[Change]) -> list[Change]:
    """Each verl job about to start (or wait) says what its snapshot's verl will do: people review that."""
    return [_noted(desired, observed, change) for change in changes]


def _noted(desired: DesiredState, observed: ObservedState, change: Change) -> Change:
    job = desired.jobs.get(change.address.removeprefix("job."))
    profile = observed.verl_profiles.get(job.name) if job is not None else None
    if job is None or profile is None or change.action not in STARTING:
        return change
    sub = resolve(desired.workspace, desired.cluster_of(job), job)
    demand = demand_of(job, sub, profile)
    pools = describe(Demand(bundles=demand.bundles, spread=demand.spread, pools=demand.pools)) if demand.bundles \
        else f"none: the trainer runs in the driver ({describe(Demand(driver=demand.driver))})"
    checked = profile.checked or (f"argus's verl {profile.knowledge} rules" if profile.knowledge else
                                  "outside argus's verl knowledge")
    note = VerlNote(version=profile.version, checked=checked, entry=f"{profile.module}, config {profile.config_name}",
                    pools=pools, resume=resume_note(desired, observed, change))
    return change.model_copy(update={"verl": note})
