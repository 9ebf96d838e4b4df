"""Specs are data: no git source, workspace file or shared-filesystem file makes argus run a program.

Every attack here tries to create a marker file; each test asserts the marker is never created (not
only that an error is shown). Where it can, a test first *arms* its payload: plain git, without
argus's defences, does create the marker, so the fixture is known to be a real attack.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specs.kinds.models import CodeSnapshot, GitSource
from state.code import sources
from state.code.gitinfo import desired_commit
from state.code.sources import resolve_source

URL_INJECTIONS = [
    "--upload-pack=touch MARKER;true ://x",
    "--upload-pack=touch MARKER",
    "ext::sh -c touch% MARKER",
    "ssh://-oProxyCommand=touch MARKER/x",
    "ssh://-oProxyCommand=touch${IFS}MARKER/x",
    "ssh://%2DoProxyCommand=touch${IFS}MARKER/x",
    "-oProxyCommand=touch MARKER@host:path",
    "git@-oProxyCommand=touch${IFS}$PWNED:path",  # no '/' before the ':', or git takes it for a local path
]
REF_INJECTIONS = ["--output=MARKER", "-ccore.fsmonitor=touch${IFS}MARKER", "--upload-pack=touch MARKER"]
VERL_JOB = "kind: Job\nname: tune\ncluster: local\ncode: evil\nworkload: sft\nmodel: /models/m\n" \
           "data: {train: /data/train.parquet}\n"


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Plain git, as a user would run it: no argus defences."""
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args], cwd=repo,
                          check=check, capture_output=True, text=True)


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file every attack tries to create; also $PWNED, for payloads that cannot hold a '/'."""
    monkeypatch.setenv("PWNED", str(tmp_path / "pwned"))
    return tmp_path / "pwned"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A harmless source repository with tags v1 and v2."""
    repo = tmp_path / "source"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "mod.py").write_text("X = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    git(repo, "tag", "v1")
    (repo / "mod.py").write_text("X = 2\n")
    git(repo, "commit", "-qam", "two")
    git(repo, "tag", "v2")
    return repo


def unchecked(url: str, ref: str = "v1") -> CodeSnapshot:
    """A spec that skipped the loader's checks: what reaches git must still be harmless."""
    return CodeSnapshot.model_construct(kind="CodeSnapshot", name="evil", cluster="c", path=None, repo=None,
                                        allow_dirty=False, description="",
                                        git=GitSource.model_construct(url=url, ref=ref))


def snapshot_yaml(url: str, ref: str = "v1") -> str:
    return f"kind: CodeSnapshot\nname: evil\ncluster: local\ngit:\n  url: {json.dumps(url)}\n  ref: {json.dumps(ref)}\n"


# --- the spec: refused by the loader with file:line, by every command --------------------------------


@pytest.mark.parametrize("payload", URL_INJECTIONS)
def test_an_injected_url_is_refused_at_its_line_by_every_command(payload, workspace, argus, marker):
    workspace.write("code/evil.yaml", snapshot_yaml(payload.replace("MARKER", str(marker))))
    workspace.write("jobs/tune.yaml", VERL_JOB)
    for command in (["validate"], ["validate", "--deep"], ["plan"]):
        result = argus(*command, workspace.root)
        assert result.code == 1, (command, result.out, result.err)
        assert "code/evil.yaml:5: git.url:" in result.err and "a git url must be a local path" in result.err
        assert not marker.exists()


@pytest.mark.parametrize("payload", REF_INJECTIONS)
def test_an_option_like_ref_is_refused_at_its_line_by_every_command(payload, workspace, argus, marker, source):
    workspace.write("code/evil.yaml", snapshot_yaml(str(source), payload.replace("MARKER", str(marker))))
    workspace.write("jobs/tune.yaml", VERL_JOB)
    for command in (["validate"], ["validate", "--deep"], ["plan"]):
        result = argus(*command, workspace.root)
        assert result.code == 1, (command, result.out, result.err)
        assert "code/evil.yaml:6: git.ref:" in result.err and "is not a ref argus accepts" in result.err
        assert not marker.exists()


def test_the_url_message_says_which_forms_are_allowed(tmp_path, argus):
    (tmp_path / "argus.yaml").write_text("kind: Workspace\nname: w\n")
    (tmp_path / "c.yaml").write_text("kind: Cluster\nname: local\naddress: http://127.0.0.1:1\nshared_root: s\n")
    (tmp_path / "code.yaml").write_text(snapshot_yaml("http://example.com/verl.git"))
    result = argus("validate", tmp_path)
    assert result.code == 1
    assert "http:// is not allowed" in result.err
    assert ("a local path (/srv/git/verl.git, ../verl), file:///absolute/path, https://host[:port]/path, "
            "ssh://[user@]host[:port]/path or user@host:path") in result.err


@pytest.mark.parametrize("url", ["/srv/git/verl.git", "../verl", "file:///srv/git/verl.git",
                                 "https://github.com/volcengine/verl.git", "ssh://git@host:2222/team/verl.git",
                                 "git@github.com:volcengine/verl.git"])
def test_the_allowed_forms_load(url):
    assert CodeSnapshot(kind="CodeSnapshot", name="ok", cluster="c", git={"url": url, "ref": "v0.9.1"}).git.url == url


# --- run time: even a spec that skipped the loader reaches git harmlessly ------------------------------


def test_the_payloads_are_real(tmp_path: Path, marker: Path):
    """Without `--` and the protocol allow-list, plain git runs them (as argus once called it: the URL,
    then the refspecs, the first of which git then takes for the repository)."""
    repo = tmp_path / "plain"
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "fetch", "--upload-pack=touch MARKER;true ://x".replace("MARKER", str(marker)),
        *sources.FETCH_REFSPECS, check=False)
    assert marker.exists()
    marker.unlink()
    git(repo, "-c", "protocol.ext.allow=always", "fetch", f"ext::sh -c touch% {marker}", check=False)
    assert marker.exists()


