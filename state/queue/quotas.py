"""The platform's quotas on a cluster: how much of each Ray resource each workspace may hold at once.

    <shared_root>/.argus/quotas.yaml      llm-rl: {GPU: 8}

The platform team writes the file, but every Ray job on the cluster can write the shared root: the
file, or the `.argus` directory above it, may be a planted symlink, a FIFO, a huge file or YAML
built to hurt the parser. So it is opened beneath the root without following symlinks, read within
a cap, parsed by specs.parse.safe_yaml, and every key and value is checked here. Any problem is an error
naming file:line: admission must never guess a quota, nor drop one silently.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.scalarbool import ScalarBoolean

from specs.diagnostics import printable
from specs.errors import ArgusError
from specs.kinds.models import MAX_COUNT, NAME_PATTERN
from specs.parse.nodes import child_line, node_line, plain
from specs.parse.safe_yaml import Refused, load_documents
from state import beneath
from state.beneath import NotBeneath, opened_dir

QUOTA_FILE = ".argus/quotas.yaml"
MAX_QUOTA_BYTES = 64 * 1024
"""A quota file is a few lines; the cap bounds reading and parsing whatever a job plants there."""
MAX_RESOURCE_NAME = 64
MAX_SHOWN = 80
"""Characters of a bad value echoed in a message: enough to recognise it, never a flood."""
YAML_SHOWN = MAX_SHOWN + 60
"""A parser's message: its own words around the bad text (a tag, a duplicate key and its values)."""
HINT = "fix the platform's quota file"
"""O_NONBLOCK: a FIFO planted as the file is refused after fstat instead of blocking the open."""

Quotas = dict[str, dict[str, float]]
Problem = tuple[int | None, str]
"""A line of the file (None: the file as a whole) and what is wrong there."""


class QuotaFileError(ArgusError):
    """The quota file exists but cannot be trusted; carries every problem found, not just the first."""

    def __init__(self, path: Path, problems: list[Problem]):
        self.path = path
        self.problems = sorted(problems, key=lambda problem: problem[0] or 0)
        where = printable(str(path))
        lines = [f"{where}:{line}: {text}" if line else f"{where}: {text}" for line, text in self.problems]
        if len(lines) == 1:
            super().__init__(f"{lines[0]}; {HINT}")
        else:
            super().__init__(f"{where} has {len(lines)} problems; {HINT}:\n" + "\n".join(f"  {x}" for x in lines))


def load_quotas(shared_root: Path) -> Quotas:
    """Each workspace's resource caps from `<shared_root>/.argus/quotas.yaml`; {} when there is no file
    (or it is empty). Raises QuotaFileError for anything else than a valid, regular, small file."""
    path = Path(shared_root) / QUOTA_FILE
    data = _read(Path(shared_root), path)
    if data is None:
        return {}
    document = _document(_decoded(data, path), path)
    if document is None:
        return {}
    quotas, problems = _parsed(document)
    if problems:
        raise QuotaFileError(path, problems)
    return quotas


def _read(shared_root: Path, path: Path) -> bytes | None:
    """The file's bytes; None when it, `.argus` or the root is absent. The root itself is the
    operator's setting (a mount point may be a symlink); nothing below it is followed."""
    folder = str(PurePosixPath(QUOTA_FILE).parent)
    try:
        with opened_dir(os.path.realpath(shared_root), folder) as fd:
            return _read_regular(fd, path)
    except NotBeneath as err:
        if isinstance(err.__cause__, FileNotFoundError):  # opened_dir chains the OSError of the open
            return None
        raise QuotaFileError(path, [(None, f"{folder} is a symlink or not a directory, and argus never follows "
                                           "a symlink on the shared root (every Ray job can write it)")]) from None
    except FileNotFoundError:
        return None
    except OSError as err:
        raise QuotaFileError(path, [(None, f"cannot read the file: {err.strerror or err}")]) from None


def _read_regular(folder_fd: int, path: Path) -> bytes | None:
    """At most the cap (plus one byte, to tell): a symlink, FIFO or directory is refused unread (state.beneath)."""
    try:
        return beneath.read_regular_at(folder_fd, path.name, MAX_QUOTA_BYTES)
    except beneath.IsLink:
        raise QuotaFileError(path, [(None, "the file is a symlink, and argus never follows a symlink on the "
                                           "shared root (every Ray job can write it)")]) from None
    except beneath.TooBig:
        raise QuotaFileError(path, [(None, f"the file is larger than {MAX_QUOTA_BYTES // 1024} KiB; a quota "
                                           "file is a few lines")]) from None
    except beneath.NotRegular:
        raise QuotaFileError(path, [(None, "not a regular file")]) from None


