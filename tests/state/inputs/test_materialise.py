"""InputState.fetch as observation builds it: run as Ray runs it, it fetches the version into the workspace's
staging directory under the shared root, every digest checked (the loopback mirror serves the repository)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from specs.kinds.inputs import Model, version_key
from state.inputs.hub import hub_repo, list_files, resolve_revision
from state.inputs.materialise import fetch_command, file_name
from tests.support.hub_mirror import HubMirror

FILES = {"config.json": b'{"architectures": ["X"]}', "weights.bin": bytes(range(256)) * 8}


def shell(command: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(command, shell=True, cwd="/", env=clean, capture_output=True, text=True, timeout=60)


def test_a_hub_models_fetch_lands_in_the_workspaces_staging_directory(tmp_path: Path):
    mirror = HubMirror()
    try:
        mirror.add("acme/tiny", FILES)
        spec = Model(kind="Model", name="tiny", cluster="c", hub={"repo": "acme/tiny", "revision": "main"})
        hub = hub_repo(mirror.endpoint, "acme/tiny")
        commit = resolve_revision(hub, "main")
        key = version_key(spec, commit)
        command = fetch_command(spec, str(tmp_path), "team", key, endpoint=mirror.endpoint, commit=commit,
                                listing=list_files(hub, commit), python=sys.executable)
        done = shell(command)
    finally:
        mirror.close()
    assert done.returncode == 0, done.stderr
    staged = tmp_path / "models" / "tiny" / f".incoming-{key[:12]}-team"
    assert {p: hashlib.sha256((staged / p).read_bytes()).digest() for p in FILES} == \
        {p: hashlib.sha256(d).digest() for p, d in FILES.items()}


def test_nothing_is_built_without_what_pins_a_hub_version():
    spec = Model(kind="Model", name="tiny", cluster="c", hub={"repo": "acme/tiny", "revision": "main"})
    assert fetch_command(spec, "/shared", "team", "a" * 64, endpoint="http://hub.test", commit="c" * 40) is None


def test_a_urls_file_keeps_a_plain_name_only():
    assert file_name("https://h.test/d/train.parquet?x=1") == "train.parquet"
    assert file_name("https://h.test/d/..") == "data" and file_name("https://h.test/") == "data"
    assert file_name("ftp://h.test/a%00b") == "data" and file_name("ftp://h.test/x/.hidden") == "data"
