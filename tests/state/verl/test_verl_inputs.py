"""What is inside a verl job's data files and model directory, read before any GPU is held: the prompt (or SFT
messages) column verl's dataset reads, config.json, a tokenizer, and the model's context against the job's."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from specs.load.loader import load_workspace
from state.code.sources import resolve_source
from state.observed import SnapshotState
from state.verl.checks import check_job
from state.verl.inputs import input_findings
from tests.support.verl_inputs import with_keys, write_inputs, write_model, write_parquet
from tests.support.workspace import make_workspace

SCRIPT = Path(__file__).resolve().parent / "verl_scripts" / "grpo-fsdp-vllm.yaml"

A = "actor_rollout_ref"


def ppo(shared: Path, data: list[str], model: Path, **more) -> dict:
    config = {"data": {"train_files": data, "val_files": data[0], "max_prompt_length": 512,
                       "max_response_length": 1024},
              A: {"model": {"path": str(model)}, "rollout": {"name": "vllm"}}}
    return with_keys(config, **more)


def findings(shared: Path, config: dict, workload: str = "ppo") -> list[tuple[tuple[str, ...], str, str]]:
    return input_findings(SimpleNamespace(workload=workload), config, str(shared))


def test_a_prompt_key_that_is_no_column_of_the_data_is_an_error(tmp_path: Path):
    data = write_parquet(tmp_path / "d" / "train.parquet", ("question", "answer"))
    model = write_model(tmp_path / "m")
    [(keys, message, severity)] = findings(tmp_path, ppo(tmp_path, [str(data)], model))
    assert keys == ("data.prompt_key", "data.train_files") and severity == "error"
    assert message.startswith(f"data.prompt_key='prompt' is not a column of {data} (it has answer, question)")
    assert findings(tmp_path, ppo(tmp_path, [str(data)], model, **{"data.prompt_key": "question"})) == []
    # a custom dataset class reads what it likes
    assert findings(tmp_path, ppo(tmp_path, [str(data)], model, **{"data.custom_cls.path": "x.py"})) == []


def test_json_and_jsonl_columns_come_from_their_first_records(tmp_path: Path):
    model = write_model(tmp_path / "m")
    lines = tmp_path / "train.jsonl"
    lines.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": "hi"}], "n": i}) + "\n"
                             for i in range(3)))
    array = tmp_path / "val.json"
    array.write_text(json.dumps([{"question": "q"}] * 3))
    [(keys, message, _)] = findings(tmp_path, ppo(tmp_path, [str(lines), str(array)], model))
    assert keys == ("data.prompt_key", "data.train_files") and f"not a column of {array} (it has question)" in message


def test_sft_messages_key_is_checked(tmp_path: Path):
    data = write_parquet(tmp_path / "sft.parquet", ("conversations",))
    model = write_model(tmp_path / "m")
    config = {"data": {"train_files": str(data)}, "model": {"path": str(model)}}
    [(keys, message, _)] = findings(tmp_path, config, "sft")
    assert keys == ("data.messages_key", "data.train_files") and "'messages' is not a column" in message
    config["data"]["messages_key"] = "conversations"
    assert findings(tmp_path, config, "sft") == []


def test_a_model_directory_needs_config_json_and_a_tokenizer(tmp_path: Path):
    data = [str(write_parquet(tmp_path / "t.parquet"))]
    bare = tmp_path / "bare"
    bare.mkdir()
    [(_, message, severity)] = findings(tmp_path, ppo(tmp_path, data, bare))
    assert f"model directory {bare} has no config.json" in message and severity == "error"
    model = write_model(tmp_path / "m")
    (model / "tokenizer_config.json").unlink()
    [(_, message, _)] = findings(tmp_path, ppo(tmp_path, data, model))
    assert message.startswith(f"{model} has no tokenizer files") and "AutoTokenizer" in message
    tokenizer = write_model(tmp_path / "tok")
    assert findings(tmp_path, ppo(tmp_path, data, model, **{f"{A}.model.tokenizer_path": str(tokenizer)})) == []


def test_the_models_context_against_the_jobs_lengths(tmp_path: Path):
    data = [str(write_parquet(tmp_path / "t.parquet"))]
    short = write_model(tmp_path / "short", {"max_position_embeddings": 1024})
    [(_, message, severity)] = findings(tmp_path, ppo(tmp_path, data, short))
    assert severity == "warning" and "max_position_embeddings (1024" in message and "(512 + 1024)" in message
    tiny = write_model(tmp_path / "tiny", {"text_config": {"max_position_embeddings": 256}})
    [(_, message, severity)] = findings(tmp_path, ppo(tmp_path, data, tiny))
    assert severity == "error" and "leaves no room to generate" in message
    [(keys, message, _)] = findings(tmp_path, ppo(tmp_path, data, short, **{f"{A}.rollout.max_model_len": 4096}))
    assert keys == (f"{A}.rollout.max_model_len",) and "is above the model's max_position_embeddings (1024" in message
    none = write_model(tmp_path / "none", {"model_type": "x"})
    [(_, message, _)] = findings(tmp_path, ppo(tmp_path, data, none))
    assert "has no max_position_embeddings" in message


def test_a_value_of_an_odd_type_is_a_finding_or_skipped_never_a_crash(tmp_path: Path):
    data = [str(write_parquet(tmp_path / "t.parquet", ("prompt",)))]
    model = write_model(tmp_path / "m")
    for column, kind in ((["a", "b"], "a list"), ({"a": 1}, "a mapping"), (None, "null"), (7, "a number")):
        [(keys, message, severity)] = findings(tmp_path, ppo(tmp_path, data, model, **{"data.prompt_key": column}))
        assert keys == ("data.prompt_key",) and severity == "error"
        assert message.startswith(f"data.prompt_key must be a column name, not {kind}: "), message
    sft = {"data": {"train_files": data, "messages_key": {"x": ["y"]}}, "model": {"path": [str(model)]}}
    [(keys, message, _)] = findings(tmp_path, sft, "sft")
    assert keys == ("data.messages_key",)
    assert message.startswith("data.messages_key must be a column name, not a mapping")
    odd = {"data.max_prompt_length": True, "data.max_response_length": 2 ** 70, f"{A}.model.tokenizer_path": 7,
           f"{A}.rollout.max_model_len": "8k", f"{A}.rollout.name": ["vllm"]}
    assert findings(tmp_path, ppo(tmp_path, data, model, **odd)) == []
    assert findings(tmp_path, ppo(tmp_path, data, model, **{"data.max_prompt_length": 2 ** 70})) == []
    for path in ([str(model)], {"p": 1}, 7, f"{model}\0x"):
        assert findings(tmp_path, ppo(tmp_path, [f"{tmp_path}/t\0.parquet", *data], path)) == []
    # a model's context past int64 is no length argus compares, nor prints
    huge = write_model(tmp_path / "huge", {"max_position_embeddings": 2 ** 80})
    [(_, message, _)] = findings(tmp_path, ppo(tmp_path, data, huge))
    assert "has no max_position_embeddings (a positive whole number)" in message and str(2 ** 80) not in message


@pytest.mark.parametrize("odd", ["data.prompt_key=[question,answer]", "data.prompt_key={a: 1}"])
def test_an_odd_prompt_key_in_a_real_plan_is_an_error_at_its_line(tmp_path: Path, verl_repo: Path, odd: str,
                                                                 monkeypatch: pytest.MonkeyPatch):
    """Composed by verl 0.9.1's own Hydra config, with the data and model on the shared root and odd values
    beside it (a model path list, a tokenizer path number, lengths of no length): a finding, never a crash."""
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    ws = make_workspace(tmp_path / "ws", "verl-inputs", "http://127.0.0.1:9")
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n")
    write_inputs(ws.shared, "datasets/gsm8k/train.parquet", "models/qwen")
    write_parquet(ws.shared / "datasets/gsm8k/test.parquet")
    text = SCRIPT.read_text().replace('model: "Qwen/Qwen3-8B"', "model: ${shared_root}/models/qwen")
    lines = ["actor_rollout_ref.model.tokenizer_path=7", "data.max_response_length=true", odd]
    ws.write("jobs/odd.yaml", text + "".join(f'  - "{line}"\n' for line in lines))
    desired = load_workspace(ws.root)
    job = desired.jobs["grpo-fsdp-vllm"]
    source = resolve_source(desired.snapshots[job.code], desired.root, str(tmp_path / "cache"), 60)
    found = check_job(desired, job, SnapshotState(source=source), str(tmp_path / "cache")).diagnostics
    [said] = [d for d in found if "data.prompt_key must be a column name" in d.message]
    assert said.severity == "error" and said.message.startswith(
        f"data.prompt_key must be a column name, not {'a list' if '[' in odd else 'a mapping'}: ")
    planted = (ws.root / "jobs" / "odd.yaml").read_text().splitlines().index(f'  - "{odd}"') + 1
    assert (said.where.file, said.where.line) == ("jobs/odd.yaml", planted)
