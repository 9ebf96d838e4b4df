"""The data file and model directory a verl job names, as small as verl would accept them: a parquet file
with the columns verl's datasets read, a model directory with config.json and a tokenizer file. argus reads
their columns, config and tokenizer before a plan may submit (state/verl/inputs.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from state.observed import InputFile, InputManifest, InputState

MODEL_CONFIG = {"model_type": "qwen2", "max_position_embeddings": 32768}
TOKENIZER = "tokenizer_config.json"


def write_parquet(path: Path, columns: tuple[str, ...] = ("prompt", "data_source", "reward_model")) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({name: ["x"] for name in columns}), path)
    return path


def write_model(model: Path, config: dict | None = None) -> Path:
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps(MODEL_CONFIG if config is None else config))
    (model / TOKENIZER).write_text("{}")
    return model


def write_inputs(shared: Path, data: str, model: str) -> None:
    """`data` (a .parquet path) and `model` (a directory), relative to the shared root."""
    write_parquet(shared / data)
    write_model(shared / model)


def with_keys(config: dict[str, Any], **keys: Any) -> dict[str, Any]:
    """`config` with each dotted key (`rollout.n_gpus_per_node`) set, as a composed verl config holds it."""
    for key, value in keys.items():
        node = config
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return config


KEY = "ab12" * 16
"""The version key of every sealed input these builders make."""


def manifest(kind: str, name: str, files: dict[str, dict]) -> InputManifest:
    """A sealed version's manifest listing `files`, with the facts each maps to (columns, a model's config)."""
    return InputManifest(kind=kind, name=name, key=KEY, source={"path": f"/staging/{name}"}, workspace="ws",
                         created_by="t", created_at="2026-11-28T00:00:00Z",
                         files=tuple(InputFile(path=p, size=1, sha256="0" * 64) for p in files),
                         bytes=len(files), digest="0" * 64, facts={p: f for p, f in files.items() if f})


def sealed(kind: str, name: str, files: dict[str, dict]) -> InputState:
    """An input as observation finds it once sealed on the cluster `local`."""
    rel = f"{kind.lower()}s/{name}/{KEY[:12]}"
    return InputState(cluster="local", key=KEY, rel=rel, manifest=manifest(kind, name, files))