@pytest.mark.parametrize("payload", URL_INJECTIONS)
def test_resolve_source_keeps_an_injected_url_harmless(payload, tmp_path, marker):
    state = resolve_source(unchecked(payload.replace("MARKER", str(marker))), str(tmp_path), str(tmp_path / "nfs"))
    assert state.error and state.error.field == "git.url"
    assert not marker.exists()


@pytest.mark.parametrize("payload", REF_INJECTIONS)
def test_resolve_source_keeps_an_option_like_ref_harmless(payload, tmp_path, marker, source):
    state = resolve_source(unchecked(str(source), payload.replace("MARKER", str(marker))), str(tmp_path),
                           str(tmp_path / "nfs"))
    assert state.error.field == "git.ref" and "not found" in state.error.message
    assert not marker.exists() and not (source / "MARKER").exists()


# --- the shared filesystem: argus's git cache ---------------------------------------------------------


def _plant(cache: Path, kind: str, marker: Path, url: str) -> None:
    """What a Ray job with write access to the shared root could leave in argus's git cache."""
    if kind == "foreign-config":
        git(cache.parent, "init", "-q", "--bare", str(cache))
        with (cache / "config").open("a") as config:
            config.write(f'[core]\n\tfsmonitor = "touch {marker}; false"\n'
                         f'[credential]\n\thelper = "!touch {marker}; false"\n'
                         f'[protocol]\n\tallow = always\n'
                         f'[url "ext::sh -c touch% {marker}% #"]\n\tinsteadOf = {url}\n')
        return
    cache.mkdir(parents=True)  # everything exactly as argus makes it, plus one thing
    for folder in ("objects/pack", "objects/info", "refs"):
        (cache / folder).mkdir(parents=True)
    (cache / "config").write_bytes(sources.CACHE_CONFIG)
    (cache / "HEAD").write_bytes(sources.CACHE_HEAD)
    if kind == "hook":
        hook = cache / "hooks" / "reference-transaction"
        hook.parent.mkdir()
        hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
        hook.chmod(0o755)
    elif kind == "alternates":
        (cache / "objects" / "info" / "alternates").write_text(f"{cache.parent}/elsewhere/objects\n")


