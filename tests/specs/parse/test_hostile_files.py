"""Every spec file is hostile input: each trick is a file:line problem, quickly, exit 1, nothing written.

A pull request's author controls every file of the workspace (and the pre-commit hook runs on whatever
a developer's checkout holds). The real CLI runs first in a subprocess with a timeout, so a loader that
blocked on a FIFO or streamed /dev/zero fails the test instead of hanging it; then in-process, timed.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from specs.diagnostics import Where
from specs.errors import SpecError
from specs.load.loader import load_workspace
from specs.parse import reading
from tests.support.workspace import Workspace

ARGUS = Path(sys.executable).parent / "argus"
SLACK = 3.0
"""Seconds a validate may take in-process: it needs well under one; the test box is a noisy 2-core machine."""
HANG = 30.0
"""Seconds after which the subprocess counts as hung (blocked on a FIFO, reading /dev/zero)."""

JOB = "kind: Job\nname: train\ncluster: h20\nworkload: command\nentrypoint: [python3, train.py]\n"
BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws", "team", "http://127.0.0.1:1")
    ws.write("argus.yaml", "kind: Workspace\nname: team\n")
    ws.write("cluster.yaml", "kind: Cluster\nname: h20\naddress: http://10.0.0.1:8265\nshared_root: shared\n")
    ws.write("jobs/train.yaml", JOB)
    for scratch in ("tmp", "home"):  # the subprocess's TMPDIR and HOME: listed too, must stay empty
        (tmp_path / scratch).mkdir(exist_ok=True)
    return ws


# Each case plants one trick in the workspace and returns the problem it must give (a prefix).

def fifo(ws: Workspace) -> str:
    os.mkfifo(ws.root / "jobs/pipe.yaml")
    return "jobs/pipe.yaml:1: not a regular file (a FIFO): argus reads only regular files"


def symlink_to_dev_zero(ws: Workspace) -> str:
    (ws.root / "jobs/zero.yaml").symlink_to("/dev/zero")
    return "jobs/zero.yaml:1: a symlink to /dev/zero, outside the workspace: argus reads only files inside"


def symlink_outside(ws: Workspace) -> str:
    elsewhere = ws.root.parent / "elsewhere.yaml"
    elsewhere.write_text(JOB.replace("train", "smuggled"))
    (ws.root / "jobs/smuggled.yaml").symlink_to(elsewhere)
    return f"jobs/smuggled.yaml:1: a symlink to {elsewhere}, outside the workspace"


def dangling_symlink(ws: Workspace) -> str:
    (ws.root / "jobs/gone.yaml").symlink_to("missing.yaml")
    return "jobs/gone.yaml:1: a symlink to jobs/missing.yaml, which does not exist (or loops): fix or remove the link"


def symlink_into_a_hidden_directory(ws: Workspace) -> str:
    ws.write(".private/job.yaml", JOB.replace("train", "hidden"))
    (ws.root / "jobs/hidden.yaml").symlink_to("../.private/job.yaml")
    return "jobs/hidden.yaml:1: a symlink to .private/job.yaml, in a directory argus never reads"


def huge_file(ws: Workspace) -> str:
    with open(ws.root / "jobs/huge.yaml", "wb") as handle:
        handle.truncate(2 * 2**30)  # sparse: 2 GiB that take no disk
    return f"jobs/huge.yaml:1: the file is too big ({2 * 2**30} bytes); a spec file is at most 32 KiB"


def alias_bomb(ws: Workspace) -> str:
    ws.write("jobs/bomb.yaml", BOMB)
    return "jobs/bomb.yaml:2: YAML aliases (*a) are not allowed in argus specs: write the value out"


def nested_100000_deep(ws: Workspace) -> str:
    ws.write("jobs/deep.yaml", "kind: Job\nname: deep\nx: " + "[" * 100_000 + "\n")
    return "jobs/deep.yaml:1: the file is too big (100025 bytes)"


def nested_deep_under_the_cap(ws: Workspace) -> str:
    ws.write("jobs/deep.yaml", "kind: Job\nname: deep\nx: " + "[" * 20_000 + "\n")
    return "jobs/deep.yaml:3: nested more than 50 levels deep: argus specs are shallow; flatten the value"


def nested_deep_block(ws: Workspace) -> str:
    ws.write("jobs/deep.yaml", "kind: Job\nname: deep\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(60)))
    return "jobs/deep.yaml:52: nested more than 50 levels deep"


def directory_symlink(ws: Workspace) -> str:
    (ws.root / "more-jobs").symlink_to("/etc")
    return "more-jobs:1: a symlink to the directory /etc, which argus does not read: argus never follows"


def values_python_refuses(ws: Workspace) -> str:
    ws.write("jobs/values.yaml", f"kind: Job\nname: v\nwhen: 2024-13-45\nrun: {'9' * 5000}\n")
    return "jobs/values.yaml:3: invalid YAML: cannot read the value '2024-13-45': month must be in 1..12"


def python_object_tag(ws: Workspace) -> str:
    ws.write("jobs/tagged.yaml", JOB.replace("entrypoint: [python3, train.py]",
                                             f"entrypoint: !!python/object/apply:os.system ['touch {ws.root}/X']"))
    return "jobs/tagged.yaml:5: YAML tags (tag:yaml.org,2002:python/object/apply:os.system) are not allowed"


def custom_tag_on_a_mapping(ws: Workspace) -> str:
    ws.write("jobs/custom.yaml", JOB + "env: !custom {a: b}\n")
    return "jobs/custom.yaml:6: YAML tags (!custom) are not allowed in argus specs"


def an_integer_too_large_to_print(ws: Workspace) -> str:
    ws.write("jobs/big.yaml", JOB + f"entrypoint_memory: 0x{'f' * 5000}\n")
    return "jobs/big.yaml:6: entrypoint_memory: Input should be less than or equal to 9007199254740992"


def a_file_name_that_forges_output_lines(ws: Workspace) -> str:
    ws.write("jobs/x\nargus: all good.yaml", "kind: Job\n")
    return "jobs/x\\nargus: all good.yaml:1: name: required field is missing"


CASES: list[Callable[[Workspace], str]] = [
    fifo, symlink_to_dev_zero, symlink_outside, dangling_symlink, symlink_into_a_hidden_directory, huge_file,
    alias_bomb, nested_100000_deep, nested_deep_under_the_cap, nested_deep_block, directory_symlink,
    values_python_refuses, python_object_tag, custom_tag_on_a_mapping, an_integer_too_large_to_print,
    a_file_name_that_forges_output_lines]


@pytest.mark.parametrize("plant", CASES, ids=[c.__name__ for c in CASES])
def test_a_hostile_file_is_a_located_problem(plant, ws: Workspace, tmp_path: Path, argus) -> None:
    expected = plant(ws)
    before = listing(tmp_path)
    done = validate_in_subprocess(ws, tmp_path)
    assert done.returncode == 1, done.stderr
    assert expected in done.stderr, done.stderr
    start = time.monotonic()
    result = argus("validate", ws.root)
    assert time.monotonic() - start < SLACK
    assert result.code == 1 and expected in result.err, result.err
    assert "Traceback" not in done.stderr + result.err
    assert listing(tmp_path) == before


def test_all_problems_are_reported_together(ws: Workspace, tmp_path: Path, argus) -> None:
    expected = [plant(ws) for plant in CASES if plant not in (nested_deep_under_the_cap, nested_deep_block)]
    ws.write("jobs/typo.yaml", JOB.replace("train", "typo") + "entrypont: x\n")
    before = listing(tmp_path)
    done = validate_in_subprocess(ws, tmp_path)
    start = time.monotonic()
    result = argus("validate", ws.root)
    assert time.monotonic() - start < SLACK
    for out in (done.stderr, result.err):
        assert all(line in out for line in expected), out
        assert "jobs/typo.yaml:6: entrypont: unknown key" in out
    assert done.returncode == result.code == 1
    assert listing(tmp_path) == before


def test_merge_keys_inside_a_value_and_core_tags_load(ws: Workspace) -> None:
    ws.write("jobs/merged.yaml", JOB.replace("name: train", "name: merged") + "env:\n  <<: [{A: '1'}, {B: '2'}]\n"
             "description: !!str plain\n")
    job = load_workspace(ws.root).jobs["merged"]
    assert job.env == {"A": "1", "B": "2"} and job.description == "plain"


def test_safe_links_and_inline_merge_keys_still_load(ws: Workspace) -> None:
    ws.write("library/base.txt", JOB.replace("train", "linked"))  # not .yaml: read only through the link
    (ws.root / "jobs/linked.yaml").symlink_to("../library/base.txt")
    (ws.root / "jobs-again").symlink_to("jobs")  # a directory read anyway: not followed, not a problem
    ws.write("jobs/merged.yaml", "kind: Job\nname: merged\n<<: {cluster: h20, workload: command}\nentrypoint: x\n")
    desired = load_workspace(ws.root)
    assert sorted(desired.jobs) == ["linked", "merged", "train"]
    assert desired.source("job.linked").at("name") == Where("jobs/linked.yaml", 2)


@pytest.mark.parametrize("limit", ["MAX_FILES", "MAX_TOTAL_BYTES"])
def test_the_total_read_is_bounded(ws: Workspace, monkeypatch: pytest.MonkeyPatch, limit: str) -> None:
    monkeypatch.setattr(reading, limit, 5 if limit == "MAX_FILES" else 400)
    for i in range(20):
        ws.write(f"jobs/j{i:02}.yaml", JOB.replace("train", f"j{i}"))
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    [problem] = [str(d) for d in caught.value.diagnostics]
    assert "argus stopped reading here; move what is not a spec out of the workspace" in problem


def validate_in_subprocess(ws: Workspace, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "HOME": str(tmp_path / "home")}
    return subprocess.run([str(ARGUS), "validate", str(ws.root)], capture_output=True, text=True, timeout=HANG,
                          env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)


def listing(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under root (links not followed) with its type, size and mtime: what a write would change. argus's
    private cache (ARGUS_CACHE_DIR, conftest's: the memo of what each file gave) is argus's own to write."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder, d) != root / "argus-cache"]
        for name in dirs + files:
            info = os.lstat(Path(folder) / name)
            found[os.path.join(folder, name)] = (stat.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns)
    return found


# The shared root: argus's output, never its input.

def write_records(ws: Workspace, shared: Path, state_dir: bool) -> None:
    """What an apply leaves under the shared root: the dumps of the very specs, as state/runs/records.py writes them."""
    from state.observed import RunRecord
    from state.runs import records

    desired = load_workspace(ws.root)
    shared.mkdir(exist_ok=True)  # argus never makes a shared root (state.beneath.made_dir): the mount is there
    record = RunRecord(submission_id="team-train-0123abcd-1", workspace="team", job="train", cluster="h20",
                       spec_hash="0123abcd", attempt=1, status="SUBMITTING", updated_at=records.now(), plan_id="p1",
                       commit="c0ffee", submission={})
    configs = {"ray_config": records.config_yaml(desired.clusters["h20"].model_dump(mode="json")),
               "jobspec": records.config_yaml(desired.jobs["train"].model_dump(mode="json"))}
    records.write_intent(str(shared), record, configs, {"submission_id": record.submission_id})
    assert "kind: Job" in (shared / "jobs" / record.submission_id / "config" / "jobspec.yaml").read_text()
    if state_dir:
        (shared / ".argus" / "locks").mkdir(parents=True)


@pytest.mark.parametrize("layout", ["after-apply", "records-only", "cluster-deeper", "absolute"])
def test_a_shared_root_inside_the_workspace_is_never_read(ws: Workspace, layout: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    if layout == "cluster-deeper":  # read after the shared root's top is listed: its records stay unread
        ws.write("clusters/prod/h20.yaml", (ws.root / "cluster.yaml").read_text())
        ws.remove("cluster.yaml")
    if layout == "absolute":
        ws.write("cluster.yaml", (ws.root / "cluster.yaml").read_text().replace("shared_root: shared",
                                                                               f"shared_root: {ws.root}/shared"))
    write_records(ws, ws.root / "shared", state_dir=layout == "after-apply")
    read = spy_on_reads(monkeypatch)
    desired = load_workspace(ws.root)
    assert sorted(desired.jobs) == ["train"] and desired.shared_root("h20") == str(ws.root / "shared")
    assert not [rel for rel in read if rel.startswith("shared/")], read


def test_a_shared_root_holding_specs_is_refused(ws: Workspace) -> None:
    ws.write("cluster.yaml", "kind: Cluster\nname: h20\naddress: http://10.0.0.1:8265\nshared_root: jobs\n")
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    assert [str(d) for d in caught.value.diagnostics] == [
        "cluster.yaml:4: shared_root: 'jobs' holds spec files (jobs/train.yaml): argus never reads a shared root, "
        "so they would be ignored; choose a directory of its own, like `shared`"]


REFUSED = {
    "/": "'/' is a system directory",
    "/etc": "'/etc' is a system directory",
    "/mnt/../etc": "'/mnt/../etc' (that is /etc) is a system directory",
    "/usr/local/shared": "'/usr/local/shared' is inside /usr, a system directory",
    "/tmp": "'/tmp' is a system directory",
    "..": "'..' is not inside the workspace",
    "../x": "'../x' is not inside the workspace",
    ".": "'.' is not inside the workspace",
    "a/../../x": "'a/../../x' is not inside the workspace",
    "sh\0ared": "control characters and NUL are not allowed",
}


@pytest.mark.parametrize("shared_root", REFUSED, ids=[repr(r) for r in REFUSED])
def test_a_shared_root_outside_the_rules_is_refused(ws: Workspace, shared_root: str, argus) -> None:
    quoted = '"' + shared_root.replace("\0", "\\0") + '"'
    ws.write("cluster.yaml", f"kind: Cluster\nname: h20\naddress: http://10.0.0.1:8265\nshared_root: {quoted}\n")
    result = argus("validate", ws.root)
    assert result.code == 1
    assert (f"cluster.yaml:4: shared_root: Value error, {REFUSED[shared_root]}; a shared root is an absolute path "
            "other than / and the system directories (like /mnt/shared), or a relative path strictly inside the "
            "workspace (like shared)") in result.err, result.err


@pytest.mark.parametrize(("target", "why"), [("/etc", "'shared' resolves to /etc through a symlink, outside the "
                                                      "workspace"),
                                             (".", "'shared' is the workspace itself")])
def test_a_shared_root_symlinked_away_is_refused(ws: Workspace, target: str, why: str, argus) -> None:
    (ws.root / "shared").symlink_to(target)
    result = argus("validate", ws.root)
    assert result.code == 1 and f"cluster.yaml:4: shared_root: {why}; a shared root is" in result.err, result.err


@pytest.mark.parametrize("shared_root", ["/mnt/shared", "/tmp/argus-x", "shared", "shared/", ".shared", "out/shared"])
def test_sane_shared_roots_are_accepted(ws: Workspace, shared_root: str) -> None:
    ws.write("cluster.yaml", f"kind: Cluster\nname: h20\naddress: http://10.0.0.1:8265\nshared_root: {shared_root}\n")
    expected = shared_root.rstrip("/") if shared_root.startswith("/") else str(ws.root / shared_root.rstrip("/"))
    assert load_workspace(ws.root).shared_root("h20") == expected


def spy_on_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    real = reading.Walk.read

    def spy(self: reading.Walk, spec: reading.SpecFile) -> str | None:
        read.append(spec.rel)
        return real(self, spec)

    monkeypatch.setattr(reading.Walk, "read", spy)
    return read


def test_an_empty_argus_file_or_an_argus_yaml_directory_hides_no_spec(ws: Workspace) -> None:
    ws.write("jobs/.argus", "")
    (ws.root / "jobs" / "more").mkdir()
    (ws.root / "jobs" / "more" / "argus.yaml").mkdir()
    ws.write("jobs/more/other.yaml", JOB.replace("name: train", "name: other"))
    assert sorted(load_workspace(ws.root).jobs) == ["other", "train"]
