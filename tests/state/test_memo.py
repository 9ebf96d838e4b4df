"""argus's memo (state.memo): a value is found only under the key it was kept by, and a pack that is not argus's
own, whole and signed by this user's key is never unpickled: a hostile or broken memo costs time, nothing else."""

from __future__ import annotations

import compileall
import os
import pickle
import shutil
from pathlib import Path

import pytest

from state import memo as memo_module
from state.memo import Memo, key_of

HERE = Path(__file__).resolve().parents[2]


class Planted:
    """Unpickling it writes a marker: what a forged pack would do if argus ever unpickled one."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "unpickled"))


@pytest.fixture(autouse=True)
def fresh_secret():
    memo_module._secret.cache_clear()
    yield
    memo_module._secret.cache_clear()


def kept(cache: Path, entries: dict[str, object]) -> Path:
    made = Memo(cache, "ws")
    for key, value in entries.items():
        made.put(key, value)
    made.save()
    return made._path


def test_a_value_kept_is_found_by_its_key_in_the_next_process_and_only_by_it(tmp_path: Path):
    kept(tmp_path, {key_of("a", "1"): ["one"], key_of("b"): {"two": 2}})
    again = Memo(tmp_path, "ws")
    assert again.get(key_of("a", "1")) == ["one"] and again.get(key_of("b")) == {"two": 2}
    assert again.get(key_of("a", "2")) is None and again.get(key_of("a1")) is None
    assert (again.hits, again.misses) == (2, 2)


def test_keys_of_different_parts_never_meet():
    assert key_of("ab", "c") != key_of("a", "bc") != key_of("abc")
    assert key_of("x", b"y") == key_of("x", "y")


def test_what_a_load_did_not_ask_for_is_dropped_when_saved(tmp_path: Path):
    kept(tmp_path, {"old": 1, "kept": 2})
    second = Memo(tmp_path, "ws")
    assert second.get("kept") == 2
    second.put("new", 3)
    second.save()
    third = Memo(tmp_path, "ws")
    assert (third.get("old"), third.get("kept"), third.get("new")) == (None, 2, 3)


@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty", "garbage"])
def test_a_broken_pack_is_a_miss(tmp_path: Path, damage: str):
    pack = kept(tmp_path, {"k": "v"})
    data = pack.read_bytes()
    broken = {"truncated": data[:-7], "flipped": data[:-1] + bytes([data[-1] ^ 1]), "empty": b"",
              "garbage": os.urandom(200)}[damage]
    pack.write_bytes(broken)
    assert Memo(tmp_path, "ws").get("k") is None


def test_a_forged_pack_is_never_unpickled(tmp_path: Path):
    """Whoever writes the pack without this user's key (another user, a job, a copied cache) plants nothing."""
    pack = kept(tmp_path, {"k": "v"})
    marker = tmp_path / "marker"
    payload = pickle.dumps({"k": Planted(marker)})
    pack.write_bytes(memo_module.MAGIC + b"\0" * 32 + payload)
    assert Memo(tmp_path, "ws").get("k") is None
    assert not marker.exists()


def test_a_pack_signed_by_another_key_is_never_unpickled(tmp_path: Path):
    other = tmp_path / "other"
    other.mkdir()
    marker = tmp_path / "marker"
    forged = kept(other, {"k": Planted(marker)})  # a whole, signed pack: by another cache's key
    Memo(other, "ws").get("k")
    assert marker.exists()  # the planted value is real: its own cache, whose key signed it, would run it
    marker.unlink()
    mine = kept(tmp_path, {"k": "v"})
    mine.write_bytes(forged.read_bytes())
    assert Memo(tmp_path, "ws").get("k") is None
    assert not marker.exists()


def test_a_key_others_can_read_or_a_linked_key_signs_nothing(tmp_path: Path):
    pack = kept(tmp_path, {"k": "v"})
    before = pack.read_bytes()
    key = tmp_path / memo_module.KEY_FILE
    key.chmod(0o644)
    memo_module._secret.cache_clear()
    assert Memo(tmp_path, "ws").get("k") is None
    key.unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"k" * memo_module.KEY_BYTES)
    elsewhere.chmod(0o600)
    key.symlink_to(elsewhere)
    memo_module._secret.cache_clear()
    made = Memo(tmp_path, "ws")
    made.put("other", "v")
    made.save()
    assert made.get("k") is None and pack.read_bytes() == before


