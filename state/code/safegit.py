"""git on hostile input: specs, workspace files and the shared filesystem are written by others.

Every git process argus starts runs with the same environment (only the transports argus allows,
no prompts, no hooks, no fsmonitor, no lazy fetch, no replace refs, nothing inherited that points
git at another repository or adds configuration) and inside a *quarantine*: a private repository in
a temp dir whose config, HEAD and refs are argus's, borrowing only the objects of the repository it
reads. A repository's own config, hooks and attributes are never read, so nothing planted there
can run. Objects are data: each one read is checked against its id, so a planted object is caught.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ALLOWED_PROTOCOLS = "file:https:ssh"
"""GIT_ALLOW_PROTOCOL: the environment overrides every protocol.*.allow a config could set."""

FORCED_CONFIG = (
    ("core.hooksPath", "/dev/null"),  # fetch runs the reference-transaction hook
    ("core.fsmonitor", "false"),  # reading an index runs it
    ("core.untrackedCache", "false"),  # ls-files -o looks at the files, not at an index's notes about them
    ("core.askPass", ""),
    ("safe.bareRepository", "explicit"),  # an embedded bare repository is never picked up by discovery
    ("gc.auto", "0"),  # no detached gc outliving the fetch deadline
    ("maintenance.auto", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("fetch.writeCommitGraph", "false"),
)
"""Command-level config: it wins over every config file, also in the source repository that a
local fetch runs git-upload-pack in."""

_KEPT_GIT_ENV = ("GIT_SSH", "GIT_SSL_", "GIT_HTTP_", "GIT_CURL_", "GIT_TRACE", "GIT_CONFIG_GLOBAL",
                 "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "GIT_EXEC_PATH")
"""GIT_* variables of the runner that only say how to reach a server or how to debug; every other
one (GIT_DIR, GIT_INDEX_FILE, GIT_CONFIG_PARAMETERS, ... set by a hook that runs argus) is dropped."""

MAX_FILES = 100_000
MAX_OBJECT = 256 << 20
MAX_BYTES = 2 << 30
"""A code snapshot is code: a source past these (a tree bomb of nested trees, a 10 GB blob) is
refused before it exhausts time or memory on the machine running argus."""

QUARANTINE_CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
OID = re.compile(r"^[0-9a-f]{40}$")
_TREE_ENTRY = re.compile(rb"(?P<mode>[0-7]{5,6}) (?P<name>[^/\0]+)\0(?P<oid>.{20})", re.DOTALL)
Entry = tuple[str, str, bytes]
"""(relative path, git mode, content); a symlink's content is its target."""


class GitError(Exception):
    """git failed, or what it returned cannot be trusted; the message says which."""


class GitTimeout(GitError):
    """git did not finish before its deadline and was killed (with everything it started)."""


