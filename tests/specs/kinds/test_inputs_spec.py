"""`kind: Dataset` and `kind: Model`: valid specs load with positions, every bad field is refused at its line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.load.loader import load_workspace
from tests.support.input_specs import workspace
from tests.support.workspace import Workspace

DIGEST = "0123456789abcdef" * 4
INPUTS = f"""
    kind: Model
    name: qwen
    cluster: h20
    hub: {{repo: Qwen/Qwen2.5-0.5B-Instruct, revision: main, endpoint: "http://127.0.0.1:9/hub"}}
    ---
    kind: Dataset
    name: gsm8k-raw
    cluster: h20
    url:
      url: https://example.org/gsm8k/train.parquet
      sha256: {DIGEST}
    ---
    kind: Dataset
    name: gsm8k-ftp
    cluster: h20
    ftp: {{url: "ftp://127.0.0.1:2121/gsm8k/test.parquet", sha256: {DIGEST}}}
    ---
    kind: Dataset
    name: staged
    cluster: h20
    path: /staging/gsm8k
    ---
    kind: Dataset
    name: gsm8k
    cluster: h20
    description: verl's own preprocessing
    prepare:
      code: verl
      entrypoint: [python, examples/data_preprocess/gsm8k.py, --local_save_dir, "${{output}}"]
      outputs: [train.parquet, test.parquet]
    """


def problems(ws: Workspace) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    return [str(d) for d in caught.value.diagnostics]


def test_every_source_loads_with_its_positions(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    ws.write("inputs.yaml", INPUTS)
    state = load_workspace(ws.root)
    assert sorted(state.inputs) == ["dataset.gsm8k", "dataset.gsm8k-ftp", "dataset.gsm8k-raw", "dataset.staged",
                                    "model.qwen"]
    assert [state.inputs[a].source for a in sorted(state.inputs)] == ["prepare", "ftp", "url", "path", "hub"]
    assert state.inputs["model.qwen"].hub.repo == "Qwen/Qwen2.5-0.5B-Instruct"
    assert state.inputs["dataset.gsm8k"].prepare.outputs == ["train.parquet", "test.parquet"]
    assert state.source("dataset.gsm8k-raw").at("url.sha256").line == 11
    assert state.source("dataset.gsm8k").at("prepare.outputs").line == 30


def test_a_hub_source_takes_the_clusters_hf_endpoint(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "job_defaults: {env: {HF_ENDPOINT: 'https://mirror.example/hub'}}")
    ws.write("model.yaml", "kind: Model\nname: qwen\ncluster: h20\nhub: {repo: Qwen/Qwen3-8B, revision: v1.0}\n")
    state = load_workspace(ws.root)
    from specs.load.input_refs import hub_endpoint
    assert hub_endpoint(state.inputs["model.qwen"], state.clusters["h20"]) == "https://mirror.example/hub"


@pytest.mark.parametrize("env", ["", "job_defaults: {env: {HF_ENDPOINT: '${env:HF_ENDPOINT}'}}"])
def test_a_hub_source_without_an_endpoint_is_refused_at_hub(tmp_path: Path, env: str) -> None:
    ws = workspace(tmp_path, env)
    ws.write("model.yaml", "kind: Model\nname: qwen\ncluster: h20\nhub: {repo: Qwen/Qwen3-8B, revision: main}\n")
    ws.write("argus.yaml", "kind: Workspace\nname: llm-rl\nsecrets: [HF_ENDPOINT]\n")
    assert problems(ws) == ["model.yaml:4: hub: no hub endpoint: cluster 'h20' sets no HF_ENDPOINT URL in "
                            "job_defaults.env; give `hub.endpoint: https://huggingface.co` (or your mirror's URL)"]


HEAD = "kind: Dataset\nname: d\ncluster: h20\n"
BAD = {
    "no source": (HEAD, 1, "", "give exactly one source of hub, url, ftp, path, prepare (got none)"),
    "two sources": (HEAD + f"path: /staging/x\nurl: {{url: 'https://h/x', sha256: {DIGEST}}}\n", 1, "",
                    "(got url, path)"),
    "bad name": ("kind: Dataset\nname: Bad_Name\ncluster: h20\npath: /staging/x\n", 2, "name", "invalid name"),
    "unknown key": (HEAD + "path: /staging/x\nsha: 1\n", 5, "sha", "unknown key"),
    "relative path": (HEAD + "path: staging/x\n", 4, "path", "give an absolute path"),
    "climbing path": (HEAD + "path: /staging/../etc\n", 4, "path", "without '.', '..'"),
    "system path": (HEAD + "path: /etc/ssl\n", 4, "path", "never a system directory"),
    "root's home": (HEAD + "path: /root/data\n", 4, "path", "never a system directory"),
    "hidden path": (HEAD + "path: /home/ci/.ssh\n", 4, "path", "hidden one"),
    "bare path": (HEAD + "path: /home\n", 4, "path", "bare top directory"),
    "no digest": (HEAD + "url: {url: 'https://h/x'}\n", 4, "url.sha256", "required field is missing"),
    "short digest": (HEAD + "url: {url: 'https://h/x', sha256: abc}\n", 4, "url.sha256", "64 lowercase hex digits"),
    "upper digest": (HEAD + f"url: {{url: 'https://h/x', sha256: {DIGEST.upper()}}}\n", 4, "url.sha256",
                     "as `sha256sum FILE` prints it"),
    "ftp as url": (HEAD + f"url: {{url: 'ftp://h/x', sha256: {DIGEST}}}\n", 4, "url.url", "http:// or https://"),
    "http as ftp": (HEAD + f"ftp: {{url: 'http://h/x', sha256: {DIGEST}}}\n", 4, "ftp.url", "ftp://"),
    "file url": (HEAD + f"url: {{url: 'file:///etc/passwd', sha256: {DIGEST}}}\n", 4, "url.url", "with a host"),
    "credentials": (HEAD + f"ftp: {{url: 'ftp://me@h/x', sha256: {DIGEST}}}\n", 4, "ftp.url", "credentials"),
    "repo without org": (HEAD + "hub: {repo: gpt2, revision: main, endpoint: 'https://h'}\n", 4, "hub.repo",
                         "write the hub repository as org/name"),
    "climbing repo": (HEAD + "hub: {repo: org/a..b, revision: main, endpoint: 'https://h'}\n", 4, "hub.repo", "'..'"),
    "option revision": (HEAD + "hub: {repo: o/n, revision: --upload, endpoint: 'https://h'}\n", 4, "hub.revision",
                        "never starting with '-'"),
    "climbing revision": (HEAD + "hub: {repo: o/n, revision: a/../b, endpoint: 'https://h'}\n", 4, "hub.revision",
                          "no '..'"),
    "bad endpoint": (HEAD + "hub: {repo: o/n, revision: main, endpoint: 'h.example'}\n", 4, "hub.endpoint",
                     "http:// or https://"),
    "no output": (HEAD + "prepare: {code: verl, entrypoint: [python, p.py], outputs: [a]}\n", 4, "prepare",
                  "never names `${output}`"),
    "shell line": (HEAD + "prepare: {code: verl, entrypoint: 'python p.py ${output}', outputs: [a]}\n", 4,
                   "prepare.entrypoint", "valid list"),
    "absolute output": (HEAD + "prepare: {code: verl, entrypoint: ['${output}'], outputs: [/etc/x]}\n", 4,
                        "prepare.outputs.0", "relative"),
    "climbing output": (HEAD + "prepare: {code: verl, entrypoint: ['${output}'], outputs: [a/../../b]}\n", 4,
                        "prepare.outputs.0", "relative"),
    "no outputs": (HEAD + "prepare: {code: verl, entrypoint: ['${output}'], outputs: []}\n", 4,
                   "prepare.outputs", "at least 1"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_bad_field_is_refused_at_its_line(tmp_path: Path, case: str) -> None:
    text, line, field, words = BAD[case]
    ws = workspace(tmp_path)
    ws.write("bad.yaml", text)
    found = problems(ws)
    where = f"bad.yaml:{line}: {field + ': ' if field else ''}"
    assert len(found) == 1 and found[0].startswith(where) and words in found[0], found


def test_references_of_an_input_to_other_resources_are_checked(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    ws.write("bad.yaml", textwrap.dedent("""
        kind: Dataset
        name: nowhere
        cluster: h30
        path: /staging/x
        ---
        kind: Dataset
        name: unknown-code
        cluster: h20
        prepare: {code: nocode, entrypoint: ['${output}'], outputs: [a]}
        ---
        kind: Dataset
        name: far-code
        cluster: h20
        prepare:
          code: elsewhere
          entrypoint: ['${output}']
          outputs: [a]
        """).lstrip())
    assert problems(ws) == [
        "bad.yaml:3: cluster: no Cluster named 'h30' (known: a100, h20)",
        "bad.yaml:9: prepare.code: no CodeSnapshot named 'nocode' (known: elsewhere, verl)",
        "bad.yaml:15: prepare.code: CodeSnapshot 'elsewhere' lives on cluster 'a100', not on 'h20': snapshot the "
        "code on the input's cluster",
    ]


def test_a_dataset_and_a_model_may_share_a_name_but_not_two_datasets(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    ws.write("a.yaml", "kind: Dataset\nname: x\ncluster: h20\npath: /staging/x\n---\n"
                       "kind: Model\nname: x\ncluster: h20\npath: /staging/m\n")
    assert sorted(load_workspace(ws.root).inputs) == ["dataset.x", "model.x"]
    ws.write("b.yaml", "kind: Dataset\nname: x\ncluster: h20\npath: /staging/y\n")
    assert problems(ws) == ["b.yaml:2: name: duplicate Dataset 'x' (first defined at a.yaml:2)"]


def test_an_invalid_input_still_has_its_cluster_checked_in_the_same_run(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    ws.write("bad.yaml", "kind: Dataset\nname: d\ncluster: h30\npath: relative\n")
    assert [p[:40] for p in problems(ws)] == ["bad.yaml:3: cluster: no Cluster named 'h",
                                              "bad.yaml:4: path: Value error, 'relative"]
