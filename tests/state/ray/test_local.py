"""`argus local`: a verl-shaped worker on a laptop (`--worker-gpus/--worker-cpus/--worker-resources`), and
`down` stops exactly the processes `up` started.

One real cluster, started through the CLI, serves the whole lifecycle (each start costs ~20 s on two
cores): Ray's own nodes API says what the worker offers, a job's driver runs under it, and `down` kills
it and nothing else. Bad resource JSON is refused before anything starts.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from state.ray import local
from state.ray.client import RayClient
from tests.support.cluster import SLEEP, jobs_of, wait_for
from tests.support.verl_inputs import write_inputs
from tests.support.workspace import make_workspace


def test_local_up_of_the_shape_asked_for_status_and_down_that_kills_only_its_own_processes(
        tmp_path, argus, monkeypatch, verl_repo):
    state_dir = tmp_path / "local"
    monkeypatch.setenv("ARGUS_LOCAL_DIR", str(state_dir))
    bystander = subprocess.Popen(["sleep", "300"])
    port = local._free_port()
    try:
        up = argus("local", "up", "--dashboard-port", str(port), "--worker-gpus", "4",
                   "--worker-cpus", "13", "--worker-resources", '{"worker_node": 1, "rack_a": 2}')
        assert up.code == 0, up.err
        assert f"http://127.0.0.1:{port}" in up.out
        assert "CPU 13, GPU 4, worker_node 1, rack_a 2" in up.out
        assert "logical" in up.out
        assert argus("local", "up", "--dashboard-port", str(port)).code == 1  # already up

        cluster = local.load(state_dir)
        [worker] = [n for n in RayClient("local", cluster.address).snapshot().nodes if not n.is_head]
        assert {k: worker.resources.get(k) for k in ("GPU", "CPU", "worker_node", "rack_a")} == {
            "GPU": 4.0, "CPU": 13.0, "worker_node": 1.0, "rack_a": 2.0}

        assert argus("local", "status").code == 0
        status = json.loads(argus("local", "status", "--json").out)
        assert status["address"] == f"http://127.0.0.1:{port}"
        assert status["up"] and status["nodes"]["worker"] == {"CPU": 13, "GPU": 4, "worker_node": 1, "rack_a": 2}
        _verl_jobs_queue_by_shape(tmp_path, argus, cluster.address, verl_repo)

        ours = _a_driver_runs_under_the_cluster(tmp_path, argus, cluster)
        down = argus("local", "down")
        assert down.code == 0 and "Stopped" in down.out
        assert not any(local._exists(p) for p in ours)
        assert bystander.poll() is None, "a process the cluster did not start was killed"
        assert argus("local", "status").code == 1
    finally:
        local.down(state_dir)
        bystander.kill()


def _a_driver_runs_under_the_cluster(tmp_path, argus, cluster: local.LocalCluster) -> list[int]:
    """A job argus applied runs its driver as a descendant of the local cluster: the pids `down` must kill."""
    ws = make_workspace(tmp_path / "ws-sleep", "local-test", cluster.address)
    ws.job("sleeper", SLEEP)
    assert argus("apply", ws.root, "--auto-approve").code == 0
    [job] = jobs_of(cluster.address, ws.name)
    wait_for(cluster.address, job.submission_id, {"RUNNING"})
    ours, driver = [], []
    deadline = time.monotonic() + 30  # RUNNING is reported just before the driver process starts
    while not driver and time.monotonic() < deadline:
        ours = local.alive_pids(cluster)
        driver = [p for p in ours if "time.sleep(120)" in _cmdline(p)]
        time.sleep(0.2)
    assert driver, "the job's driver process is a descendant of the local cluster"
    return ours


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.parametrize("given", ['{"x": -1}', "[1]", "{nope", '{"GPU": 1}', '{"x": true}', '{"x": NaN}'])
def test_bad_worker_resources_exit_1_naming_the_option_and_start_nothing(tmp_path, argus, monkeypatch, given):
    state_dir = tmp_path / "local"
    monkeypatch.setenv("ARGUS_LOCAL_DIR", str(state_dir))
    result = argus("local", "up", "--dashboard-port", "0", "--worker-resources", given)
    assert result.code == 1
    assert "--worker-resources" in result.err
    assert not state_dir.exists() and local.load(state_dir) is None


def test_the_worker_keeps_worker_node_unless_the_json_sets_it():
    assert local.worker_shape(24, 8, {"rack_a": 2}) == {"CPU": 24, "GPU": 8, "worker_node": 4.0, "rack_a": 2}
    assert local.worker_shape(4, 0, {"worker_node": 1}) == {"CPU": 4, "GPU": 0, "worker_node": 1}
    assert local.worker_shape(4, 0, {"worker_node": 0}) == {"CPU": 4, "GPU": 0}


VERL_JOB = """kind: Job
name: {name}
cluster: local
code: verl
workload: ppo
model: ${{shared_root}}/models/qwen
data:
  train: ${{shared_root}}/datasets/train.parquet
  val: ${{shared_root}}/datasets/train.parquet
