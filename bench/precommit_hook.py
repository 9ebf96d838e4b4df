"""argus's pre-commit hook for real, as a team would use it: what installing it costs, that it holds no Ray,
and that it catches an error at a monorepo's root naming the file from there. Too slow for `make test`
(pre-commit builds the hook's environment from scratch: 57-105 s measured on the shared 2-core machine), so
tests/commands/test_precommit.py runs the hook's entry the way pre-commit does instead.

    .venv/bin/python bench/precommit_hook.py

Installs pre-commit into a temporary venv, makes a git repository with teams/nlp and teams/vision
(vision's jobs/x.yaml broken at line 6) and a .pre-commit-config.yaml naming this checkout's HEAD
(commit first), stages it all and runs `pre-commit run`. Prints the seconds it took, whether the hook
failed naming teams/vision/jobs/x.yaml:6, and whether `import ray` works in the hook's environment
(it must not).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOB = "kind: Job\nname: {name}\ncluster: local\nworkload: command\nentrypoint: echo hi\n"


def _two_teams(repo: Path) -> None:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for team in ("nlp", "vision"):
        (repo / "teams" / team / "jobs").mkdir(parents=True)
        (repo / "teams" / team / "argus.yaml").write_text(f"kind: Workspace\nname: {team}\n")
        (repo / "teams" / team / "cluster.yaml").write_text("kind: Cluster\nname: local\n"
                                                            "address: http://127.0.0.1:9\nshared_root: .shared\n")
        (repo / "teams" / team / "jobs" / "a.yaml").write_text(JOB.format(name="a"))
    (repo / "teams" / "vision" / "jobs" / "x.yaml").write_text(JOB.format(name="x") + "colour: red\n")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    (repo / ".pre-commit-config.yaml").write_text(f"repos:\n- repo: {ROOT}\n  rev: {head}\n"
                                                  "  hooks:\n  - id: argus-validate\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="argus-precommit-") as tmp:
        base = Path(tmp)
        subprocess.run([sys.executable, "-m", "venv", base / "tools"], check=True)
        subprocess.run([base / "tools" / "bin" / "pip", "install", "--quiet", "pre-commit"], check=True)
        _two_teams(repo := base / "mono")
        home = base / "home"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(base), "PRE_COMMIT_HOME": str(home)}
        started = time.monotonic()
        done = subprocess.run([base / "tools" / "bin" / "pre-commit", "run"], cwd=repo, env=env, capture_output=True,
                              text=True)
        took = time.monotonic() - started
        named = done.returncode == 1 and "teams/vision/jobs/x.yaml:6: colour: unknown key" in done.stdout
        pythons = sorted(home.glob("*/py_env-*/bin/python"))
        ray = [subprocess.run([p, "-c", "import ray"], capture_output=True).returncode == 0 for p in pythons]
        print(f"pre-commit run: {took:.0f} s (its environment built from scratch)")
        print(f"caught the error, named teams/vision/jobs/x.yaml:6 from the root: {named}")
        print(f"ray importable in the hook's environment: {any(ray) if ray else 'environment not found'}")
        if not named:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        return 0 if named and not any(ray) else 1


if __name__ == "__main__":
    sys.exit(main())
