"""Reading sealed versions back: only real directories named as argus names them, manifests that name the
directory they are in, and nothing through a link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from state.inputs.manifest import MANIFEST, Untrusted, read_version, stored_versions
from state.inputs.seal import Expected
from tests.support.sealing import sealed, sha, spec, stage, step_for

DATA = b"x,y\n1,2\n"


def seal_one(root: Path, name: str = "gsm8k") -> str:
    input_spec = spec({"url": {"url": "https://h/t.csv", "sha256": sha(DATA)}}, name=name)
    step = step_for(input_spec)
    stage(root, step, {"t.csv": DATA})
    sealed(root, input_spec, step, Expected(files={"t.csv": sha(DATA)}))
    return step.rel


def test_stored_versions_lists_sealed_datasets_and_models_only(root: Path):
    rel = seal_one(root)
    (root / "datasets" / "gsm8k" / ".incoming-aaaaaaaaaaaa-team").mkdir()
    (root / "datasets" / "Odd_Name" / "aaaaaaaaaaaa").mkdir(parents=True)
    (root / "models").mkdir()
    assert list(stored_versions(root)) == [rel]


def test_a_version_dir_or_name_dir_that_is_a_symlink_is_not_listed(root: Path, tmp_path: Path):
    rel = seal_one(root)
    os.symlink(root / rel, root / "datasets" / "gsm8k" / "bbbbbbbbbbbb")
    os.symlink(root / "datasets" / "gsm8k", root / "datasets" / "alias")
    assert list(stored_versions(root)) == [rel]
    with pytest.raises(Untrusted):
        read_version(root, "datasets/alias/" + rel[-12:])


def test_a_manifest_naming_another_version_is_refused(root: Path):
    rel = seal_one(root)
    body = json.loads((root / rel / MANIFEST).read_text())
    other = root / "datasets" / "other" / rel[-12:]
    other.mkdir(parents=True)
    (other / MANIFEST).write_text(json.dumps(body))
    with pytest.raises(Untrusted, match="not the one it is in"):
        read_version(root, f"datasets/other/{rel[-12:]}")


def test_no_manifest_is_none_and_garbage_is_untrusted(root: Path):
    (root / "datasets" / "x" / "aaaaaaaaaaaa").mkdir(parents=True)
    assert read_version(root, "datasets/x/aaaaaaaaaaaa") is None
    (root / "datasets" / "x" / "aaaaaaaaaaaa" / MANIFEST).write_text("{not json")
    with pytest.raises(Untrusted, match="not a manifest argus wrote"):
        read_version(root, "datasets/x/aaaaaaaaaaaa")


@pytest.mark.parametrize("field", ["workspace", "commit", "created_by", "created_at"])
def test_a_manifest_a_job_wrote_with_terminal_escapes_is_never_trusted(root: Path, field: str):
    """Without ARGUS_ROOT_KEY a job can write a version's manifest; its text reaches the plan's lines ("ready: ...
    (workspace W, commit C)") and `argus usage --inputs` unescaped, so one carrying escape sequences (clear the
    screen, rewrite a line of the plan under review) is not argus's."""
    rel = seal_one(root)
    path = root / rel / MANIFEST
    body = json.loads(path.read_text())
    body[field] = "team\x1b[2J\x1b[1A+ all in sync"
    os.chmod(root / rel, 0o755)
    path.unlink()
    path.write_text(json.dumps(body))
    with pytest.raises(Untrusted):
        read_version(root, rel)
    assert stored_versions(root) == {}
