"""A sealed version whose files changed is damaged: the observer says so, and how to repair it must be something
that works. `argus apply --prune` cannot (a version a spec names is never pruned, and a plan with errors is never
applied), so the message must not send the user there."""

from __future__ import annotations

import os
from pathlib import Path

from state.inputs.observe import _sealed
from state.inputs.seal import Expected
from tests.support.sealing import sealed, sha, spec, stage, step_for

DATA = b"q,a\n1+1,2\n"


def test_a_damaged_version_says_a_repair_that_works(tmp_path: Path):
    root = tmp_path / "shared"
    root.mkdir()
    input_spec = spec({"url": {"url": "https://h/train.csv", "sha256": sha(DATA)}})
    step = step_for(input_spec)
    stage(root, step, {"train.csv": DATA})
    manifest = sealed(root, input_spec, step, Expected(files={"train.csv": sha(DATA)})).manifest
    os.chmod(root / step.rel, 0o755)
    (root / step.rel / "train.csv").unlink()  # a job removed it
    problem = _sealed(str(root), step.rel, input_spec, step.key, manifest, verify=False)["problem"]
    assert "--prune" not in problem
    assert f"rm -rf {root}/{step.rel}" in problem
