"""`kind: Dataset` and `kind: Model`: inputs a job reads, kept on a cluster's shared root as desired state.

Each names exactly one source, pinned so that one version is one directory that never changes:
`<shared_root>/datasets/<name>/<key12>/` (models/ for a Model), the key a digest of the pinned source.
Specs are hostile input: nothing here reaches a shell, a URL or the filesystem unchecked.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from specs.kinds.models import KINDS, SECRET_REF_PATTERN, SYSTEM_TREES, Name, Spec

SHA256_PATTERN = r"^[0-9a-f]{64}$"
COMMIT_PATTERN = r"^[0-9a-f]{40}$"
HUB_REPO_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"
REVISION_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,254}$"
OUTPUT_PLACEHOLDER = "${output}"
"""Where a prepare step writes: the version's directory, filled in when it runs."""
SOURCES = ("hub", "url", "ftp", "path", "prepare")
ADOPT_REFUSED = SYSTEM_TREES | {"root", "run", "var"}
"""Top directories a `path:` source may not be under (/var/lib holds services' secrets, /run their sockets)."""
BARE_TOPS = frozenset({"home", "mnt", "opt", "srv", "tmp", "media", "staging"})
"""Refused themselves, as the whole of what may be under them; a directory of their own under them is fine."""
_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_URL = re.compile(r"^(?P<scheme>[a-z]+)://(?P<authority>[^/?#]+)(?P<rest>[/?#].*)?$", re.DOTALL)


def check_repo(repo: str) -> str:
    if not re.fullmatch(HUB_REPO_PATTERN, repo):
        raise ValueError(f"{repo!r}: write the hub repository as org/name (letters, digits, '.', '_', '-'), like "
                         "Qwen/Qwen2.5-0.5B-Instruct")
    if ".." in repo or "--" in repo:
        raise ValueError(f"{repo!r}: a hub repository id never holds '..' or '--' (write it like org/name)")
    return repo


def check_revision(revision: str) -> str:
    if not re.fullmatch(REVISION_PATTERN, revision):
        raise ValueError(f"{revision!r}: a revision is a branch, a tag or a 40-hex commit (letters, digits, '.', "
                         "'_', '-', '/'; never starting with '-' or '.')")
    if ".." in revision or "//" in revision or revision.endswith(("/", ".")):
        raise ValueError(f"{revision!r}: a revision is a branch, a tag or a 40-hex commit (no '..', '//')")
    return revision


def check_absolute(path: str) -> str:
    """A directory or file argus adopts as it is: absolute, plain, no `.` or `..` to climb out of what a
    reviewer reads, and never the system's or a hidden one (~/.ssh): argus digests what it adopts and jobs
    then read it, so a pull request must not be able to publish the runner's keys. (Symlinks are the
    reader's to refuse: this sees text only.)"""
    if not path.startswith("/") or path == "/" or _CONTROL.search(path):
        raise ValueError(f"{path!r}: give an absolute path like /staging/gsm8k (no whitespace or control characters)")
    parts = path.rstrip("/").split("/")[1:]
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{path!r}: write the path plainly, without '.', '..' or '//'")
    if parts[0] in ADOPT_REFUSED or "/".join(parts) in BARE_TOPS or any(p.startswith(".") for p in parts):
        raise ValueError(f"{path!r}: argus adopts data only, never a system directory, a bare top directory or a "
                         "hidden one; stage the files in a directory of their own, like /staging/gsm8k")
    return path


def check_relative(path: str) -> str:
    """An output of a prepare step, inside the version's directory."""
    if path.startswith("/") or _CONTROL.search(path) or any(p in ("", ".", "..") for p in path.split("/")):
        raise ValueError(f"{path!r}: an output is a path inside `${{output}}`, like train.parquet or data/val.parquet "
                         "(relative, no '.', '..' or empty parts)")
    return path


def url_problem(url: str, schemes: tuple[str, ...]) -> str | None:
    """Why `url` may not be fetched, or None: the scheme allowed, a host, and no credentials in a spec."""
    match = _URL.match(url)
    if _CONTROL.search(url) or match is None or match["scheme"] not in schemes:
        return f"{url!r}: must be a {' or '.join(s + '://' for s in schemes)} URL with a host (no whitespace)"
    if "@" in match["authority"]:
        return f"{url!r}: credentials never go in a spec (user@host): serve the file without them"
    if "#" in (match["rest"] or ""):
        return f"{url!r}: drop the #fragment (it never reaches the server)"
    return None