trainer: {trainer}
overrides: [actor_rollout_ref.rollout.name=vllm, actor_rollout_ref.rollout.tensor_model_parallel_size=1,
  data.train_batch_size=16, actor_rollout_ref.actor.ppo_mini_batch_size=8,
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2, actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2,
  critic.ppo_micro_batch_size_per_gpu=2]
"""


def _verl_jobs_queue_by_shape(tmp_path, argus, address: str, verl_repo) -> None:
    """The README's local loop: verl-shaped jobs are planned and queued by their shape on logical GPUs."""
    ws = make_workspace(tmp_path / "ws", "local-verl", address)
    ws.write("cluster.yaml", f"kind: Cluster\nname: local\naddress: {address}\nshared_root: .shared\n"
                             "job_defaults: {entrypoint_num_cpus: 1, entrypoint_resources: {worker_node: 1}}\n")
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n")
    write_inputs(ws.shared, "datasets/train.parquet", "models/qwen")
    ws.write("jobs/whole.yaml", VERL_JOB.format(name="whole", trainer="{nnodes: 1, n_gpus_per_node: 4}") +
             "priority: 10\n")
    ws.write("jobs/wait.yaml", VERL_JOB.format(name="wait", trainer="{nnodes: 1, n_gpus_per_node: 2}"))
    plan = argus("plan", "--format", "json", ws.root)
    assert plan.code == 0, plan.out + plan.err
    changes = {c["address"]: c for c in json.loads(plan.out)["changes"]}
    whole, wait = changes["job.whole"], changes["job.wait"]
    assert whole["action"] == "submit" and whole["queue"]["position"] is None
    assert whole["queue"]["demand"] == "1 node(s) x (4 GPU, 12 CPU); driver 1 CPU, 1 worker_node"
    assert whole["verl"]["version"] == "0.9.1" and whole["verl"]["pools"] == "1 node(s) x (4 GPU, 12 CPU)"
    assert wait["action"] == "queue" and wait["queue"]["position"] == 1
    assert "needs 2 GPU, 0 GPU free" in wait["queue"]["reason"]

    # a placement group per node and pool: two groups of two GPUs may share the one GPU node, one of five never fits
    ws.write("jobs/wait.yaml", VERL_JOB.format(name="wait", trainer="{nnodes: 2, n_gpus_per_node: 2}"))
    ws.write("jobs/big.yaml", VERL_JOB.format(name="big", trainer="{nnodes: 1, n_gpus_per_node: 5}"))
    shaped = argus("plan", ws.root)
    assert shaped.code == 1
    assert "job.big can never fit on cluster 'local': verl asks for 1 node(s) x (5 GPU, 15 CPU) at once" in shaped.out
    assert ("~ job.wait  (queue: queued #1 on local: needs 4 GPU as 2 groups of 2, 0 GPU free; after local-verl/whole, "
            "which fit now)") in shaped.out
    assert "      pools:  2 node(s) x (2 GPU, 6 CPU)" in shaped.out


def test_the_ports_of_a_cluster_are_never_handed_out_twice():
    """A cluster's half-dozen ports are picked one by one before `ray start` binds any: the kernel may
    offer a port it offered a moment ago, and two alike made `ray start` fail."""
    ports = [local._free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)


def test_local_up_without_the_ray_cli_says_which_extra_installs_it_and_starts_nothing(tmp_path, argus, monkeypatch):
    """argus's base install has no Ray (validate, plan and serve never import it): `argus local up` in such an
    environment names the extra, before writing any state or starting any process."""
    bare = tmp_path / "venv" / "bin"
    bare.mkdir(parents=True)
    monkeypatch.setattr("sys.executable", str(bare / "python"))  # an interpreter with no `ray` beside it
    state_dir = tmp_path / "local"
    monkeypatch.setenv("ARGUS_LOCAL_DIR", str(state_dir))
    refused = argus("local", "up", "--dashboard-port", "0")
    assert refused.code == 1
    assert "pip install 'argus-ray[local]'" in refused.err and str(bare / "ray") in refused.err
    assert not state_dir.exists() and local.load(state_dir) is None


def test_a_node_inherits_no_variable_argus_holds_for_itself(tmp_path, monkeypatch):
    """What a node's environment holds, every job it runs holds: no git token, dashboard or notification
    credential of argus's (specs.kinds.held_variables), as no key; the node's own auth is set apart from them."""
    held = {"ARGUS_NOTIFY": "json://hook", "GIT_TOKEN_GITHUB_COM": "gh-t0ken", "PROD_RAY_TOKEN": "dash-t0ken",
            "OPS_WEBHOOK_URL": "https://hook", "ARGUS_ROOT_KEY": "root-k3y"}
    for name, value in {**held, "WANDB_API_KEY": "kept"}.items():
        monkeypatch.setenv(name, value)
    cluster = local.LocalCluster(state_dir=str(tmp_path), dashboard_port=1, gcs_port=1, temp_dir=str(tmp_path))
    env = local.node_env(cluster, "head")
    assert not set(held) & set(env) and not set(held.values()) & set(env.values())
    assert env["WANDB_API_KEY"] == "kept" and env["RAY_AUTH_MODE"] == "disabled" and env["ARGUS_LOCAL_NODE"] == "head"
