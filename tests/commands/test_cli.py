"""The CLI's contract without a cluster: fast start, exit codes, one error boundary."""

from __future__ import annotations

import ast
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.cluster import QUICK
from tests.support.workspace import make_workspace

ROOT = Path(__file__).resolve().parents[2]


def test_help_and_validate_do_not_import_ray(tmp_path: Path):
    ws = make_workspace(tmp_path, "offline", "http://127.0.0.1:9")
    ws.job("a", QUICK)
    code = (
        "import sys; from reconcile.cli import main\n"
        f"assert main(['validate', {str(ws.root)!r}]) == 0\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('ray', 'git', 'requests')]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Valid: workspace 'offline', 1 cluster(s), 0 code snapshot(s), 1 job(s)." in done.stdout


def test_console_script_exit_codes(tmp_path: Path):
    argus = Path(sys.executable).with_name("argus")
    ok = subprocess.run([argus, "--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "validate" in ok.stdout
    bad_flag = subprocess.run([argus, "plan", "--no-such-flag"], capture_output=True, text=True)
    assert bad_flag.returncode == 1 and "No such option" in bad_flag.stderr
    assert "Traceback" not in bad_flag.stderr
    missing_arg = subprocess.run([argus, "logs"], capture_output=True, text=True)
    assert missing_arg.returncode == 1 and "Missing argument" in missing_arg.stderr
    assert "Traceback" not in missing_arg.stderr
    not_ws = subprocess.run([argus, "validate", str(tmp_path)], capture_output=True, text=True)
    assert not_ws.returncode == 1 and "argus.yaml is missing" in not_ws.stderr


def test_validate_reports_all_problems_and_exits_1(tmp_path: Path, argus):
    ws = make_workspace(tmp_path, "bad", "http://127.0.0.1:9")
    ws.job("a", QUICK, extra="colour: blue\n")
    ws.write("jobs/b.yaml", "kind: Job\nname: b\ncluster: nope\nworkload: command\nentrypoint: x\n")
    result = argus("validate", ws.root)
    assert result.code == 1
    assert "jobs/a.yaml:6: colour: unknown key" in result.err
    assert "jobs/b.yaml:3: cluster: no Cluster named 'nope'" in result.err
    assert "2 problems" in result.err


def test_unreachable_dashboard_names_address_and_what_to_try(tmp_path: Path, argus):
    port = _unused_port()
    ws = make_workspace(tmp_path, "down", f"http://127.0.0.1:{port}")
    result = argus("plan", ws.root)
    assert result.code == 1
    assert f"Cannot reach the Ray dashboard of cluster 'local' at http://127.0.0.1:{port}" in result.out
    assert "argus local up" in result.out


def test_a_dashboard_that_never_answers_times_out(tmp_path: Path, argus):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # accepts connections, never answers
        port = server.getsockname()[1]
        ws = make_workspace(tmp_path, "slow", f"http://127.0.0.1:{port}")
        result = argus("plan", ws.root, "--timeout", "1")
    assert result.code == 1
    assert "did not answer within 1s" in result.out


def test_an_http_error_is_reported_with_the_status(tmp_path: Path, argus):
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Broken(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"upstream overloaded")

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ws = make_workspace(tmp_path, "broken", f"http://127.0.0.1:{server.server_port}")
        result = argus("plan", ws.root)
    finally:
        server.shutdown()
    assert result.code == 1
    assert "status code 503" in result.out and "cluster 'local'" in result.out


def test_bugs_exit_3_and_interrupts_exit_130(tmp_path: Path, argus, monkeypatch: pytest.MonkeyPatch):
    from reconcile.commands import validate

    ws = make_workspace(tmp_path, "boundary", "http://127.0.0.1:9")

    def boom(*_args):
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(validate, "run", boom)
    result = argus("validate", ws.root)
    assert result.code == 3 and "argus hit a bug: ZeroDivisionError: oops" in result.err
    assert "Traceback" not in result.err
    debugged = argus("--debug", "validate", ws.root)
    assert debugged.code == 3 and "Traceback" in debugged.err and "ZeroDivisionError: oops" in debugged.err
    assert "Traceback" not in argus("validate", ws.root).err  # --debug belongs to one run, not the process

    def interrupted(*_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(validate, "run", interrupted)
    stopped = argus("validate", ws.root)
    assert (stopped.code, stopped.err) == (130, "Interrupted.\n")


def test_user_errors_exit_with_their_code_and_debug_adds_the_traceback(tmp_path: Path, argus,
                                                                       monkeypatch: pytest.MonkeyPatch):
    from reconcile.commands import validate
    from specs.errors import ArgusError

    class Refused(ArgusError):
        exit_code = 1

    def refuse(*_args):
        raise Refused("job.x is protected")

    monkeypatch.setattr(validate, "run", refuse)
    ws = make_workspace(tmp_path, "refused", "http://127.0.0.1:9")
    plain = argus("validate", ws.root)
    assert (plain.code, plain.err) == (1, "Error: job.x is protected\n")
    debugged = argus("--debug", "validate", ws.root)
    assert debugged.code == 1 and "Traceback" in debugged.err
    assert debugged.err.endswith("Error: job.x is protected\n")


def test_only_the_boundary_catches_to_choose_an_exit_code():
    """Commands raise; reconcile.boundary alone turns errors into exit codes."""
    broad = {"Exception", "BaseException", "ArgusError", "KeyboardInterrupt"}
    files = [ROOT / "reconcile" / "cli.py", *sorted((ROOT / "reconcile" / "commands").glob("*.py"))]
    found = [f"{path.name}:{handler.lineno}" for path in files for handler in ast.walk(ast.parse(path.read_text()))
             if isinstance(handler, ast.ExceptHandler) and _caught(handler) & broad]
    assert found == []


def _caught(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return {"BaseException"}
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in names}


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_every_command_exits_1_on_user_or_cluster_errors(tmp_path: Path, argus):
    ws = make_workspace(tmp_path / "ws", "codes", f"http://127.0.0.1:{_unused_port()}")
    ws.job("a", QUICK)
    for args in (["plan", ws.root], ["apply", ws.root, "--auto-approve"], ["status", ws.root],
                 ["logs", "a", ws.root], ["unlock", "nope", ws.root], ["validate", tmp_path / "nowhere"],
                 ["local", "status", "--state-dir", tmp_path / "no-cluster"], ["plan", ws.root, "--format", "yaml"],
                 ["plan", ws.root, "--target", "job.missing"]):
        result = argus(*args)
        assert result.code == 1, (args, result.out, result.err)
        assert "Traceback" not in result.err
    for command in ("validate", "plan", "apply", "status", "logs", "unlock", "local"):
        assert argus(command, "--help").code == 0
