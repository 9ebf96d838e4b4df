"""`argus init` gives runs the HF_HOME on the shared root where argus looks for hub models."""

from __future__ import annotations

from pathlib import Path

from specs.kinds.models import Job
from specs.load.loader import load_workspace
from specs.workloads.submission import expand, resolve
from state.verl import files


def test_init_sets_hf_home_where_the_model_check_looks(tmp_path: Path, argus):
    assert argus("init", tmp_path / "team", "--no-ci").code == 0
    desired = load_workspace(tmp_path / "team")
    root = desired.shared_root("local")
    job = Job(kind="Job", name="j", cluster="local", code="v", workload="sft", model="Qwen/Qwen3-8B",
              data={"train": "/d"})
    env = resolve(desired.workspace, desired.cluster_of(job), job).env_vars
    assert expand(env["HF_HOME"], root) == f"{root}/hf"
    # where the check looks is where the run will: cached there, no warning
    [(_, said, _)] = files._model("model.path", "Qwen/Qwen3-8B", root)
    assert "`env: {HF_HOME: ${shared_root}/hf}`" in said
    (Path(root) / "hf" / "hub" / "models--Qwen--Qwen3-8B").mkdir(parents=True)
    assert files._model("model.path", "Qwen/Qwen3-8B", root) == []
