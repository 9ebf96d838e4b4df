"""check-jsonschema reads one document per YAML file: `argus schema --split` makes one JSON file per document,
and check-jsonschema (run for real, as a user would) then checks a multi-document spec file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"
JOBS = textwrap.dedent("""\
    # yaml-language-server: $schema=../schema/argus.schema.json
    kind: Job
    name: good
    cluster: h20
    workload: command
    entrypoint: [python3, train.py]
    ---
    kind: Job
    name: bad
    cluster: h20
    workload: command
    env: {WANDB_API_KEY: literal-value}
    """)


def check(*files: Path, schema: str = "argus.schema.json") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CHECK_JSONSCHEMA), "--schemafile", str(ROOT / "schema" / schema), *map(str, files)],
                          capture_output=True, text=True, timeout=120)


def test_each_document_is_checked_by_check_jsonschema(tmp_path, argus, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.yaml").write_text(JOBS)
    assert "expected a single document" in check(tmp_path / "jobs" / "train.yaml").stdout  # why --split exists

    split = argus("schema", "--split", "jobs/train.yaml", "--out", "split")
    assert split.code == 0, split.err
    good, bad = (tmp_path / "split" / "jobs" / f"train.yaml.line{n}.json" for n in (2, 8))
    assert split.out.split() == ["split/jobs/train.yaml.line2.json", "split/jobs/train.yaml.line8.json"]
    assert json.loads(good.read_text())["name"] == "good"

    assert check(good).returncode == 0
    assert check(good, schema="job.schema.json").returncode == 0
    refused = check(good, bad)
    assert refused.returncode == 1
    problems = [line for line in refused.stdout.splitlines() if "train.yaml.line" in line]
    assert all("line8.json" in line for line in problems) and len(problems) == 2, refused.stdout
    assert any("'entrypoint' is a required property" in line for line in problems)
    assert any("$.env.WANDB_API_KEY" in line for line in problems)


def test_a_hostile_file_is_refused_and_nothing_is_written(tmp_path, argus, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.yaml").write_text("kind: Workspace\nname: t\n")
    (tmp_path / "aliases.yaml").write_text("kind: Workspace\nname: &n t\ndescription: *n\n")
    os.mkfifo(tmp_path / "fifo.yaml")  # reading it would block forever
    (tmp_path / "huge.yaml").write_text("kind: Workspace\nname: t\ndescription: " + "x" * 40_000 + "\n")
    for hostile, said in (("aliases.yaml", "aliases.yaml:3: YAML aliases"), ("fifo.yaml", "not a regular file"),
                          ("huge.yaml", "larger than 32 KiB")):
        refused = argus("schema", "--split", "good.yaml", "--split", hostile, "--out", "split")
        assert refused.code == 1 and said in refused.err, refused.err
        assert not (tmp_path / "split").exists()


def test_split_needs_an_output_directory(tmp_path, argus):
    (tmp_path / "a.yaml").write_text("kind: Workspace\nname: t\n")
    refused = argus("schema", "--split", tmp_path / "a.yaml")
    assert refused.code == 1 and "--split needs --out DIR" in refused.err
