"""specs.parse.nodes.walk_document walks a document once for the loader, the secret scan, the key check and
the field lines: it must give what `plain`, a walk of every string and a walk of every key would give alone."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError

from specs.desired import Source
from specs.parse.nodes import plain, walk_document
from specs.parse.safe_yaml import ruamel_documents
from tests.support.inner_loop import examples

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
    try:
        [node] = ruamel_documents(out.getvalue())
    except MarkedYAMLError:
        # ruamel's dumper writes some strings ('?0' in a flow mapping) unquoted where its own parser refuses
        # them: a document nobody could write as a spec, so not one the walk is asked to read
        assume(False)
    return node


@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=5))
@example({"kind": "\x85"})
@example({"kind": "?0"})
def test_one_walk_gives_the_plain_value_and_every_string(value: dict[str, Any]) -> None:
    node = document(value)
    walked = walk_document(node)
    # The oracle is `plain` of the document read back, not `value`: a YAML dump and load may change a
    # string (U+0085 NEL is a YAML line break, folded to a space), which is no concern of the walk.
    read_back = plain(node)
    assert walked.value == read_back
    assert sorted((s.path, s.text) for s in walked.strings) == sorted(strings_of(read_back))
    assert all(s.line == walked.lines[s.path] for s in walked.strings)
    assert {s.path for s in walked.strings} <= set(walked.lines)
    assert walked.bad_keys == []


def test_tagged_strings_count_and_keys_that_are_not_strings_are_located() -> None:
    [node] = ruamel_documents("kind: Job\nenv:\n  A: !!str 007\n  1: one\nentrypoint: [x, {2: y}, 3]\n")
    walked = walk_document(node)
    assert ("env.A", "007") in [(s.path, s.text) for s in walked.strings]
    assert ("entrypoint.1.2", "y") in [(s.path, s.text) for s in walked.strings]
    assert "entrypoint.2" not in [s.path for s in walked.strings]  # a number is no string
    assert walked.bad_keys == [("env.1", 4), ("entrypoint.1.2", 5)]


def test_the_walk_gives_the_line_of_every_field_and_item() -> None:
    [node] = ruamel_documents("kind: Job\nname: a\nenv:\n  A: x\nentrypoint:\n  - python3\n  - {b: 1}\n")
    lines = walk_document(node).lines
    assert lines == {"kind": 1, "name": 2, "env": 3, "env.A": 4, "entrypoint": 5, "entrypoint.0": 6,
                     "entrypoint.1": 7, "entrypoint.1.b": 7}
    source = Source("jobs/a.yaml", 1, lines)
    assert source.at("env.A").line == 4 and source.at("env.B").line == 3  # else the nearest field that exists
