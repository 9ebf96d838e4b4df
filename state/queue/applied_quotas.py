"""The quotas a cluster's admin workspace applied, and whether they are the ones its audit chain vouches for.

    <shared_root>/.argus/quotas.json   {"cluster", "admin", "workspaces", "digest"}: what admission obeys

Quotas are reviewed desired state (specs.kinds.models.Quotas), applied by the cluster's `admin` workspace. The
record on the shared root is what every team's admission reads, but any Ray job can write the root: the
record counts only when its digest is the one the admin's own audit chain names last (a `quotas.applied`
record, written before the file, HMAC-chained with ARGUS_AUDIT_KEY, which no job holds). A record the chain
does not vouch for, or a vouched one that is gone or changed, is an error: nothing is admitted on the
cluster until the admin applies again. Admission never guesses a quota, nor drops one silently.

Until the admin first applies quotas, the hand-edited `.argus/quotas.yaml` of earlier versions still counts
(state.queue.quotas); the first apply moves it aside (`quotas.yaml.migrated`): it is read for migration only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from specs.errors import ArgusError
from specs.kinds.models import Quotas
from state import beneath
from state.files import write_beneath
from state.queue.quotas import QUOTA_FILE, load_quotas

RECORD = ".argus/quotas.json"
MIGRATED = QUOTA_FILE + ".migrated"
MAX_RECORD_BYTES = 256 * 1024
"""1,024 workspaces with a few resources each: the record's bound, and the cap on reading what a job plants."""
FORMAT = 1


@dataclass(frozen=True)
class Applied:
    """Quotas as the record holds them: whose, and their digest (specs.kinds.models.Quotas.digest)."""

    admin: str
    workspaces: dict[str, dict[str, float]]
    digest: str


@dataclass(frozen=True)
class Effective:
    """What admission on one cluster obeys, and why."""

    quotas: dict[str, dict[str, float]] = field(default_factory=dict)
    applied: Applied | None = None
    """The record, when the admin's chain vouches for it."""
    legacy: bool = False
    """The quotas come from the hand-edited file (no admin has applied any yet)."""


class QuotasDistrusted(ArgusError):
    """The record can't be trusted: admission on the cluster waits until the admin applies again."""


def digest_of(cluster: str, admin: str, workspaces: dict[str, dict[str, float]]) -> str:
    return Quotas(kind="Quotas", cluster=cluster, workspaces=workspaces).digest(admin)


def effective(root: str, cluster: str, admin: str | None, vouched: str | None, chain_problem: str | None) -> Effective:
    """The quotas admission obeys on `cluster`: `vouched` is the digest the admin's chain last applied (None:
    never), `chain_problem` why that chain does not verify. Raises QuotasDistrusted or QuotaFileError."""
    record = read_record(root)
    if admin is None or (vouched is None and record is None and chain_problem is None):
        if record is not None:
            raise QuotasDistrusted(f"{_where(root)} holds quotas, but cluster {cluster!r} names no `admin` whose "
                                   "audit log vouches for them; set `admin:` on the Cluster and apply its Quotas")
        return Effective(quotas=load_quotas(Path(root)), legacy=True)
    if chain_problem is not None:
        raise QuotasDistrusted(f"the audit log of workspace {admin!r}, the admin of cluster {cluster!r}, does not "
                               f"verify ({chain_problem}): nobody can tell which quotas it applied")
    if record is None or vouched is None or record.digest != vouched or record.admin != admin \
            or digest_of(cluster, record.admin, record.workspaces) != vouched:
        raise QuotasDistrusted(_mismatch(root, cluster, admin, record, vouched))
    return Effective(quotas=record.workspaces, applied=record)


def _mismatch(root: str, cluster: str, admin: str, record: Applied | None, vouched: str | None) -> str:
    if vouched is None:
        found = "quotas its audit log never applied"
    elif record is None:
        found = "no quotas, though its audit log says it applied some"
    else:
        found = f"quotas its audit log did not apply last (digest {record.digest[:12]}, expected {vouched[:12]})"
    return (f"{_where(root)} holds {found}: a job may have written or removed them (any job can write the shared "
            f"root). Nothing is admitted on cluster {cluster!r} until workspace {admin!r}, its admin, applies its "
            "Quotas again")


def read_record(root: str) -> Applied | None:
    """The record, None when there is none; QuotasDistrusted for a link, a FIFO, a huge file or bad content."""
    try:
        data = beneath.read_regular(os.path.realpath(root), RECORD, MAX_RECORD_BYTES)
    except beneath.Refused as err:
        raise QuotasDistrusted(f"{_where(root)}: {err}; argus never follows a link or waits on a FIFO on the shared "
                               "root: remove it, and the admin applies its Quotas again") from None
    except (FileNotFoundError, beneath.NotBeneath):
        return None
    if data is None:
        return None
    return _parsed(root, data)


def _parsed(root: str, data: bytes) -> Applied:
    try:
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("admin"), str) \
                or not isinstance(raw.get("digest"), str):
            raise ValueError("not a record argus wrote")
        spec = Quotas(kind="Quotas", cluster=str(raw.get("cluster")), workspaces=raw.get("workspaces"))
    except (ValueError, TypeError, RecursionError, ValidationError):
        raise QuotasDistrusted(f"{_where(root)} is not a quota record argus wrote: remove it, and the admin "
                               "applies its Quotas again") from None
    return Applied(admin=raw["admin"], workspaces={k: dict(v) for k, v in spec.workspaces.items()},
                   digest=raw["digest"])


def write_record(root: str, spec: Quotas, admin: str) -> None:
    """Replaced whole, never through a link; the hand-edited file of earlier versions is moved aside."""
    record = {"format": FORMAT, "cluster": spec.cluster, "admin": admin, "digest": spec.digest(admin),
              "workspaces": spec.workspaces}
    write_beneath(root, RECORD, json.dumps(record, indent=2, sort_keys=True) + "\n")
    _retire_legacy(root)


def _retire_legacy(root: str) -> None:
    """Read once for migration: from the admin's first apply on, `quotas.yaml` is not obeyed (renamed in place,
    beneath the root, so a link planted as `.argus` is never followed)."""
    folder, name = os.path.split(QUOTA_FILE)
    try:
        with beneath.opened_dir(os.path.realpath(root), folder) as fd:
            os.rename(name, os.path.basename(MIGRATED), src_dir_fd=fd, dst_dir_fd=fd)
    except (FileNotFoundError, beneath.NotBeneath):
        pass


def _where(root: str) -> str:
    return str(Path(root) / RECORD)
