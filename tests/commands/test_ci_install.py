"""The generated install step, run as GitHub runs it, installs exactly the argus that wrote it; and where
`argus init` reads that argus from (direct_url.json, the checkout's origin and HEAD)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from reconcile.commands.init import requirements
from reconcile.commands.install_source import detect, given, public
from specs.errors import ArgusError
from tests.support.github_ci import action_step, inputs, outputs, run_step

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "reconcile" / "templates" / "github"

# The runner's python3, for the install step's `"$PYTHON" -m venv`: a real venv, made without pip and
# seeing the test venv's packages (pip included) through a .pth, argus's own left out, so that pip
# installs argus alone instead of every dependency (minutes): measured here, the step's pip install took
# 6.5 s (clone 0.9 s, build environment 1.5 s, metadata and wheel 3 s, install 0.7 s).
PYTHON = """#!/bin/sh
[ "$1 $2" = "-m venv" ] || exec "$REAL_PYTHON" "$@"
"$REAL_PYTHON" -m venv --without-pip "$3" || exit 1
echo "$DEPENDENCIES" > "$("$3/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/deps.pth"
"""


def head() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def dependencies(into: Path) -> Path:
    """This venv's site-packages without argus itself (its dist-info, its editable finder and .pth)."""
    if into.exists():
        return into
    into.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("argus_ray", "__editable__")) and entry.suffix != ".pth":
            (into / entry.name).symlink_to(entry)
    return into


def install(tmp_path: Path, requirement_text: str) -> tuple[subprocess.CompletedProcess, Path]:
    action = tmp_path / "action"
    action.mkdir(exist_ok=True)
    (action / "requirements.txt").write_text(requirement_text)
    (action / "action.yml").write_text((TEMPLATES / "action.yml").read_text())
    python = tmp_path / "python3"
    python.write_text(PYTHON)
    python.chmod(0o755)
    temp, output = tmp_path / "runner-temp", tmp_path / "github-output"
    temp.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "GITHUB_ACTION_PATH": str(action),
           "RUNNER_TEMP": str(temp), "RUNNER_TOOL_CACHE": str(tmp_path / "tool-cache"), "GITHUB_OUTPUT": str(output),
           "REAL_PYTHON": sys.executable, "DEPENDENCIES": str(dependencies(tmp_path / "dependencies"))}
    context = inputs(action, {"python": str(python)}) | {"runner.temp": str(temp)}
    done = run_step(action_step(action, "install"), context, env, temp)
    return done, output


