"""A job's data file or model directory is anyone's: a plan reads them to find what verl would fail on, so
none may hang it (a FIFO), make it read gigabytes (a huge or sparse file), read a file outside the shared root
through a symlink (to /etc), or crash it (garbage parquet, malformed or bottomless JSON). Each test asserts the
harm never happens: bounded time, nothing outside read, no exception; and what was found is said."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from state.verl import bounded
from state.verl.inputs import input_findings
from tests.support.verl_inputs import with_keys, write_model, write_parquet

A = "actor_rollout_ref"
HUGE = 20 * 1024 ** 3
"""A 20 GiB sparse file: reading it whole would take minutes and all the memory there is."""


@pytest.fixture(autouse=True)
def bounded_time() -> Iterator[None]:
    """A plan that blocks (on a FIFO) or reads gigabytes fails the test instead of hanging it."""
    def hung(*_):
        raise TimeoutError("the plan blocked on a hostile file")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    started = time.monotonic()
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 10


def findings(shared: Path, data: list[str], model: Path, **more: str) -> list[tuple[tuple[str, ...], str, str]]:
    config = {"data": {"train_files": data, "max_prompt_length": 512, "max_response_length": 512},
              A: {"model": {"path": str(model)}, "rollout": {"name": "vllm"}}}
    return input_findings(SimpleNamespace(workload="ppo"), with_keys(config, **more), str(shared))


def sparse(path: Path, size: int, head: bytes = b"", tail: bytes = b"") -> Path:
    with path.open("wb") as file:
        file.write(head)
        file.truncate(size)
        file.seek(size - len(tail))
        file.write(tail)
    return path


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_model(tmp_path / "shared" / "model")


def test_a_fifo_never_blocks_the_plan(tmp_path: Path, model: Path):
    for name in ("train.parquet", "train.jsonl"):
        os.mkfifo(tmp_path / "shared" / name)
    os.unlink(model / "config.json")
    os.mkfifo(model / "config.json")
    found = findings(tmp_path / "shared", [str(tmp_path / "shared" / n) for n in ("train.parquet", "train.jsonl")],
                     model)
    assert sum("is not a regular file (a FIFO" in message for _, message, _ in found) == 3, found


def test_a_huge_file_is_never_read_whole(tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch):
    shared = tmp_path / "shared"
    footer = sparse(shared / "footer.parquet", HUGE, bounded.MAGIC, (0xFFFFFFF0).to_bytes(4, "little") + bounded.MAGIC)
    lines = sparse(shared / "zeros.jsonl", HUGE)
    os.unlink(model / "config.json")
    sparse(model / "config.json", HUGE, b"{")
    read: list[int] = []
    real_read = os.read
    monkeypatch.setattr(bounded.os, "read", lambda fd, n: read.append(n) or real_read(fd, n))
    found = {message for _, message, _ in findings(shared, [str(footer), str(lines)], model)}
    assert f"{footer}: has a parquet footer of {0xFFFFFFF0} bytes, more than argus reads (16 MiB) or than the file " \
           "holds" in found
    assert f"{lines}: argus read no JSON record in its first 256 KiB: verl's json reader " \
           "(datasets.load_dataset('json')) would fail on it too" in found
    assert any(f"model directory {model} config.json is larger than the 4096 KiB" in m for m in found), found
    assert sum(read) <= 256 * 1024  # the head of the jsonl file only


def test_a_symlink_out_of_the_shared_root_is_never_followed(tmp_path: Path, model: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    shared = tmp_path / "shared"
    (shared / "train.jsonl").symlink_to("/etc/passwd")
    (shared / "train.parquet").symlink_to("/etc/hostname")
    os.unlink(model / "config.json")
    (model / "config.json").symlink_to("/etc/passwd")
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(bounded.os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    found = findings(shared, [str(shared / "train.jsonl"), str(shared / "train.parquet")], model)
    assert [p for p in opened if p.startswith("/etc")] == []  # nothing outside was even opened
    symlinks = [m for _, m, severity in found if "is a symlink that leads outside the shared root" in m]
    assert len(symlinks) == 3, found
    assert "root:" not in repr(found)
    # a link that stays inside (Hugging Face's snapshot -> blob) is followed
    repo = shared / "hub" / "models--q"
    write_model(repo / "blobs")
    (repo / "snapshots" / "abc").mkdir(parents=True)
    for name in ("config.json", "tokenizer_config.json"):
        (repo / "snapshots" / "abc" / name).symlink_to(repo / "blobs" / name)
    assert findings(shared, [], repo / "snapshots" / "abc") == []


def test_garbage_and_malformed_files_are_findings_not_crashes(tmp_path: Path, model: Path):
    shared = tmp_path / "shared"
    garbage = shared / "garbage.parquet"
    garbage.write_bytes(bounded.MAGIC + os.urandom(200) + (100).to_bytes(4, "little") + bounded.MAGIC)
    text = shared / "text.parquet"
    text.write_text("x")
    bottomless = shared / "deep.json"
    bottomless.write_text("[" * 200_000)
    for name, data in (("malformed", "{not json"), ("deep", "[" * 200_000), ("list", "[1, 2]")):
        write_model(shared / name)
        (shared / name / "config.json").write_text(data)
    found = {message for _, message, _ in findings(shared, [str(garbage), str(text), str(bottomless)], model)}
    assert f"{garbage}: is not a parquet file pyarrow can read" in " ".join(found)
    assert f"{text}: is not a parquet file (no PAR1 magic): verl's parquet reader fails on it" in found
    assert f"{bottomless}: argus read no JSON record" in " ".join(found)
    for name, said in (("malformed", "is not JSON"), ("deep", "is not JSON"), ("list", "is not a JSON object")):
        [(_, message, severity)] = findings(shared, [], shared / name)
        assert said in message and severity == "error"


def test_a_valid_parquet_file_is_read_from_its_footer(tmp_path: Path, model: Path):
    data = write_parquet(tmp_path / "shared" / "ok.parquet")
    assert findings(tmp_path / "shared", [str(data)], model) == []


def test_a_file_outside_the_shared_root_is_never_opened_and_nothing_of_it_is_said(tmp_path: Path, model: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    """A pull request naming the CI runner's own files (`data.train_files=/home/u/.docker/config.json`,
    `model.path=/any/dir`) gets nothing of them into the plan's output, which CI posts to the pull request."""
    shared, home = tmp_path / "shared", tmp_path / "home"
    (home / ".docker").mkdir(parents=True)
    (home / ".docker" / "config.json").write_text('{"auths": {"registry.example": {"auth": "c2VjcmV0"}}}')
    (home / "secret.jsonl").write_text('{"auths": 1}\n')
    write_parquet(home / "secret.parquet", ("auths",))
    outside_model = write_model(home / "model", {"auths": 1})
    opened = watch_opens(monkeypatch)
    found = findings(shared, [str(home / ".docker" / "config.json"), str(home / "secret.jsonl"),
                              str(home / "secret.parquet")], outside_model)
    found += findings(shared, [], model, **{f"{A}.model.tokenizer_path": str(home / "model")})
    (home / "model" / "tokenizer_config.json").unlink()
    found += findings(shared, [f"{shared}/../home/secret.jsonl"], home / "model")
    assert [p for p in opened if p.startswith(str(home))] == []  # not one byte of them read
    assert found == [] and "auths" not in repr(found)


