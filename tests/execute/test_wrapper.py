"""The entrypoint wrapper, run by a real /bin/sh the way Ray runs it (`/bin/sh -c`, own session):
the run keeps its log and its end on the shared filesystem and behaves as the bare command would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from reconcile.execute.wrapper import wrapped
from state.runs.records import read_end
from tests.support.cluster import until


def start(command: str, job_dir: Path, has_secrets: bool = False, **env: str) -> subprocess.Popen:
    """As Ray's job supervisor starts an entrypoint: shell=True, a new session, stdout+stderr to one file."""
    return subprocess.Popen(wrapped(command, str(job_dir), has_secrets), shell=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **env})


def test_output_and_exit_code_are_kept_and_unchanged(tmp_path):
    job = tmp_path / "shared" / "jobs" / "ws.a.123.1"
    proc = start("echo to stdout; echo to stderr >&2; printf 'no newline'; exit 3", job)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert out.decode() == "to stdout\nto stderr\nno newline"
    assert (job / "logs" / "driver.log").read_text() == out.decode()  # what Ray shows, byte for byte
    end = json.loads((job / "exit.json").read_text())
    assert end["exit_code"] == 3 and end["signal"] is None and end["signalled"] is False
    assert read_end(str(tmp_path / "shared"), "ws.a.123.1").status == "FAILED"
    assert not list(job.glob(".exit.json.*")), "the temporary end file was left behind"


def test_quotes_spaces_and_dollars_reach_the_command_as_written(tmp_path):
    job = tmp_path / "it's a \"dir\" $HOME"
    proc = start("""printf '%s|' "a b" 'c'"'"'d' '$HOME'; exit 0""", job)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.decode() == "a b|c'd|$HOME|"
    assert json.loads((job / "exit.json").read_text())["exit_code"] == 0


def test_a_stop_reaches_the_command_and_its_last_words_are_kept(tmp_path):
    """Ray's stop signals the wrapper and every descendant; the command's TERM handler runs, its last
    line reaches the log (tee ignores the stop), and exit.json says a signal ended the run."""
    job, marker = tmp_path / "job", tmp_path / "child-got-term"
    proc = start(f'trap "echo cleaning up; touch {marker}; exit 7" TERM; echo started; '
                 "while true; do sleep 0.1; done", job)
    until(lambda: "started" in _log(job), "the command started")
    os.killpg(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=30)
    assert marker.exists(), "the stop signal did not reach the command"
    assert proc.returncode == 7
    assert "cleaning up" in _log(job)
    end = json.loads((job / "exit.json").read_text())
    assert end == {**end, "exit_code": 7, "signal": "TERM", "signalled": True}


def test_sigint_as_the_stop_signal_still_reaches_the_command(tmp_path):
    """RAY_JOB_STOP_SIGNAL=SIGINT: a background command of a non-interactive sh would ignore it."""
    job, marker = tmp_path / "job", tmp_path / "child-got-int"
    proc = start(f'trap "touch {marker}; exit 5" INT; echo started; while true; do sleep 0.1; done', job)
    until(lambda: "started" in _log(job), "the command started")
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=30)
    assert marker.exists() and proc.returncode == 5
    assert json.loads((job / "exit.json").read_text())["signal"] == "INT"


def test_a_command_killed_by_a_signal_is_recorded_failed_with_the_signal(tmp_path):
    job = tmp_path / "job"
    proc = start("kill -KILL $$", job)
    proc.communicate(timeout=30)
    assert proc.returncode == 137
    end = json.loads((job / "exit.json").read_text())
    assert end["exit_code"] == 137 and end["signal"] == "KILL" and end["signalled"] is False


def test_a_background_process_holding_the_output_does_not_hold_the_run(tmp_path):
    job = tmp_path / "job"
    started = time.monotonic()
    proc = start("sleep 60 & echo left a child behind", job)
    proc.wait(timeout=30)
    assert proc.returncode == 0 and time.monotonic() - started < 20
    assert (job / "exit.json").exists()


