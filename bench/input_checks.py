"""The verl input checks of a plan: from sealed manifests (issue 40) against opening each file (issue 39).

A plan checks every verl job's data files (parquet columns) and model (config.json, a tokenizer). Before issue 40
it opened each file on the shared root each plan; a job naming a sealed Dataset or Model is checked from the
manifest instead. Both are measured in this run over the same N jobs (each naming a train and a val parquet of
many row groups, and a model), on a local disk: on NFS each open costs a round trip or more, which the manifests
save, so the ratio here is the least the manifests gain.
    .venv/bin/python bench/input_checks.py [jobs]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from state.observed import InputFile, InputManifest, InputState  # noqa: E402
from state.verl.inputs import input_findings  # noqa: E402
from state.verl.sealed import JobInputs  # noqa: E402

KEY = "ab" * 32
COLUMNS = ["prompt", "data_source", "reward_model", "extra_info", "ability"]
A = "actor_rollout_ref"


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = _write(root, jobs)
        on_disk = _best(lambda: _check_files(root, files))
        states = _sealed(jobs)
        sealed = _best(lambda: _check_manifests(root, states, jobs))
    print(f"{jobs} verl jobs (2 parquet files and a model each): input checks opening the files {on_disk * 1000:.0f} "
          f"ms, from the sealed manifests {sealed * 1000:.1f} ms: {on_disk / sealed:.0f}x less (local disk; NFS "
          "adds a round trip per open to the first only)")


def _write(root: Path, jobs: int) -> list[tuple[str, str, str]]:
    table = pa.table({c: [f"{c}-{i}" for i in range(2000)] for c in COLUMNS})
    found = []
    for i in range(jobs):
        data, model = root / "datasets" / f"d{i}", root / "models" / f"m{i}"
        data.mkdir(parents=True)
        model.mkdir(parents=True)
        for name in ("train.parquet", "test.parquet"):
            pq.write_table(table, data / name, row_group_size=200)
        (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "max_position_embeddings": 32768}))
        (model / "tokenizer_config.json").write_text("{}")
        found.append((str(data / "train.parquet"), str(data / "test.parquet"), str(model)))
    return found


def _check_files(root: Path, files: list[tuple[str, str, str]]) -> None:
    for train, val, model in files:
        assert input_findings(SimpleNamespace(workload="ppo"), _config(train, val, model), str(root)) == []


def _sealed(jobs: int) -> list[dict[str, InputState]]:
    data = {"train.parquet": {"columns": COLUMNS, "rows": 2000}, "test.parquet": {"columns": COLUMNS, "rows": 2000}}
    model = {"config.json": {"config": {"model_type": "qwen2", "max_position_embeddings": 32768}},
             "tokenizer_config.json": {}}
    return [{"dataset.d": _state("Dataset", f"d{i}", data), "model.m": _state("Model", f"m{i}", model)}
            for i in range(jobs)]


def _state(kind: str, name: str, files: dict[str, dict]) -> InputState:
    manifest = InputManifest(kind=kind, name=name, key=KEY, source={"path": "/staging"}, workspace="ws",
                             created_by="b", created_at="2026-11-28T00:00:00Z",
                             files=tuple(InputFile(path=p, size=1, sha256="0" * 64) for p in files), bytes=1,
                             digest="0" * 64, facts={p: f for p, f in files.items() if f})
    return InputState(cluster="local", key=KEY, rel=f"{kind.lower()}s/{name}/{KEY[:12]}", manifest=manifest)


def _check_manifests(root: Path, states: list[dict[str, InputState]], jobs: int) -> None:
    for i in range(jobs):
        inputs = JobInputs(states[i], str(root))
        config = _config(inputs.fill("${dataset:d}/train.parquet"), inputs.fill("${dataset:d}/test.parquet"),
                         inputs.fill("${model:m}"))
        assert input_findings(SimpleNamespace(workload="ppo"), config, str(root), inputs) == []


def _config(train: str, val: str, model: str) -> dict:
    return {"data": {"train_files": [train], "val_files": val, "max_prompt_length": 512, "max_response_length": 1024},
            A: {"model": {"path": model}, "rollout": {"name": "vllm"}}}


def _best(run, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


if __name__ == "__main__":
    main()
