"""max_runtime's durations: the forms people write, and a located, clear error for anything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.duration import MAX_SECONDS, parse_duration, shown
from specs.errors import SpecError
from specs.load.loader import load_workspace
from tests.support.workspace import Workspace


@pytest.mark.parametrize("text, seconds", [
    ("90m", 5400), ("2h", 7200), ("1h30m", 5400), ("45s", 45), ("1d", 86_400), ("1d2h3m4s", 93_784),
    (" 10m ", 600), ("600", 600), (5, 5), (MAX_SECONDS, MAX_SECONDS)])
def test_the_forms_people_write_are_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("value", [
    "", "  ", "0s", 0, -5, "1.5h", "30m1h", "1h1h", "90 m", "1w", "h", "5x", True, 1.5, None, [],
    MAX_SECONDS + 1, "367d", "9" * 5000, "1" * 30 + "s"])
def test_anything_else_is_refused_with_what_is_accepted(value):
    with pytest.raises(ValueError, match=r'like "45s", "90m"'):
        parse_duration(value)


def test_durations_are_shown_as_written_back():
    assert [shown(s) for s in (45, 5400, 86_400, 93_784, 0)] == ["45s", "1h30m", "1d", "1d2h3m4s", "0s"]


def test_a_bad_max_runtime_is_an_error_at_its_line(tmp_path: Path):
    ws = Workspace(tmp_path, "team", "http://127.0.0.1:1")
    ws.write("argus.yaml", "kind: Workspace\nname: team\n")
    ws.write("clusters/c.yaml", "kind: Cluster\nname: c\naddress: http://10.0.0.1:8265\nshared_root: /mnt/shared\n")
    ws.write("jobs/a.yaml", "kind: Job\nname: a\ncluster: c\nworkload: command\nentrypoint: [x]\n"
             "max_runtime: 2 hours\n")
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    shown_errors = [str(d) for d in caught.value.diagnostics]
    assert len(shown_errors) == 1 and "jobs/a.yaml:6" in shown_errors[0] and "max_runtime" in shown_errors[0]
    assert '"1h30m"' in shown_errors[0]
    ws.write("jobs/a.yaml", "kind: Job\nname: a\ncluster: c\nworkload: command\nentrypoint: [x]\nmax_runtime: 1h30m\n"
             "retry: {max_attempts: 2, on: [deadline]}\n")
    job = load_workspace(ws.root).jobs["a"]
    assert job.max_runtime == 5400 and job.retry.on == ["deadline"]
