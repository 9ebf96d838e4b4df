"""Job names argus keeps for the runs that fetch or prepare Datasets and Models (`dataset--NAME`, `model--NAME`)
are refused in a user's job, and an input name too long to make one is refused at the input."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.load.loader import load_workspace
from tests.support.input_specs import workspace


def problems(tmp_path: Path, name: str, text: str) -> list[str]:
    ws = workspace(tmp_path)
    ws.write(name, text)
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    return [str(d) for d in caught.value.diagnostics]


@pytest.mark.parametrize("job", ["dataset--gsm8k", "model--qwen"])
def test_a_job_named_like_a_materialisation_is_refused_at_its_name(tmp_path: Path, job: str) -> None:
    text = f"kind: Job\nname: {job}\ncluster: h20\nworkload: command\nentrypoint: [echo, hi]\n"
    kept = job.split("--")[0]
    assert problems(tmp_path, "job.yaml", text) == [
        f"job.yaml:2: name: job name {job!r} starts with {kept}--, which argus keeps for the runs that fetch or "
        "prepare Datasets and Models; rename the job"]


def test_a_plain_job_with_dashes_is_fine(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    ws.write("job.yaml", "kind: Job\nname: dataset-prep\ncluster: h20\nworkload: command\nentrypoint: [echo]\n")
    assert "dataset-prep" in load_workspace(ws.root).jobs


def test_an_input_name_too_long_for_its_materialisation_is_refused(tmp_path: Path) -> None:
    name = "d" * 60
    text = f"kind: Dataset\nname: {name}\ncluster: h20\npath: /staging/gsm8k\n"
    [problem] = problems(tmp_path, "inputs.yaml", text)
    assert problem.startswith(f"inputs.yaml:2: name: Dataset name {name!r} is too long")
