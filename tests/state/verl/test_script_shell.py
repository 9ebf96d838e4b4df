"""The shell that reads a launch script for `argus import verl-script` runs none of its commands, reads no file
of this machine, and leaves nothing running: each way a reviewer found around it, asserted by its effect (a
marker file never made, a secret never read, no process left), not by a message."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from state.verl.script_shell import evaluate, sandbox_works

LAUNCH = "python3 -m verl.trainer.main_ppo trainer.project_name=\"$X\""


def _values(script: str) -> list[str]:
    found = evaluate(script, [])
    return [arg for call in found.calls for arg in call.argv]


@pytest.mark.parametrize("escape", [
    "PATH=/usr/bin:/bin", "export PATH=/usr/local/bin:$PATH", "declare -n r=PATH; r=/usr/bin:/bin",
    "declare PATH=/usr/bin", "f() { declare -g PATH=/usr/bin; }; f", "printf -v PATH %s /usr/bin",
    "read PATH <<< /usr/bin", "PATH+=:/usr/bin", "export -n PATH; declare PATH=/usr/bin",
    "typeset -n r=PATH; r=/usr/bin", "BASH_CMDS[touch]=/usr/bin/touch", "SHELL=/bin/bash; ENV=/x",
    "command_not_found_handle() { /usr/bin/touch \"$MARK\"; }", "unset -f command_not_found_handle",
    "eval '/usr/bin/touch \"$MARK\"'", "enable -f /usr/lib/x.so x", "exec /usr/bin/touch \"$MARK\"",
    "coproc /usr/bin/touch \"$MARK\"", "source /dev/stdin <<< 'touch \"$MARK\"'",
])
def test_no_way_to_set_the_path_or_the_handler_runs_a_command(escape: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = f"MARK={marker}\n{escape}\ntouch \"$MARK\"; python3 -c 'open(\"{marker}\", \"w\")'\n{LAUNCH}\n"
    evaluate(script, [])
    assert not marker.exists()


def test_a_file_the_script_names_is_never_read(tmp_path: Path) -> None:
    assert sandbox_works(), "user namespaces are needed for the import's sandbox (unshare --user --mount)"
    secret = tmp_path / "netrc"
    secret.write_text("machine x password hunter2-secret\n")
    values = _values(f"X=$(< {secret}); read -r Y < {secret}; Z=(/etc/*); X=\"$X$Y${{Z[*]}}\"\n"
                     f"X=\"$X$(< /proc/self/environ)$(< /etc/passwd)\"\n{LAUNCH}\n")
    assert values and not any("hunter2" in v or "root:" in v or "passwd" in v for v in values)


def test_globs_are_kept_as_written() -> None:
    assert "trainer.project_name=/*" in _values("X=/*\n" + LAUNCH.replace('"$X"', "$X") + "\n")


def test_nothing_the_script_starts_outlives_it(tmp_path: Path) -> None:
    token = f"argus-orphan-{os.getpid()}-{time.monotonic_ns()}"
    evaluate(f"( n=0; while [ $n -lt 400000000 ]; do n=$((n+1)); done; : {token} ) 1<&- 2<&- &\n{LAUNCH}\n", [])
    time.sleep(0.2)
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, token)]


def _cmdline_has(proc: Path, token: str) -> bool:
    try:
        return token.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_a_flood_of_output_or_a_forged_record_ends_the_evaluation_quietly() -> None:
    started = time.monotonic()
    flood = evaluate("printf '%*s' 100000000 ''; printf '%*s' 100000000 ''\n" + LAUNCH + "\n", [])
    assert time.monotonic() - started < 30 and flood.calls == []  # stopped at the cap, before the launch
    forged = evaluate("declare -f command_not_found_handle; X=$(declare -f command_not_found_handle)\n" + LAUNCH, [])
    assert [c.argv[:3] for c in forged.calls] == [("python3", "-m", "verl.trainer.main_ppo")]


def test_an_import_without_the_sandbox_says_so(monkeypatch) -> None:
    from state.verl import script_shell
    from state.verl.script_map import import_script

    monkeypatch.setattr(script_shell, "sandbox_works", lambda: False)
    found = evaluate(LAUNCH.replace('"$X"', "x") + "\n", [])
    assert not found.sandboxed and [c.argv[:3] for c in found.calls] == [("python3", "-m", "verl.trainer.main_ppo")]
    said = import_script(found, "run.sh", "j", "local", None).left_out
    assert any("no user namespace" in line for line in said)


def test_a_fork_bomb_is_capped_and_ends_with_the_evaluation() -> None:
    """A memory cap is per process, so forked subshells are capped in number too (as `nobody` when argus is root:
    the kernel exempts root from that cap)."""
    token = f"argus-bomb-{os.getpid()}-{time.monotonic_ns()}"
    started = time.monotonic()
    found = evaluate(f"f() {{ : {token}; x=$(printf '%*s' 50000000 ''); f & f; }}; f\n{LAUNCH}\n", [])
    assert time.monotonic() - started < 20 and found.error is not None
    time.sleep(0.2)
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, token)]
