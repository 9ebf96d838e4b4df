"""An SFT on Ray that uses every GPU of its node: its pool fits, its driver fits alone, but the driver's
0.01 GPU (sft_trainer_ray sums token counts on trainer.device in the driver) is never free once the pool's
bundles hold every GPU. The plan says so, and what to set, on a real Ray cluster whose one worker has 2
logical GPUs; an SFT that leaves a GPU free plans clean, and nothing is submitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from state.ray import local
from tests.support.cluster import jobs_of
from tests.support.workspace import make_workspace

SPEC = (Path(__file__).resolve().parents[1] / "state" / "verl" / "verl_scripts" / "sft-trainer-ray.yaml")


@pytest.fixture(scope="module")
def two_gpu_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A head and one worker with 2 logical GPUs and CPUs enough for a Ray SFT's 10 per GPU."""
    state_dir = tmp_path_factory.mktemp("two-gpu-cluster")
    cluster = local.up(state_dir, dashboard_port=local._free_port(), cpus_per_node=2, worker_gpus=2,
                       worker_cpus=24, worker_resources={"worker_node": 8.0})
    try:
        yield cluster
    finally:
        local.down(state_dir)


def _workspace(tmp_path: Path, verl_repo: Path, address: str, gpus: int):
    ws = make_workspace(tmp_path / "ws", "sft-driver-room", address)
    ws.write("cluster.yaml", f"kind: Cluster\nname: local\naddress: {address}\nshared_root: .shared\n"
                             "job_defaults:\n  entrypoint_num_cpus: 1\n  entrypoint_resources: {worker_node: 1}\n")
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n")
    ws.write("jobs/sft.yaml", SPEC.read_text().replace("name: sft-trainer-ray", "name: sft")
             .replace("n_gpus_per_node: 1", f"n_gpus_per_node: {gpus}"))
    for rel in ("datasets/gsm8k_sft/train.parquet", "datasets/gsm8k_sft/test.parquet",
                "models/Qwen/Qwen2.5-0.5B/config.json"):
        (ws.shared / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws.shared / rel).write_text("x")
    return ws


def test_an_sft_on_every_gpu_of_its_node_is_refused_naming_the_drivers_gpu(tmp_path, verl_repo, two_gpu_cluster,
                                                                            argus):
    ws = _workspace(tmp_path, verl_repo, two_gpu_cluster.address, gpus=2)
    plan = argus("plan", ws.root)
    assert plan.code == 1, plan.out
    said = " ".join(plan.out.split())  # the plan wraps long messages
    assert ("Error: jobs/sft.yaml:12: job.sft can never start on cluster 'local': its pools (1 node(s) x "
            "(2 GPU, 20 CPU)) reserve every GPU of the nodes they fit on, and its driver asks for 0.01 GPU of its "
            "own, which Ray takes only from a GPU no placement group bundle holds; verl's sft_trainer_ray sums "
            "each step's token counts on trainer.device in the driver, so argus asks 0.01 GPU for it: set "
            "trainer.n_gpus_per_node to 1, add a GPU node the pools leave free, or run it under torchrun") in said
    assert argus("apply", "--yes", ws.root).code == 1
    assert jobs_of(two_gpu_cluster.address, "sft-driver-room") == []  # refused: nothing reached Ray


def test_an_sft_that_leaves_the_driver_a_gpu_plans_clean(tmp_path, verl_repo, two_gpu_cluster, argus):
    ws = _workspace(tmp_path, verl_repo, two_gpu_cluster.address, gpus=1)
    plan = argus("plan", ws.root)
    assert "can never" not in plan.out and "never start" not in plan.out, plan.out
