"""What is inside the data files and the model directory a verl job names, read bounded: the columns its
dataset reads, the model's config.json and tokenizer, and the model's context length against the job's.

verl reads them only once its workers hold their GPUs (RLHFDataset and MultiTurnSFTDataset in the trainer,
HFModelConfig in every worker). Every file here is hostile: only a file whose real path is inside the job's
shared root is read (a spec naming the plan machine's own files gets nothing of them into the plan's output,
which CI posts to the pull request: files.py still says whether they exist), with a byte limit, never a FIFO
or a device, and a file argus cannot read is said, not a crash. What is said of a file's contents is a few
short, printable column names; a value of an odd type in the composed config is a finding or skipped, never
a crash. docs/verl.md cites verl's code for each finding.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from specs.diagnostics import printable
from specs.kinds.models import Job
from state.verl.bounded import Unread, read_head, read_parquet_columns, within
from state.verl.rules import A, get
from state.verl.sealed import Inside, JobInputs

Finding = tuple[tuple[str, ...], str, str]

DATA = (".parquet", ".json", ".jsonl")
"""What verl's datasets read (files.py says so of any other suffix)."""
JSON_HEAD = 256 * 1024
"""How much of a json/jsonl data file argus reads for its columns."""
JSON_RECORDS = 50
CONFIG_LIMIT = 4 * 1024 * 1024
"""A model's config.json is a few KiB; anything past this is not one argus reads."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "spiece.model")
"""What transformers' AutoTokenizer.from_pretrained loads a tokenizer from (one is enough for argus)."""
NAMES_SHOWN, NAME_CHARS = 12, 40
"""At most this many of a file's column names are said, each cut to this many characters."""
LARGEST = 2 ** 63
"""A length at or above this is no length verl's int64 tensors hold: argus compares none such."""


def input_findings(job: Job, config: dict[str, Any], shared_root: str,
                   inputs: JobInputs | None = None) -> list[Finding]:
    """`inputs`: a path into a data set or model is read from its sealed manifest (sealed.py), not opened."""
    root, inputs = Path(shared_root), inputs or JobInputs(shared_root=shared_root)
    found = _columns(job, config, root, inputs) if get(config, "data.custom_cls.path") in (None, "") else []
    model_key = "model.path" if job.workload == "sft" else f"{A}.model.path"
    model = get(config, model_key)
    if isinstance(model, str) and (at := inputs.inside(model)) is not None:  # not listed, not sealed: files.py says
        found += _sealed_model(job, config, model_key, Path(model), at, inputs) if at.holds_dir() else []
    elif isinstance(model, str) and model.startswith("/") and _ours(model, root) and _is_dir(Path(model)):
        found += _model(job, config, model_key, Path(model), root, inputs)
    return found


def _columns(job: Job, config: dict[str, Any], root: Path, inputs: JobInputs) -> list[Finding]:
    """The column verl's dataset takes each row's prompt (or SFT messages) from must be in every file."""
    key = "data.messages_key" if job.workload == "sft" else "data.prompt_key"
    column = get(config, key, "messages" if job.workload == "sft" else "prompt")
    if not isinstance(column, str):  # Hydra takes `data.prompt_key=[a,b]`; verl indexes each row with it
        return [((key,), f"{key} must be a column name, not {_kind(column)}: verl's dataset reads each row's "
                         f"prompt as row[{key.split('.')[-1]}] (verl/utils/dataset/rl_dataset.py, "
                         "multiturn_sft_dataset.py) and fails once the GPUs are held", "error")]
    found: list[Finding] = []
    seen: set[str] = set()  # a file named by both train_files and val_files is read and said once
    for files_key in ("data.train_files", "data.val_files"):
        value = get(config, files_key)
        for path in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if not isinstance(path, str) or not path.endswith(DATA) or path in seen:
                continue
            seen.add(path)
            if (at := inputs.inside(path)) is not None:
                columns = at.columns() if at.holds_file() else None  # not listed or not sealed: files.py says
                found += _file_columns(Path(path), key, column, files_key, columns) if columns is not None else []
            elif path.startswith("/") and _ours(path, root):
                found += _file_columns(Path(path), key, column, files_key, _read_columns(Path(path), root))
    return found


