"""The README's "Your first real cluster", typed as written against a real cluster: every command exists,
takes the options shown, and prints what the README says it prints. Only the dashboard, the shared root,
the workspace's directory (a name no other test uses) and the port are this test's own; `serve` gets
--once to end."""

from __future__ import annotations

import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.cluster import jobs_of, wait_for

README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough() -> list[tuple[list[str], list[str]]]:
    """Each command line of the section's sh blocks, with the comment lines (what it prints) under it."""
    section = README.read_text().split("## Your first real cluster", 1)[1].split("\n## ", 1)[0]
    commands: list[tuple[list[str], list[str]]] = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for line in block.splitlines():
            words, _, comment = line.partition(" #")
            if words.strip():
                commands.append((shlex.split(words), [comment.strip()]))
            elif comment.strip():
                commands[-1][1].append(comment.strip())
    return commands


def test_the_first_real_cluster_walkthrough_works_as_written(ray_cluster, argus, hook, tmp_path, monkeypatch):
    url, events = hook
    repo, shared = tmp_path / "infra", tmp_path / "nfs"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shared.mkdir()
    monkeypatch.chdir(repo)
    mine = {"http://10.0.0.1:8265": ray_cluster.address, "/mnt/shared": str(shared), "teams/nlp": "teams/readme-nlp",
            "'nlp'": "'readme-nlp'", "127.0.0.1:9108": "127.0.0.1:0"}

    def ours(text: str) -> str:
        for theirs, own in mine.items():
            text = text.replace(theirs, own)
        return text

    steps = walkthrough()
    assert [words[1] for words, _ in steps if words[0] == "argus"] == [
        "init", "validate", "doctor", "plan", "apply", "status", "logs", "serve"]
    for words, said in steps:
        words = [ours(w) for w in words]
        if words[0] == "export":
            monkeypatch.setenv(words[1].split("=", 1)[0], url)  # the receiver stands in for Slack
            continue
        if words[1] == "apply":
            monkeypatch.setattr(sys, "stdin", io.StringIO("yes\n"))
        if words[1] == "status":  # the README shows the run finished
            [run] = jobs_of(ray_cluster.address, "readme-nlp")
            wait_for(ray_cluster.address, run.submission_id, {"SUCCEEDED"})
        result = argus(*words[1:], *(["--once"] if words[1] == "serve" else []))
        assert result.code == 0, (words, result.out, result.err)
        printed = result.out + result.err
        for claim in said:
            _check(words[1], ours(claim), printed)
        if words[1] == "serve":  # as the README's prose says
            assert "listening on http://127.0.0.1:" in printed and "turn=1 workspace=readme-nlp ok=True" in printed
    assert [e for e in events if e.get("kind") == "failed"] == []


def _check(command: str, claim: str, printed: str) -> None:
    """A comment is what the command prints (after "offline: " or "then: "), but for the words around it."""
    shown = claim.split(": ", 1)[1] if command in ("validate", "apply", "doctor") else claim
    shown = re.sub(r"\(plan [0-9a-f]{12}\)", "(plan ", shown)
    if command == "plan" and not shown.startswith(("+", "Plan")):
        return  # "reads the cluster and the shared root, changes nothing:"
    if command == "logs":
        assert "hello from" in printed
        return
    shown = re.sub(r"[0-9a-f]{12}\.1", "", shown)  # the run's id carries the spec's hash
    for part in re.split(r"\s{2,}", shown.strip()):
        assert part in printed, (command, part, printed)
