"""ARGUS_ROOT_KEY: the key that signs what argus writes on the shared root and later decides by.

Any Ray job can write the shared root, so a file there proves nothing by being there. The entries
argus trusts for a decision -- the admission ledgers' entries (state.queue.ledger), the serve lease
(state.queue.lease), the notifier's sent events and try counts (state.queue.sent_events) -- carry an HMAC-SHA256
over a canonical JSON of their fields and of the place they belong to (`kind`, and a `scope` such as
the workspace whose ledger holds the entry): an entry is not valid in another workspace's file, and
every signed entry holds a time, so a replayed old one lives no longer than the TTL it already had.

The key is held by argus processes (every workspace and serve replica sharing a root) and by no job:
Ray nodes are started without it (state.ray.local strips it), and it is never printed or written. It is
read from the environment where it is used, as ARGUS_AUDIT_KEY is (state.audit.log).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any

KEY_VARIABLE = "ARGUS_ROOT_KEY"
AUDIT_KEY_VARIABLE = "ARGUS_AUDIT_KEY"
"""The audit chain's key (state.audit.log reads it)."""
KEY_VARIABLES = (KEY_VARIABLE, "ARGUS_PLAN_KEY", AUDIT_KEY_VARIABLE)
"""Every key argus holds and jobs must not: a Ray node (and every job it runs) is started without them."""
SIGNATURE_LENGTH = 64


def root_key() -> bytes | None:
    value = os.environ.get(KEY_VARIABLE)
    return value.encode() if value else None


def keyed() -> bool:
    return root_key() is not None


def sign(kind: str, scope: str, fields: Mapping[str, Any]) -> str | None:
    """The HMAC (hex) of `fields` as a `kind` entry of `scope`; None without a key."""
    key = root_key()
    return None if key is None else _mac(key, kind, scope, fields)


def verify(kind: str, scope: str, fields: Mapping[str, Any], signature: object) -> bool:
    """True only with a key set and `signature` the HMAC of exactly these fields, kind and scope."""
    key = root_key()
    if key is None or not isinstance(signature, str) or len(signature) != SIGNATURE_LENGTH:
        return False
    try:
        expected = _mac(key, kind, scope, fields)
    except (TypeError, ValueError, RecursionError):  # not JSON argus could have written
        return False
    return hmac.compare_digest(expected, signature)


def without_keys(env: Mapping[str, str]) -> dict[str, str]:
    """`env` less every argus key: what a process that runs jobs (a Ray node) may inherit."""
    return {name: value for name, value in env.items() if name not in KEY_VARIABLES}


def _mac(key: bytes, kind: str, scope: str, fields: Mapping[str, Any]) -> str:
    canonical = json.dumps({"kind": kind, "scope": scope, "fields": fields}, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=True, allow_nan=False)
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()
