"""`argus status` and `logs` read the inputs from the shared root's sealed versions (no network): each root's
versions are listed once, not once per input (every listing reads every manifest, up to 64 MiB each, and any job
can add versions)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from state.inputs import manifest as manifests
from state.inputs import observe
from state.inputs.seal import Expected
from tests.support.input_planning import desired_with, url_dataset
from tests.support.sealing import sealed, sha, stage, step_for

DATA = b"q,a\n"


def test_status_lists_each_roots_versions_once_and_finds_the_sealed_one(tmp_path: Path, monkeypatch):
    root = tmp_path / "shared"
    root.mkdir()
    specs = [url_dataset(f"d{i}") for i in range(5)]
    specs[0] = specs[0].model_copy(update={"url": specs[0].url.model_copy(update={"sha256": sha(DATA)})})
    step = step_for(specs[0])
    stage(root, step, {"train.parquet": DATA})
    sealed(root, specs[0], step, Expected(files={"train.parquet": sha(DATA)}))
    desired = replace(desired_with((), tuple(specs)), shared_roots={"c": str(root)})
    calls = []
    listing = manifests.stored_versions
    monkeypatch.setattr(manifests, "stored_versions", lambda r: calls.append(r) or listing(r))
    found = observe.recorded_inputs(desired, ())
    assert len(calls) == 1
    assert found["dataset.d0"].rel == step.rel and found["dataset.d1"].rel is None
