"""The JSON Schema says what `argus validate` says, where a schema can: a missing entrypoint, verl fields on
the wrong workload, literal secrets of every known shape, secret-named env keys and half references. Each
case is checked by a real JSON Schema validator (the `jsonschema` package, as check-jsonschema uses it)
and by `argus validate` on a real workspace, and the two must agree on whether, and where, it is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from specs.schema.schema import KINDS, json_schema
from specs.schema.schema_rules import LITERAL_SECRET_PATTERNS
from specs.secrets.literal_secrets import SHAPES, find_secrets
from tests.support.schema_agreement import (
    SNAPSHOT,
    assert_both_accept,
    assert_both_refuse_at,
    schema_fields,
    schema_validator,
)

COMMAND = {"kind": "Job", "name": "case", "cluster": "local", "workload": "command", "entrypoint": ["python3", "t.py"]}
PPO = {"kind": "Job", "name": "case", "cluster": "local", "workload": "ppo", "code": "verl",
       "model": "Qwen/Qwen2.5-0.5B-Instruct", "data": {"train": "/data/t.parquet", "val": "/data/v.parquet"}}
MIXED = "A1b2C3d4" * 5
"""Built at run time, so no secret scanner mistakes this file for a leak."""
TOKENS = {
    "an OpenAI-style API key": "sk-proj-" + MIXED,
    "a Hugging Face token": "hf_" + MIXED,
    "a GitHub token": "ghp_" + MIXED,
    "a Slack token": "xoxb-1234-" + MIXED[:12],
    "an AWS access key id": "AKIA" + "ABCD1234EFGH5678",
    "a GitLab token": "glpat-" + MIXED[:24],
    "a URL with a password": "https://bot:" + MIXED[:12] + "@git.example.com/verl.git",
}


def job(**changes) -> dict:
    return {**COMMAND, **changes}


GOOD = {
    "a command job": COMMAND,
    "a verl job": PPO,
    "a reference under a secret-named key": job(env={"WANDB_API_KEY": "${env:WANDB_API_KEY}", "MODE": "fast"}),
    "hex ids (a commit, a digest, a uuid)": job(entrypoint=["train", "--commit=" + "a1b2c3d4" * 5,
                                                            "--digest=" + "0f" * 32,
                                                            "--id=123e4567-e89b-12d3-a456-426614174000"]),
    "a name that starts like a key": job(description="sk-learn-for-beginners: the tutorial"),
    "a shell variable as a URL's password": job(entrypoint="curl -O https://bot:$TOKEN@h/v.tar && ./run"),
}
BAD = {  # the case, and the field both must name
    "a command job without an entrypoint": ({k: v for k, v in COMMAND.items() if k != "entrypoint"}, "entrypoint"),
    "a verl job with an entrypoint": ({**PPO, "entrypoint": "python3 x.py"}, "entrypoint"),
    "a verl field on a command job": (job(model="Qwen/Qwen2.5-0.5B-Instruct"), "model"),
    "a verl job without a model": ({k: v for k, v in PPO.items() if k != "model"}, "model"),
    "a literal under a secret-named key": (job(env={"HF_TOKEN": "not-a-reference"}), "env"),
    "half a reference": (job(env={"DATA": "/data/${env:USER}"}), "env"),
    "argus's own key in env": (job(env={"K": "${env:ARGUS_ROOT_KEY}"}), "env"),
    "the dashboard's token under a secret-named key": (job(env={"RAY_TOKEN": "${env:PROD_RAY_TOKEN}"}), "env"),
    "a git token in env": (job(env={"G": "${env:git_token_github_com}"}), "env"),
    "a notification URL in env": (job(env={"HOOK": "${env:OPS_WEBHOOK_URL}"}), "env"),
    **{f"{shape} in an env value": (job(env={"X": token}), "env") for shape, token in TOKENS.items()},
    "a token in an entrypoint": (job(entrypoint=["train", "--key", TOKENS["a GitHub token"]]), "entrypoint"),
    "a token in a description": (job(description="key " + TOKENS["an AWS access key id"]), "description"),
    "a password in a git url": ({**SNAPSHOT, "git": {"url": TOKENS["a URL with a password"], "ref": "v1"}}, "git"),
}


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    return schema_validator()


SECRETS = ("WANDB_API_KEY",)
"""The variable the workspace lets its jobs read (`secrets:`): a good case reads it as `${env:WANDB_API_KEY}`."""


@pytest.mark.parametrize("case", sorted(GOOD))
def test_both_accept(case, validator, argus, tmp_path):
    assert_both_accept(validator, argus, tmp_path, GOOD[case], secrets=SECRETS)


@pytest.mark.parametrize("case", sorted(BAD))
def test_both_refuse_at_the_same_field(case, validator, argus, tmp_path):
    assert_both_refuse_at(validator, argus, tmp_path, *BAD[case], secrets=SECRETS)


def test_every_shape_argus_knows_has_its_regex_in_the_schema():
    assert len(LITERAL_SECRET_PATTERNS) == len(SHAPES)
    assert {shape.description for shape in SHAPES} == set(TOKENS)
    for description, token in TOKENS.items():
        assert [f.description for f in find_secrets(token)] == [description]


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_has_a_schema_of_its_own(kind):
    schema = json_schema(kind)
    Draft202012Validator.check_schema(schema)
    kind_of = Draft202012Validator(schema)
    examples = {"Workspace": {"kind": "Workspace", "name": "t"}, "Job": COMMAND, "CodeSnapshot": SNAPSHOT,
                "Cluster": {"kind": "Cluster", "name": "local", "address": "http://h:8265", "shared_root": "/mnt/s"}}
    for other, document in examples.items():
        assert kind_of.is_valid(document) == (other == kind), (kind, other)


def test_every_document_of_the_examples_passes_the_schema(validator):
    """The examples are valid specs (validate checks them elsewhere): the schema must not refuse any of them."""
    from ruamel.yaml import YAML

    root = Path(__file__).resolve().parents[3] / "examples"
    documents = [(path, doc) for path in sorted(root.rglob("*.yaml")) if ".verl" not in path.parts
                 for doc in YAML(typ="safe").load_all(path.read_text()) if doc]
    assert len(documents) > 10
    for path, document in documents:
        assert schema_fields(validator, document) == [], path