def _cache_of(shared: Path, url: str) -> Path:
    return shared / ".argus" / "git" / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.git"


@pytest.mark.parametrize("kind", ["foreign-config", "hook"])
def test_the_planted_cache_is_armed(kind, tmp_path, marker, source):
    planted = tmp_path / "planted.git"
    _plant(planted, kind, marker, str(source))
    git(tmp_path, f"--git-dir={planted}", "fetch", str(source), "+refs/heads/*:refs/heads/*", check=False)
    assert marker.exists()


@pytest.mark.parametrize("kind", ["foreign-config", "hook", "alternates"])
def test_a_planted_git_cache_is_discarded_not_used(kind, tmp_path, marker, source):
    shared = tmp_path / "nfs"
    cache = _cache_of(shared, str(source))
    cache.parent.mkdir(parents=True)
    _plant(cache, kind, marker, str(source))
    state = resolve_source(unchecked(str(source)), str(tmp_path), str(shared))
    assert state.error is None, state.error
    assert state.commit == git(source, "rev-parse", "v1").stdout.strip()
    assert not marker.exists()
    assert (cache / "config").read_bytes() == sources.CACHE_CONFIG
    assert not (cache / "hooks").exists() and not any((cache / "objects" / "info").iterdir())


def test_plan_discards_a_planted_cache_and_keeps_none_on_the_shared_root(workspace, argus, marker, source):
    workspace.write("code/src.yaml", snapshot_yaml(str(source)))
    cache = _cache_of(Path(os.environ["ARGUS_CACHE_DIR"]), str(source))
    cache.parent.mkdir(parents=True)
    _plant(cache, "foreign-config", marker, str(source))
    planned = argus("plan", workspace.root)
    assert planned.code == 0, planned.out + planned.err
    assert "+ code.evil" in planned.out
    assert not marker.exists() and (cache / "config").read_bytes() == sources.CACHE_CONFIG
    assert not (workspace.shared / ".argus" / "git").exists()  # plan writes nothing on the shared root


