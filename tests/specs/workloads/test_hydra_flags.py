"""A script's Hydra flags written as overrides: said to be flags, with the `entry:` to write, where Hydra would
have read them."""

from __future__ import annotations

import pytest

from specs.errors import SpecError
from specs.load.loader import load_workspace
from specs.workloads import verl
from tests.support.workspace import make_workspace


def test_a_config_path_flag_names_the_folder_hydra_resolves_it_to():
    said = verl.hydra_flag("--config-path=config", "verl.trainer.main_ppo")
    assert said == ("is Hydra's flag, not an override: Hydra resolves a relative --config-path against the entry "
                    "module's package (verl.trainer.main_ppo is in verl/trainer/), so it names verl/trainer/config; "
                    "write `entry: {config_dir: verl/trainer/config}` (config_dir is relative to the snapshot)")
    assert "recipe/dapo/config" in verl.hydra_flag("-cp config", "recipe.dapo.main_dapo")
    assert verl.hydra_flag("--config-name='ppo_megatron_trainer'", "verl.trainer.main_ppo") == (
        "is Hydra's flag, not an override: write `entry: {config_name: ppo_megatron_trainer}`")
    assert verl.hydra_flag("trainer.config_path=config", "verl.trainer.main_ppo") is None
    assert "write `entry: {config_dir: config}`" in verl.hydra_flag("--config-path=config", "main")


def test_a_flag_in_overrides_is_refused_at_its_line_when_the_workspace_loads(tmp_path):
    ws = make_workspace(tmp_path / "ws", "team", "http://127.0.0.1:9")
    ws.write("code.yaml", "kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {url: /nowhere, ref: main}\n")
    ws.write("jobs/j.yaml", "kind: Job\nname: j\ncluster: local\ncode: verl\nworkload: ppo\nmodel: /m\n"
                            "data: {train: /d.parquet, val: /v.parquet}\noverrides:\n  - --config-path=config\n")
    with pytest.raises(SpecError) as raised:
        load_workspace(ws.root)
    assert "jobs/j.yaml:9: overrides.0: '--config-path=config' is Hydra's flag, not an override" in str(raised.value)
    assert "write `entry: {config_dir: verl/trainer/config}`" in str(raised.value)
