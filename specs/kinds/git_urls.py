"""Git sources as data: the allow-list of URL forms, refs and paths a CodeSnapshot may name.

Whatever passes here still reaches git only after `--` (state.code.safegit); this is the first wall, and
the one that gives the pull request's author a file:line message.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

GIT_URL_FORMS = ("a local path (/srv/git/verl.git, ../verl), file:///absolute/path, https://host[:port]/path, "
                 "ssh://[user@]host[:port]/path or user@host:path")
"""The only git URL forms argus fetches from; git knows more, some of which run programs (ext::)."""

_UNSAFE_CHARS = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TRANSPORT = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_USER = r"[A-Za-z0-9_][A-Za-z0-9._~-]*"
_HOST = r"(?:[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\])"
_NETWORK = re.compile(rf"^(?:{_USER}@)?{_HOST}(?::[0-9]{{1,5}})?(?P<path>/.*)$", re.DOTALL)
_SCP = re.compile(rf"^{_USER}@{_HOST}:(?P<path>.+)$", re.DOTALL)
_TOKEN_URL = re.compile(rf"^(?i:https)://(?:(?P<user>{_USER})@)?(?P<host>[^/:@\[\]]+)(?::(?P<port>[0-9]{{1,5}}))?"
                        r"(?P<path>/.*)$", re.DOTALL)
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$")
_REFERENCE = re.compile(r"^\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}$")
TOKEN_PREFIX = "GIT_TOKEN_"
TOKEN_RULE = ("a token is read only from GIT_TOKEN_ + the url's host: upper-cased, '.' as '_', '-' as '__', "
              "':port' as '___port' (github.com: GIT_TOKEN_GITHUB_COM); it is sent to that host alone, so a pull "
              "request that points the url elsewhere cannot send it anywhere")
_REF_FORBIDDEN = ("..", "@{", "//", "~", "^", ":", "?", "*", "[", "\\")


def check_git_url(url: str) -> str:
    """Accept only GIT_URL_FORMS: nothing git could read as an option or a program to run."""
    problem = _git_url_problem(url)
    if problem:
        raise ValueError(f"{problem}; a git url must be {GIT_URL_FORMS}")
    return url


def check_git_token(url: str, token: str) -> str:
    """A git source's token: `${env:NAME}` with NAME the one variable named for the url's host.

    The spec is written by pull requests: were any variable allowed, one line pointing the url at
    the author's host with `${env:GITHUB_TOKEN}` would send the runner's token there. The value
    itself is never quoted: it may be the token."""
    variable = token_variable(url)
    found = _REFERENCE.match(token)
    if not found:
        raise ValueError(f"write `token: ${{env:{variable}}}` and export {variable} where argus runs; the token "
                         "itself never goes in a spec")
    if found[1] != variable:
        raise ValueError(f"the token for {_host_port(url)} must come from {variable}, not {found[1]}: {TOKEN_RULE}")
    return token


def token_variable(url: str) -> str:
    """The only variable a token for `url` may be read from; ValueError when `url` may carry none."""
    found = _TOKEN_URL.match(url)
    if not found:
        raise ValueError("only an https:// url may carry a token (ssh uses the keys of the machine argus runs on)")
    labels = found["host"].split(".")
    if not all(_LABEL.match(label) for label in labels):
        raise ValueError(f"{found['host']!r} is not a host name a token can be named for: letters, digits and "
                         "inner '-' between dots, no trailing dot")
    # Injective, so no other host shares a variable: '.' gives one '_', each '-' two, the port's ':' three
    # (labels neither start nor end with '-', so runs of '_' never merge). github-com.io is not github.com.io.
    name = found["host"].upper().replace("-", "__").replace(".", "_")
    return f"{TOKEN_PREFIX}{name}" + (f"___{found['port']}" if found["port"] else "")


def token_scope(url: str) -> tuple[str, str]:
    """(the url without its user, the user name to send): git sends the header to that url's prefix only."""
    found = _TOKEN_URL.match(url)
    if not found:
        raise ValueError("only an https:// url may carry a token")
    port = f":{found['port']}" if found["port"] else ""
    return f"https://{found['host'].lower()}{port}{found['path']}", found["user"] or "x-access-token"


def _host_port(url: str) -> str:
    found = _TOKEN_URL.match(url)
    return f"{found['host']}{':' + found['port'] if found['port'] else ''}" if found else url


def check_git_ref(ref: str) -> str:
    """A tag, branch or commit name as git's refname rules allow it, and never an option."""
    if ref.startswith("-") or _UNSAFE_CHARS.search(ref) or _bad_ref_name(ref):
        raise ValueError(f"{ref!r} is not a ref argus accepts: no leading '-', no whitespace or control characters, "
                         "none of '..' '@{' '//' '~^:?*[\\', no part starting with '.', no trailing '/', '.' or "
                         "'.lock'; give a tag, a branch or a commit id, like v0.9.1, main or a 40-hex commit")
    return ref


def check_source_path(path: str) -> str:
    """A working copy's path reaches git and the filesystem: never an option, never control characters."""
    if path.startswith("-") or _CONTROL_CHARS.search(path):
        raise ValueError("a source path must not start with '-' or contain control characters; "
                         "write it like ../verl or /srv/work/verl")
    return path


def _git_url_problem(url: str) -> str | None:
    if url.startswith("-"):
        return "it starts with '-' (git would take it as an option)"
    if _TRANSPORT.match(url):
        return "`transport::address` forms such as ext:: and fd:: run programs and are not allowed"
    if _UNSAFE_CHARS.search(url) or _UNSAFE_CHARS.search(unquote(url)):  # git percent-decodes URLs
        return "it contains whitespace or control characters (also %-encoded)"
    scheme = _SCHEME.match(url)
    if scheme:
        return _scheme_problem(scheme[1].lower(), scheme[2])
    if ":" in url.split("/", 1)[0]:  # git's own rule: a colon before the first slash makes it scp-like
        found = _SCP.match(url)
        if not found:
            return "it looks like an scp-like address but is not user@host:path"
        return "its path starts with '-'" if found["path"].startswith("-") else None
    return None  # a local path


def _scheme_problem(scheme: str, rest: str) -> str | None:
    if scheme in ("http", "git"):
        return f"{scheme}:// is not allowed: nothing authenticates the server, anyone on the way can change the code"
    if scheme == "file":
        return None if rest.startswith("/") else "a file:// URL must name an absolute path (file:///srv/git/x.git)"
    if scheme not in ("https", "ssh"):
        return f"the {scheme}:// scheme is not allowed"
    found = _NETWORK.match(rest)
    if not found:
        return (f"it is not of the form {scheme}://[user@]host[:port]/path (no password; host and user must not "
                "start with '-')")
    return "its path starts with '-'" if found["path"][1:].startswith("-") else None


def _bad_ref_name(ref: str) -> bool:
    parts = ref.split("/")
    return (any(s in ref for s in _REF_FORBIDDEN) or ref == "@" or ref.endswith((".", "/", ".lock"))
            or any(part.startswith(".") or part.endswith(".lock") for part in parts))
