"""A verl job naming `${dataset:NAME}` and `${model:NAME}`: composed by Hydra with the sealed version's
directory (or a stand-in before it is sealed), and checked from the version's manifest with no file opened:
columns, paths the manifest does not list, config.json's context and the tokenizer."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from specs.load.loader import load_workspace
from state.code.sources import resolve_source
from state.observed import InputState, SnapshotState
from state.verl.checks import check_job
from state.verl.files import missing_files
from state.verl.sealed import JobInputs
from tests.support.verl_inputs import KEY, sealed, with_keys, write_parquet
from tests.support.workspace import make_workspace

SCRIPT = Path(__file__).resolve().parent / "verl_scripts" / "grpo-fsdp-vllm.yaml"
A = "actor_rollout_ref"
DATA = {"train.parquet": {"columns": ["prompt", "data_source", "reward_model"], "rows": 7473},
        "test.parquet": {"columns": ["prompt", "data_source", "reward_model"], "rows": 1319}}
MODEL = {"config.json": {"config": {"model_type": "qwen2", "max_position_embeddings": 32768}},
         "tokenizer_config.json": {}, "model.safetensors": {}}


def unsealed(kind: str, name: str) -> InputState:
    return InputState(cluster="local", key=KEY, rel=f"{kind.lower()}s/{name}/{KEY[:12]}")


def states(data: dict[str, dict] = DATA, model: dict[str, dict] = MODEL) -> dict[str, InputState]:
    return {"dataset.gsm8k": sealed("Dataset", "gsm8k", data), "model.qwen": sealed("Model", "qwen", model)}


def config(inputs: JobInputs, train: str = "train.parquet", **more) -> dict:
    made = {"data": {"train_files": [inputs.fill(f"${{dataset:gsm8k}}/{train}")],
                     "val_files": inputs.fill("${dataset:gsm8k}/test.parquet"),
                     "max_prompt_length": 512, "max_response_length": 1024},
            A: {"model": {"path": inputs.fill("${model:qwen}")}, "rollout": {"name": "vllm"}}}
    return with_keys(made, **more)


def findings(root: Path, inputs: JobInputs, made: dict) -> list[tuple[tuple[str, ...], str, str]]:
    return missing_files(SimpleNamespace(workload="ppo"), made, str(root), root / "code", inputs)


def test_references_are_filled_with_the_sealed_versions_directory_else_a_stand_in(tmp_path: Path):
    inputs = JobInputs({"dataset.gsm8k": sealed("Dataset", "gsm8k", DATA), "model.qwen": unsealed("Model", "qwen")},
                       str(tmp_path))
    assert inputs.fill("data.train_files=${dataset:gsm8k}/train.parquet") == \
        f"data.train_files={tmp_path}/datasets/gsm8k/{KEY[:12]}/train.parquet"
    assert inputs.fill("${model:qwen}") == "/argus-stand-in/models/qwen"
    assert JobInputs().fill("${dataset:gsm8k}/x") == "/argus-stand-in/datasets/gsm8k/x"
    at = inputs.inside(f"{tmp_path}/datasets/gsm8k/{KEY[:12]}/train.parquet")
    assert at is not None and (at.address, at.rel) == ("dataset.gsm8k", "train.parquet") and at.holds_file()
    assert inputs.inside(f"{tmp_path}/datasets/gsm8k/{KEY[:12]}/../../x.parquet") is None
    assert inputs.inside(f"{tmp_path}/datasets/other.parquet") is None


def test_a_sealed_data_set_is_checked_from_its_manifest_with_no_file_on_disk(tmp_path: Path):
    inputs = JobInputs(states(), str(tmp_path))
    assert not (tmp_path / "datasets").exists() and not (tmp_path / "models").exists()
    assert findings(tmp_path, inputs, config(inputs)) == []
    found = findings(tmp_path, inputs, config(inputs, **{"data.prompt_key": "question"}))
    assert [(keys, severity) for keys, _, severity in found] == [
        (("data.prompt_key", "data.train_files"), "error"), (("data.prompt_key", "data.val_files"), "error")]
    train = f"{tmp_path}/datasets/gsm8k/{KEY[:12]}/train.parquet"
    assert found[0][1].startswith(f"data.prompt_key='question' is not a column of {train} "
                                  "(it has data_source, prompt, reward_model)"), found[0][1]
    # a file on disk that says otherwise is never opened: the manifest is what was sealed
    write_parquet(Path(train), ("question",)).chmod(0)
    assert findings(tmp_path, inputs, config(inputs)) == []
    # the columns said are the manifest's: another data set's columns make the same key right
    inputs = JobInputs(states(data={n: {"columns": ["question"]} for n in DATA}), str(tmp_path))
    assert findings(tmp_path, inputs, config(inputs, **{"data.prompt_key": "question"})) == []


def test_a_path_into_a_sealed_data_set_that_its_manifest_does_not_list_is_an_error(tmp_path: Path):
    inputs = JobInputs(states(), str(tmp_path))
    [(keys, message, severity)] = findings(tmp_path, inputs, config(inputs, train="tran.parquet"))
    assert keys == ("data.train_files",) and severity == "error"
    assert message == "tran.parquet is not in dataset.gsm8k's manifest (its files: train.parquet, test.parquet)"
    # the file being on disk changes nothing: the manifest is what was sealed
    stray = tmp_path / "datasets" / "gsm8k" / KEY[:12] / "tran.parquet"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"PAR1")
    assert [m for _, m, _ in findings(tmp_path, inputs, config(inputs, train="tran.parquet"))] == [message]


def test_a_sealed_models_config_and_tokenizer_come_from_its_manifest(tmp_path: Path):
    short = {**MODEL, "config.json": {"config": {"max_position_embeddings": 1024}}}
    inputs = JobInputs(states(model=short), str(tmp_path))
    [(_, message, severity)] = findings(tmp_path, inputs, config(inputs))
    assert severity == "warning" and "max_position_embeddings (1024" in message and "(512 + 1024)" in message
    [(keys, message, _)] = findings(tmp_path, inputs, config(inputs, **{f"{A}.rollout.max_model_len": 4096}))
    assert keys == (f"{A}.rollout.max_model_len",) and "above the model's max_position_embeddings (1024" in message
    bare = {"config.json": MODEL["config.json"], "model.safetensors": {}}
    inputs = JobInputs(states(model=bare), str(tmp_path))
    [(_, message, severity)] = findings(tmp_path, inputs, config(inputs))
    assert severity == "error" and message.startswith(f"{tmp_path}/models/qwen/{KEY[:12]} has no tokenizer files")
    inputs = JobInputs(states(model={"model.safetensors": {}, "vocab.json": {}}), str(tmp_path))
    [(_, message, severity)] = findings(tmp_path, inputs, config(inputs))
    assert severity == "error" and message.startswith("config.json is not in it (model.qwen's manifest)")


def test_a_tokenizer_or_model_path_into_a_sealed_model_is_read_from_its_file_list(tmp_path: Path):
    bare = {"config.json": MODEL["config.json"], "model.safetensors": {}}
    inputs = JobInputs({**states(model=bare), "model.tok": sealed("Model", "tok", {"tokenizer.json": {}})},
                       str(tmp_path))
    assert findings(tmp_path, inputs, config(inputs, **{f"{A}.model.tokenizer_path": inputs.fill("${model:tok}")})) \
        == []
    [(keys, message, severity)] = findings(tmp_path, inputs, config(
        inputs, **{f"{A}.model.path": inputs.fill("${model:qwen}/step-10")}))
    assert keys == (f"{A}.model.path",) and severity == "error"
    assert message == "step-10 is not in model.qwen's manifest (its files: config.json, model.safetensors)"


def test_an_input_not_sealed_yet_is_a_note_not_an_error(tmp_path: Path):
    for inputs in (JobInputs({"dataset.gsm8k": unsealed("Dataset", "gsm8k"), "model.qwen": unsealed("Model", "qwen")},
                             str(tmp_path)), JobInputs(shared_root=str(tmp_path))):
        found = findings(tmp_path, inputs, config(inputs, **{"data.prompt_key": "question"}))
        assert [(keys, severity) for keys, _, severity in found] == [
            (("data.train_files",), "warning"), ((f"{A}.model.path",), "warning")]
        assert found[0][1].startswith("dataset.gsm8k is not sealed yet") and "checked by the plan once" in found[0][1]


@pytest.fixture
def grpo(tmp_path: Path, verl_repo: Path, monkeypatch: pytest.MonkeyPatch):
    """verl 0.9.1's GRPO example naming a data set and a model by reference; nothing of either on disk."""
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    ws = make_workspace(tmp_path / "ws", "verl-sealed", "http://127.0.0.1:9")
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n")
    ws.write("inputs.yaml", "kind: Dataset\nname: gsm8k\ncluster: local\npath: /staging/gsm8k\n---\n"
                            "kind: Model\nname: qwen\ncluster: local\npath: /staging/qwen\n")

    def check(val: str = "test.parquet", overrides: tuple[str, ...] = (), inputs: dict | None = None):
        text = SCRIPT.read_text().replace('model: "Qwen/Qwen3-8B"', "model: ${model:qwen}") \
            .replace("${shared_root}/datasets/gsm8k/train.parquet", "${dataset:gsm8k}/train.parquet") \
            .replace("${shared_root}/datasets/gsm8k/test.parquet", f"${{dataset:gsm8k}}/{val}")
        ws.write("jobs/grpo.yaml", text + "".join(f'  - "{line}"\n' for line in overrides))
        desired = load_workspace(ws.root)
        job = desired.jobs["grpo-fsdp-vllm"]
        source = resolve_source(desired.snapshots[job.code], desired.root, str(tmp_path / "cache"), 60)
        found = check_job(desired, job, SnapshotState(source=source), str(tmp_path / "cache"),
                          inputs=states() if inputs is None else inputs)
        return found, (ws.root / "jobs" / "grpo.yaml").read_text().splitlines()
    return check


def test_a_real_plan_composes_references_and_checks_them_from_the_manifests(grpo):
    found, _ = grpo()
    assert found.profile is not None and [d for d in found.diagnostics if d.severity == "error"] == []
    found, lines = grpo(overrides=("data.prompt_key=question",))
    said, _ = [d for d in found.diagnostics if "is not a column of" in d.message]  # train and val
    assert said.severity == "error" and said.where.line == lines.index('  - "data.prompt_key=question"') + 1
    found, lines = grpo(val="tran.parquet")
    [said] = [d for d in found.diagnostics if "manifest" in d.message]
    assert said.severity == "error" and said.field == "data.val"
    assert said.message == "tran.parquet is not in dataset.gsm8k's manifest (its files: train.parquet, test.parquet)"
    assert lines[said.where.line - 1].strip().startswith("val:")


def test_a_real_plan_before_the_inputs_are_sealed_has_no_error(grpo):
    found, _ = grpo(inputs={})
    assert found.profile is not None and [d for d in found.diagnostics if d.severity == "error"] == []
    assert any(d.message.startswith("dataset.gsm8k is not sealed yet") for d in found.diagnostics)
