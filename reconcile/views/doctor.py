"""`argus doctor`'s answer: one line per check (ok, warn or FAIL, and what to do), clusters one after the other,
then the verdict; or one JSON object (docs/clusters.md describes it)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from specs.diagnostics import plain
from state.doctor.checks import ClusterExam

MARKS = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
NAME_WIDTH = len("shared-root")
"""The longest check's name: every cluster's lines align alike."""


def render(exams: Sequence[ClusterExam]) -> str:
    lines: list[str] = []
    for exam in exams:
        lines.append(_line(f"cluster {exam.cluster} at {exam.address}, shared root {exam.shared_root}"))
        lines += [_line(f"  {MARKS[c.level]}  {c.name.ljust(NAME_WIDTH)}  {c.message}") for c in exam.checks]
        lines.append("")
    lines.append(verdict(exams))
    return "\n".join(lines)


def verdict(exams: Sequence[ClusterExam]) -> str:
    failed = [exam.cluster for exam in exams if exam.failed]
    warnings = sum(exam.warnings for exam in exams)
    noted = f" ({warnings} warning{'s' if warnings != 1 else ''})" if warnings else ""
    if not exams:
        return "Verdict: the workspace names no cluster; nothing to check."
    if failed:
        return _line(f"Verdict: NOT READY: {', '.join(failed)} failed a check{noted}. Fix what the FAIL lines say, "
                     "then run `argus doctor` again.")
    return f"Verdict: ready: every check passed{noted}."


def as_json(exams: Sequence[ClusterExam]) -> str:
    return json.dumps({"ok": not any(exam.failed for exam in exams), "clusters": [_cluster(e) for e in exams]},
                      indent=2, default=str)


def _cluster(exam: ClusterExam) -> dict[str, object]:
    return {"cluster": exam.cluster, "address": exam.address, "shared_root": exam.shared_root, "ok": not exam.failed,
            "checks": [{"check": c.name, "level": c.level, "message": plain(c.message, lines=False)}
                       for c in exam.checks],
            "facts": exam.facts}


def _line(text: str) -> str:
    """One line whatever a spec or a cluster put in it: no line break, no terminal escape."""
    return plain(text, lines=False)