def _decoded(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise QuotaFileError(path, [(line, f"not UTF-8 text (byte {err.start})")]) from None


def _document(text: str, path: Path) -> Any:
    """The file's one YAML document as ruamel nodes (None when empty), parsed as hostile as a spec."""
    try:
        documents = [document for document in load_documents(text) if document is not None]
    except YAMLError as err:
        raise QuotaFileError(path, [_yaml_problem(err, text)]) from None
    if len(documents) > 1:
        raise QuotaFileError(path, [(node_line(documents[1]), "a second YAML document: the file holds one")])
    return documents[0] if documents else None


def _yaml_problem(err: YAMLError, text: str) -> Problem:
    """At the mark, as specs/load/loader.py reports it, but an error at the stream's end is put on the last
    line that has text, also when the file lacks a final newline (the loader's cap says line 1 there).
    The reader's refusals (control characters) carry a position instead of a mark."""
    if not isinstance(err, MarkedYAMLError):
        line = text.count("\n", 0, getattr(err, "position", 0) or 0) + 1
        return line, "invalid YAML: " + _clipped(str(err).splitlines()[0], YAML_SHOWN)
    mark = err.problem_mark or err.context_mark
    line = min(mark.line + 1, text.rstrip("\n").count("\n") + 1) if mark else 1
    prefix = "" if isinstance(err, Refused) else "invalid YAML: "
    return line, prefix + _clipped(str(err.problem or err.context), YAML_SHOWN)


def _parsed(top: Any) -> tuple[Quotas, list[Problem]]:
    """Every workspace's limits, and every problem, so the platform fixes them all in one go."""
    if not isinstance(top, CommentedMap):
        return {}, [(node_line(top), "the file must map workspace names to resources, like `llm-rl: {GPU: 8}`, "
                                     f"got {_shown(top)}")]
    quotas: Quotas = {}
    problems: list[Problem] = []
    for workspace, resources in top.items():
        problem = _workspace_problem(workspace, resources)
        if problem:
            problems.append((child_line(top, workspace) or node_line(top), problem))
            continue
        quotas[str(workspace)] = _limits(str(workspace), resources, problems)
    return quotas, problems


def _workspace_problem(workspace: Any, resources: Any) -> str | None:
    # fullmatch: NAME_PATTERN's `$` would let a name end in a line break
    if not isinstance(workspace, str) or not re.fullmatch(NAME_PATTERN, workspace):
        return (f"invalid workspace name {_shown(workspace)}: use lowercase letters, digits and '-', "
                "at most 63")
    if not isinstance(resources, CommentedMap):
        return (f"workspace {workspace} must map Ray resource names to amounts, like `{workspace}: {{GPU: 8}}`, "
                f"got {_shown(resources)}")
    return None


def _limits(workspace: str, resources: CommentedMap, problems: list[Problem]) -> dict[str, float]:
    """The workspace's valid limits; a problem with each invalid one is appended to `problems`."""
    limits: dict[str, float] = {}
    for resource, amount in resources.items():
        problem = _entry_problem(workspace, resource, amount)
        if problem:
            problems.append((child_line(resources, resource) or node_line(resources), problem))
            continue
        limits[str(resource)] = float(amount)
    return limits


def _entry_problem(workspace: str, resource: Any, amount: Any) -> str | None:
    """Ray accepts almost any resource name; a printable one can't forge lines of argus's output."""
    if not (isinstance(resource, str) and 0 < len(resource) <= MAX_RESOURCE_NAME and resource.isprintable()):
        return (f"resource name {_shown(resource)} of workspace {workspace} must be a printable string "
                f"of 1 to {MAX_RESOURCE_NAME} characters")
    problem = _amount_problem(amount)
    return f"{resource} of workspace {workspace} {problem}, got {_shown(amount)}" if problem else None


def _amount_problem(amount: Any) -> str | None:
    # A YAML boolean is an int in Python, and ruamel's anchored `&a true` is not even a bool
    if isinstance(amount, (bool, ScalarBoolean)) or not isinstance(amount, (int, float)):
        return "must be a number >= 0"
    if (isinstance(amount, float) and not math.isfinite(amount)) or amount >= MAX_COUNT:
        return f"must be a finite number below {MAX_COUNT}"
    return "must be a number >= 0" if amount < 0 else None


def _shown(value: Any) -> str:
    """A bad value as one short visible line: repr escapes line breaks and terminal escapes."""
    return _clipped(repr(plain(bool(value) if isinstance(value, ScalarBoolean) else value)))


def _clipped(text: str, limit: int = MAX_SHOWN) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
