"""What is inside a verl job's data files and model directory, read before any GPU is held: the prompt (or SFT
messages) column verl's dataset reads, config.json, a tokenizer, and the model's context against the job's."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from state.verl.inputs import input_findings
from tests.support.verl_inputs import write_model, write_parquet

A = "actor_rollout_ref"


def ppo(shared: Path, data: list[str], model: Path, **more) -> dict:
    config = {"data": {"train_files": data, "val_files": data[0], "max_prompt_length": 512,
                       "max_response_length": 1024},
              A: {"model": {"path": str(model)}, "rollout": {"name": "vllm"}}}
    for key, value in more.items():
        node = config
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return config


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
