"""Read the workspace's own spec files (and the shared Clusters its `include:` names) into a DesiredState,
reporting every diagnostic at once.

Which files, and how safely, is specs/parse/reading.py's business; how YAML is parsed, specs/parse/safe_yaml.py's.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from specs.address import Address
from specs.desired import DesiredState, Source, address_of
from specs.diagnostics import Diagnostic
from specs.errors import ArgusError, SpecError
from specs.kinds.inputs import ALL_KINDS, Input
from specs.kinds.models import (
    SHARED_ROOT_RULE,
    Cluster,
    CodeSnapshot,
    Job,
    Quotas,
    Spec,
    Workspace,
    shared_root_problem,
)
from specs.load import after, includes, input_refs, job_secrets, rules
from specs.parse.nodes import Walked, field_at, loc_path
from specs.parse.reading import WORKSPACE_FILE, SpecFile, Walk
from specs.parse.safe_yaml import Refused, load_walked, ruamel_documents
from specs.secrets import secret_scan


class Memo(Protocol):
    """Where a file's resources are kept between loads, by a key of its content (state.memo.Memo)."""

    def get(self, key: str) -> Any | None: ...

    def put(self, key: str, value: Any) -> None: ...


FileLoad = tuple[list[Diagnostic], list[str], list[tuple[Spec, Source]], list[tuple[Any, Source]]]
"""What one file gives, all of it from its name and text alone: diagnostics, secret values, resources, invalid
documents (whose references are still checked)."""


def load_workspace(directory: str | Path, memo: Memo | None = None) -> DesiredState:
    """Load and validate the workspace at `directory`; raise SpecError listing every diagnostic. `memo`: what each
    file gave before, by a digest of its name and text (the memo holds one argus's entries only)."""
    root = Path(directory).resolve()
    if not (root / WORKSPACE_FILE).is_file():
        raise ArgusError(
            f"{root} is not an argus workspace: {WORKSPACE_FILE} is missing. "
            f"Create it with `kind: Workspace` and `name: <your-team>`, or pass the right DIR."
        )
    diagnostics: list[Diagnostic] = []
    secrets: list[str] = []
    walk = Walk(root, diagnostics)
    invalid: list[tuple[Any, Source]] = []
    asked = _Asked(memo) if memo is not None else None
    loaded, conflicts = _load_files(walk, diagnostics, secrets, invalid, asked)
    conflicts += _load_shared(walk, loaded, diagnostics, secrets, invalid, asked)
    loaded, diagnostics[:] = _outside_shared_roots(walk, loaded, diagnostics)
    diagnostics += conflicts
    whole = asked.whole(root) if asked is not None and not (diagnostics or invalid or secrets) else None
    if whole is not None and (kept := _kept_state(asked, whole, root)) is not None:
        return kept
    state = _assemble(root, loaded, diagnostics)
    diagnostics += rules.dangling(invalid, {r.name for r, _ in loaded if isinstance(r, Cluster)},
                                  {r.name for r, _ in loaded if isinstance(r, CodeSnapshot)})
    if diagnostics:
        raise SpecError(secret_scan.redact(diagnostics, secrets))
    assert state is not None
    if whole is not None and asked is not None:
        asked.put(whole, state)
    return state


class _Asked:
    """The memo, noting the key of every file asked for, in order: together they are the key of the whole state."""

    def __init__(self, memo: Memo) -> None:
        self.memo, self.keys = memo, ["desired-state"]

    def get(self, key: str) -> Any | None:
        self.keys.append(key)
        return self.memo.get(key)

    def put(self, key: str, value: Any) -> None:
        self.memo.put(key, value)

    def whole(self, root: Path) -> str:
        return hashlib.sha256("\0".join([*self.keys, str(root)]).encode()).hexdigest()


def _kept_state(asked: _Asked, whole: str, root: Path) -> DesiredState | None:
    """The state these very files made before, if the memo holds it and every file gave no diagnostic (the checks
    across files are functions of the files alone), and each shared root still resolves as it did then (the one
    fact of the filesystem the state holds)."""
    kept = asked.memo.get(whole)
    if not isinstance(kept, DesiredState) or kept.root != str(root):
        return None
    found: list[Diagnostic] = []
    if _shared_roots(root, dict(kept.clusters), dict(kept.sources), found) != kept.shared_roots or found:
        return None
    return kept