def git_env(extra: dict[str, str] | None = None, config: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """The environment of every git process argus starts; `config` adds command-level settings after
    FORCED_CONFIG, in the environment (never in argv, which `ps` shows, nor in a file)."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("GIT_") and not k.startswith(_KEPT_GIT_ENV)) and not k.startswith("SSH_ASKPASS")}
    env.update(GIT_ALLOW_PROTOCOL=ALLOWED_PROTOCOLS, GIT_TERMINAL_PROMPT="0", GIT_NO_LAZY_FETCH="1",
               GIT_NO_REPLACE_OBJECTS="1", GIT_OPTIONAL_LOCKS="0", GIT_ATTR_NOSYSTEM="1",
               GIT_SSH_COMMAND=f"{os.environ.get('GIT_SSH_COMMAND') or 'ssh'} -o BatchMode=yes",
               GIT_TRACE_REDACT="1",  # a runner's GIT_TRACE_CURL must not write a token's header to a file
               GIT_CONFIG_COUNT=str(len(FORCED_CONFIG) + len(config)))
    for index, (key, value) in enumerate((*FORCED_CONFIG, *config)):
        env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
    env.update(extra or {})
    return env


def run(git_dir: Path, *args: str, work_tree: Path | None = None, extra_env: dict[str, str] | None = None,
        timeout: float | None = None, config: tuple[tuple[str, str], ...] = ()) -> bytes:
    """git with an explicit repository (never discovered); on timeout its whole process group is killed."""
    command = ["git", f"--git-dir={git_dir}", *([f"--work-tree={work_tree}"] if work_tree else []), *args]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=git_env(extra_env, config), cwd=work_tree or git_dir, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise GitTimeout(f"git {args[0]} did not finish within {timeout:g} s") from None
    except BaseException:  # ^C: the fetch runs in its own session and would not see it
        _kill(proc)
        raise
    if proc.returncode:
        raise GitError(last_line(err.decode(errors="replace")) or f"git {args[0]} exited {proc.returncode}")
    return out


def auth_config(scope: str, user: str, token: str) -> tuple[tuple[str, str], ...]:
    """Settings that send `token` as HTTP Basic auth to URLs under `scope` alone, and follow no
    redirect (git would send the header on to wherever the server points it)."""
    basic = base64.b64encode(f"{user}:{token}".encode()).decode()
    return ((f"http.{scope}.extraHeader", f"Authorization: Basic {basic}"), ("http.followRedirects", "false"))


@contextlib.contextmanager
def quarantine(objects: Path, *, borrow: bool = False, packed_refs: bytes = b"",
               exclude: bytes = b"") -> Iterator[Path]:
    """A private repository over someone else's objects.

    borrow=False links `objects` in (argus's own cache: fetch writes into it); borrow=True adds it as
    an alternate (a working copy's: only read). packed_refs and exclude are data argus has checked.
    """
    with tempfile.TemporaryDirectory(prefix="argus-git-") as tmp:
        root = Path(tmp)
        (root / "refs").mkdir()
        (root / "info").mkdir()
        (root / "config").write_bytes(QUARANTINE_CONFIG)
        (root / "HEAD").write_bytes(b"ref: refs/heads/main\n")
        (root / "packed-refs").write_bytes(packed_refs)
        (root / "info" / "exclude").write_bytes(exclude)
        if borrow:
            (root / "objects" / "info").mkdir(parents=True)
            (root / "objects" / "info" / "alternates").write_text(f"{_alternate_line(objects)}\n")
        else:
            os.symlink(os.path.abspath(objects), root / "objects")
        yield root


class ObjectReader:
    """`git cat-file --batch` in a quarantine; every object read is checked against its id."""

    def __init__(self, git_dir: Path) -> None:
        self._proc = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"], cwd=git_dir,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      env=git_env(), start_new_session=True)

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(self, *_exc: object) -> None:
        _kill(self._proc)

    def read(self, oid: str) -> tuple[str, bytes]:
        """(type, content) of one object."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(oid.encode() + b"\n")
        self._proc.stdin.flush()
        header = self._proc.stdout.readline().split()
        if len(header) != 3:
            raise GitError(f"object {oid} is missing from the repository")
        kind, size = header[1], int(header[2])
        if size > MAX_OBJECT:
            raise GitError(f"object {oid} is {size} bytes, over argus's limit of {MAX_OBJECT} for code")
        data = self._proc.stdout.read(size)
        self._proc.stdout.read(1)  # the newline after each object
        if hashlib.sha1(b"%s %d\0" % (kind, size) + data).hexdigest() != oid:
            raise GitError(f"object {oid} does not match its id: the repository was damaged or tampered with")
        return kind.decode(), data


def commit_files(reader: ObjectReader, commit: str, under: str = "") -> Iterator[Entry]:
    """The files of a commit (or of its directory `under`), paths relative to the repository root."""
    kind, data = reader.read(commit)
    found = re.match(rb"tree ([0-9a-f]{40})\n", data)
    if kind != "commit" or not found:
        raise GitError(f"{commit} is not a commit")
    tree = found[1].decode()
    prefix = ""
    for part in [p for p in under.split("/") if p]:
        subtrees = {name: oid for mode, name, oid in _tree_items(reader, tree) if mode == "40000"}
        if part not in subtrees:
            return
        tree, prefix = subtrees[part], f"{prefix}{part}/"
    yield from _walk(reader, tree, prefix)


def last_line(text: str) -> str:
    """git's own diagnosis: its `fatal:` line, else its last words."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith("fatal:")]
    return fatal[0] if fatal else (lines[-1] if lines else "")


def _walk(reader: ObjectReader, tree: str, prefix: str) -> Iterator[Entry]:
    pending = [(tree, prefix)]  # a stack, not recursion: a tree can nest deeper than Python's stack
    files = total = 0
    while pending:
        oid, where = pending.pop()
        for mode, name, child in _tree_items(reader, oid):
            if mode == "40000":
                pending.append((child, f"{where}{name}/"))
            elif mode != "160000":  # a submodule's content is not in this repository
                kind, data = reader.read(child)
                if kind != "blob":
                    raise GitError(f"{where}{name} should be a file but is a {kind}")
                files, total = files + 1, total + len(data)
                if files > MAX_FILES or total > MAX_BYTES:
                    raise GitError(f"the source holds over {MAX_FILES} files or {MAX_BYTES >> 30} GiB: too large "
                                   "for a code snapshot")
                yield f"{where}{name}", git_mode(int(mode, 8)), data


def _tree_items(reader: ObjectReader, oid: str) -> Iterator[tuple[str, str, str]]:
    """(mode, name, id) of a tree's entries; a name that could leave the snapshot is refused."""
    kind, data = reader.read(oid)
    if kind != "tree":
        raise GitError(f"{oid} should be a tree but is a {kind}")
    at = 0
    while at < len(data):
        found = _TREE_ENTRY.match(data, at)
        if not found:
            raise GitError(f"tree {oid} is malformed: refusing to read this source")
        mode, name = found["mode"].decode(), found["name"]
        if name in (b".", b"..") or name.lower() == b".git":
            raise GitError(f"tree {oid} holds the unsafe file name {name!r}: refusing to read this source")
        yield mode, os.fsdecode(name), found["oid"].hex()
        at = found.end()


def git_mode(mode: int) -> str:
    """The three modes a checkout can reproduce (old trees also hold 100664 and the like)."""
    if mode & 0o170000 == 0o120000:
        return "120000"
    return "100755" if mode & 0o111 else "100644"


def _alternate_line(objects: Path) -> str:
    text = str(objects)
    if not text.startswith("/") or any(c in text for c in '\n\r"'):
        raise GitError(f"cannot read objects from {text!r}: not a plain absolute path")
    return text


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: ssh and git-remote-https go too
    proc.communicate()
