"""What `argus validate` checks beyond the models' types, said in JSON Schema where a schema can say it.

Editors (yaml-language-server) and schema tools (check-jsonschema) then flag, as validate does:
- a `workload: command` job without an `entrypoint`, and a verl job (ppo, grpo, sft) without `model`,
  `data` and `code` or with an `entrypoint` or `demand` of its own (specs.load.rules.workload_diagnostics);
- a literal secret in any string: the known token shapes and URLs with a password of
  specs.secrets.literal_secrets, as ECMA-262 regexes (what JSON Schema's `pattern` is);
- an `env:` key naming a secret (KEY, TOKEN, SECRET, PASSWORD) whose value is not a whole
  `${env:NAME}` reference, and a `${env:...}` that is only part of a value (specs.secrets.secret_scan, models);
- a `${env:NAME}`, or a Workspace's `secrets:` entry, naming a variable argus holds for itself
  (specs.kinds.held_variables).
What no regex can say stays validate's alone: long random text, judged by its entropy; a token written
as a key; the ratio of separators that lets a name like `sk-learn-for-beginners-v2` pass; references
between resources (a `${env:NAME}` the Workspace's `secrets:` does not list). The schema is a first check
in the editor; `argus validate` is the check.
"""

from __future__ import annotations

from typing import Any

from specs.secrets.secret_scan import WHOLE_REFERENCE