def test_a_model_in_a_root_named_snapshots_never_widens_where_links_may_lead(tmp_path: Path):
    """Hugging Face's snapshots/<rev> layout once widened the followed area to the model's grandparent: with a
    shared root named `snapshots` (or a model at /snapshots/x) that is the directory above the root, or /."""
    shared = tmp_path / "snapshots"
    model = write_model(shared / "x")
    secret = write_model(tmp_path / "secret", {"auths": {"registry.example": 1}})
    (model / "config.json").unlink()
    (model / "config.json").symlink_to(secret / "config.json")
    [(_, message, severity)] = findings(shared, [], model)
    assert "is a symlink that leads outside the shared root" in message and severity == "warning"
    assert "auths" not in message


def test_a_symlink_swapped_in_between_check_and_open_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The data directory is replaced by a link out of the shared root after argus resolved the file's real path
    and before it opened it: the descriptor's own path is not the one checked, so nothing of it is read."""
    shared, outside = tmp_path / "shared", tmp_path / "outside"
    model = write_model(shared / "model")
    (shared / "d").mkdir()
    (shared / "d" / "train.jsonl").write_text('{"prompt": "x"}\n')
    outside.mkdir()
    (outside / "train.jsonl").write_text('{"auths": "c2VjcmV0"}\n')
    real_open = os.open

    def swapping_open(path, *args, **kwargs):
        if str(path) == str(shared / "d" / "train.jsonl") and not (shared / "d").is_symlink():
            (shared / "d").rename(shared / "d-was")
            (shared / "d").symlink_to(outside)
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(bounded.os, "open", swapping_open)
    [(_, message, _)] = findings(shared, [str(shared / "d" / "train.jsonl")], model)
    assert "changed while argus opened it" in message and "auths" not in message


def test_hostile_column_names_are_said_few_short_and_printable(tmp_path: Path, model: Path):
    shared = tmp_path / "shared"
    names = ("\x1b[2J\x1b[31mError: all clear", "line\nError: jobs/x.yaml:1: forged", "\u202eevil", "z" * 10_000,
             *(f"c{i:04}" for i in range(2000)))
    data = write_parquet(shared / "hostile.parquet", names)
    lines = shared / "hostile.jsonl"
    lines.write_text("".join(json.dumps({name: 1}) + "\n" for name in names[:4]))
    found = findings(shared, [str(data), str(lines)], model)
    assert len(found) == 2, found
    for _, message, _ in found:
        assert message.isprintable() and "\u202e" not in message and "z" * 41 not in message
        assert len(message) < 1200, len(message)
    assert "and 1992 more" in found[0][1]


def watch_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(bounded.os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    return opened
