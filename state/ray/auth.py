"""A cluster's dashboard token, read from where its spec points (`auth_token:`) when argus connects.

The spec holds only the reference; the value lives in this process's memory and in the header of
each request, nowhere else. No message here quotes a token, or any byte of a token file.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from urllib.parse import urlsplit

from specs.errors import ArgusError
from specs.kinds.models import SECRET_REF_PATTERN, TOKEN_FILE_RULE, Cluster, is_token_file_name

TOKEN_HOSTS = "ARGUS_TOKEN_HOSTS"
"""Where the operator may pin, outside the workspace, the dashboards that receive tokens: a pull
request can point a cluster's address anywhere, and its auth_token at the real cluster's token."""

MAX_TOKEN_FILE = 4096
"""Bytes (of a file, or characters of a token): Ray's tokens are 64 hex digits; anything near this is no token."""
TOKEN_TEXT = re.compile(r"[\x21-\x7e]+")
"""Visible ASCII without spaces: what one `Authorization: Bearer` value can carry. requests itself
rejects other header values with a message that quotes them, so a bad token is refused here first."""


class TokenUnavailable(ArgusError):
    """A cluster's auth_token names a variable or file that holds no usable token."""


def token_of(cluster: Cluster) -> str | None:
    """The cluster's token, or None when its spec names none (then argus sends no token at all)."""
    reference = cluster.auth_token
    if reference is None:
        return None
    check_host_allowed(cluster)
    match = re.match(SECRET_REF_PATTERN, reference)
    if match:
        return _from_env(cluster.name, match.group(1))
    return _from_file(cluster.name, _expanded(cluster.name, reference))


def check_host_allowed(cluster: Cluster) -> None:
    allowed = os.environ.get(TOKEN_HOSTS)
    if allowed is None:
        return
    hosts = {host.strip().lower() for host in allowed.split(",") if host.strip()}
    host = urlsplit(cluster.address).netloc.lower()
    if host not in hosts:
        raise TokenUnavailable(f"Cluster {cluster.name!r}: argus sends tokens only to the dashboards in "
                               f"{TOKEN_HOSTS} (host:port, comma-separated), and {host} is not one of them. "
                               f"If {cluster.address} is really this cluster's dashboard, add {host} to "
                               f"{TOKEN_HOSTS} where argus runs.")


def _expanded(cluster: str, reference: str) -> Path:
    try:
        return Path(reference).expanduser()
    except RuntimeError:  # `~/...` with no HOME to expand it against
        raise TokenUnavailable(f"Cluster {cluster!r}: its auth_token {reference} starts with ~, but argus's "
                               "home directory is unknown (HOME is not set).") from None


def _from_env(cluster: str, name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise TokenUnavailable(f"Cluster {cluster!r}: auth_token is ${{env:{name}}}, but {name} is not set in "
                               f"argus's environment. Export {name} (the cluster's token, as `ray get-auth-token` "
                               "prints it on the head) and run the command again.")
    return _checked(cluster, value, f"environment variable {name}")


def _from_file(cluster: str, path: Path) -> str:
    what = f"token file {path}"
    # A symlink named ray.token in a checked-out pull request could point at ~/.git-credentials.
    if not is_token_file_name(os.path.basename(os.path.realpath(path))):
        raise TokenUnavailable(f"Cluster {cluster!r}: its {what} is a link to a file of another name; "
                               f"{TOKEN_FILE_RULE}.")
    data = read_regular(cluster, path, what)
    if len(data) > MAX_TOKEN_FILE:
        raise TokenUnavailable(f"Cluster {cluster!r}: its {what} is larger than {MAX_TOKEN_FILE} bytes, "
                               "so it is no token file.")
    return _checked(cluster, data.decode("ascii", errors="replace"), what)


def read_regular(cluster: str, path: Path, what: str) -> bytes:
    """At most one byte over the cap, of a regular file (symlinks followed: secret mounts use them)."""
    try:
        # O_NONBLOCK: a FIFO put where the file should be must not hang argus; it is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise TokenUnavailable(f"Cluster {cluster!r}: cannot read its {what} ({err.strerror}). Write the "
                               "cluster's token there (as `ray get-auth-token` prints it on the head), or fix "
                               "auth_token.") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # checked before fdopen, which refuses a directory itself
        os.close(fd)
        raise TokenUnavailable(f"Cluster {cluster!r}: its {what} is not a regular file.")
    with os.fdopen(fd, "rb") as file:
        return file.read(MAX_TOKEN_FILE + 1)


def _checked(cluster: str, raw: str, what: str) -> str:
    """The token without surrounding whitespace (files end in a newline); refused, unquoted, if unusable."""
    token = raw.strip()
    if not token:
        raise TokenUnavailable(f"Cluster {cluster!r}: its {what} is empty; it must hold the cluster's token.")
    if len(token) > MAX_TOKEN_FILE or not TOKEN_TEXT.fullmatch(token):
        raise TokenUnavailable(f"Cluster {cluster!r}: its {what} is not one token (visible ASCII characters, "
                               "no spaces or line breaks, as `ray get-auth-token` prints it).")
    return token
