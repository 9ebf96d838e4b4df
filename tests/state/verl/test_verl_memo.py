"""A verl job's checks are kept in argus's memo by everything they read (state.verl.checks: the job's spec, its
snapshot's code, the inputs it names): a warm, cold or forged memo gives the same checks, and a changed input
invalidates exactly the jobs that read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.load.loader import load_workspace
from state import memo as memo_module
from state.code.sources import resolve_source
from state.memo import Memo
from state.observed import SnapshotState
from state.verl.checks import JobCheck, check_job
from tests.support import verl_inputs
from tests.support.workspace import make_workspace

SCRIPT = Path(__file__).resolve().parent / "verl_scripts" / "grpo-fsdp-vllm.yaml"


@pytest.fixture
def checks(tmp_path: Path, verl_repo: Path, monkeypatch: pytest.MonkeyPatch):
    """Two GRPO jobs of verl 0.9.1: `reads` names dataset.gsm8k, `apart` names nothing; checked as a plan
    checks them, through a memo saved between two calls as between two plans."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(cache))
    memo_module._secret.cache_clear()
    ws = make_workspace(tmp_path / "ws", "verl-memo", "http://127.0.0.1:9")
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n"
                          f"---\nkind: CodeSnapshot\nname: older\ncluster: local\n"
                          f"git: {{url: {verl_repo}, ref: v0.8.0}}\n")
    ws.write("inputs.yaml", "kind: Dataset\nname: gsm8k\ncluster: local\npath: /staging/gsm8k\n")
    text = SCRIPT.read_text()
    ws.write("jobs/reads.yaml", text.replace("name: grpo-fsdp-vllm", "name: reads")
             .replace("${shared_root}/datasets/gsm8k/", "${dataset:gsm8k}/"))
    ws.write("jobs/apart.yaml", text.replace("name: grpo-fsdp-vllm", "name: apart")
             .replace("${shared_root}/datasets/gsm8k/", "${shared_root}/data/"))

    def run(inputs: dict | None = None) -> tuple[dict[str, JobCheck], Memo]:
        desired = load_workspace(ws.root)
        memo = Memo(cache, "verl-ws")
        sources = {name: resolve_source(spec, desired.root, str(cache), 60) for name, spec in desired.snapshots.items()}
        found = {name: check_job(desired, job, SnapshotState(source=sources[job.code or ""]), str(cache),
                                 inputs=inputs or {}, memo=memo) for name, job in sorted(desired.jobs.items())}
        memo.save()
        return found, memo
    return ws, run


def sealed(columns: list[str]) -> dict:
    data = {name: {"columns": columns, "rows": 10} for name in ("train.parquet", "test.parquet")}
    return {"dataset.gsm8k": verl_inputs.sealed("Dataset", "gsm8k", data)}


def test_cold_warm_and_forged_memos_give_the_same_checks(checks, tmp_path: Path):
    ws, run = checks
    cold, memo = run()
    assert memo.misses >= 2 and memo.hits == 0
    assert cold["reads"].profile is not None and cold["apart"].profile is not None
    warm, memo = run()
    assert warm == cold and memo.misses == 0 and memo.hits == 2  # one judgement a job: nothing composed again
    for pack in (tmp_path / "cache").rglob("verl-ws.pack"):
        data = pack.read_bytes()
        pack.write_bytes(data[:-40] + bytes(40))  # forged: the same size, another tail
    forged, memo = run()
    assert forged == cold and memo.hits == 0


def test_a_changed_input_or_spec_invalidates_exactly_the_jobs_that_read_it(checks):
    ws, run = checks
    first, _ = run(sealed(["prompt", "data_source", "reward_model"]))
    _, memo = run(sealed(["question", "data_source", "reward_model"]))  # the data set's files changed
    # `reads` judged again (its composition read only the data set's directory, the same: reused), `apart` reused
    assert (memo.hits, memo.misses) == (2, 1)
    ws.write("jobs/apart.yaml", (ws.root / "jobs/apart.yaml").read_text().replace("lr=1e-6", "lr=2e-6"))
    _, memo = run(sealed(["question", "data_source", "reward_model"]))
    assert (memo.hits, memo.misses) == (1, 2)  # the spec: `apart` judged and composed again, `reads` reused
    ws.write("jobs/reads.yaml", (ws.root / "jobs/reads.yaml").read_text().replace("code: verl", "code: older"))
    later, memo = run(sealed(["question", "data_source", "reward_model"]))
    assert (memo.hits, memo.misses) == (1, 2)  # another snapshot, another verl: only `reads` again
    assert later["apart"] == run(sealed(["question", "data_source", "reward_model"]))[0]["apart"]
    assert first["reads"] != later["reads"]
