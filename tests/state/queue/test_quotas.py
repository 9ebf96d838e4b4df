"""The platform's quota file is read from a shared root every Ray job can write: real files, no mocks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specs.errors import ArgusError
from state.queue.quotas import MAX_QUOTA_BYTES, QUOTA_FILE, QuotaFileError, load_quotas

EXAMPLE = """\
# GPUs and other Ray resources each workspace may hold at once on this cluster
llm-rl: {GPU: 8}
vision:
  GPU: 4
  CPU: 64
"""


def write(root: Path, text: str | bytes) -> Path:
    path = root / QUOTA_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def refusal(root: Path) -> str:
    with pytest.raises(QuotaFileError) as caught:
        load_quotas(root)
    return str(caught.value)


def test_valid_file_loads_as_floats(tmp_path: Path) -> None:
    write(tmp_path, EXAMPLE + "tiny:\n  memory: 1.5e9\n  accel_v1: 0.5\nidle: {}\n")
    quotas = load_quotas(tmp_path)
    assert quotas == {"llm-rl": {"GPU": 8.0}, "vision": {"GPU": 4.0, "CPU": 64.0},
                      "tiny": {"memory": 1.5e9, "accel_v1": 0.5}, "idle": {}}
    assert all(type(amount) is float for limits in quotas.values() for amount in limits.values())


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n", "~\n"])
def test_empty_file_means_no_quotas(tmp_path: Path, text: str) -> None:
    write(tmp_path, text)
    assert load_quotas(tmp_path) == {}


def test_missing_file_dir_or_root_means_no_quotas(tmp_path: Path) -> None:
    assert load_quotas(tmp_path) == {}
    (tmp_path / ".argus").mkdir()
    assert load_quotas(tmp_path) == {}
    assert load_quotas(tmp_path / "not-mounted") == {}


def test_a_symlinked_shared_root_is_the_operators_setting(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    write(real, EXAMPLE)
    (tmp_path / "mnt").symlink_to(real)
    assert load_quotas(tmp_path / "mnt")["llm-rl"] == {"GPU": 8.0}


BAD = [
    pytest.param("# c\nllm-rl:\n  GPU: 8\n  CPU: eight\n", 4, "CPU of workspace llm-rl must be a number >= 0, "
                 "got 'eight'; fix the platform's quota file", id="word"),
    pytest.param("a:\n  CPU: 1\n  GPU: true\n", 3, "GPU of workspace a must be a number >= 0, got True", id="bool"),
    pytest.param("a:\n  GPU: &n true\n", 2, "got True", id="anchored-bool-is-no-int"),
    pytest.param("a:\n  CPU: 1\n  GPU: -1\n", 3, "GPU of workspace a must be a number >= 0, got -1", id="negative"),
    pytest.param("a:\n  GPU: -0.5\n", 2, "got -0.5", id="negative-float"),
    pytest.param('a:\n  GPU: "8"\n', 2, "got '8'", id="quoted-number"),
    pytest.param("a:\n  GPU: !!str 8\n", 2, "got '8'", id="tagged-string"),
    pytest.param("a:\n  GPU: .nan\n", 2, "must be a finite number", id="nan"),
    pytest.param("a:\n  GPU: .inf\n", 2, "must be a finite number", id="inf"),
    pytest.param("a:\n  GPU: 1e400\n", 2, "must be a finite number", id="overflowing-float"),
    pytest.param("a:\n  GPU: 9007199254740992\n", 2, "below 9007199254740992", id="max-count"),
    pytest.param("a:\n  GPU: [8]\n", 2, "got [8]", id="list-amount"),
    pytest.param("a:\n  GPU:\n", 2, "got None", id="no-amount"),
    pytest.param("ok: {GPU: 1}\nLLM_RL: {GPU: 1}\n", 2, "invalid workspace name 'LLM_RL'", id="bad-name"),
    pytest.param('ok: {GPU: 1}\n"llm\\n": {GPU: 1}\n', 2, "invalid workspace name 'llm\\n'", id="name-newline"),
    pytest.param("ok: {}\n12: {GPU: 1}\n", 2, "invalid workspace name 12", id="int-name"),
    pytest.param("ok: {}\n" + "a" * 64 + ": {GPU: 1}\n", 2, "invalid workspace name", id="long-name"),
    pytest.param("ok: {}\nllm-rl: 8\n", 2, "workspace llm-rl must map Ray resource names to amounts", id="flat"),
    pytest.param("ok: {}\nllm-rl:\n", 2, "got None", id="empty-workspace"),
    pytest.param("ok: {}\nllm-rl:\n  - GPU: 8\n", 2, "must map Ray resource names", id="list-workspace"),
    pytest.param('a:\n  CPU: 1\n  "": 1\n', 3, "resource name '' of workspace a", id="empty-resource"),
    pytest.param("a:\n  CPU: 1\n  " + "G" * 65 + ": 1\n", 3, "1 to 64 characters", id="long-resource"),
    pytest.param('a:\n  "G\\tPU": 1\n', 2, "resource name 'G\\tPU'", id="control-resource"),
    pytest.param('a:\n  "G\\e[2JPU": 1\n', 2, "resource name 'G\\x1b[2JPU'", id="escape-resource"),
    pytest.param("a:\n  1: 2\n", 2, "resource name 1 of workspace a", id="int-resource"),
    pytest.param("a: {GPU: 1}\nb: {}\na: {GPU: 2}\n", 3, 'duplicate key "a"', id="duplicate-workspace"),
    pytest.param("a:\n  GPU: 1\n  CPU: 2\n  GPU: 3\n", 4, 'duplicate key "GPU"', id="duplicate-resource"),
    pytest.param("a: &q {GPU: 1}\nb: *q\n", 2, "aliases (*q) are not allowed", id="alias"),
    pytest.param("a: {GPU: 1}\nb:\n  <<: *q\n", 3, "aliases", id="merge-key"),
    pytest.param("a: !!python/object/apply:os.system [ls]\n", 1, "YAML tags", id="python-tag"),
    pytest.param("a:\n  GPU: !gpus 8\n", 2, "YAML tags (!gpus)", id="custom-tag"),
    pytest.param("a: {GPU: 1}\nb: " + "[" * 60 + "]" * 60 + "\n", 2, "nested more than 50", id="deep"),
    pytest.param("a: {GPU: 1}\nb: {GPU: 1", 2, "invalid YAML", id="unclosed-no-newline-at-end"),
    pytest.param("a: {GPU: 1}\nb: [\n\n\n", 2, "invalid YAML", id="unclosed-then-blank-lines"),
    pytest.param("a: {GPU: 1}\nb: \x07\n", 2, "unacceptable character #x0007", id="control-char"),
    pytest.param("a: {GPU: 1}\n---\nb: {GPU: 1}\n", 3, "a second YAML document", id="two-documents"),
    pytest.param("\n- a\n", 2, "must map workspace names to resources", id="list"),
    pytest.param("GPU 8\n", 1, "got 'GPU 8'", id="scalar"),
]


@pytest.mark.parametrize(("text", "line", "words"), BAD)
def test_each_bad_input_is_refused_at_its_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    write(tmp_path, text)
    message = refusal(tmp_path)
    assert f"{tmp_path / QUOTA_FILE}:{line}: " in message
    assert words in message
    assert message.endswith("; fix the platform's quota file")


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    write(tmp_path, "BAD: {GPU: 1}\nok:\n  GPU: -1\n  CPU: 2\n  X: eight\nbad_too: {}\n")
    message = refusal(tmp_path)
    assert message.startswith(f"{tmp_path / QUOTA_FILE} has 4 problems; fix the platform's quota file:\n")
    assert [line.split(": ")[0].rsplit(":", 1)[1] for line in message.splitlines()[1:]] == ["1", "3", "5", "6"]


def test_the_error_is_an_argus_error(tmp_path: Path) -> None:
    write(tmp_path, "a: {GPU: x}\n")
    with pytest.raises(ArgusError):
        load_quotas(tmp_path)


def test_bad_values_are_echoed_short_and_on_one_line(tmp_path: Path) -> None:
    write(tmp_path, f'a:\n  GPU: "{"x" * 1000}\\n\\e]0;owned\\a"\n  {"y" * 1000}: 1\nb: {{"{"z" * 500}": 1}}\n')
    message = refusal(tmp_path)
    assert "x" * 81 not in message and "y" * 81 not in message and "z" * 81 not in message
    assert all(line.isprintable() for line in message.splitlines())
    assert len(message.splitlines()) == 4


def test_duplicate_key_with_long_values_is_clipped(tmp_path: Path) -> None:
    write(tmp_path, f"a: {{GPU: 1}}\nb: {'v' * 5000}\nb: 2\n")
    message = refusal(tmp_path)
    assert ":3: invalid YAML: found duplicate key" in message
    assert len(message) < len(str(tmp_path)) + 250


def test_symlinked_file_is_refused_and_its_target_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere.yaml"
    secret.write_text("llm-rl: {GPU: 1000}  # not-for-argus\n")
    (tmp_path / "root" / ".argus").mkdir(parents=True)
    (tmp_path / "root" / QUOTA_FILE).symlink_to(secret)
    message = refusal(tmp_path / "root")
    assert message == (f"{tmp_path / 'root' / QUOTA_FILE}: the file is a symlink, and argus never follows a symlink "
                       "on the shared root (every Ray job can write it); fix the platform's quota file")
    assert "not-for-argus" not in message and "1000" not in message


def test_dangling_symlink_is_refused_not_taken_for_missing(tmp_path: Path) -> None:
    (tmp_path / ".argus").mkdir()
    (tmp_path / QUOTA_FILE).symlink_to(tmp_path / "nowhere.yaml")
    assert "is a symlink" in refusal(tmp_path)


def test_symlinked_argus_dir_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, EXAMPLE)
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / ".argus").symlink_to(elsewhere / ".argus")
    message = refusal(tmp_path / "root")
    assert message.startswith(f"{tmp_path / 'root' / QUOTA_FILE}: .argus is a symlink or not a directory")
    assert "llm-rl" not in message


def test_argus_as_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".argus").write_text("llm-rl: {GPU: 1}\n")
    assert ".argus is a symlink or not a directory" in refusal(tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_not_a_regular_file_is_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    (tmp_path / ".argus").mkdir()
    if kind == "fifo":
        os.mkfifo(tmp_path / QUOTA_FILE)  # opened blocking, this would hang until a writer came
    else:
        (tmp_path / QUOTA_FILE).mkdir()
    assert refusal(tmp_path).endswith(f"{QUOTA_FILE}: not a regular file; fix the platform's quota file")


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "#" * MAX_QUOTA_BYTES + "\nllm-rl: {GPU: 8}\n")
    assert "larger than 64 KiB" in refusal(tmp_path)


def test_a_file_at_the_cap_loads(tmp_path: Path) -> None:
    line = "llm-rl: {GPU: 8}\n"
    write(tmp_path, "#" * (MAX_QUOTA_BYTES - len(line) - 1) + "\n" + line)
    assert (tmp_path / QUOTA_FILE).stat().st_size == MAX_QUOTA_BYTES
    assert load_quotas(tmp_path) == {"llm-rl": {"GPU": 8.0}}


def test_not_utf8_is_refused_at_its_line(tmp_path: Path) -> None:
    write(tmp_path, b"a: {GPU: 1}\nb: {GPU: \xff}\n")
    assert f"{QUOTA_FILE}:2: not UTF-8 text (byte 21)" in refusal(tmp_path)
