"""A recipe argus has not read: the CPUs its entry module's TaskRunner holds (read with ast), a warning that
only the trainer's pool is counted, and `entry.demand` declaring the rest, checked against the composed config.
Composed against the real verl 0.8.0 and 0.9.1 wheels, with verl-recipe's partial_rollout/main_ppo.py (a
recipe whose TaskRunner is `@ray.remote(num_cpus=1)`) beside verl."""

from __future__ import annotations

import os

import pytest

from reconcile.plan.demand import demand_of, describe
from specs.load.loader import load_workspace
from specs.workloads.submission import resolve
from state.code.sources import resolve_source
from state.observed import SnapshotState
from state.verl.checks import check_job
from tests.support.verl_scripts import SCRIPTS, VERSIONS

RECIPE = ("entry: {module: recipe.partial_rollout.main_ppo, config_dir: verl/trainer/config, "
          "config_name: ppo_trainer}\n")
"""Its @hydra.main names ../../verl/trainer/config, which argus does not follow: the spec names it."""
DECLARED = """entry:
  module: recipe.partial_rollout.main_ppo
  config_dir: verl/trainer/config
  config_name: ppo_trainer
  demand:
    pools:
      - name: rollout_pool
        nnodes: 1
        gpus_per_node: 8
        cpus_per_gpu: 2
        nnodes_key: actor_rollout_ref.rollout.nnodes
        gpus_per_node_key: actor_rollout_ref.rollout.n_gpus_per_node
    cpus: 5
"""


def _write(ws, entry: str, extra: str = "") -> None:
    text = (SCRIPTS / "grpo-fsdp-vllm.yaml").read_text().replace("workload: grpo\n", f"workload: grpo\n{entry}")
    text = text.replace("name: grpo-fsdp-vllm\n", "name: recipe-job\n")
    ws.write("jobs/recipe-job.yaml", text + extra)


def _check(ws, version: str):
    text = ws.root.joinpath("jobs/recipe-job.yaml").read_text().replace("code: verl\n",
                                                                      f"code: verl-{version.replace('.', '')}\n")
    ws.write("jobs/recipe-job.yaml", text)
    return checked_job(ws, "recipe-job")


def checked_job(ws, name: str):
    desired = load_workspace(ws.root)
    job = desired.jobs[name]
    source = resolve_source(desired.snapshots[job.code], desired.root, os.environ["ARGUS_CACHE_DIR"], 60)
    result = check_job(desired, job, SnapshotState(source=source), os.environ["ARGUS_CACHE_DIR"], files=False)
    return result, desired, job


@pytest.mark.parametrize("version", VERSIONS)
def test_an_unknown_recipe_is_warned_that_only_the_trainers_pool_is_counted(scripts_ws, version: str):
    _write(scripts_ws, RECIPE)
    result, desired, job = _check(scripts_ws, version)
    assert [d.text for d in result.diagnostics if d.severity == "error"] == []
    warnings = [d for d in result.diagnostics if d.severity == "warning"]
    assert len(warnings) == 1 and warnings[0].field == "entry"
    assert "argus has not read recipe.partial_rollout.main_ppo's placement code: it counts only the trainer's " \
           "pool" in warnings[0].text and "demand: {pools: [{name: rollout_pool" in warnings[0].text
    assert warnings[0].where is not None and warnings[0].where.line == 8  # the entry: line of the spec
    # the TaskRunner's @ray.remote(num_cpus=1), read from the recipe's own module, 0.9 as 0.8
    demand = demand_of(job, resolve(desired.workspace, desired.cluster_of(job), job), result.profile)
    assert demand.spread == {"CPU": 1.0}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_declared_demand_is_counted_beside_the_trainers_pool(scripts_ws, version: str):
    _write(scripts_ws, DECLARED, '  - "actor_rollout_ref.rollout.nnodes=1"\n'
                                 '  - "actor_rollout_ref.rollout.n_gpus_per_node=8"\n')
    result, desired, job = _check(scripts_ws, version)
    assert [d.text for d in result.diagnostics] == []
    demand = demand_of(job, resolve(desired.workspace, desired.cluster_of(job), job), result.profile)
    assert describe(demand).startswith("global_pool 1 node(s) x (8 GPU, 24 CPU) + rollout_pool 1 node(s) x "
                                       "(8 GPU, 16 CPU); 5 CPU")
    assert demand.total()["GPU"] == 16


def test_a_declared_pool_that_contradicts_the_config_is_an_error_at_its_line(scripts_ws):
    _write(scripts_ws, DECLARED.replace("nnodes_key: actor_rollout_ref.rollout.nnodes",
                                        "nnodes_key: rollout.no_such_key"),
           '  - "actor_rollout_ref.rollout.n_gpus_per_node=4"\n')
    result, _, _ = _check(scripts_ws, "0.9.1")
    errors = {d.field: (d.where.line if d.where else None, d.text) for d in result.diagnostics if d.severity == "error"}
    assert set(errors) == {"entry.demand.pools.0.nnodes_key", "entry.demand.pools.0.gpus_per_node"}
    line, text = errors["entry.demand.pools.0.gpus_per_node"]
    assert line == 16 and "rollout_pool is declared with gpus_per_node: 8, but the composed config has " \
                          "actor_rollout_ref.rollout.n_gpus_per_node=4" in text
    line, text = errors["entry.demand.pools.0.nnodes_key"]
    assert line == 18 and "rollout.no_such_key is not a key of the composed config" in text


def test_a_demand_declared_for_a_trainer_argus_knows_is_refused(scripts_ws):
    text = (SCRIPTS / "one-step-off-policy-fsdp2.yaml").read_text().replace(
        "entry: {module: verl.experimental.one_step_off_policy.main_ppo}\n",
        "entry:\n  module: verl.experimental.one_step_off_policy.main_ppo\n  demand: {cpus: 3}\n")
    scripts_ws.write("jobs/one-step-off-policy-fsdp2.yaml", text.replace("code: verl\n", "code: verl-091\n"))
    result, _, _ = checked_job(scripts_ws, "one-step-off-policy-fsdp2")
    errors = [(d.field, d.text) for d in result.diagnostics if d.severity == "error"]
    assert errors == [("entry.demand", "argus counts verl.experimental.one_step_off_policy.main_ppo's pools and "
                                       "actors itself (read from verl's placement code, docs/verl.md, \"Declaring a "
                                       "recipe's demand\"): remove entry.demand, or it would be counted twice")]
