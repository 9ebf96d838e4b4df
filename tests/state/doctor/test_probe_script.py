"""The probe's sh script run by a real /bin/sh on real directories (as a node would), and its report read back;
a hostile log never makes a fact it did not say."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from state.doctor.place import ProbePlace
from state.doctor.script import parse_report, probe_script

NONCE = "0123456789abcdef"


def run_script(root: Path) -> str:
    """As Ray runs an entrypoint: /bin/sh -c."""
    done = subprocess.run(["/bin/sh", "-c", probe_script(str(root), NONCE)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_on_argus_root_it_sees_argus_file_answers_and_names_the_writable_folders(tmp_path):
    root = tmp_path / "shared root; $(touch pwned)"  # a hostile path stays one argument
    (root / ".argus" / "audit").mkdir(parents=True)
    place = ProbePlace(str(root), NONCE)
    place.prepare()

    report = parse_report(run_script(root))

    assert report.sees and report.wrote and report.done and report.uid == str(os.geteuid())
    assert place.answer() == f"{NONCE} {os.geteuid()}"
    assert report.writable[".argus"] == "yes" and report.writable[".argus/audit"] == "yes"
    assert report.writable[".argus/queue"] == "absent" and report.owner == str(os.geteuid())
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    place.remove()
    assert sorted(p.name for p in root.rglob("*")) == [".argus", "audit"]  # as before: the probe's files gone


def test_on_another_directory_it_sees_nothing_and_writes_nothing(tmp_path):
    root = tmp_path / "other"
    (root / ".argus").mkdir(parents=True)

    report = parse_report(run_script(root))

    assert report.sees is False and report.wrote is False and report.done
    assert sorted(p.name for p in root.rglob("*")) == [".argus"]


def test_a_place_made_on_a_fresh_root_is_removed_whole(tmp_path):
    root = tmp_path / "fresh"
    place = ProbePlace(str(root), NONCE)
    place.prepare()
    assert (root / ".argus" / "doctor" / NONCE / "from-argus").read_text() == NONCE + "\n"
    assert place.remove() == [] and not root.exists()


def test_a_hostile_log_makes_no_fact_it_did_not_say():
    log = "\n".join([
        "Running entrypoint for job x: sh -c 'say() { echo \"argus-doctor: $1\"; }'",
        "argus-doctor: sees=yes",
        "argus-doctor: sees=no",  # said twice: the first wins
        "argus-doctor: uid=0; rm -rf /",  # out of shape: not taken
        "argus-doctor: writable /etc=yes",  # not one of argus's folders
        "argus-doctor: writable .argus=maybe",
        "  argus-doctor: wrote=yes",  # not at the start of a line
        "argus-doctor: clock=99999999999999999999",
        "argus-doctor: owner=\x1b[31m0",
    ])
    report = parse_report(log)
    assert report.sees is True and report.uid is None and report.wrote is None and report.clock is None
    assert report.writable == {} and report.owner is None and not report.done


def test_the_entrypoint_is_one_sh_line_with_nothing_of_argus():
    entry = probe_script("/mnt/shared", NONCE)
    assert "\n" not in entry and "python" not in entry
    assert shlex.split(entry)[:2] == ["sh", "-c"]
