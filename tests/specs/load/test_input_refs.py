"""`${dataset:NAME}` and `${model:NAME}` in jobs: listed for the planner, refused where they name nothing or
another cluster's input, and replaced by stand-ins or paths without touching anything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.load import after, input_refs
from specs.load.loader import load_workspace
from tests.support.input_specs import workspace

INPUTS = """
    kind: Model
    name: qwen
    cluster: h20
    path: /staging/qwen
    ---
    kind: Dataset
    name: gsm8k
    cluster: h20
    path: /staging/gsm8k
    ---
    kind: Dataset
    name: far
    cluster: a100
    path: /staging/far
    """
VERL = """
    kind: Job
    name: grpo
    cluster: h20
    code: verl
    workload: grpo
    model: ${model:qwen}
    data:
      train: ${dataset:gsm8k}/train.parquet
      val: ["${dataset:gsm8k}/test.parquet"]
    overrides: ["actor_rollout_ref.model.tokenizer_path=${model:qwen}"]
    """
COMMAND = """
    kind: Job
    name: eval
    cluster: h20
    workload: command
    entrypoint: [python, eval.py, --data, "${dataset:gsm8k}/test.parquet"]
    env: {MODEL_DIR: "${model:qwen}"}
    """


def problems(tmp_path: Path, job: str) -> list[str]:
    ws = workspace(tmp_path)
    ws.write("inputs.yaml", INPUTS)
    ws.write("job.yaml", job)
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    return [str(d) for d in caught.value.diagnostics]


def test_jobs_name_their_inputs_in_every_field_and_the_planner_can_list_them(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    ws.write("inputs.yaml", INPUTS)
    ws.write("verl.yaml", VERL)
    ws.write("command.yaml", COMMAND)
    state = load_workspace(ws.root)
    assert input_refs.inputs_of(state.jobs["grpo"]) == ["dataset.gsm8k", "model.qwen"]
    assert input_refs.inputs_of(state.jobs["eval"]) == ["dataset.gsm8k", "model.qwen"]
    paths = [path for path, text in input_refs.referenced_texts(state.jobs["grpo"]) if input_refs.references(text)]
    assert paths == ["model", "data.train", "data.val.0", "overrides.0"]


def test_a_job_without_references_waits_on_nothing(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    ws.job("plain", ["python", "x.py"], "env: {A: '${dataset'}\n")
    ws.write("jobs/plain.yaml", (ws.root / "jobs/plain.yaml").read_text().replace("local", "h20"))
    assert input_refs.inputs_of(load_workspace(ws.root).jobs["plain"]) == []


@pytest.mark.parametrize(("old", "new", "line", "field", "message"), [
    ("${model:qwen}", "${model:qwne}", 6, "model", "`${model:qwne}`: no Model named 'qwne' (known: qwen)"),
    ("${dataset:gsm8k}/train", "${dataset:gsm}/train", 8, "data.train",
     "`${dataset:gsm}`: no Dataset named 'gsm' (known: far, gsm8k)"),
    ('["${dataset:gsm8k}/test', '["${dataset:far}/test', 9, "data.val.0",
     "`${dataset:far}` lives on cluster 'a100', not on the job's 'h20': its nodes may not see that shared root; "
     "declare the Dataset on cluster 'h20' too"),
    ("tokenizer_path=${model:qwen}", "tokenizer_path=${model:Qwen}", 10, "overrides.0",
     "`${model:Qwen}` is not a reference argus knows; write `${model:NAME}`, NAME a Model's name"),
    ("}/train.parquet", "}/../../etc/passwd", 8, "data.train",
     "`${dataset:gsm8k}` is followed by '..': name a file inside the Dataset"),
])
def test_a_bad_reference_in_a_verl_job_is_refused_at_its_field(tmp_path: Path, old: str, new: str, line: int,
                                                                field: str, message: str) -> None:
    assert problems(tmp_path, VERL.replace(old, new, 1)) == [f"job.yaml:{line}: {field}: {message}"]


@pytest.mark.parametrize(("old", "new", "line", "field", "message"), [
    ("${dataset:gsm8k}/test", "${dataset:nope}/test", 5, "entrypoint.3",
     "`${dataset:nope}`: no Dataset named 'nope' (known: far, gsm8k)"),
    ("${model:qwen}", "${model:gsm8k}", 6, "env.MODEL_DIR", "`${model:gsm8k}`: no Model named 'gsm8k' (known: qwen)"),
])
def test_a_bad_reference_in_a_command_job_is_refused_at_its_field(tmp_path: Path, old: str, new: str, line: int,
                                                                   field: str, message: str) -> None:
    assert problems(tmp_path, COMMAND.replace(old, new, 1)) == [f"job.yaml:{line}: {field}: {message}"]


def test_a_reference_when_no_input_is_defined_says_none(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    ws.write("job.yaml", COMMAND)
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    assert [str(d) for d in caught.value.diagnostics] == [
        "job.yaml:5: entrypoint.3: `${dataset:gsm8k}`: no Dataset named 'gsm8k' (known: none defined)",
        "job.yaml:6: env.MODEL_DIR: `${model:qwen}`: no Model named 'qwen' (known: none defined)"]


def test_stand_ins_and_fill_replace_only_references() -> None:
    text = "data.train_files=${dataset:gsm8k}/train.parquet ${model:qwen} ${dataset:Bad} ${job:a.checkpoint_dir}"
    assert input_refs.stand_ins(text) == ("data.train_files=/argus-stand-in/datasets/gsm8k/train.parquet "
                                          "/argus-stand-in/models/qwen ${dataset:Bad} ${job:a.checkpoint_dir}")
    assert "${" not in after.stand_ins("${model:qwen}/x ${job:a.checkpoint_dir}")  # Hydra never sees either
    where = {"dataset.gsm8k": "${shared_root}/datasets/gsm8k/0123456789ab", "model.qwen": "/m"}
    assert input_refs.fill(text, where) == ("data.train_files=${shared_root}/datasets/gsm8k/0123456789ab/train.parquet"
                                            " /m ${dataset:Bad} ${job:a.checkpoint_dir}")


def test_a_reference_in_a_prepare_step_is_refused_not_passed_on_literally(tmp_path: Path) -> None:
    """A prepare step's argv is not filled (nor does it wait for the input): `${dataset:raw}` would reach the
    program as those very characters, so the loader refuses it at its field."""
    ws = workspace(tmp_path)
    ws.write("inputs.yaml", """
        kind: Dataset
        name: raw
        cluster: h20
        path: /staging/raw
        ---
        kind: Dataset
        name: prepped
        cluster: h20
        prepare:
          code: verl
          entrypoint: [python, prep.py, --in, "${dataset:raw}/train.parquet", --out, "${output}"]
          outputs: [train.parquet]
        """)
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    [problem] = [str(d) for d in caught.value.diagnostics]
    assert "prepare.entrypoint.3" in problem and "${dataset:raw}" in problem
