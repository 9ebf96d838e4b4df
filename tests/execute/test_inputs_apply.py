"""Datasets and Models end to end, on the real test cluster and a real shared root: a model from a loopback hub
mirror (tests.support.hub_mirror stands in for the intranet's HF_ENDPOINT mirror), a data set from a loopback FTP
server (pyftpdlib) and one made by a preparation command in a CodeSnapshot. Each is fetched or made by a Ray job,
sealed by argus, named by a job through `${model:...}`/`${dataset:...}`; a second workspace reuses a version
without a second download; a prune is refused while a run names a version; a new revision replaces the job."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.cluster import jobs_of, until, wait_for
from tests.support.ftp import LoopbackFtp
from tests.support.hub_mirror import FakeRepo, HubMirror
from tests.support.repos import git
from tests.support.workspace import make_workspace

MODEL_FILES = {"config.json": json.dumps({"model_type": "qwen2", "max_position_embeddings": 4096}).encode(),
               "tokenizer.json": b'{"version": "1.0"}', "model.safetensors": b"\0" * 4096}
PREP = """
import pyarrow as pa, pyarrow.parquet as pq, sys, os
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
table = pa.table({"prompt": ["1+1?", "2+2?"], "reward_model": ["2", "4"]})
pq.write_table(table, os.path.join(out, "train.parquet"))
"""


FTP_PASSWORD = "ftp-pass-9c1e7d"


def parquet_bytes(columns: dict[str, list[str]]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


@pytest.fixture
def mirror():
    hub = HubMirror()
    hub.add("tiny/qwen", MODEL_FILES)
    yield hub
    hub.close()


@pytest.fixture
def ftp(tmp_path: Path):
    served = tmp_path / "ftp"
    served.mkdir()
    data = parquet_bytes({"prompt": ["a", "b", "c"], "answer": ["x", "y", "z"]})
    (served / "gsm8k.parquet").write_bytes(data)
    server = LoopbackFtp(served, "reader", FTP_PASSWORD)
    yield server, hashlib.sha256(data).hexdigest()
    server.close()


def inputs_workspace(root: Path, name: str, address: str, shared: Path, mirror: HubMirror, ftp_url: str,
                     digest: str):
    ws = make_workspace(root, name, address, secrets=("FTP_PASSWORD",))
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {address}
        shared_root: {shared}
        job_defaults:
          entrypoint_num_cpus: 0.5
          entrypoint_resources: {{worker_node: 1}}
          env: {{HF_ENDPOINT: {mirror.endpoint}}}
        """)
    ws.write("inputs.yaml", f"""
        kind: Model
        name: qwen
        cluster: local
        hub: {{repo: tiny/qwen, revision: main}}
        ---
        kind: Dataset
        name: gsm8k
        cluster: local
        ftp: {{url: {ftp_url}/gsm8k.parquet, sha256: {digest}, user: reader, password: "${{env:FTP_PASSWORD}}"}}
        """)
    return ws


def add_prepared(ws, code_dir: Path) -> None:
    code_dir.mkdir(exist_ok=True)
    (code_dir / "prep.py").write_text(PREP)
    git(code_dir, "init", "-q")
    git(code_dir, "add", "-A")
    git(code_dir, "commit", "-qm", "prep")
    ws.write("prep.yaml", f"""
        kind: CodeSnapshot
        name: prep
        cluster: local
        path: {code_dir}
        ---
        kind: Dataset
        name: made
        cluster: local
        prepare:
          code: prep
          entrypoint: [python, prep.py, "${{output}}"]
          outputs: [train.parquet]
        """)


def reader(ws) -> None:
    ws.job("reader", ["python", "-c", "import os, sys; assert all(os.path.exists(p) for p in sys.argv[1:]); "
                      "import time; time.sleep(600)",
                      "${model:qwen}/config.json", "${dataset:gsm8k}/gsm8k.parquet", "${dataset:made}/train.parquet"])


