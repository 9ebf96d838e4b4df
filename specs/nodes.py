"""Where things are in ruamel's round-trip YAML nodes: the line of a field, the path of a pydantic
error, keys that are not strings; and the nodes as plain Python values."""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar


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


def field_lines(node: Any, prefix: str = "") -> dict[str, int]:
    lines: dict[str, int] = {}
    keys = node.keys() if isinstance(node, CommentedMap) else range(len(node))
    for key in keys:
        path = f"{prefix}{key}"
        lines[path] = child_line(node, key) or 1
        child = node[key]
        if isinstance(child, (CommentedMap, CommentedSeq)):
            lines.update(field_lines(child, path + "."))
    return lines


def non_string_keys(node: Any, prefix: str = "") -> list[tuple[str, int]]:
    found = []
    children = node.items() if isinstance(node, CommentedMap) else enumerate(node) if isinstance(node, list) else []
    for key, child in children:
        if isinstance(node, CommentedMap) and not isinstance(key, str):
            found.append((f"{prefix}{key}", child_line(node, key) or node_line(node)))
        found.extend(non_string_keys(child, f"{prefix}{key}."))
    return found


def plain(node: Any) -> Any:
    """ruamel's round-trip types as plain Python values, so pydantic sees ordinary data."""
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, TaggedScalar):  # `!!str 007`: the only tagged scalar specs.safe_yaml lets through
        return str(node.value)
    for kind in (int, float, str):
        if isinstance(node, kind):
            return kind(node)
    return node
