"""A verl job whose pools fit and whose driver fits, but never both: the driver asks for a GPU (a sliver for
sft_trainer_ray's) and the pools reserve every GPU of the nodes it could run on. Pure.

Ray reserves a placement group bundle's GPU whole: a driver's 0.01 GPU is taken only from a GPU no bundle
holds, so a Ray SFT on every GPU of its nodes waits forever (docs/verl.md, "SFT on Ray").
"""

from __future__ import annotations

from collections.abc import Sequence

from reconcile.plan.admission import never_fits
from reconcile.plan.demand import describe
from reconcile.plan.placement import Demand, Resources
from specs.kinds.models import Job, Trainer


def crowded_out(job: Job, demand: Demand, capacity: Sequence[Resources], cluster: str) -> str | None:
    """Why the driver and the pools can never be placed together, and what to set; None when they can."""
    gpus = demand.driver.get("GPU", 0.0)
    if not gpus or not demand.bundles or not never_fits(Demand(bundles=demand.bundles, driver=demand.driver),
                                                        capacity):
        return None
    pools = Demand(bundles=demand.bundles, pools=demand.pools)
    return (f"job.{job.name} can never start on cluster {cluster!r}: its pools ({describe(pools)}) reserve every GPU "
            f"of the nodes they fit on, and its driver asks for {gpus:g} GPU of its own, which Ray takes only from "
            f"a GPU no placement group bundle holds; {_way_out(job, gpus)}")


def _way_out(job: Job, gpus: float) -> str:
    trainer = job.trainer or Trainer()
    if job.workload != "sft" or job.entrypoint_num_gpus is not None:
        return "lower `entrypoint_num_gpus`, or leave a GPU of a node free for the driver"
    fewer = f"set trainer.n_gpus_per_node to {trainer.n_gpus_per_node - 1}" if trainer.n_gpus_per_node > 1 else \
        "leave a GPU node for the driver"
    torchrun = ", or run it under torchrun (`entry: {launcher: torchrun}`: the driver itself holds the node's " \
               "GPUs and no placement group is made)" if trainer.nnodes == 1 else ""
    return (f"verl's sft_trainer_ray sums each step's token counts on trainer.device in the driver, so argus asks "
            f"{gpus:g} GPU for it: {fewer}, add a GPU node the pools leave free{torchrun}")