def test_the_install_step_installs_the_argus_that_wrote_it_in_a_fresh_venv(tmp_path):
    commit = head()
    source = given(f"git+{ROOT.as_uri()}@{commit}")
    done, output = install(tmp_path, requirements(source))
    assert done.returncode == 0, done.stdout + done.stderr
    argus = Path(outputs(output)["argus"])
    assert argus.is_file() and argus.parent.parent.parent == tmp_path / "tool-cache"
    python = argus.with_name("python")
    shown = subprocess.run([str(python), "-c", READ_BACK], capture_output=True, text=True, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    installed = json.loads(shown.stdout)
    assert installed["version"] == importlib.metadata.version("argus-ray"), installed
    assert installed["direct"], installed
    direct = json.loads(installed["direct"])
    assert direct["vcs_info"]["commit_id"] == commit and direct["url"] == ROOT.as_uri(), installed
    assert Path(installed["module"]).is_relative_to(argus.parent.parent)  # the venv's own copy, not this checkout
    assert installed["detected"] == source.requirement  # an init run by the installed argus pins the same argus
    again_repo = tmp_path / "next-repo"  # the installed argus (its packaged templates) writes CI pinning itself
    subprocess.run(["git", "init", "-q", str(again_repo)], check=True)
    made = subprocess.run([str(argus), "init", str(again_repo / "teams" / "nlp")], capture_output=True, text=True,
                          cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    written = (again_repo / ".github" / "actions" / "argus" / "requirements.txt").read_text()
    assert written.splitlines()[-1] == source.requirement and (again_repo / ".github" / "zizmor.yml").is_file()
    version = subprocess.run([str(argus), "--version"], capture_output=True, text=True, cwd=tmp_path)
    if version.returncode == 0:  # `argus --version` (another part of issue 27) names the version and the commit
        assert version.stdout.split("\n")[0].startswith(f"argus {installed['version']} (git {commit[:12]})")

    installed_at = (argus.parent.parent / ".installed").stat().st_mtime_ns
    output.write_text("")
    again, _ = install(tmp_path, requirements(source))  # the next job on this runner: the same venv, as it is
    assert again.returncode == 0 and outputs(output)["argus"] == str(argus), again.stderr
    assert (argus.parent.parent / ".installed").stat().st_mtime_ns == installed_at


READ_BACK = """
import importlib.metadata as m, reconcile
from reconcile.commands.install_source import detect
import json
d = m.distribution('argus-ray')
print(json.dumps({'version': d.version, 'direct': d.read_text('direct_url.json'), 'module': reconcile.__file__,
                  'detected': detect().requirement}))
"""


def test_init_pins_the_checkout_argus_runs_from():
    """This test run's argus is an install of this checkout: its origin (or path) at HEAD."""
    source = detect()
    origin = subprocess.run(["git", "-C", str(ROOT), "remote", "get-url", "origin"], capture_output=True, text=True)
    url = public(origin.stdout.strip()) if origin.returncode == 0 else ROOT.as_uri()
    assert source.requirement == f"argus-ray @ git+{url}@{head()}"
    assert f"Written by `argus init` of argus {importlib.metadata.version('argus-ray')}, from " in requirements(source)


@pytest.mark.parametrize(("spec", "requirement"), [
    ("argus-ray==0.2.0", "argus-ray==0.2.0"),
    ("git+https://github.com/org/argus@" + "a" * 40, "argus-ray @ git+https://github.com/org/argus@" + "a" * 40),
    ("git+https://x-access-token:ghs_SECRET@github.com/org/argus@" + "b" * 40,
     "argus-ray @ git+https://github.com/org/argus@" + "b" * 40),
])
def test_install_from_takes_a_pin_or_a_commit_and_never_writes_a_credential(spec, requirement):
    assert given(spec).requirement == requirement


def test_scp_like_origins_become_urls_pip_reads():
    assert public("git@github.com:org/argus.git") == "ssh://git@github.com/org/argus.git"
    assert public("ssh://me:pw@host/argus") == "ssh://me@host/argus"


@pytest.mark.parametrize("spec", ["argus-ray", "git+https://github.com/org/argus@main", "argus==0.1.0",
                                  "git+https://github.com/org/argus", "/nowhere/argus_ray-0.1.0-py3-none-any.whl",
                                  "git+https://bot:ghp_SECRET@github.com/org/argus@main",
                                  "https://bot:ghp_SECRET@github.com/org/argus"])
def test_install_from_refuses_what_would_not_pin_one_argus(spec, tmp_path, argus):
    with pytest.raises(ArgusError):
        given(spec)
    refused = argus("init", tmp_path / "ws", "--install-from", spec)
    assert refused.code == 1 and "--install-from" in refused.err and not (tmp_path / "ws").exists()
    assert "SECRET" not in refused.out + refused.err


def test_a_wheel_is_pinned_by_its_absolute_path(tmp_path):
    wheel = tmp_path / "argus_ray-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    assert given(str(wheel)).requirement == f"argus-ray @ {wheel.as_uri()}"


def test_a_checkout_is_pinned_at_head_by_its_origin_without_credentials_and_a_dirty_one_warns(tmp_path):
    from reconcile.commands.install_source import from_checkout

    repo = tmp_path / "argus"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'argus-ray'\n")
    with pytest.raises(ArgusError, match="has no commit yet"):
        from_checkout(repo)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "argus"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    clean = from_checkout(repo)
    assert clean.requirement == f"argus-ray @ git+{repo.as_uri()}@{commit}"
    assert "no origin remote" in clean.warning and "uncommitted" not in clean.warning

    subprocess.run([*git, "remote", "add", "origin", "https://bot:ghp_SECRET@git.example/org/argus.git"], check=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'argus-ray'\nversion = '9'\n")
    dirty = from_checkout(repo)
    assert dirty.requirement == f"argus-ray @ git+https://git.example/org/argus.git@{commit}"
    assert "uncommitted changes" in dirty.warning and commit[:12] in dirty.warning and "origin" not in dirty.warning
    assert "SECRET" not in dirty.requirement + dirty.origin + dirty.warning


def test_a_second_init_by_another_argus_says_its_pin_differs(tmp_path, argus, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    assert argus("init", "teams/nlp", "--install-from", "argus-ray==0.0.9").code == 0
    pinned = (tmp_path / ".github" / "actions" / "argus" / "requirements.txt").read_text()
    second = argus("init", "teams/vision", "--install-from", "argus-ray==0.1.0")
    assert second.code == 0
    assert "requirements.txt pins another argus than this one (argus-ray==0.1.0)" in second.out
    assert (tmp_path / ".github" / "actions" / "argus" / "requirements.txt").read_text() == pinned