def _pattern(schemes: tuple[str, ...]) -> dict[str, str]:
    """For editors (JSON Schema); the check, which explains itself, is url_problem."""
    return {"pattern": rf"^({'|'.join(schemes)})://[^/?#@\s]+([/?][^#\s]*)?$"}


def _checked_url(schemes: tuple[str, ...]) -> AfterValidator:
    def check(url: str) -> str:
        problem = url_problem(url, schemes)
        if problem:
            raise ValueError(problem)
        return url
    return AfterValidator(check)


def check_sha256(digest: str) -> str:
    if not re.fullmatch(SHA256_PATTERN, digest):
        raise ValueError("must be the file's SHA-256: 64 lowercase hex digits, as `sha256sum FILE` prints it")
    return digest


Sha256 = Annotated[str, Field(json_schema_extra={"pattern": SHA256_PATTERN}), AfterValidator(check_sha256)]
Relative = Annotated[str, Field(min_length=1, max_length=1024, json_schema_extra={"pattern": "^[^/]"}),
                     AfterValidator(check_relative)]
HttpUrl = Annotated[str, Field(max_length=4096, json_schema_extra=_pattern(("http", "https"))),
                    _checked_url(("http", "https"))]
FtpUrl = Annotated[str, Field(max_length=4096, json_schema_extra=_pattern(("ftp",))), _checked_url(("ftp",))]
Absolute = Annotated[str, Field(max_length=4096, json_schema_extra={"pattern": "^/"}), AfterValidator(check_absolute)]


class HubSource(Spec):
    """A repository of a Hugging Face hub (or a mirror of one), pinned to a commit when planned."""

    repo: Annotated[str, Field(json_schema_extra={"pattern": HUB_REPO_PATTERN}), AfterValidator(check_repo)]
    """org/name, as the hub writes it (Qwen/Qwen2.5-0.5B-Instruct, openai/gsm8k)."""
    revision: Annotated[str, Field(json_schema_extra={"pattern": REVISION_PATTERN}), AfterValidator(check_revision)]
    """A branch, a tag or a 40-hex commit: a branch or tag is resolved to its commit at plan time, and that
    commit is the version (a new commit on the branch is a new version)."""
    endpoint: HttpUrl | None = None
    """The hub's URL (https://huggingface.co, or a mirror's). Default: HF_ENDPOINT of the cluster's
    job_defaults.env; one of the two is required (argus never picks a hub for you)."""


class UrlSource(Spec):
    """One file over HTTP(S), checked against its digest."""

    url: HttpUrl
    """http:// or https://, without credentials."""
    sha256: Sha256
    """The file's SHA-256 (64 lowercase hex): what is fetched must match it, and it is part of the version."""


class FtpSource(Spec):
    """One file over FTP, checked against its digest: anonymous, or as `user` with a `password` from argus's
    environment."""

    url: FtpUrl
    """ftp://host/path, without credentials."""
    sha256: Sha256
    """The file's SHA-256 (64 lowercase hex): what is fetched must match it, and it is part of the version."""
    user: Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$")] | None = None
    """The login name; anonymous when absent. Not part of the version: who logs in does not change the bytes."""
    password: Annotated[str, Field(pattern=SECRET_REF_PATTERN)] | None = None
    """`${env:NAME}`, NAME a variable the Workspace's `secrets:` lists: handed to the fetch run as any job's secret
    is, never in its command, the manifest, a plan or Ray's job table."""

    @model_validator(mode="after")
    def _password_with_user(self) -> FtpSource:
        if self.password is not None and self.user is None:
            raise ValueError("a `password` logs in as someone: give the `user` too")
        return self

    @property
    def password_variable(self) -> str | None:
        match = re.match(SECRET_REF_PATTERN, self.password or "")
        return match.group(1) if match else None


class PrepareSource(Spec):
    """Made by a program of a CodeSnapshot on the same cluster (a preprocessing script)."""

    code: Name
    """A CodeSnapshot on the input's cluster: the program runs from it."""
    entrypoint: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1, max_length=256)
    """argv, never a shell line; `${output}` is the directory it must write to."""
    outputs: list[Relative] = Field(min_length=1, max_length=256)
    """The files (or directories) it writes, relative to `${output}`: the version is complete when all exist."""

    @model_validator(mode="after")
    def _says_where(self) -> PrepareSource:
        if not any(OUTPUT_PLACEHOLDER in arg for arg in self.entrypoint):
            raise ValueError("the entrypoint never names `${output}`: pass it where the program writes, like "
                             "[python, prep.py, --local_dir, '${output}']")
        return self


