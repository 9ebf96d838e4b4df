"""Git sources with a token from `${env:GIT_TOKEN_<HOST>}` (issue 16): the name rule that keeps a
token on its own host, the header scoped to one URL in git's environment, and a real fetch over
HTTPS (git http-backend on loopback, tests/support/git_https.py) after which no file, output, plan or audit
record holds the token. Attacks are tested by their effect: the attacker's server never sees it.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.kinds.git_urls import token_scope, token_variable
from specs.load.loader import load_workspace
from state.code import safegit
from tests.support.git_https import GitHttps, make_certificate, serve
from tests.support.workspace import make_workspace

TOKEN = "tok" + secrets.token_hex(16)


@pytest.mark.parametrize(("url", "variable"), [
    ("https://github.com/volcengine/verl.git", "GIT_TOKEN_GITHUB_COM"),
    ("https://GitHub.com/volcengine/verl", "GIT_TOKEN_GITHUB_COM"),
    ("https://x-access-token@github.com/volcengine/verl", "GIT_TOKEN_GITHUB_COM"),
    ("https://git.corp.example.com/ml/verl.git", "GIT_TOKEN_GIT_CORP_EXAMPLE_COM"),
    ("https://git.corp-example.com/ml/verl.git", "GIT_TOKEN_GIT_CORP__EXAMPLE_COM"),  # another domain: another name
    ("https://github-com.io/x", "GIT_TOKEN_GITHUB__COM_IO"),
    ("https://gitlab.example.com:8443/x", "GIT_TOKEN_GITLAB_EXAMPLE_COM___8443"),
    ("https://10.0.0.5/x.git", "GIT_TOKEN_10_0_0_5"),
])
def test_the_variable_is_named_for_the_host(url: str, variable: str) -> None:
    assert token_variable(url) == variable


@pytest.mark.parametrize("url", ["ssh://git@github.com/x", "git@github.com:x", "/srv/git/x.git",
                                 "file:///srv/git/x.git", "https://github.com./x", "https://-evil.com/x"])
def test_only_https_to_a_plain_host_name_may_carry_a_token(url: str) -> None:
    with pytest.raises(ValueError):
        token_variable(url)


def test_the_scope_drops_the_user_and_keeps_the_path() -> None:
    assert token_scope("https://bob@GitHub.com/org/repo.git") == ("https://github.com/org/repo.git", "bob")
    assert token_scope("https://github.com:443/org/repo") == ("https://github.com:443/org/repo", "x-access-token")


def _snapshot_ws(tmp_path: Path, address: str, url: str, token_line: str, name: str = "tokens"):
    ws = make_workspace(tmp_path / "ws", name, address)
    ws.write("code/c.yaml", f"kind: CodeSnapshot\nname: c\ncluster: local\ngit:\n  url: {url}\n  ref: v1\n{token_line}")
    return ws


@pytest.mark.parametrize(("url", "token_line", "message"), [
    ("https://evil.example.net/x.git", "  token: ${env:GITHUB_TOKEN}\n",
     "the token for evil.example.net must come from GIT_TOKEN_EVIL_EXAMPLE_NET, not GITHUB_TOKEN"),
    ("https://github-com.evil.io/x.git", "  token: ${env:GIT_TOKEN_GITHUB_COM}\n",
     "must come from GIT_TOKEN_GITHUB__COM_EVIL_IO, not GIT_TOKEN_GITHUB_COM"),
    ("ssh://git@github.com/x.git", "  token: ${env:GIT_TOKEN_GITHUB_COM}\n", "only an https:// url may carry a token"),
    ("https://github.com/x.git", f"  token: {TOKEN}\n", "write `token: ${env:GIT_TOKEN_GITHUB_COM}`"),
    ("https://github.com/x.git", "  token: Bearer ${env:GIT_TOKEN_GITHUB_COM}\n", "the token itself never goes"),
], ids=["another-hosts-variable", "lookalike-host", "ssh", "literal-token", "bearer-prefix"])  # a random token is no id
def test_a_token_for_another_host_is_refused_at_its_line(tmp_path: Path, url: str, token_line: str,
                                                         message: str) -> None:
    ws = _snapshot_ws(tmp_path, "http://127.0.0.1:9", url, token_line)
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    [problem] = caught.value.diagnostics
    assert (str(problem.where), problem.field) == ("code/c.yaml:7", "git.token"), problem
    assert message in problem.text and TOKEN not in str(caught.value)


def test_the_header_reaches_only_the_url_it_is_scoped_to(tmp_path: Path) -> None:
    """git itself decides which URL gets the header: asked with the environment argus gives git."""
    scope, user = token_scope("https://github.com/org/repo.git")
    env = safegit.git_env(config=safegit.auth_config(scope, user, TOKEN))

    def header_for(url: str) -> str:
        done = subprocess.run(["git", "config", "--get-urlmatch", "http.extraHeader", url], env=env, cwd=tmp_path,
                              capture_output=True, text=True)
        return done.stdout.strip()

    expected = "Authorization: Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert header_for("https://github.com/org/repo.git/info/refs") == expected
    assert header_for("https://github.com/org/repo.git/git-upload-pack") == expected
    for elsewhere in ("https://github.com/org/other.git/info/refs", "https://github.com.evil.io/org/repo.git",
                      "https://evil.io/org/repo.git", "https://github.com:8443/org/repo.git", "http://github.com/org/repo.git"):
        assert header_for(elsewhere) == "", elsewhere
    assert header_for("https://github.com/org/repo.git") == expected
    assert subprocess.run(["git", "config", "--get-urlmatch", "http.followRedirects", "https://github.com/"],
                          env=env, capture_output=True, text=True).stdout.strip() == "false"


# --- a real fetch over HTTPS

@pytest.fixture
def https_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[GitHttps, GitHttps]]:
    """(the token's own server, an attacker's), both holding repo.git with tag v1."""
    cert, key = make_certificate(tmp_path)
    monkeypatch.setenv("GIT_SSL_CAINFO", str(cert))
    source = tmp_path / "served"
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print('hello')\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "one"], ["tag", "v1"]):
        subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(source / "repo.git")], check=True,
                   capture_output=True)
    own, attacker = GitHttps(source, "x-access-token", TOKEN), GitHttps(source, "x-access-token", "never")
    servers = [serve(own, cert, key), serve(attacker, cert, key)]
    yield own, attacker
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def _no_token_under(*roots: Path) -> None:
    header = base64.b64encode(f"x-access-token:{TOKEN}".encode())
    for root in roots:
        for path in [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]:
            data = path.read_bytes()
            assert TOKEN.encode() not in data and header not in data, path


def test_a_snapshot_fetched_with_a_token_leaves_it_nowhere(tmp_path: Path, workspace, argus, https_git,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    own, _ = https_git
    variable = token_variable(own.url("repo.git"))  # GIT_TOKEN_127_0_0_1___<port>
    workspace.write("code/c.yaml", f"kind: CodeSnapshot\nname: c\ncluster: local\ngit:\n  url: {own.url('repo.git')}\n"
                                   f"  ref: v1\n  token: ${{env:{variable}}}\n")
    missing = argus("plan", workspace.root)
    assert missing.code == 1 and f"code/c.yaml:7: {variable} is not set" in missing.out, missing.out
    assert own.seen == []  # nothing was asked of the server without the token

    monkeypatch.setenv(variable, TOKEN)
    saved = tmp_path / "plan.json"
    plan = argus("plan", workspace.root, "-o", saved)
    assert plan.code == 0, plan.out + plan.err
    assert own.seen and set(own.seen) == {own.expected}  # every request carried it: git never asked without
    applied = argus("apply", saved, "--dir", workspace.root)
    assert applied.code == 0, applied.out + applied.err
    manifest = workspace.shared / "common" / "code" / "repo" / "c" / ".argus-snapshot.json"
    assert json.loads(manifest.read_text())["source"] == {"git": {"url": own.url("repo.git"), "ref": "v1"}}
    shown = (argus("plan", workspace.root, "--json"), argus("audit", "show", workspace.root))
    for result in (missing, plan, applied, *shown):
        assert TOKEN not in result.out + result.err
    _no_token_under(tmp_path)  # the workspace, its shared root (snapshot, audit log), the saved plan, caches


def test_a_pull_request_cannot_send_the_token_elsewhere(tmp_path: Path, https_git,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner exports the token for 127.0.0.1; a spec points at another host with that variable,
    or with the variable its own host would need; or the token's host redirects. The attacker's
    server never receives the token."""
    own, attacker = https_git
    variable = token_variable(own.url("repo.git"))
    monkeypatch.setenv(variable, TOKEN)
    from state.code.sources import resolve_source

    elsewhere = _snapshot_ws(tmp_path / "a", "http://127.0.0.1:9", attacker.url("repo.git", "localhost"),
                             f"  token: ${{env:{variable}}}\n")
    with pytest.raises(SpecError, match=f"must come from GIT_TOKEN_LOCALHOST___{attacker.port}, not {variable}"):
        load_workspace(elsewhere.root)
    renamed = _snapshot_ws(tmp_path / "b", "http://127.0.0.1:9", attacker.url("repo.git", "localhost"),
                           f"  token: ${{env:GIT_TOKEN_LOCALHOST___{attacker.port}}}\n")
    desired = load_workspace(renamed.root)
    state = resolve_source(desired.snapshots["c"], str(renamed.root), str(tmp_path / "cache"))
    assert state.error is not None and f"GIT_TOKEN_LOCALHOST___{attacker.port} is not set" in state.error.message

    own.redirect_to = attacker.url("repo.git")[: -len("/repo.git")]
    redirected = _snapshot_ws(tmp_path / "c", "http://127.0.0.1:9", own.url("repo.git"),
                              f"  token: ${{env:{variable}}}\n")
    snapshot = load_workspace(redirected.root).snapshots["c"]
    state = resolve_source(snapshot, str(redirected.root), str(tmp_path / "cache"))
    assert state.error is not None and TOKEN not in state.error.message
    assert own.seen and attacker.seen == []
