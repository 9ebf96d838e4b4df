"""The applied quota record on a shared root every Ray job can write, checked against the admin's own audit
chain: real files and a real chain, no mocks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specs.kinds.models import Quotas
from state.audit import log as audit
from state.audit import registry
from state.audit.events import QuotasApplied
from state.queue.applied_quotas import MIGRATED, RECORD, QuotasDistrusted, effective, read_record, write_record
from state.queue.quotas import QUOTA_FILE

ADMIN = "platform"
CAPS = {"rl": {"GPU": 2.0}}


def applied(root: Path, caps: dict = CAPS) -> Quotas:
    """What the admin's apply does: the digest into its chain, then the record."""
    spec = Quotas(kind="Quotas", cluster="c", workspaces=caps)
    audit.append(str(root), ADMIN, QuotasApplied(cluster="c", digest=spec.digest(ADMIN), workspaces=spec.workspaces))
    write_record(str(root), spec, ADMIN)
    return spec


def obeyed(root: Path, admin: str | None = ADMIN) -> dict:
    read = registry.read(str(root), admin or ADMIN)
    return effective(str(root), "c", admin, read.quotas.get("c"), "; ".join(read.problems) or None).quotas


def refusal(root: Path, admin: str | None = ADMIN) -> str:
    with pytest.raises(QuotasDistrusted) as caught:
        obeyed(root, admin)
    return str(caught.value)


def test_the_record_the_chain_vouches_for_is_obeyed_and_the_old_file_is_retired(tmp_path: Path) -> None:
    (tmp_path / ".argus").mkdir()
    (tmp_path / QUOTA_FILE).write_text("rl: {GPU: 1}\n")
    assert obeyed(tmp_path) == {"rl": {"GPU": 1.0}}  # before the admin's first apply: the hand-edited file
    applied(tmp_path)
    assert obeyed(tmp_path) == CAPS
    assert not (tmp_path / QUOTA_FILE).exists() and (tmp_path / MIGRATED).exists()
    (tmp_path / QUOTA_FILE).write_text("rl: {GPU: 99}\n")  # planted again: never read after the first apply
    assert obeyed(tmp_path) == CAPS


def test_a_rewritten_record_with_a_matching_digest_is_refused(tmp_path: Path) -> None:
    applied(tmp_path)
    raised = {"rl": {"GPU": 8.0}}
    record = json.loads((tmp_path / RECORD).read_text())
    record.update(workspaces=raised, digest=Quotas(kind="Quotas", cluster="c", workspaces=raised).digest(ADMIN))
    (tmp_path / RECORD).write_text(json.dumps(record))
    assert "a job may have written or removed them" in refusal(tmp_path)


def test_a_removed_record_is_refused_not_taken_for_no_quotas(tmp_path: Path) -> None:
    applied(tmp_path)
    (tmp_path / RECORD).unlink()
    assert "though its audit log says it applied some" in refusal(tmp_path)


def test_a_record_the_chain_never_applied_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".argus").mkdir()
    spec = Quotas(kind="Quotas", cluster="c", workspaces={"rl": {"GPU": 8.0}})
    write_record(str(tmp_path), spec, ADMIN)  # as a job would: no chain record
    assert "quotas its audit log never applied" in refusal(tmp_path)
    assert "names no `admin`" in refusal(tmp_path, admin=None)


def test_a_later_apply_supersedes_the_earlier_one(tmp_path: Path) -> None:
    applied(tmp_path)
    applied(tmp_path, {"rl": {"GPU": 3.0}})
    assert obeyed(tmp_path) == {"rl": {"GPU": 3.0}}


@pytest.mark.parametrize("plant", ["link", "fifo", "huge", "garbage", "deep"])
def test_a_planted_record_is_refused_unread(tmp_path: Path, plant: str) -> None:
    (tmp_path / ".argus").mkdir()
    path = tmp_path / RECORD
    secret = tmp_path / "elsewhere.json"
    secret.write_text('{"format": 1}')
    if plant == "link":
        path.symlink_to(secret)
    elif plant == "fifo":
        os.mkfifo(path)  # a blocking open would hang every plan
    elif plant == "huge":
        path.write_bytes(b" " * (300 * 1024))
    elif plant == "garbage":
        path.write_text('{"format": 1, "admin": "platform", "digest": "x", "cluster": "c", "workspaces": {"rl": 3}}')
    else:
        path.write_text("[" * 100_000)
    with pytest.raises(QuotasDistrusted):
        read_record(str(tmp_path))