def _read_columns(path: Path, root: Path) -> set[str] | Unread:
    return read_parquet_columns(path, root) if path.suffix == ".parquet" else _json_columns(path, root)


def _file_columns(path: Path, key: str, column: str, files_key: str, columns: set[str] | Unread) -> list[Finding]:
    if isinstance(columns, Unread):
        return [] if columns.missing else [((files_key,), f"{path}: {columns.why}", columns.severity)]
    if column in columns:
        return []
    return [((key, files_key), f"{key}={_cut(repr(column))} is not a column of {path} (it has {_names(columns)})"
                               ": verl's dataset reads each row's prompt from that column and fails with a KeyError "
                               "once the GPUs are held (verl/utils/dataset/rl_dataset.py, multiturn_sft_dataset.py)",
             "error")]


def _json_columns(path: Path, root: Path) -> set[str] | Unread:
    head = read_head(path, root, JSON_HEAD)
    if isinstance(head, Unread):
        return head
    records = _records(head.decode("utf-8", errors="replace"))
    if not records:
        return Unread(f"argus read no JSON record in its first {JSON_HEAD // 1024} KiB: verl's json reader "
                      "(datasets.load_dataset('json')) would fail on it too", "error")
    return {name for record in records for name in record}


def _records(text: str) -> list[dict[str, Any]]:
    """The first records of a JSON array or of JSON lines, as far as the head holds whole ones."""
    decoder, records, at = json.JSONDecoder(), [], 0
    text = text.lstrip()
    at = 1 if text.startswith("[") else 0
    while len(records) < JSON_RECORDS:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            record, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):  # garbage, a record cut by the head, or bottomless nesting
            break
        if not isinstance(record, dict):
            break
        records.append(record)
    return records


def _sealed_model(job: Job, config: dict[str, Any], key: str, model: Path, at: Inside,
                  inputs: JobInputs) -> list[Finding]:
    """A model in a sealed version: config.json as the seal step read it, the tokenizer from its file list."""
    found = _tokenizer(config, key, model, Path(inputs.shared_root), inputs)
    if (hf := at.config()) is None:
        what = "is no JSON object argus's seal could read" if at.holds_file("config.json") else "is not in it"
        return [*found, ((key,), f"{at.file('config.json')} {what} ({at.address}'s manifest); a model directory "
                                 "needs one: verl's HFModelConfig loads it with transformers' "
                                 "AutoConfig.from_pretrained once the GPUs are held (verl/workers/config/model.py)",
                         "error")]
    return found + _context(job, config, key, model, hf)


def _model(job: Job, config: dict[str, Any], key: str, model: Path, root: Path, inputs: JobInputs) -> list[Finding]:
    # Hugging Face's cache links snapshots/<revision>/config.json to ../../blobs: inside the shared root, followed
    hf_config = read_head(model / "config.json", root, CONFIG_LIMIT, whole=True)
    if isinstance(hf_config, Unread):
        why = "has no config.json" if hf_config.missing else f"config.json {hf_config.why}"
        return [((key,), f"model directory {model} {why}: verl's HFModelConfig loads it with "
                         "transformers' AutoConfig.from_pretrained once the GPUs are held "
                         "(verl/workers/config/model.py)", hf_config.severity)]
    found = _tokenizer(config, key, model, root, inputs)
    try:
        parsed = json.loads(hf_config)
    except (ValueError, RecursionError):
        return [*found, ((key,), f"{model}/config.json is not JSON: transformers' AutoConfig cannot load it once the "
                                 "GPUs are held (verl/workers/config/model.py)", "error")]
    if not isinstance(parsed, dict):
        return [*found, ((key,), f"{model}/config.json is not a JSON object: AutoConfig cannot load it", "error")]
    return found + _context(job, config, key, model, parsed)


