"""An ftp:// source fetched by the node's fetcher (issue 40) from a loopback FTP server (tests/support/ftp.py):
its sha256 verified, the password taken from the job's environment and never from argv or the manifest."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from state.inputs import fetch_job
from tests.support.fetching import leftovers, run
from tests.support.ftp import LoopbackFtp

DATA = b"question,answer\n" * 500
PASSWORD = "pw" + secrets.token_hex(12)


@pytest.fixture
def ftp(tmp_path: Path) -> Iterator[LoopbackFtp]:
    served = tmp_path / "served"
    (served / "gsm8k").mkdir(parents=True)
    (served / "gsm8k" / "train.csv").write_bytes(DATA)
    server = LoopbackFtp(served, "reader", PASSWORD)
    yield server
    server.close()


def spec(ftp: LoopbackFtp, dest: Path, sha256: str) -> dict:
    return fetch_job.url_spec(f"{ftp.url}/gsm8k/train.csv", "train.csv", sha256, str(dest), max_bytes=1 << 20,
                              user="reader", password_env="FTP_PASSWORD")


def test_an_ftp_file_is_fetched_with_its_sha256(ftp: LoopbackFtp, tmp_path: Path):
    dest = tmp_path / "d" / "k1"
    planned = spec(ftp, dest, hashlib.sha256(DATA).hexdigest())
    assert PASSWORD not in fetch_job.entrypoint(planned)
    done = run(planned, env={"FTP_PASSWORD": PASSWORD})
    assert done.returncode == 0, done.stderr
    assert (dest / "train.csv").read_bytes() == DATA
    assert PASSWORD not in (dest / ".argus-fetch.json").read_text() + done.stdout + done.stderr


def test_an_ftp_file_with_a_wrong_sha256_is_refused(ftp: LoopbackFtp, tmp_path: Path):
    dest = tmp_path / "d" / "k1"
    done = run(spec(ftp, dest, "f" * 64), env={"FTP_PASSWORD": PASSWORD})
    assert done.returncode == 1 and "train.csv: sha256" in done.stderr
    assert leftovers(tmp_path / "d") == []


def test_a_wrong_password_is_a_clear_refusal(ftp: LoopbackFtp, tmp_path: Path):
    done = run(spec(ftp, tmp_path / "d" / "k1", hashlib.sha256(DATA).hexdigest()), env={"FTP_PASSWORD": "nope"})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "argus-fetch: refused: train.csv: ftp 127.0.0.1:" in done.stderr and "530" in done.stderr
    assert leftovers(tmp_path / "d") == []