def _load_files(walk: Walk, diagnostics: list[Diagnostic], secrets: list[str], invalid: list[tuple[Any, Source]],
                memo: Memo | None) -> tuple[list[tuple[Spec, Source]], list[Diagnostic]]:
    """Every resource of the files the walk yields, each scanned for literal secrets (added to `secrets`);
    a Cluster's shared root is kept out of the walk at once."""
    loaded: list[tuple[Spec, Source]] = []
    conflicts: list[Diagnostic] = []
    for spec in walk.files():
        conflicts += _load_file(walk, spec, (diagnostics, secrets, loaded, invalid), memo)
    return loaded, conflicts


def _load_shared(walk: Walk, loaded: list[tuple[Spec, Source]], diagnostics: list[Diagnostic], secrets: list[str],
                 invalid: list[tuple[Any, Source]], memo: Memo | None) -> list[Diagnostic]:
    """The Clusters of the files argus.yaml's `include:` names (specs.load.includes), after the workspace's own:
    a name both define is reported at the included one, naming the workspace's."""
    found = [(r, s) for r, s in loaded if isinstance(r, Workspace) and s.file == WORKSPACE_FILE]
    workspace, source = found[0] if len(found) == 1 else (None, None)
    conflicts: list[Diagnostic] = []
    for spec in includes.files(walk, workspace, source):
        conflicts += _load_file(walk, spec, (diagnostics, secrets, loaded, invalid), memo, includes.refused)
    return conflicts


def _load_file(walk: Walk, spec: SpecFile, into: FileLoad, memo: Memo | None,
               refused: Callable[[Walked, str], list[Diagnostic]] | None = None) -> list[Diagnostic]:
    """The resources of one file added to `into`; `refused`: why a document may not be taken from this file (an
    included file's rule). What a file gives depends on its name, its text and that rule only: it is memoized by
    them. A Cluster's shared root is kept out of the walk (the filesystem's business: never memoized)."""
    text = walk.read(spec)
    if text is None:
        return []
    key = _file_key(spec.rel, text, refused is not None)
    found = memo.get(key) if memo is not None else None
    if not _is_file_load(found):
        found = _read_file(spec.rel, text, refused)
        if memo is not None and not found[1]:  # a file holding a literal secret is read again, never kept
            memo.put(key, found)
    for kept, more in zip(into, found, strict=True):
        kept += more
    return [d for resource, source in found[2] if isinstance(resource, Cluster)
            for d in _keep_out(walk, resource, source)]


def _file_key(rel: str, text: str, included: bool) -> str:
    name = rel.encode("utf-8", "surrogateescape")
    head = b"spec-file\0%d\0%d\0" % (included, len(name))
    return hashlib.sha256(head + name + text.encode("utf-8", "surrogateescape")).hexdigest()


def _is_file_load(found: Any) -> bool:
    return type(found) is tuple and len(found) == 4  # only argus's own pack is ever read (state.memo)


def _read_file(rel: str, text: str, refused: Callable[[Walked, str], list[Diagnostic]] | None) -> FileLoad:
    diagnostics: list[Diagnostic] = []
    secrets: list[str] = []
    loaded: list[tuple[Spec, Source]] = []
    invalid: list[tuple[Any, Source]] = []
    for index, walked in enumerate(_documents(text, rel, diagnostics)):
        found, values = secret_scan.scan(walked.strings, rel, walked.keys)
        diagnostics += found
        secrets += values
        if refused is not None and (refusal := refused(walked, rel)):
            diagnostics += refusal
            continue
        resource = _validate(walked, rel, diagnostics, lambda index=index: _node(text, index))
        source = Source(rel, walked.line, walked.lines)
        if resource is None:
            invalid.append((walked.value, source))  # its references are still checked, in the same run
        else:
            loaded.append((resource, source))
    return diagnostics, secrets, loaded, invalid


def _keep_out(walk: Walk, cluster: Cluster, source: Source) -> list[Diagnostic]:
    """A shared root inside the workspace holds argus's output (dumps of these very specs): never read it."""
    shared = _shared_root_path(walk.root, cluster.shared_root)
    if shared is None or walk.root not in shared.parents:
        return []
    specs = walk.exclude(shared)
    if not specs:
        return []
    return [Diagnostic(severity="error", address=Address.cluster(cluster.name), field="shared_root",
                       message=f"{cluster.shared_root!r} holds spec files ({', '.join(specs[:3])}): argus never "
                               "reads a shared root, so they would be ignored",
                       hint="choose a directory of its own, like `shared`").located(source)]


