"""`argus import verl-script` with secrets in the launch (a `ray job submit` wrapper's runtime env, a second launch's
env, Hydra overrides, typed keys) and with `--env` names bash or the loader act on: the secret reaches no output and
no file, and a refused variable never runs anything."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specs.secrets.secret_words import secret_name, secrets_in
from tests.support.workspace import make_workspace

HEX = "0123456789abcdef0123456789abcdef01234567"
"""A W&B key: hex, so caught by its name only (specs.secrets.literal_secrets never judges hex by entropy)."""
HEX2, HEX3 = HEX[::-1], "fedcba9876543210" * 2 + "76543210"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
SECRETS = (HEX, HEX2, HEX3, HF)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    return make_workspace(tmp_path / "ws", "imports", "http://127.0.0.1:9")


def test_no_secret_of_the_launch_reaches_the_spec_the_output_or_any_file(ws, argus, tmp_path: Path):
    script = ws.write("s.sh", f"""
        ray job submit --address=http://head:8265 \\
            --runtime-env-json='{{"env_vars":{{"WANDB_API_KEY":"{HEX}","HF_TOKEN":"{HF}"}}}}' \\
            -- python3 -m verl.trainer.main_ppo data.train_files=/d/t.parquet trainer.experiment_name={HF} \\
            +ray_kwargs.ray_init.runtime_env.env_vars.WANDB_API_KEY={HEX2} data.prompt_key=prompt \\
            actor_rollout_ref.actor.balance_dp_token=True
        env WANDB_API_KEY={HEX3} python3 -m verl.trainer.main_ppo data.train_files=/d/u.parquet
        """)
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "s", script, f"--token={HEX3}")
    assert done.code == 0, done.err
    spec = ws.root / "jobs" / "s.yaml"
    text = spec.read_text()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != script and "cache" not in p.parts]
    for secret in SECRETS:
        assert secret not in done.out + done.err
        assert not [p for p in written if secret.encode() in p.read_bytes()]
    loaded = yaml.safe_load(text)
    assert "experiment" not in loaded.get("trainer", {})
    assert loaded["overrides"] == ["data.prompt_key=prompt", "actor_rollout_ref.actor.balance_dp_token=True"]
    assert "--address, --runtime-env-json: not written" in done.out
    assert "another launch, not imported: python3 -m verl.trainer.main_ppo" in done.out
    assert "env: {WANDB_API_KEY: ${env:WANDB_API_KEY}}" in done.out  # how to pass it instead


def test_a_refused_script_quotes_no_secret(ws, argus):
    script = ws.write("r.sh", f"ray job submit --runtime-env-json='{{\"x\":\"{HF}\"}}' -- {HF} -m x\n")
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "r", script)
    assert done.code == 1 and HF not in done.out + done.err
    assert not (ws.root / "jobs" / "r.yaml").exists()


@pytest.mark.parametrize("pair", ["BASH_ENV={hook}", "ENV={hook}", "SHELLOPTS=xtrace", "BASHOPTS=extdebug",
                                  "PS4=$(/usr/bin/touch {marker})", "IFS=/", "BASH_XTRACEFD=1", "PATH=/usr/bin",
                                  "HOME=/", "LD_PRELOAD={hook}",
                                  "BASH_FUNC_python3%%=() {{ /usr/bin/touch {marker}; }}",
                                  "A-B=1"])
def test_an_env_variable_bash_or_the_loader_acts_on_is_refused_and_nothing_runs(ws, argus, tmp_path: Path, pair):
    marker = tmp_path / "ran"
    hook = ws.write("hook.sh", f"/usr/bin/touch {marker}\n")
    script = ws.write("h.sh", "set -x\npython3 -m verl.trainer.main_ppo data.train_files=/d/t.parquet\n")
    given = pair.format(hook=hook, marker=marker)
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "h", "--env", given, script,
                 "--env", "SHELLOPTS=xtrace")  # after FILE: the script's own arguments, never an option
    assert done.code == 1 and "--env" in done.err, done.out + done.err
    assert given.partition("=")[0][:3] in done.err
    assert not marker.exists() and not (ws.root / "jobs" / "h.yaml").exists()


def test_secret_names_are_told_from_verl_keys_that_hold_key_or_token():
    assert all(secret_name(n) for n in ("WANDB_API_KEY", "HF_TOKEN", "hf_token", "api_key", "apiKey", "password"))
    assert not any(secret_name(n) for n in ("prompt_key", "reward_fn_key", "ppo_max_token_len_per_gpu", "path"))
    assert secrets_in(["--hf-token", HEX, "x.api_key=true", "a.password=${oc.env:P}", "a.balance_dp_token=False",
                       f"k={HF}"]) == [HEX, HF]


def test_a_weak_name_holding_a_key_like_value_is_a_secret_and_a_verl_key_is_not():
    """`--wandb-key`, `+x.wandb_key=`, `--key`, `--pass`, `--auth` with a generated value (second reviewer)."""
    found = secrets_in(["--wandb-key", HEX, f"+trainer.wandb_key={HEX2}", "--key", HEX3, "--pass",
                        "Xk29dLq0PzM3nB7vR1tY8wEe", "data.prompt_key=question", "--key", "question",
                        "reward_model.reward_fn_key=data_source"])
    assert found == [HEX, HEX2, HEX3, "Xk29dLq0PzM3nB7vR1tY8wEe"]


@pytest.mark.parametrize("line", [f"export HF_TOKEN={HF} )", f"X=$(( {HEX} + ))", f"X=${{NOPE:?{HF}}}",
                                  f"echo {HF} >&2; exit 1", f"set -x; HF_TOKEN={HF}; A=\"a\n{HF}\"; exit 3"])
def test_a_script_that_stops_quotes_none_of_itself(ws, argus, tmp_path: Path, line: str):
    """bash's own error messages quote the script (a whole line, for a syntax error): argus shows only where and
    what kind of error stopped it."""
    script = ws.write("stop.sh", f"python3 -m verl.trainer.main_ppo data.train_files=/d/t.parquet\n{line}\n")
    done = argus("import", "verl-script", "--dir", ws.root, "--name", "stop", script)
    spec = ws.root / "jobs" / "stop.yaml"
    written = spec.read_text() if spec.exists() else ""
    assert "the script stopped" in done.out + done.err + written
    assert not any(secret in done.out + done.err + written for secret in (HF, HEX))
