"""`argus import verl-script`: real verl launch scripts (tests/commands/verl_scripts/SOURCES.md) become Job specs
that plan without errors and compose to the config the script's own argv composes to.

The script's own argv is found independently of argus's importer: the script runs under bash with stub
`python3` and `ray` commands that write their argv to a file (these are verl's pinned scripts, not input).
What argus sets on purpose is left out of the comparison, and said here: hydra.* and
trainer.default_local_dir (argus's own run and checkpoint directories), and the paths under $HOME, which
the import moves to the shared root ($HOME/data/X -> <root>/datasets/X, any other $HOME/X -> <root>/X).
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from specs.load.loader import load_workspace
from specs.workloads import verl
from specs.workloads.submission import expand
from state.code.sources import resolve_source
from state.observed import SnapshotState
from state.verl.checks import FAKE_ID, check_job
from state.verl.compose import compose_job, dotted
from state.verl.entry import resolve_entry
from tests.support.verl_scripts import VERSIONS
from tests.support.workspace import make_workspace

SCRIPTS = Path(__file__).resolve().parent / "verl_scripts"
RECIPE = Path(__file__).resolve().parents[1] / "state" / "verl" / "verl_scripts" / "recipe"
HOME = "/home/someone"
GIVEN = ("--env", "EXPERIMENT_NAME=qwen3-8b-ppo", "--env", "DEVICE=gpu")
"""What a user passes for values the script would take from commands' output (`$(date)`, a torch_npu probe)."""
EXEMPT = ("hydra.", "trainer.default_local_dir")
# script -> (the job's name, the verl it is composed with, the config folder and name its module composes, what
# the spec must say)
CASES = {
    "run_qwen3_8b_fsdp.sh": ("ppo", "0.9.1", "verl/trainer/config", "ppo_trainer", {"workload": "ppo"}),
    # its experiment name takes `$(date ...)`: set it, as a user running it would (import refuses otherwise)
    "run_qwen3_8b_megatron.sh": ("megatron", "0.9.1", "verl/trainer/config", "ppo_trainer",
                                 {"workload": "grpo", "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}}),
    "run_dapo_qwen3_8b_base_npu.sh": ("dapo", "0.9.1", "recipe/dapo/config", "dapo_trainer",
                                      {"workload": "grpo", "entry": {"module": "recipe.dapo.main_dapo"}}),
}


@pytest.fixture(scope="module")
def recipe_repo(verl_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl with the dapo recipe beside it (as verl-recipe is checked out), tagged v<version>-recipe."""
    repo = tmp_path_factory.mktemp("verl-import") / "verl"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "advice.detachedHead=0"]
    subprocess.run(["git", "clone", "-q", str(verl_repo), str(repo)], check=True)
    for version in VERSIONS:
        subprocess.run([*git, "checkout", "-q", f"v{version}"], check=True)
        subprocess.run(["rm", "-rf", str(repo / "recipe")], check=True)
        subprocess.run(["cp", "-r", str(RECIPE), str(repo / "recipe")], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "recipe"], check=True)
        subprocess.run([*git, "tag", f"v{version}-recipe"], check=True)
    return repo


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    ws = make_workspace(tmp_path / "ws", "imports", "http://127.0.0.1:9")
    return ws


@pytest.mark.parametrize("script", sorted(CASES))
def test_a_real_script_imports_plans_and_composes_as_its_own_argv(ws, argus, recipe_repo: Path, tmp_path: Path,
                                                                  script: str):
    name, version, config_dir, config_name, expected = CASES[script]
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\n"
                          f"git: {{url: {recipe_repo}, ref: v{version}-recipe}}\n")
    done = argus("import", "verl-script", "--dir", ws.root, "--name", name, *GIVEN, SCRIPTS / script)
    assert done.code == 0, done.err
    assert "Mapped:" in done.out and f"jobs/{name}.yaml" in done.out
    desired = load_workspace(ws.root)
    job = desired.jobs[name]
    assert {k: v for k, v in job.model_dump(exclude_defaults=True).items() if k in expected} == expected

    source = resolve_source(desired.snapshots["verl"], desired.root, os.environ["ARGUS_CACHE_DIR"], 60)
    checked = check_job(desired, job, SnapshotState(source=source), os.environ["ARGUS_CACHE_DIR"], files=False)
    assert [d.text for d in checked.diagnostics if d.severity == "error"] == []

    code = _checkout(recipe_repo, version, tmp_path / "code")
    root = desired.shared_root("local")
    point = resolve_entry(code, job)
    ours = [expand(a, root, FAKE_ID) for a in verl.overrides(job, desired.workspace.name)[:-len(job.overrides) or None]]
    spec = compose_job(code / point.config_dir, point.config_name, ours + point.searchpath,
                       [expand(a, root, FAKE_ID) for a in job.overrides])
    own = compose_job(code / config_dir, config_name, point.searchpath,
                      [_on_shared_root(a, root) for a in _scripts_overrides(SCRIPTS / script, tmp_path)])
    assert spec.errors == [] and own.errors == []
    assert (point.config_dir, point.config_name) == (config_dir, config_name)
    assert _compared(spec.config) == _compared(own.config)


def test_the_script_is_never_run(ws, argus, tmp_path: Path):
    marker = tmp_path / "ran"
    script = ws.write("evil.sh", f"""
        touch {marker}
        /usr/bin/touch {marker}
        echo x > {marker}
        cd / && touch {marker}
        eval "/bin/touch {marker}"
        python3 -m verl.trainer.main_ppo data.train_files=$HOME/data/t.parquet trainer.nnodes=2 $@
        """)
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "evil", script, "x.y=1")
    assert done.code == 0, done.err
    assert not marker.exists()
    text = (ws.root / "jobs" / "evil.yaml").read_text()
    assert "train: ${shared_root}/datasets/t.parquet" in text and "- x.y=1" in text and "nnodes: 2" in text


def test_secrets_the_script_exports_are_never_written(ws, argus):
    key = "wandb-0123456789abcdef0123456789abcdef01234567"
    script = ws.write("s.sh", f"""
        export WANDB_API_KEY={key}
        export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF
        export VLLM_USE_V1=1
        python3 -m verl.trainer.main_ppo data.train_files=/d/t.parquet
        """)
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "s", script)
    text = (ws.root / "jobs" / "s.yaml").read_text()
    assert done.code == 0 and "VLLM_USE_V1" in text
    for secret in (key, "hf_abcdefghijklmnopqrstuvwxyzABCDEF"):
        assert secret not in text and secret not in done.out and secret not in done.err
    assert "WANDB_API_KEY" in done.out and "secrets:" in done.out


def test_an_existing_file_is_never_overwritten_and_a_script_without_a_launch_is_refused(ws, argus):
    script = ws.write("a.sh", "python3 -m verl.trainer.main_ppo data.train_files=/d/t.parquet\n")
    ws.write("jobs/a.yaml", "# mine\n")
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "a", script)
    assert done.code == 1 and "never overwrites" in done.err
    assert (ws.root / "jobs" / "a.yaml").read_text() == "# mine\n"
    nothing = ws.write("b.sh", "echo hello\nnvidia-smi\n")
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "b", nothing)
    assert done.code == 1 and "no verl launch found" in done.err and "nvidia-smi" in done.err
    assert not (ws.root / "jobs" / "b.yaml").exists()


def _checkout(repo: Path, version: str, to: Path) -> Path:
    data = subprocess.run(["git", "-C", str(repo), "archive", f"v{version}-recipe"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(to, filter="data")
    return to


def _scripts_overrides(script: Path, tmp: Path) -> list[str]:
    """The Hydra overrides the script passes its module, found by running it with stub launchers."""
    stubs, out = tmp / "stubs", tmp / "argv"
    stubs.mkdir(exist_ok=True)
    for launcher in ("python3", "ray"):
        (stubs / launcher).write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" > {out}\n")
        (stubs / launcher).chmod(0o755)
    subprocess.run(["bash", str(script)], cwd=tmp, check=True, capture_output=True,
                   env={"PATH": f"{stubs}:/usr/bin:/bin", "HOME": HOME, "EXPERIMENT_NAME": "qwen3-8b-ppo",
                        "DEVICE": "gpu"})
    argv = out.read_bytes().decode().split("\0")[:-1]
    argv = argv[argv.index("-m") + 2:]
    return [a for a in argv if not a.startswith("--config-")]


def _on_shared_root(override: str, root: str) -> str:
    return override.replace(f"{HOME}/data/", f"{root}/datasets/").replace(f"{HOME}/", f"{root}/")


def _compared(config: dict | None) -> dict:
    assert config is not None
    return {k: v for k, v in dotted(config).items() if not k.startswith(EXEMPT)}


def test_a_value_from_a_commands_output_is_refused_until_it_is_given(ws, argus):
    script = ws.write("d.sh", "NAME=${NAME:-run_$(date +%s)}\npython3 -m verl.trainer.main_ppo "
                              "data.train_files=/d/t.parquet trainer.experiment_name=$NAME\n")
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "d", script)
    assert done.code == 1 and "`date +%s`" in done.err and "--env NAME=VALUE" in done.err
    assert not (ws.root / "jobs" / "d.yaml").exists()
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "d", "--env", "NAME=run-1", script)
    text = (ws.root / "jobs" / "d.yaml").read_text()
    assert done.code == 0 and "experiment: run-1" in text and "env:" not in text.split("\n", 3)[3]