def test_a_hostile_local_source_repository_runs_nothing(tmp_path, marker, source):
    """A bare repository committed in the pull request as a `git:` source: git-upload-pack runs in it."""
    bare = tmp_path / "embedded.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(bare))
    for hook in ("pre-upload-pack", "post-upload-pack", "reference-transaction", "post-checkout"):
        (bare / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (bare / "hooks" / hook).chmod(0o755)
    with (bare / "config").open("a") as config:
        config.write(f'[core]\n\tfsmonitor = "touch {marker}; false"\n\thooksPath = {bare}/hooks\n'
                     f'[uploadpack]\n\tpackObjectsHook = "touch {marker}; git"\n'
                     f'[protocol]\n\tallow = always\n')
    state = resolve_source(unchecked(str(bare)), str(tmp_path), str(tmp_path / "nfs"))
    assert state.error is None, state.error
    assert not marker.exists()


# --- the shared filesystem: `path:` working copies ------------------------------------------------------


def _hostile_working_copy(path: Path, marker: Path) -> Path:
    """A checkout whose .git/config runs a program on `git status`: fsmonitor and a clean filter."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "mod.py").write_text("X = 1\n")
    (path / ".gitattributes").write_text("*.py filter=evil\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "one")
    with (path / ".git" / "config").open("a") as config:
        config.write(f'[core]\n\tfsmonitor = "touch {marker}; false"\n'
                     f'[filter "evil"]\n\tclean = "touch {marker}; cat"\n\tsmudge = cat\n')
    later = time.time() + 5
    os.utime(path / "mod.py", (later, later))  # stat-dirty: status would run the clean filter on it
    return path


def test_the_hostile_working_copy_is_armed(tmp_path, marker):
    copy = _hostile_working_copy(tmp_path / "wc", marker)
    git(copy, "status", "--porcelain", check=False)
    assert marker.exists()


def test_a_hostile_working_copy_is_read_without_running_its_config(tmp_path, marker):
    copy = _hostile_working_copy(tmp_path / "wc", marker)
    spec = CodeSnapshot(kind="CodeSnapshot", name="wc", cluster="c", path=str(copy))
    state = resolve_source(spec, str(tmp_path), str(tmp_path / "nfs"))
    assert state.error is None and not state.dirty, state.error
    assert state.commit == git(copy, "rev-parse", "HEAD").stdout.strip()
    (copy / "mod.py").write_text("X = 2\n")
    dirty = resolve_source(spec, str(tmp_path), str(tmp_path / "nfs"))
    assert dirty.dirty and "has uncommitted changes" in dirty.error.message
    assert not marker.exists()


def test_plan_and_deep_validate_read_a_hostile_working_copy_safely(workspace, argus, marker):
    copy = _hostile_working_copy(workspace.root.parent / "wc", marker)
    workspace.write("code/evil.yaml", f"kind: CodeSnapshot\nname: evil\ncluster: local\npath: {copy}\n")
    planned = argus("plan", workspace.root)
    assert planned.code == 0, planned.out + planned.err
    assert "+ code.evil" in planned.out
    workspace.write("jobs/tune.yaml", VERL_JOB)
    argus("validate", "--deep", workspace.root)  # verl is not in this code: only the marker matters
    assert not marker.exists()


def test_an_embedded_bare_repository_is_not_a_working_copy(workspace, argus, marker, source):
    bare = workspace.root / "vendor" / "evil.git"
    git(workspace.root, "clone", "-q", "--bare", str(source), str(bare))
    with (bare / "config").open("a") as config:
        config.write(f'[core]\n\tfsmonitor = "touch {marker}; false"\n\thooksPath = {bare}/hooks\n')
    (bare / "hooks" / "post-checkout").write_text(f"#!/bin/sh\ntouch {marker}\n")
    workspace.write("code/evil.yaml", "kind: CodeSnapshot\nname: evil\ncluster: local\npath: vendor/evil.git\n")
    planned = argus("plan", workspace.root)
    assert planned.code == 1
    assert "code/evil.yaml:4: " in planned.out and "is a bare git repository, not a working copy" in planned.out
    assert not marker.exists()


def test_a_planted_index_cannot_make_argus_read_outside_the_working_copy(tmp_path):
    outside = tmp_path / "runner-home"
    outside.mkdir()
    (outside / "id_rsa").write_text("SECRET KEY\n")
    copy = tmp_path / "wc"
    (copy / "keys").mkdir(parents=True)
    git(copy, "init", "-q")
    (copy / "keys" / "id_rsa").write_text("placeholder\n")
    git(copy, "add", "-A")
    git(copy, "commit", "-qm", "one")
    shutil.rmtree(copy / "keys")
    os.symlink(outside, copy / "keys")  # the index still lists keys/id_rsa
    spec = CodeSnapshot(kind="CodeSnapshot", name="wc", cluster="c", path=str(copy), allow_dirty=True)
    state = resolve_source(spec, str(tmp_path), str(tmp_path / "nfs"))
    assert state.error and "leads out of the working copy" in state.error.message


def test_the_workspace_commit_is_read_without_running_its_config(tmp_path, marker):
    copy = _hostile_working_copy(tmp_path / "ws", marker)
    info = desired_commit(str(copy))
    assert info.commit == git(copy, "rev-parse", "HEAD").stdout.strip() and not info.dirty
    (copy / "mod.py").write_text("X = 2\n")
    assert desired_commit(str(copy)).dirty
    assert not marker.exists()


# --- a source tree that would write outside the snapshot ----------------------------------------------


def test_a_tree_entry_that_climbs_out_is_refused(tmp_path, marker):
    repo = tmp_path / "crafted"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input="import os\n", text=True,
                          capture_output=True, check=True).stdout.strip()
    inner = _mktree(repo, f"100644 blob {blob}\tpwned.py\n")
    climbing = _mktree(repo, f"040000 tree {inner}\t..\n")
    config = _mktree(repo, f"040000 tree {climbing}\tconfig\n")
    trainer = _mktree(repo, f"040000 tree {config}\ttrainer\n")
    top = _mktree(repo, f"040000 tree {trainer}\tverl\n")
    commit = git(repo, "commit-tree", top, "-m", "crafted").stdout.strip()
    git(repo, "update-ref", "refs/heads/main", commit)
    git(repo, "tag", "v1", commit)
    state = resolve_source(unchecked(str(repo)), str(tmp_path), str(tmp_path / "nfs"))
    assert state.error and "unsafe file name b'..'" in state.error.message
    assert not list(tmp_path.rglob("pwned.py"))


def _mktree(repo: Path, listing: str) -> str:
    return subprocess.run(["git", "mktree"], cwd=repo, input=listing, text=True, capture_output=True,
                          check=True).stdout.strip()


# --- a snapshot on disk is planned from its manifest ---------------------------------------------------


def test_a_materialized_snapshot_is_not_fetched_and_its_source_cannot_change(workspace, argus, source, tmp_path):
    workspace.write("code/evil.yaml", snapshot_yaml(str(source)))
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    moved = tmp_path / "elsewhere" / source.name  # same base name: the same place under common/code/
    moved.parent.mkdir()
    shutil.move(source, moved)  # gone, or moved on: a snapshot on disk never looks at its source again
    planned = argus("plan", workspace.root)
    assert planned.code == 0, planned.out + planned.err
    assert "code.evil: materialized at commit" in planned.out

    workspace.write("code/evil.yaml", snapshot_yaml(str(moved)))
    new_url = argus("plan", workspace.root)
    assert new_url.code == 1
    assert "code/evil.yaml:5: code.evil was materialized from git" in new_url.out
    assert "snapshots are immutable: give the new source a new name" in new_url.out
    workspace.write("code/evil.yaml", snapshot_yaml(str(source), "v2"))
    new_ref = argus("plan", workspace.root)
    assert new_ref.code == 1 and "code/evil.yaml:6: code.evil was materialized from" in new_ref.out


# --- every fetch has a deadline ------------------------------------------------------------------------


@contextlib.contextmanager
def tarpit() -> Iterator[int]:
    """A TCP server on loopback that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            with contextlib.suppress(socket.timeout, OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        done.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def _processes_naming(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if text.encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
    return found


@pytest.mark.parametrize("command", [["plan"], ["validate", "--deep"]])
def test_a_fetch_that_never_answers_is_stopped_at_the_deadline(command, workspace, argus):
    with tarpit() as port:
        url = f"https://127.0.0.1:{port}/x.git"
        workspace.write("code/evil.yaml", snapshot_yaml(url))
        workspace.write("jobs/tune.yaml", VERL_JOB)
        started = time.monotonic()
        result = argus(*command, workspace.root, "--fetch-timeout", "2")
        elapsed = time.monotonic() - started
        assert result.code == 1, result.out + result.err
        assert "code/evil.yaml:5: git fetch did not finish within 2 s" in result.out
        assert elapsed < 15
        assert _processes_naming(f"127.0.0.1:{port}") == []  # git-remote-https went with it


def test_a_tree_bomb_is_refused_not_walked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Twelve objects, a million files: nested trees of ten entries each, reading all would never end."""
    from state.code import safegit

    repo = tmp_path / "bomb"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input="x", capture_output=True,
                          text=True, check=True).stdout.strip()
    entry, kind = blob, "100644 blob"
    for _ in range(6):
        listing = "".join(f"{kind} {entry}\tn{i}\n" for i in range(10))
        entry = subprocess.run(["git", "mktree"], cwd=repo, input=listing, capture_output=True, text=True,
                               check=True).stdout.strip()
        kind = "040000 tree"
    commit = git(repo, "commit-tree", entry, "-m", "bomb").stdout.strip()
    git(repo, "update-ref", "refs/heads/main", commit)
    git(repo, "tag", "v1")
    monkeypatch.setattr(safegit, "MAX_FILES", 2000)  # the real cap (100,000) is only slower to reach
    started = time.monotonic()
    state = resolve_source(unchecked(str(repo)), str(tmp_path), str(tmp_path / "cache"))
    assert state.error is not None and "too large for a code snapshot" in state.error.message, state
    assert time.monotonic() - started < 30