class Input(Spec):
    """What a Dataset and a Model share: a name, a cluster, exactly one source."""

    name: Name
    cluster: Name
    """The Cluster whose shared root holds it; only that cluster's jobs may read it."""
    hub: HubSource | None = None
    url: UrlSource | None = None
    ftp: FtpSource | None = None
    path: Absolute | None = None
    """An existing directory or file adopted as it is (absolute): digested once, then never copied."""
    prepare: PrepareSource | None = None
    description: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> Input:
        given = [name for name in SOURCES if getattr(self, name) is not None]
        if len(given) != 1:
            found = f"got {', '.join(given)}" if given else "got none"
            raise ValueError(f"give exactly one source of {', '.join(SOURCES)} ({found})")
        return self

    @property
    def source(self) -> str:
        """Which of SOURCES this input names."""
        return next(name for name in SOURCES if getattr(self, name) is not None)


class Dataset(Input):
    """Data a job reads (parquet files, a hub dataset), referenced as `${dataset:NAME}`."""

    kind: Literal["Dataset"]


class Model(Input):
    """Weights a job starts from (a hub model), referenced as `${model:NAME}`."""

    kind: Literal["Model"]


INPUT_KINDS: dict[str, type[Spec]] = {"Dataset": Dataset, "Model": Model}
ALL_KINDS = {**KINDS, **INPUT_KINDS}
"""Every kind a spec file may hold (the loader's)."""
TOP = {"Dataset": "datasets", "Model": "models"}
"""The directory under a shared root each kind's versions live in."""


def version_key(spec: Dataset | Model, pin: str | None = None) -> str:
    """The digest (64 hex) of the pinned source: the same key is the same bytes. `pin` is what only
    observation knows: a hub source's resolved 40-hex commit, a path's content digest, a prepare step's
    code snapshot digest; None for url and ftp, whose sha256 is in the spec."""
    pinned = json.dumps([spec.kind, spec.source, *_pinned(spec, pin)], separators=(",", ":"))
    return hashlib.sha256(pinned.encode()).hexdigest()


def version_rel(spec: Dataset | Model, key: str) -> str:
    """Where one version lives, relative to the cluster's shared root (beside specs.desired.snapshot_rel)."""
    if not re.fullmatch(SHA256_PATTERN, key):
        raise ValueError(f"not a version key: {key!r}")
    return f"{TOP[spec.kind]}/{spec.name}/{key[:12]}"


def staged_rel(spec: Dataset | Model, key: str, workspace: str) -> str:
    """Where a workspace's materialisation of one version is written before argus seals it: per workspace, so two
    workspaces materialising the same version at once never write into one directory."""
    return f"{TOP[spec.kind]}/{spec.name}/.incoming-{version_rel(spec, key).rpartition('/')[2]}-{workspace}"


MATERIALISER_PREFIXES = ("dataset--", "model--")
"""Job names argus keeps for its materialisation runs (`dataset--NAME`, `model--NAME`): the loader refuses them."""


def materialiser_name(spec: Dataset | Model) -> str:
    """The job whose runs fetch or prepare this input's versions."""
    return f"{spec.kind.lower()}--{spec.name}"


def _pinned(spec: Dataset | Model, pin: str | None) -> list[object]:
    if spec.hub is not None:
        return [spec.hub.repo, _commit(spec.hub.revision, pin)]
    if spec.url is not None or spec.ftp is not None:
        source = spec.url or spec.ftp
        assert source is not None
        if pin is not None:
            raise ValueError(f"{spec.source} sources are pinned by their sha256: no pin")
        return [source.url, source.sha256]
    if not pin:
        raise ValueError(f"a {spec.source} source needs its pin (content or code digest)")
    if spec.path is not None:
        return [spec.path, pin]
    assert spec.prepare is not None
    return [pin, spec.prepare.entrypoint, spec.prepare.outputs]  # the code's digest, not its name: a rename is same


def _commit(revision: str, resolved: str | None) -> str:
    if resolved is None or not re.fullmatch(COMMIT_PATTERN, resolved):
        raise ValueError(f"a hub source is keyed by its resolved 40-hex commit, got {resolved!r}")
    if re.fullmatch(COMMIT_PATTERN, revision) and revision != resolved:
        raise ValueError(f"revision {revision} is a commit: it resolves to itself, not {resolved}")
    return resolved