_ALNUM_BEFORE = "(?<![A-Za-z0-9])"
_TOKEN_AFTER = "(?![A-Za-z0-9_-])"
_DIGIT_AND_LETTER = "(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])"
"""specs.secrets.literal_secrets._plausible: a generated token mixes letters and digits; words alone are a name."""
LITERAL_SECRET_PATTERNS = (
    f"{_ALNUM_BEFORE}sk-(?:proj-|svcacct-|admin-|ant-[a-z0-9]+-)?{_DIGIT_AND_LETTER}[A-Za-z0-9_-]{{20,}}{_TOKEN_AFTER}",
    f"{_ALNUM_BEFORE}hf_[A-Za-z0-9]{{30,}}{_TOKEN_AFTER}",
    f"{_ALNUM_BEFORE}gh[pousr]_[A-Za-z0-9]{{30,}}{_TOKEN_AFTER}",
    f"{_ALNUM_BEFORE}github_pat_[A-Za-z0-9_]{{22,}}{_TOKEN_AFTER}",
    f"{_ALNUM_BEFORE}xox[abposr]-{_DIGIT_AND_LETTER}[A-Za-z0-9-]{{10,}}{_TOKEN_AFTER}",
    "(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
    f"{_ALNUM_BEFORE}glpat-{_DIGIT_AND_LETTER}[A-Za-z0-9_-]{{20,}}{_TOKEN_AFTER}",
    r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:(?![$%][{(A-Za-z_])[^/\s@]+@",
)
"""specs.secrets.literal_secrets.SHAPES, one for one, in the regex dialect both Python's re and ECMA-262 read."""
LITERAL_SECRET = "|".join(f"(?:{p})" for p in LITERAL_SECRET_PATTERNS)
SECRET_KEY = "[Kk][Ee][Yy]|[Tt][Oo][Kk][Ee][Nn]|[Ss][Ee][Cc][Rr][Ee][Tt]|[Pp][Aa][Ss][Ss][Ww][Oo][Rr][Dd]"
"""specs.secrets.secret_scan.SECRET_KEY_PATTERN without the (?i) flag, which ECMA-262 regexes lack."""
_REFERENCE = WHOLE_REFERENCE.pattern


def _any_case(text: str) -> str:
    """`text` matched without case, in a regex dialect (ECMA-262) that has no (?i)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in text)


def _anywhere(*words: str) -> str:
    return "(?:" + "|".join(_any_case(word) for word in words) + ")"


HELD_NAME = (f"(?:{_any_case('ARGUS_')}|{_any_case('GIT_TOKEN_')}"
             f"|(?=\\w*{_anywhere('RAY')})(?=\\w*{_anywhere('TOKEN', 'HEADER', 'COOKIE')})"
             f"|\\w*{_anywhere('NOTIFY', 'WEBHOOK')})")
"""The start of a name specs.kinds.held_variables.held() refuses (its tests hold the two together)."""
_DEFINITIONS = {
    "LiteralSecret": {
        "type": "string", "pattern": LITERAL_SECRET,
        "description": "A literal secret (an API key or token of a known shape, or a URL with a password): a "
                       "secret written in a spec sits in git, in plans and in Ray's job table. Put it in the "
                       "job's `env:` as `NAME: ${env:NAME}` and export NAME where argus applies.",
    },
    "EnvValue": {
        "type": "string",
        "anyOf": [{"pattern": _REFERENCE}, {"not": {"pattern": r"\$\{env:"}}],
        "not": {"anyOf": [{"$ref": "#/$defs/LiteralSecret"}, {"$ref": "#/$defs/HeldReference"}]},
        "description": "`${env:NAME}` must be the whole value: it is read from argus's environment at submit "
                       "time; half a reference would reach Ray as literal text. NAME must be in the Workspace's "
                       "`secrets:`.",
    },
    "SecretReference": {
        "type": "string", "pattern": _REFERENCE,
        "not": {"$ref": "#/$defs/HeldReference"},
        "description": "This key names a secret: its value must be `${env:NAME}` (export NAME where argus "
                       "applies), never the secret itself.",
    },
    "HeldReference": {
        "type": "string", "pattern": f"^\\$\\{{env:{HELD_NAME}",
        "description": "A variable argus holds for itself (ARGUS_*, GIT_TOKEN_*, RAY with TOKEN, HEADER or "
                       "COOKIE, NOTIFY, WEBHOOK): never handed to a job.",
    },
    "HeldVariable": {
        "type": "string", "pattern": f"^{HELD_NAME}",
        "description": "A variable argus holds for itself: a workspace's jobs may never read it.",
    },
}
_VERL_FIELDS = ("model", "data", "trainer", "entry")


def add_rules(schema: dict[str, Any]) -> None:
    """Add the rules to a schema of every kind (its `$defs` hold each model), in place."""
    definitions = schema["$defs"]
    for definition in definitions.values():
        _refuse_literal_secrets(definition)
        for env in _env_maps(definition):
            env["additionalProperties"] = {"$ref": "#/$defs/EnvValue"}
            env["patternProperties"] = {SECRET_KEY: {"$ref": "#/$defs/SecretReference"}}
    definitions["Job"]["allOf"] = [_workload_rule()]
    definitions["Workspace"]["properties"]["secrets"]["items"]["not"] = {
        "anyOf": [{"$ref": "#/$defs/LiteralSecret"}, {"$ref": "#/$defs/HeldVariable"}]}
    definitions.update(_DEFINITIONS)


def _workload_rule() -> dict[str, Any]:
    """`command` needs an entrypoint and no verl fields; verl needs model, data and code, and builds its own."""
    null = {"type": "null"}
    command = {"required": ["entrypoint"],
               "properties": {"entrypoint": {"not": null}, **{f: null for f in _VERL_FIELDS},
                              "overrides": {"maxItems": 0}}}
    verl = {"required": ["model", "data", "code"],
            "properties": {"model": {"not": null}, "data": {"not": null}, "code": {"not": null},
                           "entrypoint": null, "demand": null}}
    return {"if": {"properties": {"workload": {"const": "command"}}, "required": ["workload"]},
            "then": command, "else": verl}


def _refuse_literal_secrets(node: Any) -> None:
    """Every free string (not a `const` or an `enum`), wherever it is: argus scans every string."""
    if isinstance(node, list):
        for item in node:
            _refuse_literal_secrets(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "string" and "const" not in node and "enum" not in node and "not" not in node:
        node["not"] = {"$ref": "#/$defs/LiteralSecret"}
    for key, value in node.items():
        if key not in ("not", "default", "examples"):
            _refuse_literal_secrets(value)


def _env_maps(definition: dict[str, Any]) -> list[dict[str, Any]]:
    env = definition.get("properties", {}).get("env")
    return [env] if isinstance(env, dict) and env.get("type") == "object" else []
