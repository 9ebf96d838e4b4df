"""Workspace discovery on real directory trees: what counts as a workspace, what is never entered, and which
workspaces a set of changed paths touches."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specs.errors import ArgusError
from specs.load.workspaces import affected, discover, owner, slug, slugs, workspace_name


def _workspace(path: Path, name: str = "team") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "argus.yaml").write_text(f"kind: Workspace\nname: {name}\n")
    return path


def test_discover_finds_every_workspace_nested_ones_too_sorted(tmp_path):
    for rel in ("teams/vision", "teams/nlp", "teams/nlp/sub", "infra"):
        _workspace(tmp_path / rel)
    (tmp_path / "teams" / "empty").mkdir()
    assert discover(tmp_path) == [tmp_path / rel for rel in ("infra", "teams/nlp", "teams/nlp/sub", "teams/vision")]


def test_discover_finds_the_root_itself(tmp_path):
    _workspace(tmp_path)
    assert discover(tmp_path) == [tmp_path]


def test_discover_skips_hidden_vendored_linked_and_shared_root_directories(tmp_path):
    real = _workspace(tmp_path / "teams" / "nlp")
    for rel in (".git/x", ".venv/lib", "node_modules/pkg", "teams/nlp/.shared/runs"):
        _workspace(tmp_path / rel)
    shared = tmp_path / "shared"
    (shared / ".argus").mkdir(parents=True)  # a shared root: any job may plant files there
    _workspace(shared / "planted")
    elsewhere = _workspace(tmp_path.parent / f"{tmp_path.name}-outside")
    os.symlink(elsewhere, tmp_path / "linked")
    (tmp_path / "teams" / "fake").mkdir()
    os.symlink(real / "argus.yaml", tmp_path / "teams" / "fake" / "argus.yaml")  # a linked argus.yaml is none
    assert discover(tmp_path) == [real]


def test_discover_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr("specs.load.workspaces.MAX_DIRECTORIES", 5)
    for index in range(6):
        (tmp_path / f"d{index}").mkdir()
    with pytest.raises(ArgusError, match="more than 5 directories"):
        discover(tmp_path)


def test_affected_maps_paths_to_the_deepest_workspace(tmp_path):
    nlp, sub, vision = (_workspace(tmp_path / rel) for rel in ("teams/nlp", "teams/nlp/sub", "teams/vision"))
    assert affected(tmp_path, ["teams/nlp/jobs/a.yaml"]) == [nlp]
    assert affected(tmp_path, ["teams/nlp/sub/jobs/a.yaml", "README.md", "teams/other/x"]) == [sub]
    assert affected(tmp_path, ["teams/vision/argus.yaml", "teams/nlp/x.yaml"]) == [nlp, vision]
    assert affected(tmp_path, [tmp_path / "teams/vision/jobs/b.yaml"]) == [vision]  # absolute paths too
    assert affected(tmp_path, []) == []
    assert affected(tmp_path / "teams", [tmp_path / "gone" / "argus.yaml", tmp_path / "teams" / "nlp" / "x"]) == [nlp]


def test_a_deleted_argus_yaml_leaves_its_workspace_affected_and_the_one_around_it(tmp_path):
    nlp = _workspace(tmp_path / "teams" / "nlp")
    (tmp_path / "teams" / "nlp" / "old").mkdir()  # teams/nlp/old/argus.yaml was deleted: its jobs still run
    gone = tmp_path / "teams" / "gone"  # the whole directory was deleted
    assert affected(tmp_path, ["teams/nlp/old/argus.yaml", "teams/gone/argus.yaml", "teams/gone/jobs/a.yaml"]) == [
        gone, nlp, tmp_path / "teams" / "nlp" / "old"]


def test_owner_is_the_deepest_holder(tmp_path):
    spaces = [tmp_path / "a", tmp_path / "a" / "b"]
    assert owner(spaces, tmp_path / "a" / "b" / "c.yaml") == tmp_path / "a" / "b"
    assert owner(spaces, tmp_path / "a" / "c.yaml") == tmp_path / "a"
    assert owner(spaces, tmp_path / "ab" / "c.yaml") is None  # a prefix of the name is not a parent


def test_workspace_name_reads_only_a_small_regular_argus_yaml(tmp_path):
    assert workspace_name(_workspace(tmp_path / "a", "nlp")) == "nlp"
    broken = tmp_path / "b"
    broken.mkdir()
    (broken / "argus.yaml").write_text("kind: Workspace\nname: [unclosed\n")
    assert workspace_name(broken) == ""
    big = tmp_path / "c"
    big.mkdir()
    (big / "argus.yaml").write_text("kind: Workspace\nname: big\n" + "# pad\n" * 10_000)
    assert workspace_name(big) == ""
    fifo = tmp_path / "d"
    fifo.mkdir()
    os.mkfifo(fifo / "argus.yaml")  # never waited on
    assert workspace_name(fifo) == ""
    escape = tmp_path / "e"
    escape.mkdir()
    (escape / "argus.yaml").write_text('kind: Workspace\nname: "x\\e[2J"\n')
    assert workspace_name(escape) == ""


def test_slugs_are_safe_and_unique():
    assert slug("teams/vision") == "teams-vision" and slug(".") == "root" and slug("Teams/My Team") == "teams-my-team"
    made = slugs(["teams/nlp", "teams-nlp", "teams/vision", "x/" + "y" * 80])
    assert made["teams/vision"] == "teams-vision"
    assert len(set(made.values())) == 4
    assert all(set(text) <= set("abcdefghijklmnopqrstuvwxyz0123456789-") and len(text) <= 60 for text in made.values())
    assert made["teams/nlp"].startswith("teams-nlp-") and made["teams-nlp"].startswith("teams-nlp-")


def test_a_workspace_made_by_init_is_found_although_it_holds_the_editor_schema_in_argus_dir(tmp_path):
    made = _workspace(tmp_path / "teams" / "nlp")
    (made / ".argus").mkdir()  # argus init writes .argus/argus.schema.json there
    (made / ".argus" / "argus.schema.json").write_text("{}")
    assert discover(tmp_path) == [made]