def _tokenizer(config: dict[str, Any], key: str, model: Path, root: Path, inputs: JobInputs) -> list[Finding]:
    named = get(config, f"{A}.model.tokenizer_path") if key.startswith(A) else get(config, "model.tokenizer_path")
    if not isinstance(named, (str, type(None))) or (named and not named.startswith("/")):
        return []  # a hub id, a remote path or no path at all: not argus's to look into
    where = Path(named) if named else model
    if (at := inputs.inside(str(where))) is not None:  # a sealed version's file list says; else not checked yet
        if at.manifest is None or any(at.holds_file(name) for name in TOKENIZER_FILES):
            return []
    elif not _ours(str(where), root):
        return []  # outside the shared root: argus says nothing of what is there
    elif any(not isinstance(read_head(where / name, root, 0), Unread) for name in TOKENIZER_FILES):
        return []
    return [((key,), f"{where} has no tokenizer files ({', '.join(TOKENIZER_FILES)}): verl loads the tokenizer with "
                     "transformers' AutoTokenizer.from_pretrained (verl/utils/tokenizer.py hf_tokenizer, called by "
                     "verl/workers/config/model.py) once the GPUs are held", "error")]


def _context(job: Job, config: dict[str, Any], key: str, model: Path, hf: dict[str, Any]) -> list[Finding]:
    """vLLM's context is the model's max_position_embeddings unless rollout.max_model_len says less
    (verl/workers/rollout/vllm_rollout/vllm_async_server.py _validate_configs)."""
    if job.workload == "sft" or get(config, f"{A}.rollout.name") not in ("vllm", "sglang"):
        return []
    limit = hf.get("max_position_embeddings")
    if limit is None and isinstance(hf.get("text_config"), dict):
        limit = hf["text_config"].get("max_position_embeddings")
    limit = _length(limit)
    if limit is None:
        return [((key,), f"{model}/config.json has no max_position_embeddings (a positive whole number): verl's "
                         "rollout server raises 'max_position_embeddings not found' (verl/workers/rollout/utils.py)",
                 "error")]
    asked = get(config, f"{A}.rollout.max_model_len")
    if (length := _length(asked)) is not None and length > limit:
        return [((f"{A}.rollout.max_model_len",), f"{A}.rollout.max_model_len={asked} is above the model's "
                                                  f"max_position_embeddings ({limit}, {model}/config.json): verl's "
                                                  "rollout server raises 'max_model_len ... should be less than or "
                                                  "equal to max_position_embeddings'", "error")]
    return _lengths(config, key, model, limit) if asked is None else []


def _lengths(config: dict[str, Any], key: str, model: Path, limit: int) -> list[Finding]:
    prompt, response = _length(get(config, "data.max_prompt_length")), _length(get(config, "data.max_response_length"))
    if prompt is None or response is None:
        return []  # not lengths argus can compare (a string, a bool, a number past int64)
    keys = (key, "data.max_prompt_length", "data.max_response_length")
    if limit <= prompt:
        return [(keys, f"the model's max_position_embeddings ({limit}, {model}/config.json) leaves no room to "
                       f"generate after a prompt of data.max_prompt_length={prompt} tokens: verl's vLLM server raises "
                       "'Prompt length ... leaves no room to generate' on such a prompt", "error")]
    if limit < prompt + response:
        return [(keys, f"the model's max_position_embeddings ({limit}, {model}/config.json) is below "
                       f"max_prompt_length + max_response_length ({prompt} + {response}): verl caps each response "
                       "at what is left of the context, so long prompts get short responses", "warning")]
    return []


def _ours(path: str, root: Path) -> bool:
    """Whether argus may look inside: the path's real location is inside the shared root, or it is spelt
    inside it (a symlink out of it is then said, never followed: bounded.py)."""
    try:
        return within(Path(path), root) or Path(os.path.abspath(path)).is_relative_to(os.path.abspath(root))
    except ValueError:
        return False


def _length(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < LARGEST else None


def _kind(value: Any) -> str:
    kinds = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "a mapping"}
    return "null" if value is None else kinds.get(type(value), "a value of another type")


def _cut(text: str, chars: int = NAME_CHARS) -> str:
    """A name as one printable line of at most `chars` characters: a hostile file's column name can neither
    forge lines of the plan's output nor fill it."""
    text = printable(text)
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _names(columns: set[str]) -> str:
    shown = [_cut(str(name)) for name in sorted(columns, key=str)[:NAMES_SHOWN]]
    more = len(columns) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False