def converge(argus, ws, address: str, job: str, other_than: str = "") -> list:
    """apply (as `argus serve --sync auto` would, turn after turn) until a run of `job` is on Ray: the inputs'
    runs end between turns, the next seals them, the one after submits the job naming them."""
    def submitted():
        applied = argus("apply", ws.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        return [j for j in jobs_of(address, ws.name) if f".{job}." in j.submission_id and j.submission_id != other_than]
    return until(submitted, f"a run of {job} in {ws.name}", timeout=300, every=3)


@pytest.fixture
def stopped_after(ray_cluster):
    """Stops what the test's workspaces left running on the shared cluster."""
    yield
    from tests.support.cluster import sdk
    for name in ("inputs-team-a", "inputs-team-b"):
        for job in jobs_of(ray_cluster.address, name):
            if job.status.value in ("PENDING", "RUNNING"):
                sdk(ray_cluster.address).stop_job(job.submission_id)


def test_inputs_fetched_prepared_sealed_named_reused_and_pruned(argus, tmp_path, mirror, ftp, ray_cluster,
                                                                  stopped_after, monkeypatch):
    server, digest = ftp
    monkeypatch.setenv("FTP_PASSWORD", FTP_PASSWORD)
    shared = tmp_path / "nfs"
    shared.mkdir()
    ws = inputs_workspace(tmp_path / "a", "inputs-team-a", ray_cluster.address, shared, mirror, server.url, digest)
    add_prepared(ws, tmp_path / "prepcode")
    reader(ws)

    first = argus("plan", ws.root)
    assert first.code == 0, first.out + first.err
    assert "model.qwen" in first.out and mirror.repos["models/tiny/qwen"].commit[:12] in first.out
    assert "job.reader" in first.out and "waits for" in first.out

    [run] = converge(argus, ws, ray_cluster.address, "reader")
    wait_for(ray_cluster.address, run.submission_id, {"RUNNING"})  # it found every file it names
    manifest = json.loads(next(shared.glob("datasets/gsm8k/*/.argus-input.json")).read_text())
    assert manifest["files"][0]["sha256"] == digest and manifest["workspace"] == "inputs-team-a"
    made = json.loads(next(shared.glob("datasets/made/*/.argus-input.json")).read_text())
    assert made["facts"]["train.parquet"]["columns"] == ["prompt", "reward_model"]
    model_dir = next(shared.glob("models/qwen/*"))
    assert (model_dir / "model.safetensors").read_bytes() == MODEL_FILES["model.safetensors"]
    assert not (model_dir / "config.json").stat().st_mode & 0o222, "a sealed version is read-only"
    record = _reader_records(shared)[run.submission_id]
    assert record["submission"]["inputs"]["dataset.gsm8k"].startswith("datasets/gsm8k/")
    audit = "\n".join(p.read_text() for p in shared.glob(".argus/audit/**/*.jsonl"))
    assert '"dataset.gsm8k"' in audit and manifest["digest"] in audit
    written = [p for p in shared.rglob("*") if p.is_file() and FTP_PASSWORD.encode() in p.read_bytes()]
    assert written == [] and FTP_PASSWORD not in first.out, "the FTP password reached a file or the plan"
    assert FTP_PASSWORD not in repr(jobs_of(ray_cluster.address, "inputs-team-a")), "... or Ray's job table"

    fetched = sum("/resolve/" in p for p in mirror.seen)
    other = inputs_workspace(tmp_path / "b", "inputs-team-b", ray_cluster.address, shared, mirror, server.url, digest)
    other.job("reader", ["python", "-c", "import os, sys, time; assert os.path.exists(sys.argv[1]); time.sleep(600)",
                         "${dataset:gsm8k}/gsm8k.parquet"])
    seen = argus("plan", other.root)
    assert seen.code == 0 and "ready: 1 files" in seen.out and "workspace inputs-team-a" in seen.out, seen.out
    [reuse] = converge(argus, other, ray_cluster.address, "reader")
    wait_for(ray_cluster.address, reuse.submission_id, {"RUNNING"})
    assert not [j for j in jobs_of(ray_cluster.address, "inputs-team-b") if "model--" in j.submission_id
                or "dataset--" in j.submission_id], "the second workspace fetched again"
    assert sum("/resolve/" in p for p in mirror.seen) == fetched

    old_model = model_dir.name
    mirror.repos["models/tiny/qwen"] = moved = FakeRepo({**MODEL_FILES, "tokenizer.json": b'{"version": "2.0"}'},
                                                       commit="d00d" + "1" * 36)
    moved.branches["main"] = moved.commit
    changed = argus("plan", ws.root)
    assert f"then replace: its model model.qwen changed ({old_model} -> " in changed.out, changed.out
    [again] = converge(argus, ws, ray_cluster.address, "reader", other_than=run.submission_id)
    wait_for(ray_cluster.address, again.submission_id, {"RUNNING"})
    assert wait_for(ray_cluster.address, run.submission_id, {"STOPPED"}) == "STOPPED"
    replaced = _reader_records(shared)[again.submission_id]
    assert replaced["submission"]["inputs"]["model.qwen"] != f"models/qwen/{old_model}"

    # team a stops naming the FTP data set; team b's running reader still reads the version team a sealed
    ws.write("inputs.yaml", (ws.root / "inputs.yaml").read_text().split("---")[0])
    ws.job("reader", ["python", "-c", "import time; time.sleep(600)", "${model:qwen}/config.json"])
    ws.remove("prep.yaml")
    gsm8k = next(shared.glob("datasets/gsm8k/*")).relative_to(shared).as_posix()
    pruned = argus("plan", ws.root, "--prune")
    assert pruned.code == 1 and f"prune refused: run {reuse.submission_id}" in pruned.out, pruned.out
    assert f"names {gsm8k}" in pruned.out and f"models/qwen/{old_model}" in pruned.out
    refused = argus("apply", ws.root, "--prune", "--auto-approve")
    assert refused.code == 1 and (shared / gsm8k / "gsm8k.parquet").is_file()
    assert (shared / "models" / "qwen" / old_model / "config.json").is_file()  # nothing of that apply ran


def _reader_records(shared: Path) -> dict[str, dict]:
    found = [json.loads(status.read_text()) for status in shared.glob("jobs/*/status.json")]
    return {record["submission_id"]: record for record in found if record.get("job") == "reader"}



GRPO = Path(__file__).resolve().parents[1] / "state" / "verl" / "verl_scripts" / "grpo-fsdp-vllm.yaml"


def test_a_verl_job_naming_sealed_inputs_is_checked_from_their_manifests(argus, tmp_path, mirror, ray_cluster,
                                                                          verl_repo, monkeypatch, stopped_after):
    """verl 0.9.1's GRPO example naming a model fetched from the mirror and a data set a prepare step made, both
    sealed by the real cluster: the plan checks the columns and the model from the manifests, and a planted wrong
    prompt_key, or a file the data set does not hold, is an error at its line."""
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    shared = tmp_path / "nfs"
    shared.mkdir()
    ws = inputs_workspace(tmp_path / "c", "inputs-team-c", ray_cluster.address, shared, mirror, "ftp://unused",
                          "0" * 64)
    ws.write("inputs.yaml", (ws.root / "inputs.yaml").read_text().split("---")[0])
    add_prepared(ws, tmp_path / "prepcode")

    def sealed():
        applied = argus("apply", ws.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        return len(list(shared.glob("*/*/*/.argus-input.json"))) == 2
    until(sealed, "model.qwen and dataset.made sealed", timeout=300, every=3)

    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n")
    text = GRPO.read_text().replace('model: "Qwen/Qwen3-8B"', "model: ${model:qwen}")

    def planned(train: str, val: str, *overrides: str):
        job = text.replace("${shared_root}/datasets/gsm8k/train.parquet", train) \
            .replace("${shared_root}/datasets/gsm8k/test.parquet", val)
        ws.write("jobs/grpo.yaml", job + "".join(f'  - "{line}"\n' for line in overrides))
        return argus("plan", ws.root)

    good = planned("${dataset:made}/train.parquet", "${dataset:made}/train.parquet")
    assert "is not a column" not in good.out and "manifest" not in good.out, good.out
    assert "${model:qwen}" not in good.out.split("job.grpo")[1].split("\n\n")[0]  # filled with the version
    wrong = planned("${dataset:made}/train.parquet", "${dataset:made}/train.parquet", "data.prompt_key=question")
    assert wrong.code == 1 and "data.prompt_key='question' is not a column of" in wrong.out, wrong.out
    assert "(it has prompt, reward_model)" in wrong.out and "jobs/grpo.yaml:" in wrong.out
    missing = planned("${dataset:made}/train.parquet", "${dataset:made}/tran.parquet")
    assert missing.code == 1, missing.out
    assert "tran.parquet is not in dataset.made's manifest (its files: train.parquet)" in missing.out