def _outside_shared_roots(walk: Walk, loaded: list[tuple[Spec, Source]],
                          diagnostics: list[Diagnostic]) -> tuple[list[tuple[Spec, Source]], list[Diagnostic]]:
    """Drop what came from a file read before the cluster whose shared root holds it was known."""
    if not walk.excluded:
        return loaded, diagnostics
    return ([(r, s) for r, s in loaded if not walk.in_excluded(s.file)],
            [d for d in diagnostics if d.where is None or not walk.in_excluded(d.where.file)])


def _shared_root_path(root: Path, shared_root: str) -> Path | None:
    """The shared root as a resolved absolute path (a relative one is taken from the workspace root)."""
    try:
        return (root / shared_root).resolve()
    except (OSError, ValueError, RuntimeError):  # NUL, a symlink loop: the model already refused the first
        return None


def _documents(text: str, rel: str, diagnostics: list[Diagnostic]) -> list[Walked]:
    try:
        return load_walked(text)
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = min(mark.line + 1, text.count("\n") or 1) if mark else 1
        prefix = "" if isinstance(err, Refused) else "invalid YAML: "
        diagnostics.append(Diagnostic.in_file(rel, line, "", prefix + str(err.problem or err.context)))
        return []
    except YAMLError as err:
        diagnostics.append(Diagnostic.in_file(rel, 1, "", f"invalid YAML: {err}"))
        return []


def _node(text: str | None, index: int) -> Any:
    """The document's ruamel nodes, read again: only to locate errors where dotted paths are ambiguous."""
    return [node for node in ruamel_documents(text or "") if node is not None][index]


def _validate(walked: Walked, rel: str, diagnostics: list[Diagnostic], node: Callable[[], Any]) -> Spec | None:
    """The resource, or None after adding its diagnostics; `node`: its ruamel nodes, made on demand."""
    document, line = walked.value, walked.line
    if not isinstance(document, dict):
        diagnostics.append(Diagnostic.in_file(rel, line, "", "a resource must be a mapping with a `kind:` key"))
        return None
    kind = document.get("kind")
    model = ALL_KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        where = walked.lines.get("kind", line)
        hint = f"got {kind!r}" if "kind" in document else "missing"
        diagnostics.append(Diagnostic.in_file(rel, where, "kind", f"{hint}; expected one of {', '.join(ALL_KINDS)}"))
        return None
    if walked.bad_keys:
        diagnostics.extend(Diagnostic.in_file(rel, line, path, "keys must be strings")
                           for path, line in walked.bad_keys)
        return None
    try:
        return model.model_validate(document)
    except ValidationError as err:
        diagnostics.extend(_located(err, model, walked, rel, node() if walked.dotted else None))
        return None


def _located(err: ValidationError, model: type[Spec], walked: Walked, rel: str, node: Any) -> list[Diagnostic]:
    """Turn pydantic errors into file:line diagnostics; merge the branches of one union error. `node`:
    the document's ruamel nodes, when a key with a dot makes its dotted field paths ambiguous."""
    merged: dict[tuple[int, str], list[str]] = {}
    for item in err.errors():
        loc, missing = item["loc"], item["type"] == "missing"
        path, line = loc_path(node, loc, missing) if node is not None else field_at(walked, loc, missing)
        merged.setdefault((line, path), []).append(_message(item, model))
    return [Diagnostic.in_file(rel, line, path, " or ".join(dict.fromkeys(msgs)))
            for (line, path), msgs in merged.items()]


