"""The audit log's hash chain: any edit, removal, insertion or reordering is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from state.audit import log as audit
from state.audit.events import StepCarriedOut
from tests.support.workspace import make_workspace


@pytest.fixture
def logged(tmp_path: Path):
    ws = make_workspace(tmp_path / "ws", "audited", "http://127.0.0.1:9")
    for number in range(5):
        audit.append(str(ws.shared), ws.name, StepCarriedOut(address=f"job.j{number}", action="submit",
                                                                step="submit", outcome="ok"))
    return ws, audit.audit_path(str(ws.shared), ws.name)


def rewrite(path: Path, change) -> None:
    lines = path.read_text().splitlines()
    path.write_text("\n".join(change(lines)) + "\n")


def test_an_intact_chain_verifies(logged, argus):
    ws, _ = logged
    result = argus("audit", "verify", ws.root)
    assert result.code == 0 and "5 record(s), chain intact." in result.out


@pytest.mark.parametrize(("tamper", "named"), [
    (lambda lines: [*lines[:2], lines[2].replace("job.j2", "job.jX"), *lines[3:]], "line 3 (" ),
    (lambda lines: lines[:2] + lines[3:], "line 3 ("),
    (lambda lines: [lines[0], lines[2], lines[1], *lines[3:]], "line 2 ("),
    (lambda lines: [*lines[:3], lines[1], *lines[3:]], "line 4 ("),
])
def test_edits_removals_reorderings_and_insertions_are_named(logged, argus, tamper, named):
    ws, path = logged
    rewrite(path, tamper)
    result = argus("audit", "verify", ws.root)
    assert result.code == 1
    assert named in result.out.splitlines()[1]


def test_a_forged_hash_still_breaks_the_chain(logged, argus):
    ws, path = logged

    def forge(lines):
        entry = json.loads(lines[1])
        entry["outcome"] = "forged"
        entry["hash"] = audit.record_hash(entry)  # recomputed: the next record's `prev` now disagrees
        return [lines[0], json.dumps(entry, sort_keys=True), *lines[2:]]

    rewrite(path, forge)
    result = argus("audit", "verify", ws.root)
    assert result.code == 1 and "line 3 (" in result.out and "removed, inserted or reordered" in result.out


def test_show_filters_by_job_and_time(logged, argus):
    ws, _ = logged
    shown = argus("audit", "show", ws.root, "--job", "j3")
    assert shown.code == 0 and len(shown.out.splitlines()) == 1 and "job.j3" in shown.out
    as_json = argus("audit", "show", ws.root, "--json", "--since", "2000-01-01")
    assert [json.loads(line)["address"] for line in as_json.out.splitlines()] == [f"job.j{n}" for n in range(5)]


def test_show_prints_what_a_job_wrote_into_the_log_as_plain_text(logged, argus):
    """Issue 37: any job can append to the log; its words reach the terminal as text, never as escapes."""
    ws, path = logged
    escapes = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[31mAPPROVED\x1b[0m\r\nforged line"

    def forge(lines: list[str]) -> list[str]:
        entry = json.loads(lines[1])
        entry["outcome"], entry["actor"] = "ok" + escapes, "ci" + escapes
        return [lines[0], json.dumps(entry, sort_keys=True), *lines[2:]]

    rewrite(path, forge)
    shown = argus("audit", "show", ws.root)
    assert "\x1b" not in shown.out and "\x07" not in shown.out and "\r" not in shown.out
    assert "APPROVED" in shown.out and not any(line.startswith("forged line") for line in shown.out.splitlines())
