"""Where things are in ruamel's round-trip YAML nodes: the line of a field, the path of a pydantic
error, keys that are not strings; and the nodes as plain Python values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar


class StringAt(NamedTuple):
    """A string scalar of a document: its dotted field path, its line and its text."""

    path: str
    line: int
    text: str


MIN_SCANNED_KEY = 16
"""Keys this long or longer are scanned for literal secrets too (field and variable names are shorter
than any token shape: `sk-` keys, `ghp_` tokens and AWS key ids are 20 characters or more)."""


@dataclass
class Walked:
    """One document walked once (a workspace of 5,000 files walked each of them four times): what
    the loader validates, what the secret scan reads, what makes it no resource, where each field is."""

    value: Any = None
    """The document as plain Python values (`plain`)."""
    line: int = 1
    """Where the document starts (`node_line`)."""
    strings: list[StringAt] = field(default_factory=list)
    """Every string scalar, including `!!str`-tagged ones; keys are not scalars of their own here."""
    keys: list[StringAt] = field(default_factory=list)
    """Keys long enough to be a secret (MIN_SCANNED_KEY): a token written as a key would otherwise be
    printed by the unknown-key error about it."""
    bad_keys: list[tuple[str, int]] = field(default_factory=list)
    """Dotted path and line of every key that is not a string."""
    lines: dict[str, int] = field(default_factory=dict)
    """The line of every field and item, by dotted path: a resource's Source.field_lines."""
    dotted: bool = False
    """A key holds a dot, so two fields may share a dotted path (`env.A` and `env: {A: }`): `lines`
    cannot tell them apart, and the loader locates errors in ruamel's nodes (`loc_path`) instead."""


def walk_document(node: Any) -> Walked:
    """`plain(node)`, its strings, its non-string keys and its field lines, in one pass."""
    walked = Walked(line=node_line(node))
    walked.value = _walked(node, "", walked)
    return walked


def field_at(walked: Walked, loc: tuple[Any, ...], missing: bool) -> tuple[str, int]:
    """Follow a pydantic loc through the document's field lines (`loc_path` does it in the nodes, when
    `walked.dotted`); return the path found and its line. A missing field's own name is kept: the
    message is about it, at the line of its mapping."""
    parts: list[str] = []
    line = walked.line
    for part in loc:
        below = ".".join([*parts, str(part)])
        if below not in walked.lines:
            if missing and isinstance(part, str):
                parts.append(part)
            break
        parts.append(str(part))
        line = walked.lines[below]
    return ".".join(parts), line


def loc_path(node: Any, loc: tuple[Any, ...], missing: bool) -> tuple[str, int]:
    """Follow a pydantic loc through the YAML nodes; return the path found and its line."""
    parts: list[str] = []
    line = node_line(node)
    for part in loc:
        below = child_line(node, part)
        if below is None:
            if missing and isinstance(part, str):
                parts.append(part)
            break
        parts.append(str(part))
        line, node = below, node[part]
    return ".".join(parts), line


def child_line(node: Any, part: Any) -> int | None:
    if isinstance(node, CommentedMap) and part in node:
        position = (node.lc.data or {}).get(part)  # absent for keys merged in with `<<:`
        return position[0] + 1 if position else node_line(node)
    if isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
        return node.lc.item(part)[0] + 1
    return None


def node_line(node: Any, path: list[Any] | None = None) -> int:
    if path:
        return child_line(node, path[0]) or node_line(node)
    lc = getattr(node, "lc", None)
    return lc.line + 1 if lc is not None and lc.line is not None else 1


def plain(node: Any) -> Any:
    """ruamel's round-trip types as plain Python values, so pydantic sees ordinary data."""
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    return _plain_scalar(node)


def _plain_scalar(node: Any) -> Any:
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, TaggedScalar):  # `!!str 007`: the only tagged scalar specs.parse.safe_yaml lets through
        return str(node.value)
    for kind in (int, float, str):
        if isinstance(node, kind):
            return kind(node)
    return node


def _walked(node: Any, path: str, walked: Walked) -> Any:
    """`plain(node)`, adding what is below `node` to `walked`'s strings, keys and lines.
    Recursive, like `plain`: specs.parse.safe_yaml keeps documents shallow and alias-free."""
    if isinstance(node, dict):
        built = {}
        for key, child in node.items():
            below = f"{path}.{key}" if path else str(key)
            line = child_line(node, key)
            if not isinstance(key, str):
                walked.bad_keys.append((below, line or node_line(node)))
            walked.dotted = walked.dotted or "." in str(key)
            if isinstance(key, str) and len(key) >= MIN_SCANNED_KEY:
                walked.keys.append(StringAt(below, line or 1, key))
            built[str(key)] = _child(child, below, line or 1, walked)
        return built
    if isinstance(node, list):
        return [_child(child, f"{path}.{index}" if path else str(index), child_line(node, index) or 1,
                       walked) for index, child in enumerate(node)]
    return _plain_scalar(node)


def _child(child: Any, path: str, line: int, walked: Walked) -> Any:
    """The plain value of `child` (at `path` and `line`), noted among the strings if it is one."""
    walked.lines[path] = line
    text = child.value if isinstance(child, TaggedScalar) else child
    if isinstance(text, str):
        walked.strings.append(StringAt(path, line, str(text)))
    return _walked(child, path, walked)