def _message(item: Any, model: type[Spec]) -> str:
    if item["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, item["loc"][:-1])
        close = difflib.get_close_matches(str(item["loc"][-1]), allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown key{hint}; allowed keys: {', '.join(allowed)}" if allowed else "unknown key"
    if item["type"] == "missing":
        return "required field is missing"
    if item["type"] == "string_pattern_mismatch" and item["loc"][-1:] in (("name",), ("cluster",)):
        return f"invalid name {item['input']!r}: use lowercase letters, digits and '-', at most 63"
    return item["msg"]


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    current: Any = model
    for part in loc:
        field = current.model_fields.get(part) if isinstance(part, str) else None
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        current = annotation
    return list(current.model_fields)


def _assemble(root: Path, loaded: list[tuple[Spec, Source]], diagnostics: list[Diagnostic]) -> DesiredState | None:
    unique = _without_duplicates(loaded, diagnostics)
    sources = {address_of(r.kind, r.name): s for r, s in unique}
    roots = [s for r, s in loaded if isinstance(r, Workspace) and s.file == WORKSPACE_FILE]
    if roots:
        sources["workspace"] = roots[0]
    workspace = _the_workspace(loaded, diagnostics)
    clusters = {r.name: r for r, _ in unique if isinstance(r, Cluster)}
    snapshots = {r.name: r for r, _ in unique if isinstance(r, CodeSnapshot)}
    jobs = {r.name: r for r, _ in unique if isinstance(r, Job)}
    quotas = {r.cluster: r for r, _ in unique if isinstance(r, Quotas)}
    inputs = {address_of(r.kind, r.name): r for r, _ in unique if isinstance(r, Input)}
    diagnostics += rules.broken_references(clusters, snapshots, jobs, sources)
    diagnostics += input_refs.diagnostics(clusters, snapshots, jobs, inputs, sources)
    diagnostics += input_refs.reserved_names(jobs, inputs, sources)
    diagnostics += [d for job in jobs.values() for d in rules.workload_diagnostics(job, sources[Address.job(job.name)])]
    diagnostics += after.pipeline_diagnostics(jobs, sources)
    shared_roots = _shared_roots(root, clusters, sources, diagnostics)
    if workspace is None:
        return None
    diagnostics += job_secrets.diagnostics(workspace, clusters, jobs, sources, inputs)
    diagnostics += rules.quota_diagnostics(workspace.name, clusters, quotas, sources)
    return DesiredState(str(root), workspace, clusters, jobs, snapshots, sources, shared_roots, quotas, inputs)


def _shared_roots(root: Path, clusters: dict[str, Cluster], sources: dict[str, Source],
                  diagnostics: list[Diagnostic]) -> dict[str, str]:
    """Each cluster's shared root, resolved: a committed symlink may not lead where the text may not."""
    resolved = {}
    for name, cluster in clusters.items():
        path = _shared_root_path(root, cluster.shared_root)
        reason = _resolved_problem(root, cluster.shared_root, path)
        if reason:
            address = Address.cluster(name)
            diagnostics.append(Diagnostic(severity="error", address=address, field="shared_root", message=reason,
                                          hint=SHARED_ROOT_RULE).located(sources[address]))
        resolved[name] = str(path or cluster.shared_root)
    return resolved


def _resolved_problem(root: Path, text: str, path: Path | None) -> str | None:
    if path is None:
        return f"{text!r} cannot be resolved (a symlink loop?)"
    if path == root:
        return f"{text!r} is the workspace itself"
    if not text.startswith("/") and root not in path.parents:
        return f"{text!r} resolves to {path} through a symlink, outside the workspace"
    if shared_root_problem(str(path)):
        return f"{text!r} resolves to {path} through a symlink, a system directory"
    return None


def _without_duplicates(loaded: list[tuple[Spec, Source]], diagnostics: list[Diagnostic]) -> list[tuple[Spec, Source]]:
    """The first definition of each address wins; every later one is an error."""
    first: dict[str, Source] = {}
    unique = []
    for resource, source in loaded:
        if isinstance(resource, Workspace):
            continue
        address = address_of(resource.kind, resource.name)
        if address in first:
            diagnostics.append(Diagnostic(severity="error", address=address, field="name",
                                          message=f"duplicate {resource.kind} {resource.name!r} "
                                                  f"(first defined at {first[address].at('name')})").located(source))
            continue
        first[address] = source
        unique.append((resource, source))
    return unique


def _the_workspace(loaded: list[tuple[Spec, Source]], diagnostics: list[Diagnostic]) -> Workspace | None:
    found = [(r, s) for r, s in loaded if isinstance(r, Workspace)]
    for _, source in found:
        if source.file != WORKSPACE_FILE:
            diagnostics.append(Diagnostic.in_file(source.file, source.line, "kind",
                                                  f"the Workspace belongs in {WORKSPACE_FILE} at the workspace root"))
    in_root = [r for r, s in found if s.file == WORKSPACE_FILE]
    if len(in_root) > 1:
        diagnostics.append(Diagnostic.in_file(WORKSPACE_FILE, 1, "kind", "exactly one Workspace is allowed"))
    if not found and not any(d.where and d.where.file == WORKSPACE_FILE for d in diagnostics):
        diagnostics.append(Diagnostic.in_file(WORKSPACE_FILE, 1, "kind",
                                              "no Workspace: add `kind: Workspace` and `name: <team>` to argus.yaml"))
    return in_root[0] if in_root else None