def test_an_unwritable_cache_only_costs_time(tmp_path: Path):
    (tmp_path / "memo-v1").write_text("a file where the folder goes")
    made = Memo(tmp_path, "ws")
    made.put("k", "v")
    made.save()  # no error: the next load misses
    assert Memo(tmp_path, "ws").get("k") is None


def test_the_pack_and_its_key_are_private(tmp_path: Path):
    pack = kept(tmp_path, {"k": "v"})
    assert pack.stat().st_mode & 0o077 == 0
    assert (tmp_path / memo_module.KEY_FILE).stat().st_mode & 0o077 == 0


def test_a_pack_moved_to_another_argus_versions_or_workspaces_place_is_not_read(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch):
    real = memo_module.code()
    monkeypatch.setattr(memo_module, "code", lambda: "0" * 64)  # an older argus: another folder, the same key
    older = kept(tmp_path, {"k": ("an older argus's verdict", "of another shape")})
    monkeypatch.setattr(memo_module, "code", lambda: real)
    ours = Memo(tmp_path, "ws")
    ours._folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(older, ours._path)  # moved by whoever may write the folder
    assert Memo(tmp_path, "ws").get("k") is None
    other = Memo(tmp_path, "another-workspace")
    other.put("k", "the other workspace's")
    other.save()
    shutil.copyfile(other._path, ours._path)
    assert Memo(tmp_path, "ws").get("k") is None


def test_a_cache_folder_others_may_write_keeps_nothing(tmp_path: Path):
    kept(tmp_path, {"k": "v"})
    tmp_path.chmod(0o777)
    memo_module._secret.cache_clear()
    try:
        assert Memo(tmp_path, "ws").get("k") is None
    finally:
        tmp_path.chmod(0o700)


def test_an_empty_key_left_by_a_crash_is_made_again(tmp_path: Path):
    (tmp_path / memo_module.KEY_FILE).write_bytes(b"")
    (tmp_path / memo_module.KEY_FILE).chmod(0o600)
    kept(tmp_path, {"k": "v"})
    memo_module._secret.cache_clear()
    assert Memo(tmp_path, "ws").get("k") == "v"


def code_of(tree: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(memo_module, "__file__", str(tree / "state" / "memo.py"))
    memo_module.code.cache_clear()
    try:
        return memo_module.code()
    finally:
        memo_module.code.cache_clear()


def installed_copy(to: Path) -> Path:
    for floor in ("specs", "state", "reconcile"):  # copy2: the files' times kept
        shutil.copytree(HERE / floor, to / floor, ignore=shutil.ignore_patterns("__pycache__"))
    return to


def test_an_edit_that_keeps_size_and_time_is_another_argus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tree = installed_copy(tmp_path / "argus")
    before = code_of(tree, monkeypatch)
    models = tree / "specs" / "kinds" / "models.py"
    text, info = models.read_text(), models.stat()
    edited = text.replace("{0,62}", "{0,61}", 1)  # names one character shorter: a rule of the new version
    assert edited != text and len(edited) == len(text)
    models.write_text(edited)
    os.utime(models, ns=(info.st_atime_ns, info.st_mtime_ns))  # as a store or a reproducible image keeps them
    assert code_of(tree, monkeypatch) != before


def test_a_sourceless_install_of_another_version_is_another_argus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tree = installed_copy(tmp_path / "argus")
    compileall.compile_dir(tree, legacy=True, quiet=1)  # foo.pyc beside foo.py, then the sources removed
    for source in tree.rglob("*.py"):
        source.unlink()
    before = code_of(tree, monkeypatch)
    compiled = tree / "specs" / "kinds" / "models.pyc"
    compiled.write_bytes(compiled.read_bytes())  # another version's bytes, in the same place
    assert code_of(tree, monkeypatch) != before

