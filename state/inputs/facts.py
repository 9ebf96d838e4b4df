"""What a sealed version's manifest says of its files, so that checks need not open them again: a parquet's
columns and rows (from its footer alone, never its data), a json/jsonl file's first record's keys (from a bounded
head), a model's config.json (when small). Read from a descriptor argus already opened without following links
(walk.py); every file is hostile: a bad footer or a garbled JSON gives no facts, never a crash, and what is kept
is bounded in count and length (the manifest is read back with a size cap).
"""

from __future__ import annotations

import json
import os
from typing import Any

PARQUET_FOOTER_LIMIT = 16 * 1024 * 1024
"""A parquet footer past this is not read (as state.verl.bounded): a data set's is KiBs to a few MiB."""
MAGIC = b"PAR1"
JSON_HEAD = 256 * 1024
CONFIG_LIMIT = 64 * 1024
"""A model's config.json is a few KiB; a bigger one is not copied into the manifest."""
MAX_NAMES, MAX_NAME = 1000, 256


def facts_of(fd: int, path: str, kind: str) -> dict[str, Any]:
    """The facts of one file (empty when it says nothing argus keeps)."""
    if path.endswith(".parquet"):
        return _parquet(fd)
    if kind == "Model" and path == "config.json":
        return _config(fd)
    if path.endswith((".json", ".jsonl")):
        return _json_keys(fd)
    return {}


def _parquet(fd: int) -> dict[str, Any]:
    size = os.fstat(fd).st_size
    tail = os.pread(fd, 8, size - 8) if size >= 12 else b""
    if len(tail) != 8 or tail[4:] != MAGIC or os.pread(fd, 4, 0) != MAGIC:
        return {}
    footer = int.from_bytes(tail[:4], "little")
    if footer > min(PARQUET_FOOTER_LIMIT, size - 12):
        return {}
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        # Only the footer's bytes are handed to pyarrow: it cannot read the data pages, however the footer lies.
        data = os.pread(fd, footer + 8, size - footer - 8)
        meta = _footer(pq, pa, data)
        return {"columns": _names(meta.schema.to_arrow_schema().names), "rows": int(meta.num_rows)}
    except Exception:  # noqa: BLE001 - pyarrow's errors on a hostile footer are many; none may stop a seal
        return {}


def _footer(pq: Any, pa: Any, data: bytes) -> Any:
    """The metadata of a parquet file made of its footer alone (PAR1 + footer + length + PAR1)."""
    return pq.read_metadata(pa.BufferReader(MAGIC + data))


def _json_keys(fd: int) -> dict[str, Any]:
    head = os.pread(fd, JSON_HEAD, 0).decode("utf-8", errors="replace").lstrip()
    at = 1 if head.startswith("[") else 0
    while at < len(head) and head[at] in " \t\r\n":
        at += 1
    try:
        record, _ = json.JSONDecoder().raw_decode(head, at)
    except (ValueError, RecursionError):
        return {}
    return {"columns": _names(list(record))} if isinstance(record, dict) else {}


def _config(fd: int) -> dict[str, Any]:
    if os.fstat(fd).st_size > CONFIG_LIMIT:
        return {}
    try:
        config = json.loads(os.pread(fd, CONFIG_LIMIT + 1, 0), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return {}
    return {"config": config} if isinstance(config, dict) else {}


def _no_constant(name: str) -> None:
    """NaN and Infinity are no JSON argus writes (its signature's canonical form refuses them)."""
    raise ValueError(f"{name} is not JSON")


def _names(names: list[Any]) -> list[str]:
    return [str(name)[:MAX_NAME] for name in names[:MAX_NAMES]]
