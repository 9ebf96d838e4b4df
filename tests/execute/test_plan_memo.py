"""A plan is the same whatever argus's memo holds (state.memo): cold, warm, corrupted or forged, the JSON plan of a
workspace with a verl job, a pipeline and jobs waiting in the admission queue is the same, byte for byte, on a
real cluster with 3 logical GPUs. The observation's clock is pinned: two plans of one world differ by the time
they were made (the queue's `seen`) and by nothing else."""

from __future__ import annotations

import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest

from state import memo as memo_module
from state import observe as observe_module
from tests.support.gpu_queue import gpu_job, team

SCRIPT = Path(__file__).resolve().parents[1] / "state" / "verl" / "verl_scripts" / "grpo-fsdp-vllm.yaml"


@pytest.fixture
def planned(tmp_path: Path, gpu_cluster, shared: Path, verl_repo: Path, argus, monkeypatch: pytest.MonkeyPatch):
    ws = team(tmp_path, "plan-memo", gpu_cluster, shared)
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n")
    ws.write("jobs/grpo.yaml", SCRIPT.read_text())
    gpu_job(ws, shared, "first", gpus=2)
    gpu_job(ws, shared, "second", gpus=2)  # only one of the two fits the 3 GPUs: the other waits
    gpu_job(ws, shared, "after-first", gpus=1, extra="after: [first]\n")
    cache = tmp_path / "cache"
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(cache))
    monkeypatch.setattr(observe_module, "time", SimpleNamespace(time=lambda: 1_795_000_000.0))
    memo_module._secret.cache_clear()

    def plan() -> str:
        done = argus("plan", ws.root, "--json")
        assert done.code in (0, 1), done.err  # 1: the GRPO example asks more GPUs than the cluster has
        return done.out
    return plan, cache


def test_a_cold_warm_corrupted_or_forged_memo_plans_the_same_json(planned):
    plan, cache = planned
    cold = plan()
    assert '"queue"' in cold and "waits" in cold and "grpo" in cold and "after-first" in cold
    assert list((cache / memo_module.DIRECTORY).rglob("*.pack")), "the plan kept nothing: the memo is not used"
    assert plan() == cold
    for pack in (cache / memo_module.DIRECTORY).rglob("*.pack"):
        pack.write_bytes(pack.read_bytes()[:100])
    assert plan() == cold
    for pack in (cache / memo_module.DIRECTORY).rglob("*.pack"):  # forged: well-formed, of another key's making
        pack.write_bytes(memo_module.MAGIC + bytes(32) + pickle.dumps({}))
    assert plan() == cold
    assert plan() == cold  # and warm again after the forged one was replaced
