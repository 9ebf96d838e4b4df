"""The editor's schema and `argus validate` agree on Datasets and Models: both accept the good ones and both
refuse a bad one at the same field."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from tests.support.schema_agreement import assert_both_accept, assert_both_refuse_at, schema_validator

DIGEST = "ab" * 32
HEAD = {"kind": "Dataset", "name": "case", "cluster": "local"}
URL = {**HEAD, "url": {"url": "https://example.org/t.parquet", "sha256": DIGEST}}
PREPARE = {**HEAD, "prepare": {"code": "verl", "entrypoint": ["python3", "p.py", "${output}"],
                               "outputs": ["t.parquet"]}}
GOOD = {
    "a url": URL,
    "an ftp file": {**HEAD, "ftp": {"url": "ftp://127.0.0.1:2121/t.parquet", "sha256": DIGEST}},
    "a staged path": {**HEAD, "path": "/staging/gsm8k"},
    "a prepare step": PREPARE,
    "a hub model": {"kind": "Model", "name": "case", "cluster": "local",
                    "hub": {"repo": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "main", "endpoint": "https://h/hub"}},
}
BAD = {  # the case, and the field both must name
    "no digest": ({**HEAD, "url": {"url": "https://example.org/t.parquet"}}, "url.sha256"),
    "an upper-case digest": ({**HEAD, "url": {"url": "https://h/t", "sha256": DIGEST.upper()}}, "url.sha256"),
    "an http url as ftp": ({**HEAD, "ftp": {"url": "https://h/t", "sha256": DIGEST}}, "ftp.url"),
    "a relative path": ({**HEAD, "path": "staging/gsm8k"}, "path"),
    "an absolute output": ({**PREPARE, "prepare": {**PREPARE["prepare"], "outputs": ["/etc/passwd"]}},
                           "prepare.outputs"),
    "a repo without its org": ({**HEAD, "hub": {"repo": "gpt2", "revision": "main", "endpoint": "https://h"}},
                               "hub.repo"),
    "an unknown key": ({**URL, "checksum": DIGEST}, "checksum"),
}


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    return schema_validator()


@pytest.mark.parametrize("case", sorted(GOOD))
def test_both_accept(case, validator, argus, tmp_path):
    assert_both_accept(validator, argus, tmp_path, GOOD[case])


@pytest.mark.parametrize("case", sorted(BAD))
def test_both_refuse_at_the_same_field(case, validator, argus, tmp_path):
    assert_both_refuse_at(validator, argus, tmp_path, *BAD[case])
