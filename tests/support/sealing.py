"""Builders for the sealing tests: specs, steps and staging dirs on a real temp shared root."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from reconcile.model import SealInputStep
from specs.kinds.inputs import Dataset, Model, version_key, version_rel
from state.inputs.seal import Expected, Sealed, seal

WORKSPACE = "team-a"


def spec(source: dict[str, Any], kind: str = "Dataset", name: str = "gsm8k") -> Dataset | Model:
    model = Dataset if kind == "Dataset" else Model
    return model.model_validate({"kind": kind, "name": name, "cluster": "h20", **source})


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def step_for(input_spec: Dataset | Model, pin: str | None = None, run: str | None = "run-1") -> SealInputStep:
    key = version_key(input_spec, pin)
    rel = version_rel(input_spec, key)
    staged = f"{rel.rsplit('/', 1)[0]}/.incoming-{key[:12]}-{WORKSPACE}"
    adopt = input_spec.path if input_spec.source == "path" else None
    return SealInputStep(cluster="h20", address=f"{input_spec.kind.lower()}.{input_spec.name}", key=key, rel=rel,
                         staged=staged, run=None if adopt else run, adopt=adopt)


def stage(root: Path, step: SealInputStep, files: dict[str, bytes]) -> Path:
    """What a materialisation run leaves: the files in the staging dir, and the fetcher's own record."""
    staged = root / step.staged
    staged.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (staged / name).parent.mkdir(parents=True, exist_ok=True)
        (staged / name).write_bytes(data)
    (staged / ".argus-fetch.json").write_text("{}")
    return staged


def sealed(root: Path, input_spec: Dataset | Model, step: SealInputStep, expected: Expected) -> Sealed:
    return seal(str(root), input_spec, step, WORKSPACE, "abc123", "tester", expected)


def parquet(path: Path, rows: int = 3) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": ["q"] * rows, "reward_model": [{"ground_truth": "4"}] * rows}), path)
    return path.read_bytes()
