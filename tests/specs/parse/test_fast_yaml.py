"""specs.parse.fast_yaml gives exactly what walking ruamel's nodes gives, or declines: it never decides a
file's fate."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from specs.parse.fast_yaml import walked_documents
from specs.parse.nodes import Walked, walk_document
from specs.parse.safe_yaml import MAX_DEPTH, ruamel_documents
from tests.support.inner_loop import examples

ROOT = Path(__file__).resolve().parents[3]
SPEC_FILES = sorted(p for d in ("examples", "tests") for p in (ROOT / d).rglob("*.y*ml"))
KEYS = st.sampled_from(["kind", "name", "env", "entrypoint", "x", "1", "true", "a b", "k:v", "#", "-", "", "a.b",
                        "ghp_abcdefghijklmnopqrstuvwxyz0123"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12),
                    st.sampled_from(["yes", "no", "on", "0o17", "0x1f", "1_000", "007", "1e3", ".inf", "2024-01-01",
                                     "1:20", "~", "null", "True", "FALSE", "-0.5", "+3", "<<", "=", "${env:X}"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)
DOCUMENTS = st.lists(st.dictionaries(KEYS, VALUES, max_size=6), min_size=1, max_size=3)
PIECES = [*"kind: Job\n-[]{}&*!|>'\"#%@`,?\t ${}:", "name: a", "---", "...", "\n  ", "<<: ", "&a ", "*a", "!!int ",
          "%YAML 1.1\n", "yes", "0.5", "1e3", "\u2028", "\x85", "\ufeff", "'a''b'", '"\\x41\\/"', "|\n  x\n",
          ">-\n  y\n"]


def shape(walked: Walked) -> Any:
    """Everything argus reads from a walked document: the value with its types, where it starts, every
    string with its path and line, the line of every field, keys that are not strings."""
    return (typed(walked.value), walked.line, walked.strings, walked.lines, walked.bad_keys, walked.keys, walked.dotted)


def typed(value: Any) -> Any:
    """The value with the type of every scalar: `1`, `1.0` and `True` are equal in Python, not in a spec."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return type(value).__name__, value


def same_or_declined(text: str) -> None:
    fast = walked_documents(text, MAX_DEPTH)
    if fast is None:
        return
    # ruamel raising fails the test too
    assert [shape(d) for d in fast] == [shape(walk_document(d)) for d in ruamel_documents(text)]


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_spec_of_the_repository_reads_the_same(path: Path):
    same_or_declined(path.read_text())


@pytest.mark.parametrize("text", ['"": ghp_x\n', 'a: {"": [y]}\n', '"": {"": z}\n'])
def test_strings_under_an_empty_key_are_walked_like_ruamel_walks_them(text: str):
    fast = walked_documents(text, MAX_DEPTH)
    assert fast is not None and fast[0].strings  # the secret scan reads them
    same_or_declined(text)


def test_plain_job_specs_take_the_fast_path():
    text = (ROOT / "examples/quickstart/jobs/train.yaml").read_text()
    assert walked_documents(text, MAX_DEPTH) is not None


@pytest.mark.parametrize("text", [
    "a: !!str 007\n", "a: !custom x\n", "a: &x 1\nb: *x\n", "a: &x 1\n", "%YAML 1.1\n---\na: yes\n",
    "a: 1\na: 2\n", "1: a\n", "[a]: 1\n", "<<: {a: 1}\n", "a: 2024-01-01\n", "a: 0x1f\n", "a:\n", "a:\tb\n",
    "a: b\u2028c\n", "\ufeffa: b\n", "|#", "a: >-#c\n  x\n", "a: [b\n", "a: \x07\n",
    "x: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n",
])
def test_what_ruamel_must_judge_is_declined(text: str):
    assert walked_documents(text, MAX_DEPTH) is None


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS, st.booleans())
def test_dumped_documents_read_the_same(documents, flow):
    yaml = YAML()
    yaml.default_flow_style = flow
    buffer = io.StringIO()
    yaml.dump_all(documents, buffer)
    same_or_declined(buffer.getvalue())


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=40))
def test_textual_garbage_reads_the_same_or_is_declined(pieces):
    same_or_declined("".join(pieces))
