"""specs.nodes.walk_document walks a document once for the loader, the secret scan and the key check:
it must give what `plain`, a walk of every string and a walk of every key would each give alone."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from specs.desired import Source
from specs.nodes import field_lines, plain, walk_document
from specs.safe_yaml import ruamel_documents

KEYS = st.sampled_from(["kind", "env", "entrypoint", "x", "1", "a.b", "TOKEN"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(KEYS, inner, max_size=3)), max_leaves=10)


def strings_of(value: Any, path: str = "") -> list[tuple[str, str]]:
    """(dotted path, text) of every string of a plain value, keys aside: the oracle."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    found = []
    for key, child in items:
        below = f"{path}.{key}" if path else str(key)
        found += [(below, child)] if isinstance(child, str) else strings_of(child, below)
    return found


def document(value: Any) -> Any:
    out = io.StringIO()
    YAML(typ="safe", pure=True).dump(value, out)
    [node] = ruamel_documents(out.getvalue())
    return node


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=5))
def test_one_walk_gives_the_plain_value_and_every_string(value: dict[str, Any]) -> None:
    node = document(value)
    walked = walk_document(node)
    assert walked.value == plain(node) == value
    assert sorted((s.path, s.text) for s in walked.strings) == sorted(strings_of(value))
    assert all(s.parent[s.key] == s.text for s in walked.strings)
    assert walked.bad_keys == []


def test_tagged_strings_count_and_keys_that_are_not_strings_are_located() -> None:
    [node] = ruamel_documents("kind: Job\nenv:\n  A: !!str 007\n  1: one\nentrypoint: [x, {2: y}, 3]\n")
    walked = walk_document(node)
    assert ("env.A", "007") in [(s.path, s.text) for s in walked.strings]
    assert ("entrypoint.1.2", "y") in [(s.path, s.text) for s in walked.strings]
    assert "entrypoint.2" not in [s.path for s in walked.strings]  # a number is no string
    assert walked.bad_keys == [("env.1", 4), ("entrypoint.1.2", 5)]


def test_a_source_reads_field_lines_from_its_document_only_when_asked() -> None:
    [node] = ruamel_documents("kind: Job\nname: a\nenv:\n  A: x\nentrypoint:\n  - python3\n  - train.py\n")
    source = Source("jobs/a.yaml", 1, node=node)
    assert "_lines" not in vars(source)  # nothing tabulated while loading
    assert source.at("env.A").line == 4 and source.at("entrypoint.1").line == 7
    assert source.at("env.B").line == 3  # the nearest field that exists
    assert source.line_of("missing") == 1
    assert dict(vars(source)["_lines"]) == field_lines(node)
    assert Source("jobs/a.yaml", 1, {"name": 9}, node=node).line_of("name") == 9  # given lines win
    assert source == Source("jobs/a.yaml", 1)  # the document is no part of a source's identity
