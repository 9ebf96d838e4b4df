"""The loader with argus's memo (specs.load.loader, state.memo): a cold, warm, corrupted or forged memo loads the
same desired state and reports the same diagnostics; an edited file is the only one read again; a file holding
a literal secret is never kept."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.load.loader import load_workspace
from state import memo as memo_module
from state.memo import Memo

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    made = tmp_path / "cache"
    made.mkdir()
    memo_module._secret.cache_clear()
    return made


def loaded(root: Path, cache: Path) -> tuple[object, Memo]:
    memo = Memo(cache, "specs")
    try:
        found: object = load_workspace(root, memo)
    except SpecError as err:
        found = [str(d) for d in err.diagnostics]
    memo.save()
    return found, memo


def damage_every_pack(cache: Path, how: str) -> None:
    for pack in (cache / memo_module.DIRECTORY).rglob("*.pack"):
        data = pack.read_bytes()
        if how == "corrupted":
            pack.write_bytes(data[: len(data) // 2])
        else:  # forged: a well-formed pack of other resources, without this user's key
            pack.write_bytes(memo_module.MAGIC + bytes(32) + pickle.dumps({}))


@pytest.mark.parametrize("example", ["pipeline", "h20", "quickstart"])
@pytest.mark.parametrize("how", ["corrupted", "forged"])
def test_cold_warm_and_damaged_memos_load_the_same_state(example: str, how: str, cache: Path, tmp_path: Path):
    root = tmp_path / example
    shutil.copytree(EXAMPLES / example, root)
    cold, memo = loaded(root, cache)
    assert memo.hits == 0 and memo.misses > 0
    warm, memo = loaded(root, cache)
    assert memo.misses == 0 and memo.hits > 0
    assert warm == cold and repr(warm) == repr(cold)  # equal, and in the same order
    damage_every_pack(cache, how)
    again, memo = loaded(root, cache)
    assert memo.hits == 0 and again == cold and repr(again) == repr(cold)


def test_diagnostics_are_the_same_from_the_memo_and_an_edit_reads_only_its_file(cache: Path, tmp_path: Path):
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "pipeline", root)
    broken = root / "jobs" / "broken.yaml"
    broken.write_text("kind: Job\nname: broken\ncluster: nowhere\nworkload: command\nentrypoint: [true]\nbogus: 1\n")
    cold, memo = loaded(root, cache)
    assert isinstance(cold, list) and any("broken.yaml:6" in line and "unknown key" in line for line in cold)
    files = memo.misses
    warm, memo = loaded(root, cache)
    assert warm == cold and (memo.hits, memo.misses) == (files, 0)
    broken.write_text(broken.read_text().replace("bogus: 1\n", ""))
    edited, memo = loaded(root, cache)
    assert (memo.hits, memo.misses) == (files - 1, 1)
    assert any("broken.yaml:3" in line and "nowhere" in line for line in edited)
    assert not any("unknown key" in line for line in edited)


def test_a_file_holding_a_literal_secret_is_never_kept(cache: Path, tmp_path: Path):
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "pipeline", root)
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    (root / "jobs" / "leak.yaml").write_text(
        f"kind: Job\nname: leak\ncluster: local\nworkload: command\nentrypoint: [true]\nenv: {{TOKEN: {token}}}\n")
    first, _ = loaded(root, cache)
    second, memo = loaded(root, cache)
    assert isinstance(first, list) and first == second and memo.misses == 1  # the leaking file, read again
    assert not any(token.encode() in pack.read_bytes() for pack in (cache / memo_module.DIRECTORY).rglob("*.pack"))
    assert not any(token in line for line in second)
