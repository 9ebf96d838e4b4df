"""`argus local up --worker-gpus/--worker-cpus/--worker-resources`: a verl-shaped worker on a laptop.

One real cluster, started through the CLI; Ray's own nodes API says what the worker offers. Bad
resource JSON is refused before anything starts.
"""

from __future__ import annotations

import json

import pytest

from state import local
from state.ray_client import RayClient


def test_local_up_starts_a_worker_of_the_shape_asked_for(tmp_path, argus, monkeypatch):
    state_dir = tmp_path / "local"
    monkeypatch.setenv("ARGUS_LOCAL_DIR", str(state_dir))
    try:
        up = argus("local", "up", "--dashboard-port", str(local._free_port()), "--worker-gpus", "4",
                   "--worker-cpus", "12", "--worker-resources", '{"worker_node": 1, "rack_a": 2}')
        assert up.code == 0, up.err
        assert "CPU 12, GPU 4, worker_node 1, rack_a 2" in up.out
        assert "logical" in up.out

        cluster = local.load(state_dir)
        [worker] = [n for n in RayClient("local", cluster.address).snapshot().nodes if not n.is_head]
        assert {k: worker.resources.get(k) for k in ("GPU", "CPU", "worker_node", "rack_a")} == {
            "GPU": 4.0, "CPU": 12.0, "worker_node": 1.0, "rack_a": 2.0}

        status = json.loads(argus("local", "status", "--json").out)
        assert status["up"] and status["nodes"]["worker"] == {"CPU": 12, "GPU": 4, "worker_node": 1, "rack_a": 2}
        assert argus("local", "down").code == 0
        assert argus("local", "status").code == 1
    finally:
        local.down(state_dir)


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