def test_an_unwritable_shared_root_still_runs_the_command(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the job directory should go")
    proc = start("echo ran anyway; exit 4", blocker / "job")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 4 and "ran anyway" in out.decode()
    assert "keeps no record of its own" in out.decode()


def test_no_temporary_files_are_left_behind(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = start("echo hi", tmp_path / "job", TMPDIR=str(scratch))
    proc.communicate(timeout=30)
    assert list(scratch.iterdir()) == []


def _log(job: Path) -> str:
    path = job / "logs" / "driver.log"
    return path.read_text() if path.exists() else ""


def test_an_exit_json_planted_by_a_job_is_not_believed_unless_it_is_one(tmp_path):
    """Every job can write the shared root: a symlink, a huge file, a FIFO or a wrong shape is no end."""
    secret = tmp_path / "elsewhere.json"
    secret.write_text('{"exit_code": 0}')
    plants = {
        "symlink": lambda p: p.symlink_to(secret),
        "huge": lambda p: p.write_text('{"exit_code": 0, "ended_at": "' + "x" * 10000 + '"}'),
        "fifo": lambda p: os.mkfifo(p),
        "wrong": lambda p: p.write_text('{"exit_code": "zero"}'),
        "signal": lambda p: p.write_text('{"exit_code": 0, "signal": "$(rm -rf /)"}'),
        "garbage": lambda p: p.write_bytes(b"\xff\xfe not json"),
    }
    for name, plant in plants.items():
        (tmp_path / "jobs" / name).mkdir(parents=True)
        plant(tmp_path / "jobs" / name / "exit.json")
        assert read_end(str(tmp_path), name) is None, name
    (tmp_path / "jobs" / "real").mkdir()
    (tmp_path / "jobs" / "real" / "exit.json").write_text('{"exit_code": 0, "signal": null, "signalled": false}')
    assert read_end(str(tmp_path), "real").status == "SUCCEEDED"


def test_secrets_reach_the_command_from_a_file_that_is_gone_before_it_starts(tmp_path):
    from state.runs import secrets as run_secrets

    job = tmp_path / "job"
    job.mkdir()
    tricky = "it's $HOME; `touch " + str(tmp_path / "injected") + "`\nline two"
    run_secrets.write(job, {"TOKEN": tricky, "OTHER": "plain"})
    secrets_file = job / run_secrets.SECRETS_FILE
    assert secrets_file.stat().st_mode & 0o777 == 0o600
    proc = start(f'test -e {secrets_file} && echo still there; printf "%s|%s" "$TOKEN" "$OTHER"', job, True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.decode() == tricky + "|plain"
    assert not secrets_file.exists() and not (tmp_path / "injected").exists()


def test_a_secrets_file_the_run_cannot_read_fails_it_with_the_reason(tmp_path):
    from state.runs import secrets as run_secrets

    job = tmp_path / "job"
    job.mkdir()
    marker = tmp_path / "ran"
    (job / run_secrets.SECRETS_FILE).mkdir()  # not a file: as unreadable as another user's
    proc = start(f"touch {marker}", job, True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1 and not marker.exists()
    assert "cannot read its .secrets.env" in out.decode()
    assert json.loads((job / "exit.json").read_text())["exit_code"] == 1


def test_a_secret_named_like_the_wrappers_own_variables_is_refused(tmp_path):
    import pytest

    from state.runs import secrets as run_secrets

    job = tmp_path / "job"
    job.mkdir()
    with pytest.raises(ValueError, match="'c'"):
        run_secrets.write(job, {"c": "x"})
    with pytest.raises(ValueError, match="letters, digits"):
        run_secrets.write(job, {"A;touch x": "x"})
    assert not list(job.iterdir())


def test_a_value_argus_holds_never_reaches_the_secrets_file_whatever_it_is_called(tmp_path):
    """Defence in depth behind the loader (specs.kinds.held_variables): the value, not the reference, is judged."""
    import pytest

    from state.runs import secrets as run_secrets

    job = tmp_path / "job"
    job.mkdir()
    environ = {"ARGUS_ROOT_KEY": "k3y-of-the-root", "GIT_TOKEN_GITHUB_COM": "git-t0ken", "WANDB_API_KEY": "wandb",
               "ARGUS_EMPTY": ""}
    for values, said in (({"W": "k3y-of-the-root"}, "W would receive the value of ARGUS_ROOT_KEY"),
                         ({"OK": "wandb", "G": "git-t0ken"}, "G would receive the value of GIT_TOKEN_GITHUB_COM")):
        with pytest.raises(ValueError, match=said) as caught:
            run_secrets.write(job, values, environ)
        assert "k3y-of-the-root" not in str(caught.value) and "git-t0ken" not in str(caught.value)
    assert not list(job.iterdir())
    run_secrets.write(job, {"OK": "wandb", "EMPTY": ""}, environ)
    assert (job / run_secrets.SECRETS_FILE).read_text() == "export EMPTY=''\nexport OK=wandb\n"


def _secret_run(tmp_path: Path, values: dict[str, str], command: str) -> tuple[int, bytes, Path]:
    from state.runs import secrets as run_secrets

    job = tmp_path / "job"
    job.mkdir(exist_ok=True)
    run_secrets.write(job, values)
    proc = start(command, job, True)
    out, _ = proc.communicate(timeout=30)
    return proc.returncode, out, job


@pytest.mark.parametrize("value", [
    "", "-n", "'", "''\\'", '"$(touch INJ)"', "`touch INJ`", "$(touch INJ)", "a\nb\n\n", "\r\n\t end",
    "\\'\\\\", "${IFS}$0$1$@", "ünïcødé ✓ 𝄞", "x" * 100_000, "; touch INJ #", "'; touch INJ; '",
    "\n'\ntouch INJ\n'", "\udcff\udcfe raw bytes",
])
def test_no_secret_value_runs_as_code_and_each_reaches_the_command_byte_for_byte(tmp_path, value):
    code, out, job = _secret_run(tmp_path, {"TOKEN": value}, 'cd "$(dirname "$0")" 2>/dev/null; printf "%s" "$TOKEN"')
    assert code == 0, out[-300:]
    assert out == os.fsencode(value)
    assert not list(tmp_path.rglob("INJ")) and not list(Path.cwd().glob("INJ"))
    assert not (job / ".secrets.env").exists()


@pytest.mark.parametrize("name", ["IFS", "PS4", "ENV", "OPTIND", "PPID", "UID", "EUID", "SHELLOPTS",
                                  "BASH_VERSINFO", "TOKEN\n", "d", "k"])
def test_a_secret_named_like_a_shell_or_wrapper_variable_is_refused(tmp_path, name):
    from state.runs import secrets as run_secrets

    job = tmp_path / "job"
    job.mkdir()
    with pytest.raises(ValueError, match="rename it"):
        run_secrets.write(job, {name: "0123456789"})
    assert not list(job.iterdir())


def test_a_secret_ifs_would_have_split_the_wrappers_pids_and_exit_code(tmp_path):
    """Why IFS is refused: dash ignores an IFS from its environment, but one sourced mid-script applies."""
    job = tmp_path / "job"
    job.mkdir()
    (job / ".secrets.env").write_text("export IFS='0123456789'\n")
    proc = start("exit 3", job, True)
    proc.communicate(timeout=30)
    assert json.loads((job / "exit.json").read_text())["exit_code"] != 3  # the wrapper's own $r was split


def test_a_run_without_secrets_never_sources_a_planted_file(tmp_path):
    job, marker = tmp_path / "job", tmp_path / "planted-ran"
    job.mkdir()
    (job / ".secrets.env").write_text(f"touch {marker}\n")
    proc = start("echo ok", job)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.decode() == "ok\n"
    assert not marker.exists()


def test_a_run_whose_secrets_file_is_missing_fails_saying_so_instead_of_running_without(tmp_path):
    """A node without the shared root at the same path, or a file removed before the run started."""
    job, marker = tmp_path / "job", tmp_path / "ran"
    proc = start(f"touch {marker}", job, True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1 and not marker.exists()
    assert "has no .secrets.env in its job directory" in out.decode()
    assert json.loads((job / "exit.json").read_text())["exit_code"] == 1
