"""A verl job is judged by the files composed (state/verl/checks.py `_code_digest`): the snapshot on the shared
root once made, named by its manifest's digest, not by its source's. A `path:` snapshot whose working copy moved on
is observed as source = the working copy (digest B) and manifest = what is on disk (digest A): a plan after
`argus validate --deep` (which composed B's files) must not be handed B's composition for A's files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specs.load.loader import load_workspace
from state import memo as memo_module
from state.code.sources import entries, resolve_source
from state.memo import Memo
from state.observed import Manifest, SnapshotState
from state.verl.checks import check_job
from tests.support.workspace import make_workspace

SCRIPT = Path(__file__).resolve().parent / "verl_scripts" / "grpo-fsdp-vllm.yaml"


def test_a_made_snapshot_is_not_judged_by_the_composition_of_its_source(tmp_path: Path, verl_repo: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(cache))
    memo_module._secret.cache_clear()
    ws = make_workspace(tmp_path / "ws", "verl-made", "http://127.0.0.1:9")
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n")
    ws.write("jobs/j.yaml", SCRIPT.read_text().replace("name: grpo-fsdp-vllm", "name: j"))
    desired = load_workspace(ws.root)
    job, spec = desired.jobs["j"], desired.snapshots["verl"]
    source = resolve_source(spec, desired.root, str(cache), 60)  # the working copy now: digest B

    # On the shared root: the snapshot made earlier (digest A), the same verl version, one config file different
    # (the actor's optimizer has no `lr` there: the job's `actor_rollout_ref.actor.optim.lr=1e-6` cannot compose)
    on_disk = Path(desired.snapshot_dir(spec))
    for rel, _mode, data in entries(spec, source, desired.root, str(cache)):
        (on_disk / rel).parent.mkdir(parents=True, exist_ok=True)
        (on_disk / rel).write_bytes(data)
    edited = 0
    for config in (on_disk / "verl" / "trainer" / "config").rglob("*.yaml"):
        text = config.read_text()
        if config.parent.name in ("optim", "actor") and re.search(r"^ *lr:", text, re.M):
            config.write_text(re.sub(r"^ *lr:.*$", "", text, flags=re.M))
            edited += 1
    assert edited
    manifest = Manifest(workspace="verl-made", name="verl", repo="verl", source={}, commit="a" * 40, digest="a" * 64,
                        files=1, bytes=1, created_at="2026-01-01T00:00:00Z", created_by="t")
    planned = SnapshotState(source=source, manifest=manifest)  # observe_snapshot's view of a moved `path:` copy

    cold = check_job(desired, job, planned, str(cache), files=False)
    assert any("lr" in d.message for d in cold.diagnostics), cold.diagnostics  # the files on disk do not compose

    memo = Memo(cache, "verl-ws")
    check_job(desired, job, SnapshotState(source=source), str(cache), files=False, memo=memo)  # validate --deep
    memo.save()
    warm = check_job(desired, job, planned, str(cache), files=False, memo=Memo(cache, "verl-ws"))  # the plan
    assert warm == cold
    tampered = SnapshotState(source=source, manifest=manifest, problem="files changed since the snapshot was made")
    memo = Memo(cache, "verl-ws")
    assert check_job(desired, job, tampered, str(cache), files=False, memo=memo) == cold
    memo.save()
    assert memo.hits == 0  # files that no longer match their manifest are judged afresh, and kept nowhere
